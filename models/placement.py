"""An op placed on a device: the Analysis record (point, regime, time bound, advice) and its measured part.

Its own module so that `advice`, which reads an Analysis, and `analysis`, which makes one
and asks advice for its words, do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from . import roofline
from .ops import Collective, Cost, Op
from .profile import DeviceProfile
from .units import fmt_time

# An op's regime (roofline.Regime), or a collective's: latency-bound (α) or comm-bound (Q/B).
PlacedRegime = Literal["memory", "compute", "latency", "comm"]


@dataclass(frozen=True)
class Measured:
    time_s: float
    achieved_flops: float  # W / t
    achieved_bandwidth: float  # Q / t
    fraction_of_roof: float  # (W / t) / P

    def to_dict(self) -> dict[str, float]:
        return {
            "time_s": self.time_s,
            "achieved_flops": self.achieved_flops,
            "achieved_bandwidth": self.achieved_bandwidth,
            "fraction_of_roof": self.fraction_of_roof,
        }


@dataclass(frozen=True)
class Analysis:
    op: Op
    device: DeviceProfile
    cost: Cost
    peak: float  # F of the op's path
    bandwidth: float  # B of the op's level
    measured: Measured | None = None
    advice: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())
    alpha_s: float = 0.0  # a collective's latency floor α on its link (0 for other ops)
    alpha_source: str = ""  # where α came from, in words (collectives only)

    @property
    def is_collective(self) -> bool:
        return isinstance(self.op, Collective)

    @property
    def path(self) -> str:
        return self.cost.path

    @property
    def level(self) -> str:
        return self.cost.level

    @property
    def flops(self) -> float:
        return self.cost.flops

    @property
    def bytes(self) -> float:
        return self.cost.bytes

    @property
    def intensity(self) -> float:
        return self.cost.intensity

    @property
    def ridge(self) -> float:
        return roofline.ridge(self.peak, self.bandwidth)

    @property
    def regime(self) -> PlacedRegime:
        """memory / compute; a collective's is latency (α over Q/B), comm (Q/B) or compute (W/F)."""
        if self.is_collective:
            if self.time_compute > self.time_memory:
                return "compute"
            return "latency" if self.alpha_s > self.bytes / self.bandwidth else "comm"
        return roofline.regime(self.intensity, self.peak, self.bandwidth)

    @property
    def attainable(self) -> float:
        return roofline.attainable(self.intensity, self.peak, self.bandwidth)

    @property
    def time_compute(self) -> float:
        return self.flops / self.peak

    @property
    def time_memory(self) -> float:
        """Q/B; a collective's adds its link's α (t = α + Q/β)."""
        return self.alpha_s + self.bytes / self.bandwidth

    @property
    def time_lower_bound(self) -> float:
        return max(self.time_compute, self.time_memory)

    @property
    def launch_overhead(self) -> float | None:
        """Seconds to launch one kernel on this device, where its profile has the figure."""
        lo = self.device.launch_overhead
        return lo.value if lo else None

    @property
    def time_bound(self) -> float:
        """T ≥ max(W/F, Q/B, one launch): issued on its own, a kernel takes no less than its launch."""
        return max(self.time_lower_bound, self.launch_overhead or 0.0)

    @property
    def launch_binds(self) -> bool:
        return self.launch_overhead is not None and self.launch_overhead > self.time_lower_bound

    def launch_note(self) -> str:
        """What the launch overhead adds to this op's bound, in words."""
        if self.is_collective:
            return self.alpha_source
        lo = self.launch_overhead
        if lo is None:
            return f"launch overhead not measured for {self.device.id}: T is the roofline bound alone"
        src = self.device.launch_overhead.source if self.device.launch_overhead else ""
        if self.launch_binds:
            return (f"T includes one kernel launch ({fmt_time(lo)}, {src}): above the roofline bound "
                    f"{fmt_time(self.time_lower_bound)}, so the launch sets the time")
        return f"T includes one kernel launch ({fmt_time(lo)}, {src}), below the roofline bound"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: SI units throughout."""
        return {
            "op": self.op.spec(),
            "kind": self.op.kind,
            "description": self.op.describe(),
            "dtype": self.op.dtype,
            "device": self.device.id,
            "device_source": self.device.source,
            "path": self.path,
            "level": self.level,
            "flops": float(self.flops),
            "bytes": float(self.bytes),
            "bytes_terms": {name: float(v) for name, v in self.cost.terms},
            "counting": self.cost.counting,
            "intensity": self.intensity,
            "peak_flops": self.peak,
            "peak_source": self.device.peak[self.path].source,
            "bandwidth": self.bandwidth,
            "bandwidth_source": self.device.bandwidth[self.level].source,
            "ridge": self.ridge,
            "regime": self.regime,
            "attainable_flops": self.attainable,
            "time_compute_s": self.time_compute,
            "time_memory_s": self.time_memory,
            "time_lower_bound_s": self.time_lower_bound,
            "launch_overhead_s": self.launch_overhead,
            "kernels": 1,
            "launch_floor_s": self.launch_overhead,
            "time_bound_s": self.time_bound,
            "binds": "launch" if self.launch_binds else "roofline",
            "advice": list(self.advice),
            "warnings": list(self.warnings),
            "measured": self.measured.to_dict() if self.measured else None,
            **({"alpha_s": self.alpha_s, "alpha_source": self.alpha_source} if self.is_collective else {}),
        }
