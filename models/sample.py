"""A measured point: one kernel timed at one size, with its W, Q and time statistics.

The probes yield these; the store keeps them; calibration turns them into
ceilings. Field names follow the reference repository's summary.csv so a
rooftop run exports next to the published measurements.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

UNSTABLE_IQR = 0.10  # reference protocol: iqr_ratio above this is unstable, left out of ceilings

# The kernel families, as in the reference summary.csv plus launch probes.
FAMILIES = ("read_reduce", "copy", "triad", "write", "gemm", "fma", "launch", "launch_graph", "l2_read", "l1_read")
DATA_MOVING = ("read_reduce", "copy", "triad", "write")
# In-kernel-loop cache probes (GPU): their bandwidth is a cache level's, never DRAM's.
CACHE_PROBES = ("l2_read", "l1_read")


@dataclass(frozen=True)
class TimeStats:
    """Per-call time statistics over the repeats of one point, in seconds."""

    median_s: float
    p10_s: float
    p90_s: float
    min_s: float
    iqr_ratio: float  # (p75 − p25) / median
    repeats: int  # samples taken (7 in the reference protocol)
    calls: int  # back-to-back calls per sample

    @property
    def stable(self) -> bool:
        return self.iqr_ratio <= UNSTABLE_IQR

    @classmethod
    def from_times(cls, per_call_s: Sequence[float], calls: int) -> "TimeStats":
        """Statistics of the per-call times of the repeats (linear-interpolated percentiles)."""
        if not per_call_s:
            raise ValueError("no times to summarise")
        xs = sorted(float(t) for t in per_call_s)
        med = percentile(xs, 50)
        iqr = percentile(xs, 75) - percentile(xs, 25)
        return cls(
            median_s=med,
            p10_s=percentile(xs, 10),
            p90_s=percentile(xs, 90),
            min_s=xs[0],
            iqr_ratio=iqr / med if med > 0 else float("inf"),
            repeats=len(xs),
            calls=int(calls),
        )


def percentile(sorted_xs: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) of sorted values, interpolated linearly (numpy's default)."""
    if not sorted_xs:
        raise ValueError("percentile of no values")
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Sample:
    family: str  # one of FAMILIES
    dtype: str  # fp32, bf16, … (see models.dtypes)
    shape: Mapping[str, int]  # m, n, k for GEMMs; n (elements) and reps (R) for stream/FMA kernels
    flops: float  # W, algorithmic
    bytes: float  # Q, algorithmic (each array once)
    footprint_bytes: float = 0.0  # the working set the kernel touches
    cache: str = "warm"  # warm | cold (L2 evicted before each sample) | streaming
    stats: TimeStats | None = None  # None when skipped
    path: str | None = None  # compute path the kernel runs on
    skipped: str = ""  # why the point was not measured (OOM, unsupported dtype, kernel error)
    max_error: float | None = None  # against a reference result, when checked
    conditions: Mapping[str, Any] = field(default_factory=dict)  # clocks, temperature, throttling

    @property
    def stable(self) -> bool:
        return self.stats is not None and self.stats.stable

    @property
    def time_s(self) -> float | None:
        return self.stats.median_s if self.stats else None

    @property
    def flop_rate(self) -> float | None:
        return self.flops / self.stats.median_s if self.stats and self.stats.median_s > 0 else None

    @property
    def bandwidth(self) -> float | None:
        return self.bytes / self.stats.median_s if self.stats and self.stats.median_s > 0 else None

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def shape_text(self) -> str:
        """The shape as a person writes it, `m=128 n=128 k=128`: GEMM dims in m, n, k order
        (the store keeps keys sorted), then any others (n, reps, …) as they come."""
        order = {"m": 0, "n": 1, "k": 2}
        keys = sorted(self.shape, key=lambda k: order.get(k, len(order)))
        return " ".join(f"{k}={self.shape[k]}" for k in keys)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["shape"] = dict(self.shape)
        d["conditions"] = dict(self.conditions)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Sample":
        st = d.get("stats")
        return cls(
            family=str(d["family"]),
            dtype=str(d["dtype"]),
            shape={k: int(v) for k, v in dict(d.get("shape", {})).items()},
            flops=float(d["flops"]),
            bytes=float(d["bytes"]),
            footprint_bytes=float(d.get("footprint_bytes", 0.0)),
            cache=str(d.get("cache", "warm")),
            stats=TimeStats(**st) if st else None,
            path=d.get("path"),
            skipped=str(d.get("skipped", "")),
            max_error=d.get("max_error"),
            conditions=dict(d.get("conditions", {})),
        )
