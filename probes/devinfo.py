"""What the probes run on, in facts: name, memory, SMs / cores, caches, versions, clocks.

Recorded with every run (`rooftop measure --json` → device_info). CPU facts
come from sysfs and /proc (the LLC from /sys/devices/system/cpu/cpu0/cache),
GPU facts from torch's device properties and, when it answers, NVML. Nothing
here raises for a fact it cannot get: the field stays None.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from rooftop.models.calibrate import Hardware
from rooftop.probes.nvml import door

log = logging.getLogger(__name__)

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")

@dataclass(frozen=True)
class CacheLevel:
    level: int
    type: str  # Data, Instruction, Unified
    size_bytes: int  # one instance
    instances: int  # how many of them the CPUs we run on share between them

    @property
    def total_bytes(self) -> int:
        return self.size_bytes * self.instances


def parse_size(text: str) -> int:
    """'32K', '512K', '32768K', '1M', '32 MiB' → bytes."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([KMG]?)(i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"not a cache size: {text!r}")
    scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


def parse_cpu_list(text: str) -> int:
    """How many CPUs a sysfs list like '0-3,8' names."""
    n = 0
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def sysfs_caches(root: Path = SYSFS_CACHE, ncpus: int | None = None) -> list[CacheLevel]:
    """The CPU caches as cpu0 sees them; instances = CPUs / CPUs sharing one."""
    ncpus = ncpus or os.cpu_count() or 1
    out = []
    for d in sorted(root.glob("index*")):
        try:
            level = int((d / "level").read_text())
            ctype = (d / "type").read_text().strip()
            size = parse_size((d / "size").read_text())
            shared = parse_cpu_list((d / "shared_cpu_list").read_text())
        except (OSError, ValueError):
            continue
        out.append(CacheLevel(level, ctype, size, max(1, ncpus // max(1, shared))))
    return out


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@dataclass(frozen=True)
class DeviceInfo:
    """Facts about the device, recorded with every run."""

    kind: str  # "cuda" or "cpu"
    name: str
    vendor: str
    memory_bytes: int | None
    units: int | None  # SMs / CUs on a GPU, threads torch uses on a CPU
    l2_bytes: int | None  # GPU L2; on a CPU the last-level cache (all instances)
    torch_version: str
    index: int | None = None  # the CUDA device index (cuda:N)
    nvml_index: int | None = None  # the same GPU in NVML's numbering (telemetry); None when NVML did not answer
    uuid: str | None = None  # GPU: as nvidia-smi shows it ("GPU-…"); the store's key for the physical device
    private_cache_bytes: int | None = None  # CPU: the level below the LLC, all instances
    caches: tuple[CacheLevel, ...] = ()
    compute_capability: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    hip_version: str | None = None
    cpu_capability: str | None = None  # torch's SIMD level on the CPU (AVX2, AVX512, …)
    native_bf16: bool | None = None  # CPU: avx512_bf16 / AMX present
    clocks_mhz: Mapping[str, float] = field(default_factory=dict)
    load_avg_1m: float | None = None  # CPU: how busy the machine was when the run started
    busy_cpus: int | None = None  # CPU: CPUs over half busy with other work at the start
    default_threads: int | None = None  # CPU: torch's thread count before rooftop chose one

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["caches"] = [asdict(c) for c in self.caches]
        d["clocks_mhz"] = dict(self.clocks_mhz)
        return d

    def hardware(self) -> Hardware:
        """The facts calibration needs, as a pure models value."""
        return Hardware(
            kind="gpu" if self.kind == "cuda" else "cpu",
            name=self.name,
            vendor=self.vendor,
            memory_bytes=self.memory_bytes,
            units=self.units,
            l2_bytes=self.l2_bytes,
            private_cache_bytes=self.private_cache_bytes,
            max_clock_hz=self.clocks_mhz["sm_max"] * 1e6 if self.clocks_mhz.get("sm_max") else None,
        )


CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38  # cuda.h


def driver_l2_bytes(index: int, lib: Any = None) -> int | None:
    """The L2 size from the CUDA driver (cuDeviceGetAttribute): torch < 2.5 has no L2_cache_size.

    `index` is the CUDA ordinal, as torch counts it (both honour CUDA_VISIBLE_DEVICES).
    `lib` may be injected (tests); by default libcuda.so.1 is loaded. None when it cannot say.
    """
    try:
        cuda = lib or ctypes.CDLL("libcuda.so.1")
        dev, value = ctypes.c_int(), ctypes.c_int()
        if (cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), index)
                or cuda.cuDeviceGetAttribute(ctypes.byref(value), CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev)):
            return None
    except (OSError, AttributeError):
        return None
    return value.value if value.value > 0 else None


@dataclass(frozen=True)
class NvmlFacts:
    """What NVML adds about one CUDA device, and which NVML index it is."""

    index: int | None = None  # NVML's index: not the CUDA index under CUDA_VISIBLE_DEVICES or FASTEST_FIRST
    driver: str | None = None
    clocks: Mapping[str, float] = field(default_factory=dict)


def nvml_facts(cuda_index: int, uuid: str | None, nvml: Any = None) -> NvmlFacts:
    """Driver version and clocks of the GPU whose UUID torch reports; empty whenever NVML cannot say.

    NVML numbers the GPUs in PCI order and ignores CUDA_VISIBLE_DEVICES, so the device is found by
    UUID (torch: '58f0…', NVML: 'GPU-58f0…'); without one the CUDA index is assumed to be NVML's. Asked
    through NVML's one door (probes/nvml.py): `nvml` is a pynvml-like binding (tests pass a thin fake).
    """
    nv = door(nvml)
    if not nv.open():
        log.debug("%s", nv.reason)
        return NvmlFacts()
    driver = nv.query("nvmlSystemGetDriverVersion")
    driver = str(driver) if driver is not None else None
    index: int | None = cuda_index
    if uuid:
        want = uuid.lower().removeprefix("gpu-")
        uuids = {g.index: nv.query("nvmlDeviceGetUUID", g.handle, gpu=g.index) for g in nv.gpus}
        found = [i for i, u in uuids.items() if u is not None and str(u).lower().removeprefix("gpu-") == want]
        # not found: the CUDA index, unless a GPU did not say its UUID (it may be this one)
        index = found[0] if found else (cuda_index if None not in uuids.values() else None)
    gpu = nv.gpu(index) if index is not None else None
    if gpu is None:
        return NvmlFacts(driver=driver)
    clocks: dict[str, float] = {}
    for key, clk in (("sm", getattr(nv.lib, "NVML_CLOCK_SM", 1)), ("mem", getattr(nv.lib, "NVML_CLOCK_MEM", 2))):
        top = nv.query("nvmlDeviceGetMaxClockInfo", gpu.handle, clk, gpu=gpu.index)
        if not isinstance(top, (int, float)):
            continue
        clocks[f"{key}_max"] = float(top)
        now = nv.query("nvmlDeviceGetClockInfo", gpu.handle, clk, gpu=gpu.index)
        if isinstance(now, (int, float)):
            clocks[f"{key}_now"] = float(now)
    return NvmlFacts(gpu.index, driver, clocks)


def cuda_info(index: int) -> DeviceInfo:
    # deferred: torch, only when the device is read
    import torch

    props = torch.cuda.get_device_properties(index)
    uuid = str(getattr(props, "uuid", "") or "") or None  # absent in some builds (FBCODE, old ROCm)
    facts = nvml_facts(index, uuid)
    hip = getattr(torch.version, "hip", None)
    l2 = getattr(props, "L2_cache_size", None) or getattr(props, "l2_cache_size", None)
    if not l2 and not hip:
        l2 = driver_l2_bytes(index)
    return DeviceInfo(
        kind="cuda",
        index=index,
        nvml_index=facts.index,
        uuid=f"GPU-{uuid}" if uuid and not hip else uuid,
        name=str(props.name),
        vendor="amd" if hip else "nvidia",
        memory_bytes=int(props.total_memory),
        units=int(props.multi_processor_count),
        l2_bytes=int(l2) if l2 else None,
        torch_version=str(torch.__version__),
        compute_capability=f"{props.major}.{props.minor}",
        driver_version=facts.driver,
        cuda_version=getattr(torch.version, "cuda", None),
        hip_version=hip,
        clocks_mhz=dict(facts.clocks),
    )


def busy_cpus(interval_s: float = 0.2) -> int:
    """CPUs more than half busy over a short look, before we start using them."""
    # deferred: psutil (~15 ms), only when the CPU is read
    import psutil

    return sum(1 for pct in psutil.cpu_percent(interval=interval_s, percpu=True) if pct > 50)


def cpu_info() -> DeviceInfo:
    # deferred: psutil (~15 ms) and torch, only when the device is read
    import psutil
    import torch

    caches = tuple(sysfs_caches())
    unified = sorted((c for c in caches if c.type in ("Unified", "Data")), key=lambda c: c.level)
    llc = unified[-1] if unified else None
    below = unified[-2] if len(unified) >= 2 else None
    if llc is None:
        size = os.sysconf("SC_LEVEL3_CACHE_SIZE") if hasattr(os, "sysconf") else 0
        llc_bytes = int(size) if size and size > 0 else None
    else:
        llc_bytes = llc.total_bytes
    flags = cpu_flags()
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):  # a torch without it, or one that cannot tell
        capability = None
    freq = psutil.cpu_freq()
    return DeviceInfo(
        kind="cpu",
        name=cpu_name(),
        vendor=platform.machine(),
        memory_bytes=int(psutil.virtual_memory().total),
        units=int(torch.get_num_threads()),
        l2_bytes=llc_bytes,
        private_cache_bytes=below.total_bytes if below else None,
        caches=caches,
        torch_version=str(torch.__version__),
        cpu_capability=capability,
        native_bf16=bool(flags & {"avx512_bf16", "amx_bf16"}) if flags else None,
        clocks_mhz={"now": float(freq.current), "max": float(freq.max)} if freq and freq.max else {},
        load_avg_1m=os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        busy_cpus=busy_cpus(),
    )


def busy_note(info: DeviceInfo) -> str | None:
    """Say when other work held the CPUs: torch's threads then wait for them (figures low, unstable)."""
    cpus = os.cpu_count() or 1
    if info.kind != "cpu" or not info.busy_cpus:
        return None
    if info.default_threads and info.units and info.units < info.default_threads:
        return (
            f"{info.busy_cpus} of {cpus} CPUs were busy with other work when the run started "
            f"(load {info.load_avg_1m or 0:.2f}): measuring with {info.units} of torch's {info.default_threads} "
            "threads, since a thread that waits for a busy CPU stalls every parallel kernel; "
            "pass --threads to choose"
        )
    if info.busy_cpus + (info.units or cpus) <= cpus:
        return None
    return (
        f"{info.busy_cpus} of {cpus} CPUs were busy with other work when the run started "
        f"(load {info.load_avg_1m or 0:.2f}); torch's {info.units} threads wait for them, so CPU figures are low "
        "and unstable: measure on a quiet machine, or pass --threads to use fewer"
    )
