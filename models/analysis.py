"""An op on a device: its point, regime, time bound and what to do about it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from . import roofline
from .advice import advise, warn
from .links import link_on
from .ops import Collective, Op, with_batch
from .placement import Analysis, Measured
from .profile import DeviceProfile, NoRoof

# Analysis and Measured live in .placement (advice reads them); importing them from here still works.
__all__ = ["Analysis", "Measured", "analyze", "devices_with_roof", "flip_point", "link_alpha"]


def devices_with_roof(op: Op, devices: Iterable[DeviceProfile]) -> list[str]:
    """The ids of the devices that have the roof `op` needs, for a message where the chosen one has not
    (int8 on a reference profile that measured no int8 GEMM): where the user can ask instead."""
    have = []
    for dev in devices:
        try:
            analyze(op, dev)
        except NoRoof:
            continue
        have.append(dev.id)
    return have


def analyze(op: Op, device: DeviceProfile, measured_time: float | None = None) -> Analysis:
    """Place `op` on `device`'s roofline; NoRoof if the device lacks its path or level."""

    cost = op.cost()
    cost = replace(cost, path=device.path_name(cost.path))  # bf16-tc on a GPU is bf16-matmul on a CPU
    if isinstance(op, Collective):  # an AMD GPU's nvlink is its xGMI, kept under either name
        level, key = link_on(device, cost.level)
        op, cost = replace(op, level=level), replace(cost, level=level)
        if key is not None and key != level:  # shown, and looked up, under the name it is analysed on
            device = replace(device, bandwidth={**device.bandwidth, level: device.bandwidth[key]})
    a = Analysis(op=op, device=device, cost=cost, peak=device.F(cost.path), bandwidth=device.B(cost.level))
    if isinstance(op, Collective):
        a = replace(a, **link_alpha(device, cost.level))
    if measured_time is not None:
        if not measured_time > 0:
            raise ValueError(f"measured time must be positive, got {measured_time!r}")
        achieved = cost.flops / measured_time
        a = replace(
            a,
            measured=Measured(
                time_s=measured_time,
                achieved_flops=achieved,
                achieved_bandwidth=cost.bytes / measured_time,
                fraction_of_roof=roofline.fraction_of_roof(cost.flops, cost.bytes, measured_time, a.peak,
                                                           a.bandwidth),
            ),
        )
    return replace(a, advice=tuple(advise(a)), warnings=tuple(warn(a)))


def link_alpha(device: DeviceProfile, level: str) -> dict[str, Any]:
    """α of a link: a measured comm run's fit kept in the profile's extra["link_alpha_s"], else 0, said so."""
    measured = dict(device.extra.get("link_alpha_s", {}) or {})
    key = next((k for k in (level, "nvlink" if level == "xgmi" else "") if k in measured), None)  # kept as nvlink
    if key is not None:
        return {"alpha_s": float(measured[key]), "alpha_source": f"α measured by rooftop comm on {level}"}
    return {"alpha_s": 0.0, "alpha_source": f"no measured α for {level} on {device.id}: α = 0, "
                                            "T is the bandwidth bound alone (run `rooftop comm` to measure α)"}


def flip_point(op: Op, device: DeviceProfile, limit: int = 1 << 24) -> int | None:
    """The smallest batch-like value (GEMM M, attention b, FMA R, …) at which `op` is compute-bound.

    None when it never gets there below `limit` (decode attention, elementwise ops).
    """
    def compute(v: int) -> bool:
        c = with_batch(op, v).cost()
        return c.intensity >= device.ridge(c.path, c.level)

    return roofline.first_at_least(compute, limit)
