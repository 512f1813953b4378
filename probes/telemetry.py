"""Live telemetry: an NVML sampler with a CPU fallback (modelled on nvitop's api/).

A sampler thread takes immutable snapshots on a drift-free schedule into a
ring buffer. It never raises: a field the GPU does not support reads as None
(shown N/A), an NVML failure becomes the sampler's `state`, and with no NVML
at all the CPU (psutil) is sampled so a live panel is never empty. Every NVML call
is bounded (each GPU is read on its own thread within a deadline), so a hung driver
costs a tick's fields, never the sampler. On Hopper and newer, GPM adds DRAM
bandwidth and SM and tensor activity (probes/gpm.py), each against its roof.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Callable, Iterable

from rooftop.probes.gpm import GpmDevice, dram_peak_bytes_s, dram_roof, fraction
from rooftop.probes.nvml import CLOSE_TIMEOUT_S, INIT_TIMEOUT_S, ODD_VALUE, door

log = logging.getLogger(__name__)

# nvmlDeviceGetCurrentClocksEventReasons bits (nvml.h).
CLOCK_EVENT_BITS: dict[int, str] = {
    0x1: "idle",
    0x2: "application clocks",
    0x4: "power cap",
    0x8: "hw slowdown",
    0x10: "sync boost",
    0x20: "sw thermal",
    0x40: "hw thermal",
    0x80: "power brake",
    0x100: "display clocks",
}
THROTTLING = ("power cap", "hw slowdown", "sw thermal", "hw thermal", "power brake")
# Current NVML names first, then the deprecated ones older drivers or bindings have: nvmlDeviceGetTemperature
# "will be removed in CUDA 14.0" (nvidia-ml-py 13), ClocksThrottleReasons was renamed ClocksEventReasons in
# driver 535 (same bits).
TEMPERATURE_FNS = ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature")
CLOCK_EVENT_FNS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
PCIE_EVERY_S = 1.0  # nvmlDeviceGetPcieThroughput "is querying a byte counter over a 20ms interval"
PROCESSES_EVERY_S = 1.0  # the processes on each GPU: they change rarely, and naming them costs psutil calls
READ_TIMEOUT_S = 0.5  # the longest a tick waits for a GPU's NVML reads (Sampler: less at a short interval)
MIN_INTERVAL_S = 0.05  # 20 Hz at most
DEFAULT_INTERVAL_S = 0.25  # 4 Hz


def decode_clock_events(mask: int | None) -> tuple[str, ...]:
    """The clock-event reason bits in words; () for None or 0."""
    if not mask:
        return ()
    return tuple(name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit)


@dataclass(frozen=True)
class GpuProcess:
    """A process using a GPU now (as nvitop lists them): its name is None where psutil cannot see it
    (another PID namespace), its memory None where NVML does not say (MIG, Windows WDDM)."""

    pid: int
    name: str | None = None
    memory_bytes: float | None = None


@dataclass(frozen=True)
class GpuSnapshot:
    """One GPU at one instant. None means N/A: not supported or not readable."""

    index: int
    name: str
    gpu_util_pct: float | None = None  # % of time a kernel ran (not SM occupancy)
    mem_util_pct: float | None = None  # % of time memory was read or written (not bandwidth)
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None  # total since driver load: average power by difference
    temperature_c: float | None = None
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    pcie_tx_bytes_s: float | None = None
    pcie_rx_bytes_s: float | None = None
    clock_events: tuple[str, ...] = ()
    lost: bool = False
    # GPM (Hopper and newer), fractions 0–1 over the last tick; None elsewhere (gpm_note says why)
    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    hmma_active: float | None = None
    dmma_active: float | None = None
    imma_active: float | None = None
    fp64_active: float | None = None
    fp32_active: float | None = None
    fp16_active: float | None = None
    dram_active: float | None = None  # DRAM_BW_UTIL: a fraction of dram_peak
    dram_peak: float | None = None  # bytes/s NVML implies: memory clock × bus width × 2
    dram_bandwidth: float | None = None  # bytes/s = dram_active × dram_peak
    dram_roof: float | None = None  # the measured B dram (bytes/s) of this device
    dram_roof_source: str | None = None  # whose: "local" or a reference profile id
    dram_fraction_of_roof: float | None = None  # dram_bandwidth / dram_roof
    gpm_note: str | None = None  # why the GPM fields are None (not offered on this GPU or driver)
    processes: tuple[GpuProcess, ...] = ()
    note: str | None = None  # why this tick's fields are missing (NVML did not answer in time)

    @property
    def throttling(self) -> tuple[str, ...]:
        return tuple(r for r in self.clock_events if r in THROTTLING)


@dataclass(frozen=True)
class CpuSnapshot:
    util_pct: float
    per_core_pct: tuple[float, ...]
    freq_mhz: float | None
    memory_used_bytes: float
    memory_total_bytes: float
    load1: float | None


@dataclass(frozen=True)
class Snapshot:
    time: float  # seconds since the epoch
    gpus: tuple[GpuSnapshot, ...] = ()
    cpu: CpuSnapshot | None = None
    state: str = "ok"  # "ok", or why the GPU part is missing ("NVML not available: …", "GPU lost")


class _Worker:
    """One daemon thread running one GPU's NVML reads, so that a hung driver call blocks that GPU only —
    never the sampler, `rooftop watch` or the app. Daemon: a call that never returns does not keep the
    process alive at exit."""

    def __init__(self, label: str) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.busy_since: float | None = None  # monotonic time the running job started
        self._thread = threading.Thread(target=self._loop, name=f"rooftop-nvml-{label}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, box, done = job
            try:
                box.append(fn())
            except BaseException as exc:  # handed to the waiting tick
                box.append(exc)
            finally:
                self.busy_since = None
                done.set()

    def submit(self, fn: Callable[[], Any]) -> tuple[list, threading.Event]:
        box: list = []
        done = threading.Event()
        self.busy_since = time.monotonic()
        self._jobs.put((fn, box, done))
        return box, done

    def stop(self) -> None:
        self._jobs.put(None)


class NvmlSource:
    """Reads every GPU through NVML's one door (probes/nvml.py), never raising and never hanging.

    `nvml` may be injected (tests pass a thin fake of pynvml); by default pynvml is imported. Each GPU is
    read on its own worker thread within a deadline: a call that has not returned by then costs that GPU
    this tick's fields (`note` says why), and the GPU is skipped until the call comes back. Each field is
    read and converted on its own: an error or an odd value costs that field only.
    """

    def __init__(self, nvml: Any = None, local: Any = None, init_timeout_s: float = INIT_TIMEOUT_S,
                 own: Any = None) -> None:
        self.state = "ok"
        self._own: dict[str, Any] = dict(own or {})  # GPU UUID → that GPU's own measured profile
        self._nv = door(nvml)
        self._lost: set[int] = set()
        self._pcie: dict[int, tuple[float, Any, Any]] = {}  # GPU → (when read, TX, RX)
        self._procs: dict[int, tuple[float, tuple[GpuProcess, ...]]] = {}  # GPU → (when read, processes)
        self._names: dict[int, str | None] = {}  # pid → process name (psutil), looked up once
        self._calling: dict[int, str] = {}  # GPU → the NVML function its worker is in
        self._gpm: dict[int, Any] = {}  # GPU → GpmDevice
        self._dram_peak: dict[int, float | None] = {}
        self._roofs: dict[int, Any] = {}  # GPU → DramRoof | None
        self._local = local
        if not self._nv.open(init_timeout_s):
            self.state = str(self._nv.reason)
        self._handles: list[tuple[int, Any, str]] = [(g.index, g.handle, g.name) for g in self._nv.gpus]
        self._workers: dict[int, _Worker] = {i: _Worker(str(i)) for i, _, _ in self._handles}

    @property
    def available(self) -> bool:
        return bool(self._handles)

    def _q(self, index: int, fn: str, *args: Any) -> Any:
        """One NVML query about GPU `index` through the door: None on any NVML error (NotSupported included)."""
        self._calling[index] = fn
        value = self._nv.query(fn, *args, gpu=index)
        if index in self._nv.lost and index not in self._lost:
            self._lost.add(index)
            self.state = f"GPU {index} lost"
        return value

    def _q_first(self, index: int, fns: tuple[str, ...], *args: Any) -> Any:
        """The first of `fns` that the binding and the driver have (the current name first, then the
        deprecated one), queried as _q; None when none of them is there."""
        for fn in fns:
            if self._nv.missing(fn):
                continue
            value = self._q(index, fn, *args)
            if not self._nv.missing(fn):
                return value
        return None

    def _pcie_kb_s(self, index: int, h: Any) -> tuple[Any, Any]:
        """PCIe TX and RX in KB/s, re-read at most every PCIE_EVERY_S: each NVML call counts bytes over
        20 ms and returns only then, so two a sample would cost 40 ms per GPU at every tick."""
        now = time.monotonic()
        last = self._pcie.get(index)
        if last is None or now - last[0] >= PCIE_EVERY_S:
            nv = self._nv.lib
            last = (now, self._q(index, "nvmlDeviceGetPcieThroughput", h, getattr(nv, "NVML_PCIE_UTIL_TX_BYTES", 0)),
                    self._q(index, "nvmlDeviceGetPcieThroughput", h, getattr(nv, "NVML_PCIE_UTIL_RX_BYTES", 1)))
            self._pcie[index] = last
        return last[1], last[2]

    def _processes(self, index: int, h: Any) -> tuple[GpuProcess, ...]:
        """The compute processes on a GPU (pid, name, memory), re-read at most every PROCESSES_EVERY_S."""
        now = time.monotonic()
        last = self._procs.get(index)
        if last is not None and now - last[0] < PROCESSES_EVERY_S:
            return last[1]
        found = []
        for p in self._q(index, "nvmlDeviceGetComputeRunningProcesses", h) or ():
            pid = _field(lambda: int(p.pid))
            if pid is None:
                continue
            found.append(GpuProcess(pid=pid, name=self._process_name(pid),
                                    memory_bytes=_field(lambda: _num(getattr(p, "usedGpuMemory", None)))))
        procs = tuple(sorted(found, key=lambda x: -(x.memory_bytes or 0)))
        self._procs[index] = (now, procs)
        return procs

    def _process_name(self, pid: int) -> str | None:
        if pid not in self._names:
            self._names[pid] = _process_name(pid)
            if len(self._names) > 4096:  # pids are reused: forget the oldest
                self._names.pop(next(iter(self._names)))
        return self._names[pid]

    def set_local(self, local: Any) -> None:
        """A new `local` profile (a measurement just finished): the DRAM roofs are found again from it."""
        self._local = local
        self._roofs = {}

    def _roof(self, i: int, name: str, h: Any = None) -> Any:
        """The GPU's DRAM roof (a DramRoof or None), found once per `local` (and `own`)."""
        if i not in self._roofs:
            uuid = self._q(i, "nvmlDeviceGetUUID", h) if self._own and h is not None else None
            mine = self._own.get(uuid) if uuid else None
            self._roofs[i] = _field(lambda: dram_roof(name, self._local, mine))
        return self._roofs[i]

    def _open_gpm(self, i: int, h: Any, name: str) -> Any:
        """The GPU's GPM and DRAM peak, found once (on its worker thread: GPM calls can hang too)."""
        nv = self._nv.lib
        mem_max = _num(self._q(i, "nvmlDeviceGetMaxClockInfo", h, getattr(nv, "NVML_CLOCK_MEM", 2)))
        bus_bits = _num(self._q(i, "nvmlDeviceGetMemoryBusWidth", h))
        self._dram_peak[i] = _field(lambda: dram_peak_bytes_s(mem_max, bus_bits))
        gpm = GpmDevice(self._nv, h, lambda fn, *a: self._q(i, fn, *a))
        self._gpm[i] = gpm
        return gpm

    def _read_gpu(self, i: int, h: Any, name: str) -> GpuSnapshot:
        """One GPU's fields, each on its own: an error or an odd value costs that field, not the GPU."""
        if i in self._lost:  # nothing to ask a GPU that fell off the bus
            return GpuSnapshot(index=i, name=name, lost=True)
        nv = self._nv.lib
        gpm = self._gpm.get(i) or self._open_gpm(i, h, name)
        m: dict[str, Any] = _field(gpm.read) or {}
        util = self._q(i, "nvmlDeviceGetUtilizationRates", h)
        mem = self._q(i, "nvmlDeviceGetMemoryInfo", h)
        sm_clock, mem_clock = getattr(nv, "NVML_CLOCK_SM", 1), getattr(nv, "NVML_CLOCK_MEM", 2)
        sensor = getattr(nv, "NVML_TEMPERATURE_GPU", 0)
        f: dict[str, Any] = {
            "gpu_util_pct": _field(lambda: _num(getattr(util, "gpu", None))),
            "mem_util_pct": _field(lambda: _num(getattr(util, "memory", None))),
            "sm_clock_mhz": _field(lambda: _num(self._q(i, "nvmlDeviceGetClockInfo", h, sm_clock))),
            "mem_clock_mhz": _field(lambda: _num(self._q(i, "nvmlDeviceGetClockInfo", h, mem_clock))),
            "sm_clock_max_mhz": _field(lambda: _num(self._q(i, "nvmlDeviceGetMaxClockInfo", h, sm_clock))),
            "power_w": _field(lambda: _scaled(self._q(i, "nvmlDeviceGetPowerUsage", h), 1e-3)),  # mW
            "power_limit_w": _field(lambda: _scaled(self._q(i, "nvmlDeviceGetEnforcedPowerLimit", h), 1e-3)),
            "energy_j": _field(lambda: _scaled(self._q(i, "nvmlDeviceGetTotalEnergyConsumption", h), 1e-3)),  # mJ
            "temperature_c": _field(lambda: _num(self._q_first(i, TEMPERATURE_FNS, h, sensor))),
            "memory_used_bytes": _field(lambda: _num(getattr(mem, "used", None))),
            "memory_total_bytes": _field(lambda: _num(getattr(mem, "total", None))),
            "clock_events": _field(lambda: decode_clock_events(self._q_first(i, CLOCK_EVENT_FNS, h))) or (),
            "processes": _field(lambda: self._processes(i, h)) or (),
        }
        for key in ("pcie_tx_bytes_s", "pcie_rx_bytes_s"):  # GPM's counters where it has them: no 20 ms wait
            f[key] = m.pop(key, None)
        if f["pcie_tx_bytes_s"] is None and f["pcie_rx_bytes_s"] is None:
            tx, rx = self._pcie_kb_s(i, h)
            f["pcie_tx_bytes_s"] = _field(lambda: _scaled(tx, 1024))  # KB/s
            f["pcie_rx_bytes_s"] = _field(lambda: _scaled(rx, 1024))
        f.update(m)
        peak, roof = self._dram_peak.get(i), self._roof(i, name, h)
        bandwidth = _field(lambda: m["dram_active"] * peak) if m.get("dram_active") is not None and peak else None
        f.update(dram_peak=peak, dram_bandwidth=bandwidth,
                 dram_roof=roof.bandwidth if roof else None, dram_roof_source=roof.source if roof else None,
                 dram_fraction_of_roof=_field(lambda: fraction(bandwidth, roof.bandwidth if roof else None)),
                 gpm_note=gpm.note)
        return GpuSnapshot(index=i, name=name, lost=i in self._lost, **f)

    def read(self, timeout_s: float = READ_TIMEOUT_S) -> tuple[GpuSnapshot, ...]:
        """Every GPU's snapshot within `timeout_s` (each on its worker, at once); a GPU that did not answer in
        time, or is still in a call from an earlier tick, is there with its fields None and `note` why."""
        started = time.monotonic()
        jobs: dict[int, tuple[list, threading.Event]] = {}
        for i, h, name in self._handles:
            w = self._workers[i]
            if w.busy_since is None:
                jobs[i] = w.submit(partial(self._read_gpu, i, h, name))
        out = []
        for i, h, name in self._handles:
            if i in jobs:
                box, done = jobs[i]
                done.wait(max(0.0, started + timeout_s - time.monotonic()))
                if box and isinstance(box[0], GpuSnapshot):
                    out.append(box[0])
                    continue
                if box:  # a bug in reading this GPU: this GPU's fields, not every GPU's
                    log.warning("reading GPU %d failed: %r", i, box[0])
                    out.append(GpuSnapshot(index=i, name=name, lost=i in self._lost, note=f"read failed: {box[0]}"))
                    continue
                why = f"NVML did not answer within {timeout_s:g} s ({self._calling.get(i, 'a call')})"
            else:
                since = self._workers[i].busy_since
                hung = time.monotonic() - since if since is not None else 0.0
                why = f"NVML has not answered for {hung:.1f} s ({self._calling.get(i, 'a call')}): skipped"
            out.append(GpuSnapshot(index=i, name=name, lost=i in self._lost, note=why))
        return tuple(out)

    def close(self) -> None:
        """Free GPM samples, on a daemon thread: a hung driver does not hang the exit. NVML itself is shut
        down once, at exit, by its door (other probes share it)."""
        if not self._handles:
            return
        handles, self._handles = self._handles, []
        workers = list(self._workers.values())
        self._workers = {}

        def free() -> None:
            for gpm in list(self._gpm.values()):
                _field(gpm.close)

        if any(w.busy_since is not None for w in workers):
            log.info("GPM samples left allocated: a call on %d GPU(s) has not returned", len(handles))
        else:
            t = threading.Thread(target=free, name="rooftop-nvml-close", daemon=True)
            t.start()
            t.join(CLOSE_TIMEOUT_S)
        for w in workers:
            w.stop()


def _field(read: Callable[[], Any]) -> Any:
    """One field's value, or None when reading or converting it fails: one bad value costs one field."""
    try:
        return read()
    except ODD_VALUE as exc:  # NVML's own errors are None already (the door): this is a value that is not one
        log.debug("telemetry field failed: %r", exc)
        return None


def _process_name(pid: int) -> str | None:
    """A process's name (psutil), or None where it cannot be seen."""
    try:
        # deferred: psutil (~15 ms), only when a process is named or a sampler starts
        import psutil
    except ImportError:  # a broken install: the processes go unnamed
        return None
    try:
        return psutil.Process(pid).name()
    except (psutil.Error, ValueError):  # gone, not ours to see, another PID namespace (a container); pid < 0
        return None


def _scaled(v: Any, factor: float) -> float | None:
    n = _num(v)
    return n * factor if n is not None else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


CPU_WINDOW_S = 0.1  # the shortest window CPU utilisation is measured over


class CpuSource:
    """The CPU through psutil: utilisation per core, frequency, memory, load."""

    def __init__(self) -> None:
        # deferred: psutil (~15 ms), only when a process is named or a sampler starts
        import psutil

        self._ps = psutil
        self._freq: tuple[float, float | None] = (-1.0, None)  # (when read, MHz)
        psutil.cpu_percent(percpu=True)  # prime: the first call has no interval to measure
        self._since = time.monotonic()  # when utilisation was last read: the next read's window starts here

    def _mhz(self) -> float | None:
        """The CPU clock, re-read at most once a second: it is the costliest psutil call here."""
        now = time.monotonic()
        if now - self._freq[0] >= 1.0:
            try:
                freq = self._ps.cpu_freq()
                self._freq = (now, float(freq.current) if freq else None)
            except (AttributeError, NotImplementedError, OSError):  # not on this OS, or not in this container
                self._freq = (now, None)
        return self._freq[1]

    def read(self) -> CpuSnapshot:
        ps = self._ps
        wait = CPU_WINDOW_S - (time.monotonic() - self._since)
        if wait > 0:  # read at once after the prime, psutil measured no window: `watch`'s first line said 0%
            time.sleep(wait)
        per = tuple(float(x) for x in ps.cpu_percent(percpu=True))
        self._since = time.monotonic()
        mhz = self._mhz()
        vm = ps.virtual_memory()
        try:
            load1: float | None = float(ps.getloadavg()[0])
        except (AttributeError, OSError):  # psutil before 5.6.2; a system that will not say
            load1 = None
        return CpuSnapshot(
            util_pct=sum(per) / len(per) if per else 0.0,
            per_core_pct=per,
            freq_mhz=mhz,
            memory_used_bytes=float(vm.total - vm.available),
            memory_total_bytes=float(vm.total),
            load1=load1,
        )


@dataclass
class Sampler:
    """A thread sampling GPUs (and the CPU) every `interval` seconds into a ring buffer.

    The schedule is drift-free: the k-th sample is due at start + k·interval,
    and a late sample skips the missed slots rather than bunching up.
    """

    interval: float = DEFAULT_INTERVAL_S
    capacity: int = 2400  # 10 minutes at 4 Hz
    nvml: Any = None  # inject a fake NVML module in tests
    local: Any = None  # this machine's measured DeviceProfile (`local`): live DRAM bandwidth as a fraction of its B
    own: Any = None  # GPU UUID → that GPU's own measured profile (each its own B, as a fleet run keeps them)
    gpu: int | None = None  # sample only this GPU index
    cpu: bool = True  # also sample the CPU
    on_snapshot: Callable[[Snapshot], object] | None = None
    _buffer: deque[Snapshot] = field(init=False)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _thread: threading.Thread | None = field(init=False, default=None)
    _nvml_source: NvmlSource | None = field(init=False, default=None)
    _cpu_source: CpuSource | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if not (MIN_INTERVAL_S <= self.interval <= 3600):
            raise ValueError(f"interval {self.interval!r} s: from {MIN_INTERVAL_S} s (at most 20 Hz) to 3600 s")
        self._buffer = deque(maxlen=self.capacity)
        self._lock = threading.Lock()
        self._tick = threading.Lock()  # one read at a time: the thread's tick and a caller's sample_once take turns

    # -- sources -----------------------------------------------------------------

    def _open(self) -> None:
        self._nvml_source = NvmlSource(self.nvml, local=self.local, own=self.own)
        if self.cpu or not self._nvml_source.available:
            try:
                self._cpu_source = CpuSource()
            except (ImportError, OSError) as exc:  # psutil missing, or no /proc to read: keep the GPU part
                log.info("CPU sampler unavailable: %s", exc)

    @property
    def state(self) -> str:
        return self._nvml_source.state if self._nvml_source else "not started"

    def set_local(self, local: Any) -> None:
        """Divide live DRAM bandwidth by this `local` profile's B from the next tick on (a run just finished)."""
        self.local = local
        if self._nvml_source is not None:
            self._nvml_source.set_local(local)

    @property
    def read_timeout_s(self) -> float:
        """How long a tick waits for the GPUs: most of the interval, so a hung call still leaves the tick on time."""
        return min(READ_TIMEOUT_S, max(0.1, 0.8 * self.interval))

    def sample_once(self) -> Snapshot:
        """Take one snapshot now (opening the sources on first use); never raises. Safe while the thread runs:
        the two take turns, so neither finds the GPUs' workers busy with the other's read and skips them."""
        with self._tick:
            snap = self._read()
        with self._lock:
            self._buffer.append(snap)
        if self.on_snapshot is not None:
            try:
                self.on_snapshot(snap)
            except Exception as exc:  # broad on purpose: the caller's callback may raise anything, the thread goes on
                log.warning("telemetry callback failed: %s", exc)
        return snap

    def _read(self) -> Snapshot:
        if self._nvml_source is None:
            self._open()
        assert self._nvml_source is not None
        try:
            gpus = self._nvml_source.read(timeout_s=self.read_timeout_s)
        except Exception as exc:  # broad on purpose: a bug in a source must not kill the sampler's thread
            gpus = ()
            self._nvml_source.state = f"NVML read failed: {exc}"
        if self.gpu is not None:
            gpus = tuple(g for g in gpus if g.index == self.gpu)
        cpu = None
        if self._cpu_source is not None:
            try:
                cpu = self._cpu_source.read()
            except Exception as exc:  # broad on purpose, as for the GPUs: the sampler's thread goes on
                log.info("CPU sample failed: %s", exc)
        return Snapshot(time=time.time(), gpus=gpus, cpu=cpu, state=self._nvml_source.state)

    # -- the thread --------------------------------------------------------------

    def start(self) -> "Sampler":
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="rooftop-sampler", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        start = time.monotonic()
        k = 0
        while not self._stop.is_set():
            self.sample_once()
            k += 1
            due = start + k * self.interval
            now = time.monotonic()
            if now > due:  # fell behind: skip the missed slots
                k = int((now - start) / self.interval) + 1
                due = start + k * self.interval
            self._stop.wait(due - now if due > now else 0)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._nvml_source is not None:
            self._nvml_source.close()

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- reading -----------------------------------------------------------------

    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._buffer[-1] if self._buffer else None

    def history(self, since: float | None = None) -> list[Snapshot]:
        with self._lock:
            snaps = list(self._buffer)
        return [s for s in snaps if since is None or s.time >= since]


def conditions(snapshots: Iterable[Snapshot], gpu: int = 0) -> dict[str, Any]:
    """What a measurement ran under: mean SM clock (and the maximum), max temperature, mean power and
    the power limit, throttling.

    Attached to each sample, so a point taken while throttled is flagged, as the
    reference measurements mark runs with "active thermal slowdown".
    """
    g = [x for s in snapshots for x in s.gpus if x.index == gpu]
    out: dict[str, Any] = {"snapshots": len(g)}
    if not g:
        return out

    def mean(vals: list[float | None]) -> float | None:
        v = [x for x in vals if x is not None]
        return sum(v) / len(v) if v else None

    temps = [x.temperature_c for x in g if x.temperature_c is not None]
    out["mean_sm_clock_mhz"] = mean([x.sm_clock_mhz for x in g])
    out["max_temperature_c"] = max(temps) if temps else None
    out["mean_power_w"] = mean([x.power_w for x in g])
    limits = [x.power_limit_w for x in g if x.power_limit_w is not None]
    out["power_limit_w"] = max(limits) if limits else None
    maxima = [x.sm_clock_max_mhz for x in g if x.sm_clock_max_mhz is not None]
    out["sm_clock_max_mhz"] = max(maxima) if maxima else None
    out["throttle"] = sorted({r for x in g for r in x.throttling})
    return out


def snapshot_dict(s: Snapshot) -> dict[str, Any]:
    """A JSON-ready snapshot (SI units; None for N/A)."""
    d = asdict(s)
    for g in d["gpus"]:
        g["clock_events"] = list(g["clock_events"])
        g["processes"] = list(g["processes"])
    return d


# `rooftop watch --json`'s headline keys: those of the first GPU shown, None (null) without one.
WATCH_KEYS = ("dram_bandwidth", "dram_fraction_of_roof", "tensor_active", "sm_active")


def watch_dict(s: Snapshot) -> dict[str, Any]:
    """A snapshot for `rooftop watch --json`: snapshot_dict, the WATCH_KEYS of its first GPU at the top
    (null where unknown: no NVML, no GPM, no roof), and `processes` on every GPU shown, each with its GPU."""
    d = snapshot_dict(s)
    first = s.gpus[0] if s.gpus else None
    for key in WATCH_KEYS:
        d[key] = getattr(first, key) if first is not None else None
    d["processes"] = [{"gpu": g.index, **asdict(p)} for g in s.gpus for p in g.processes]
    return d
