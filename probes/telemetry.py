"""Live telemetry: an NVML sampler with a CPU fallback (modelled on nvitop's api/).

A sampler thread takes immutable snapshots on a drift-free schedule into a
ring buffer. It never raises: a field the GPU does not support reads as None
(shown N/A), an NVML failure becomes the sampler's `state`, and with no NVML
at all the CPU (psutil) is sampled so a live panel is never empty.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)

# nvmlDeviceGetCurrentClocksEventReasons bits (nvml.h, METHODS.md).
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
MIN_INTERVAL_S = 0.05  # 20 Hz at most
DEFAULT_INTERVAL_S = 0.25  # 4 Hz


def decode_clock_events(mask: int | None) -> tuple[str, ...]:
    """The clock-event reason bits in words; () for None or 0."""
    if not mask:
        return ()
    return tuple(name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit)


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


class NvmlSource:
    """Reads every GPU through NVML (`pynvml` from nvidia-ml-py), never raising.

    `nvml` may be injected (tests pass a thin fake); by default pynvml is imported.
    """

    def __init__(self, nvml: Any = None) -> None:
        self.state = "ok"
        self._nv = nvml
        self._handles: list[tuple[int, Any, str]] = []
        self._missing: set[str] = set()  # functions the driver lacks, logged once
        self._lost: set[int] = set()
        self._pcie: dict[int, tuple[float, Any, Any]] = {}  # GPU → (when read, TX, RX)
        try:
            if self._nv is None:
                import pynvml

                self._nv = pynvml
            self._nv.nvmlInit()
            for i in range(self._nv.nvmlDeviceGetCount()):
                h = self._nv.nvmlDeviceGetHandleByIndex(i)
                name = self._nv.nvmlDeviceGetName(h)
                self._handles.append((i, h, name.decode() if isinstance(name, bytes) else str(name)))
        except Exception as exc:  # LibraryNotFound, DriverNotLoaded, ImportError, …
            self.state = f"NVML not available: {exc}"
            self._handles = []

    @property
    def available(self) -> bool:
        return bool(self._handles)

    def _err(self, name: str) -> type[BaseException]:
        return getattr(self._nv, name, ()) or ()  # type: ignore[return-value]

    def _q(self, index: int, fn: str, *args: Any) -> Any:
        """One NVML query; None on any NVMLError (NotSupported included)."""
        if fn in self._missing or index in self._lost:
            return None
        try:
            return getattr(self._nv, fn)(*args)
        except Exception as exc:
            if isinstance(exc, self._err("NVMLError_GpuIsLost")):
                self._lost.add(index)
                self.state = f"GPU {index} lost"
            elif isinstance(exc, (AttributeError, self._err("NVMLError_FunctionNotFound"))):
                self._missing.add(fn)
                log.info("NVML function %s not available (binding/driver mismatch)", fn)
            return None

    def _q_first(self, index: int, fns: tuple[str, ...], *args: Any) -> Any:
        """The first of `fns` that the binding and the driver have (the current name first, then the
        deprecated one), queried as _q; None when none of them is there."""
        for fn in fns:
            if fn in self._missing:
                continue
            value = self._q(index, fn, *args)
            if fn not in self._missing:
                return value
        return None

    def _pcie_kb_s(self, index: int, h: Any) -> tuple[Any, Any]:
        """PCIe TX and RX in KB/s, re-read at most every PCIE_EVERY_S: each NVML call counts bytes over
        20 ms and returns only then, so two a sample would cost 40 ms per GPU at every tick."""
        now = time.monotonic()
        last = self._pcie.get(index)
        if last is None or now - last[0] >= PCIE_EVERY_S:
            nv = self._nv
            last = (now, self._q(index, "nvmlDeviceGetPcieThroughput", h, getattr(nv, "NVML_PCIE_UTIL_TX_BYTES", 0)),
                    self._q(index, "nvmlDeviceGetPcieThroughput", h, getattr(nv, "NVML_PCIE_UTIL_RX_BYTES", 1)))
            self._pcie[index] = last
        return last[1], last[2]

    def read(self) -> tuple[GpuSnapshot, ...]:
        nv = self._nv
        out = []
        for i, h, name in self._handles:
            util = self._q(i, "nvmlDeviceGetUtilizationRates", h)
            mem = self._q(i, "nvmlDeviceGetMemoryInfo", h)
            power = self._q(i, "nvmlDeviceGetPowerUsage", h)
            limit = self._q(i, "nvmlDeviceGetEnforcedPowerLimit", h)
            energy = self._q(i, "nvmlDeviceGetTotalEnergyConsumption", h)
            tx, rx = self._pcie_kb_s(i, h)
            out.append(
                GpuSnapshot(
                    index=i,
                    name=name,
                    gpu_util_pct=_num(getattr(util, "gpu", None)),
                    mem_util_pct=_num(getattr(util, "memory", None)),
                    sm_clock_mhz=_num(self._q(i, "nvmlDeviceGetClockInfo", h, getattr(nv, "NVML_CLOCK_SM", 1))),
                    mem_clock_mhz=_num(self._q(i, "nvmlDeviceGetClockInfo", h, getattr(nv, "NVML_CLOCK_MEM", 2))),
                    sm_clock_max_mhz=_num(self._q(i, "nvmlDeviceGetMaxClockInfo", h, getattr(nv, "NVML_CLOCK_SM", 1))),
                    power_w=power / 1e3 if power is not None else None,  # mW
                    power_limit_w=limit / 1e3 if limit is not None else None,
                    energy_j=energy / 1e3 if energy is not None else None,  # mJ
                    temperature_c=_num(self._q_first(i, TEMPERATURE_FNS, h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))),
                    memory_used_bytes=_num(getattr(mem, "used", None)),
                    memory_total_bytes=_num(getattr(mem, "total", None)),
                    pcie_tx_bytes_s=tx * 1024 if tx is not None else None,  # KB/s
                    pcie_rx_bytes_s=rx * 1024 if rx is not None else None,
                    clock_events=decode_clock_events(self._q_first(i, CLOCK_EVENT_FNS, h)),
                    lost=i in self._lost,
                )
            )
        return tuple(out)

    def close(self) -> None:
        if self._handles:
            try:
                self._nv.nvmlShutdown()
            except Exception:
                pass
            self._handles = []


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


class CpuSource:
    """The CPU through psutil: utilisation per core, frequency, memory, load."""

    def __init__(self) -> None:
        import psutil

        self._ps = psutil
        self._freq: tuple[float, float | None] = (-1.0, None)  # (when read, MHz)
        psutil.cpu_percent(percpu=True)  # prime: the first call has no interval to measure

    def _mhz(self) -> float | None:
        """The CPU clock, re-read at most once a second: it is the costliest psutil call here."""
        now = time.monotonic()
        if now - self._freq[0] >= 1.0:
            try:
                freq = self._ps.cpu_freq()
                self._freq = (now, float(freq.current) if freq else None)
            except Exception:  # not available in some containers
                self._freq = (now, None)
        return self._freq[1]

    def read(self) -> CpuSnapshot:
        ps = self._ps
        per = tuple(float(x) for x in ps.cpu_percent(percpu=True))
        mhz = self._mhz()
        vm = ps.virtual_memory()
        try:
            load1: float | None = float(ps.getloadavg()[0])
        except Exception:
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
    gpu: int | None = None  # sample only this GPU index
    cpu: bool = True  # also sample the CPU
    on_snapshot: Callable[[Snapshot], None] | None = None
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

    # -- sources -----------------------------------------------------------------

    def _open(self) -> None:
        self._nvml_source = NvmlSource(self.nvml)
        if self.cpu or not self._nvml_source.available:
            try:
                self._cpu_source = CpuSource()
            except Exception as exc:  # psutil missing or broken: keep the GPU part
                log.info("CPU sampler unavailable: %s", exc)

    @property
    def state(self) -> str:
        return self._nvml_source.state if self._nvml_source else "not started"

    def sample_once(self) -> Snapshot:
        """Take one snapshot now (opening the sources on first use); never raises."""
        if self._nvml_source is None:
            self._open()
        assert self._nvml_source is not None
        try:
            gpus = self._nvml_source.read()
        except Exception as exc:  # defensive: a source bug must not kill the thread
            gpus = ()
            self._nvml_source.state = f"NVML read failed: {exc}"
        if self.gpu is not None:
            gpus = tuple(g for g in gpus if g.index == self.gpu)
        cpu = None
        if self._cpu_source is not None:
            try:
                cpu = self._cpu_source.read()
            except Exception as exc:
                log.info("CPU sample failed: %s", exc)
        snap = Snapshot(time=time.time(), gpus=gpus, cpu=cpu, state=self._nvml_source.state)
        with self._lock:
            self._buffer.append(snap)
        if self.on_snapshot is not None:
            try:
                self.on_snapshot(snap)
            except Exception as exc:
                log.warning("telemetry callback failed: %s", exc)
        return snap

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
    from dataclasses import asdict

    d = asdict(s)
    for g in d["gpus"]:
        g["clock_events"] = list(g["clock_events"])
    return d
