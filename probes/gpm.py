"""NVML GPM (GPU Performance Monitoring, Hopper and newer): what the GPU is doing, as fractions of its roofs.

`nvmlDeviceGetUtilizationRates` says how much of the time a kernel ran; GPM says how busy the DRAM, the
SMs and the tensor pipes were between two samples, which any process may read (no DCGM daemon). One
`nvmlGpmSampleGet` a tick: each tick's metrics span the previous tick's sample and this one. On an H200 a
sample costs 0.11 ms; a 4227 GB/s copy read DRAM_BW_UTIL 87.8%, so GPM's 100% is 4.81 TB/s — exactly the
memory clock (3201 MHz) × the bus width (6016 bits) × 2 (DDR) that NVML reports, the peak used here.

Every call goes through NVML's door (probes/nvml.py: N/A on any NVMLError), so nothing here raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rooftop.models.catalog import find_by_name
from rooftop.probes.nvml import ODD_VALUE, Nvml

# nvml.h's NVML_GPM_METRIC_* ids → the GpuSnapshot field each one fills (utilisations as fractions 0–1).
GPM_METRICS: dict[int, str] = {
    2: "sm_active",  # SM_UTIL: % of SMs busy
    3: "sm_occupancy",  # SM_OCCUPANCY: % of warps resident vs the maximum
    5: "tensor_active",  # ANY_TENSOR_UTIL
    7: "hmma_active",  # HMMA_TENSOR_UTIL (fp16/bf16/tf32/fp8 MMA)
    8: "dmma_active",  # DMMA_TENSOR_UTIL (fp64 MMA)
    9: "imma_active",  # IMMA_TENSOR_UTIL (int8 MMA)
    10: "dram_active",  # DRAM_BW_UTIL: % of the theoretical DRAM bandwidth
    11: "fp64_active",  # FP64_UTIL (non-tensor)
    12: "fp32_active",  # FP32_UTIL
    13: "fp16_active",  # FP16_UTIL
    20: "pcie_tx_bytes_s",  # PCIE_TX_PER_SEC, MiB/s
    21: "pcie_rx_bytes_s",  # PCIE_RX_PER_SEC, MiB/s
}
PER_SECOND_MIB = {20, 21}  # the metrics in MiB/s; the rest are percentages
GPM_FIELDS = tuple(GPM_METRICS.values())

NOT_SUPPORTED = "GPM needs a data-centre GPU, Hopper or newer: no live DRAM bandwidth or tensor activity here"
NO_GPM_API = "this NVML (driver or binding) has no GPM: no live DRAM bandwidth or tensor activity"


def dram_peak_bytes_s(mem_clock_mhz: float | None, bus_width_bits: float | None) -> float | None:
    """The DRAM bandwidth NVML implies: memory clock × bus width × 2 (double data rate), in bytes/s.

    This is the 100% of GPM's DRAM_BW_UTIL (H200: 3201 MHz × 6016 bits × 2 = 4.81 TB/s).
    """
    if not mem_clock_mhz or not bus_width_bits or mem_clock_mhz <= 0 or bus_width_bits <= 0:
        return None
    return mem_clock_mhz * 1e6 * bus_width_bits / 8 * 2


def fraction(value: float | None, roof: float | None) -> float | None:
    """value / roof, or None when either is unknown (or the roof is not positive)."""
    if value is None or roof is None or roof <= 0:
        return None
    return value / roof


@dataclass(frozen=True)
class DramRoof:
    """The measured B dram a live bandwidth is divided by, and whose it is."""

    bandwidth: float  # bytes/s
    source: str  # "local" (this machine's latest measurement) or a reference profile id


def dram_roof(gpu_name: str, local: Any = None, own: Any = None) -> DramRoof | None:
    """The DRAM roof of a GPU: `own` (this very GPU's measured DeviceProfile) first, then `local` when it was
    measured on this kind of GPU, else the catalog's reference profile for the GPU's name; None when none
    has a DRAM bandwidth. On a server of eight, one slow GPU's live figure is a fraction of its own B."""
    if own is not None and "dram" in own.bandwidth:
        return DramRoof(own.B("dram"), str(own.id))
    want = gpu_name.strip().lower()
    if local is not None and str(getattr(local, "name", "")).strip().lower() == want and "dram" in local.bandwidth:
        return DramRoof(local.B("dram"), str(local.id))
    ref = find_by_name(gpu_name)
    if ref is not None and "dram" in ref.bandwidth:
        return DramRoof(ref.B("dram"), ref.id)
    return None


class GpmDevice:
    """GPM on one GPU: whether it is offered (and if not, one note why), and a pair of samples per tick.

    `query(fn, *args)` asks NVML through the door (`nvml.query` about this GPU, by default): None on any
    NVML error; the door remembers the functions the binding or driver lacks.
    """

    def __init__(self, nvml: Nvml, handle: Any, query: Callable[..., Any] | None = None) -> None:
        self._nv, self._h = nvml.lib, handle
        self._q: Callable[..., Any] = query or nvml.query
        self.note: str | None = None
        self._samples: list[Any] = []
        self._have_prev = False
        support = self._q("nvmlGpmQueryDeviceSupport", handle)
        if support is None:
            self.note = NO_GPM_API if nvml.missing("nvmlGpmQueryDeviceSupport") else NOT_SUPPORTED
            return
        if not getattr(support, "isSupportedDevice", 0):
            self.note = NOT_SUPPORTED
            return
        samples = [self._q("nvmlGpmSampleAlloc"), self._q("nvmlGpmSampleAlloc")]
        if any(s is None for s in samples):
            self.note = "GPM is offered but NVML could not allocate its samples"
            return
        self._samples = samples

    def read(self) -> dict[str, float | None]:
        """This tick's metrics (over the span since the last tick's sample); {} on the first tick or when a
        sample could not be taken (then the next tick starts a new pair)."""
        if not self._samples:
            return {}
        prev, cur = self._samples
        if self._q("nvmlGpmSampleGet", self._h, cur) is None:
            self._have_prev = False
            return {}
        out: dict[str, float | None] = {}
        if self._have_prev:
            out = self._metrics(prev, cur)
        self._samples = [cur, prev]  # this sample is the next tick's first
        self._have_prev = True
        return out

    def _metrics(self, first: Any, second: Any) -> dict[str, float | None]:
        nv = self._nv
        try:
            get = nv.c_nvmlGpmMetricsGet_t()
            get.version = getattr(nv, "NVML_GPM_METRICS_GET_VERSION", 1)
            get.numMetrics = len(GPM_METRICS)
            get.sample1, get.sample2 = first, second
            for i, mid in enumerate(GPM_METRICS):
                get.metrics[i].metricId = mid
        except ODD_VALUE:  # a binding without the structure, or one of another shape
            return {}
        got = self._q("nvmlGpmMetricsGet", get)
        if got is None:
            return {}
        out: dict[str, float | None] = {}
        for i, (mid, name) in enumerate(GPM_METRICS.items()):
            try:
                m = got.metrics[i]
                ok = int(m.metricId) == mid and int(m.nvmlReturn) == 0
                v = float(m.value)
            except ODD_VALUE:  # one odd metric costs that metric only
                out[name] = None
                continue
            if not ok or v != v or v < 0:  # an error for this metric, or NaN / a negative reading
                out[name] = None
            elif mid in PER_SECOND_MIB:
                out[name] = v * 2**20
            else:
                out[name] = min(v, 100.0) / 100.0
        return out

    def close(self) -> None:
        for s in self._samples:
            self._q("nvmlGpmSampleFree", s)
        self._samples = []
