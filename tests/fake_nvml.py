"""A thin fake of the pynvml module: just the calls rooftop makes, with NVML's error classes.

NVML cannot exist on this machine; this stands in for it and nothing else.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # pynvml's names
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_FunctionNotFound(NVMLError):
    pass


class NVMLError_Unknown(NVMLError):
    pass


class GpmSupport(SimpleNamespace):
    """nvmlGpmQueryDeviceSupport's answer."""


class c_nvmlGpmMetricsGet_t:  # pynvml's name; a plain object standing for the ctypes structure
    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1 = self.sample2 = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(64)]


# GPM's metrics on the H200 under a 4227 GB/s copy (reference gpm.txt), by NVML_GPM_METRIC id
COPY_GPM = {2: 98.3, 3: 79.3, 5: 0.0, 7: 0.0, 8: 0.0, 9: 0.0, 10: 87.8, 11: 0.0, 12: 0.0, 13: 0.0, 20: 10.0, 21: 20.0}
# ... and idle (all 0), without the PCIe counters: the default, a Hopper GPU doing nothing
IDLE_GPM = {k: 0.0 for k in COPY_GPM if k not in (20, 21)}


class FakeNVML:
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_GPM_METRICS_GET_VERSION = 1
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    c_nvmlGpmMetricsGet_t = c_nvmlGpmMetricsGet_t

    def __init__(self, names: list[str] = ("NVIDIA H200",),  # type: ignore[assignment]
                 init_error: Exception | None = None, uuids: list[str] | None = None,
                 gpm: dict[int, float] | None = IDLE_GPM) -> None:
        self.names = list(names)
        self.uuids = uuids or [f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(len(self.names))]
        self.init_error = init_error
        self.raise_on: dict[str, Exception] = {}  # "fn" or "fn:GPU" → error to raise
        self.hang_on: dict[str, threading.Event] = {}  # "fn" or "fn:GPU" → the call blocks until the event is set
        self.values: dict[tuple[str, int], Any] = {}  # (function, GPU) → what it returns instead (a bad value)
        self.lost: set[int] = set()
        self.calls: dict[str, int] = {}
        self.clock_events = 0x4  # SW power cap
        self.shutdown = False
        self.gpm_supported = gpm is not None  # nvmlGpmQueryDeviceSupport's isSupportedDevice (None: a pre-Hopper GPU)
        self.gpm = dict(gpm or {})  # NVML_GPM_METRIC id → value; a metric not here answers NotSupported
        self.processes: dict[int, list[SimpleNamespace]] = {}  # GPU → nvmlDeviceGetComputeRunningProcesses

    def _call(self, fn: str, h: Any = None, value: Any = None) -> Any:
        self.calls[fn] = self.calls.get(fn, 0) + 1
        hang = self.hang_on.get(fn) or self.hang_on.get(f"{fn}:{h}")  # every GPU's call, or one GPU's
        if hang is not None:
            hang.wait(30)  # a hung driver call (released by the test)
        if h is not None and h in self.lost:
            raise NVMLError_GpuIsLost()
        error = self.raise_on.get(fn) or self.raise_on.get(f"{fn}:{h}")
        if error is not None:
            raise error
        return self.values.get((fn, h), value)

    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return self._call("nvmlDeviceGetCount", None, len(self.names))

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return self._call("nvmlDeviceGetHandleByIndex", None, i)

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._call("nvmlDeviceGetName", h, self.names[h])

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._call("nvmlDeviceGetUUID", h, self.uuids[h])

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._call("nvmlSystemGetDriverVersion", None, "570.86.15")

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return self._call("nvmlDeviceGetUtilizationRates", h, SimpleNamespace(gpu=97, memory=41))

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return self._call("nvmlDeviceGetMemoryInfo", h,
                          SimpleNamespace(used=12 * 2**30, total=141 * 10**9, free=141 * 10**9 - 12 * 2**30))

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._call("nvmlDeviceGetPowerUsage", h, 650_000)  # mW

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self._call("nvmlDeviceGetEnforcedPowerLimit", h, 700_000)

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        return self._call("nvmlDeviceGetTotalEnergyConsumption", h, 5_000_000)  # mJ

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        return self._call("nvmlDeviceGetPcieThroughput", h, 1000 if counter == 0 else 2000)  # KB/s

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return self._call("nvmlDeviceGetClockInfo", h, 1980 if clock == 1 else 3201)

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        return self._call("nvmlDeviceGetMaxClockInfo", h, 1980 if clock == 1 else 3201)

    def nvmlDeviceGetMemoryBusWidth(self, h: int) -> int:
        return self._call("nvmlDeviceGetMemoryBusWidth", h, 6016)  # bits (the H200's, reference ncu-raw.csv)

    def nvmlDeviceGetTemperatureV(self, h: int, sensor: int) -> int:
        return self._call("nvmlDeviceGetTemperatureV", h, 71)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:  # deprecated in nvidia-ml-py 13
        return self._call("nvmlDeviceGetTemperature", h, 71)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._call("nvmlDeviceGetCurrentClocksEventReasons", h, self.clock_events)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:  # the name before driver 535
        return self._call("nvmlDeviceGetCurrentClocksThrottleReasons", h, self.clock_events)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return self._call("nvmlDeviceGetComputeRunningProcesses", h, list(self.processes.get(h, [])))

    # -- GPM (Hopper and newer) ------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, h: int) -> GpmSupport:
        support = GpmSupport(version=1, isSupportedDevice=int(self.gpm_supported))
        return self._call("nvmlGpmQueryDeviceSupport", h, support)

    def nvmlGpmSampleAlloc(self) -> object:
        return self._call("nvmlGpmSampleAlloc", None, object())

    def nvmlGpmSampleFree(self, sample: object) -> None:
        self._call("nvmlGpmSampleFree")

    def nvmlGpmSampleGet(self, h: int, sample: object) -> object:
        return self._call("nvmlGpmSampleGet", h, sample)

    def nvmlGpmMetricsGet(self, get: c_nvmlGpmMetricsGet_t) -> c_nvmlGpmMetricsGet_t:
        self._call("nvmlGpmMetricsGet")
        for m in get.metrics[: get.numMetrics]:
            m.nvmlReturn, m.value = (0, self.gpm[m.metricId]) if m.metricId in self.gpm else (3, 0.0)
        return get
