"""A thin fake of the pynvml module: just the calls rooftop makes, with NVML's error classes.

NVML cannot exist on this machine; this stands in for it and nothing else.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's names
    pass


class NVMLError_GpuIsLost(NVMLError):  # noqa: N801
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    pass


class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801
    pass


class NVMLError_Unknown(NVMLError):  # noqa: N801
    pass


class FakeNVML:
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound

    def __init__(self, names: list[str] = ("NVIDIA H200",), init_error: Exception | None = None,
                 uuids: list[str] | None = None) -> None:  # type: ignore[assignment]
        self.names = list(names)
        self.uuids = uuids or [f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(len(self.names))]
        self.init_error = init_error
        self.raise_on: dict[str, Exception] = {}  # function name → error to raise
        self.lost: set[int] = set()
        self.calls: dict[str, int] = {}
        self.clock_events = 0x4  # SW power cap
        self.shutdown = False

    def _call(self, fn: str, h: Any = None) -> None:
        self.calls[fn] = self.calls.get(fn, 0) + 1
        if h is not None and h in self.lost:
            raise NVMLError_GpuIsLost()
        if fn in self.raise_on:
            raise self.raise_on[fn]

    def nvmlInit(self) -> None:
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.names)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> str:
        return self.names[h]

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self.uuids[h]

    def nvmlSystemGetDriverVersion(self) -> str:
        self._call("nvmlSystemGetDriverVersion")
        return "570.86.15"

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        self._call("nvmlDeviceGetUtilizationRates", h)
        return SimpleNamespace(gpu=97, memory=41)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        self._call("nvmlDeviceGetMemoryInfo", h)
        return SimpleNamespace(used=12 * 2**30, total=141 * 10**9, free=141 * 10**9 - 12 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        self._call("nvmlDeviceGetPowerUsage", h)
        return 650_000  # mW

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        self._call("nvmlDeviceGetEnforcedPowerLimit", h)
        return 700_000

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        self._call("nvmlDeviceGetTotalEnergyConsumption", h)
        return 5_000_000  # mJ

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        self._call("nvmlDeviceGetPcieThroughput", h)
        return 1000 if counter == 0 else 2000  # KB/s

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        self._call("nvmlDeviceGetClockInfo", h)
        return 1980 if clock == 1 else 3201

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        self._call("nvmlDeviceGetMaxClockInfo", h)
        return 1980

    def nvmlDeviceGetTemperatureV(self, h: int, sensor: int) -> int:
        self._call("nvmlDeviceGetTemperatureV", h)
        return 71

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:  # deprecated in nvidia-ml-py 13
        self._call("nvmlDeviceGetTemperature", h)
        return 71

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        self._call("nvmlDeviceGetCurrentClocksEventReasons", h)
        return self.clock_events

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:  # the name before driver 535
        self._call("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return self.clock_events
