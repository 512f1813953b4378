"""What each ceiling was measured under: the GPU's SM clock and throttling when its winning point ran.

A roof measured while the GPU was power- or thermally capped is the roof at that clock, not the
card's: a reader comparing it with a datasheet or another run must see that beside the figure.
The telemetry sampler attaches its conditions to every sample (mean SM clock, throttle reasons,
power limit); calibration keeps those of each ceiling's winning sample, and `capped_line` says in
one line which ceilings ran capped and at what clock. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .profile import Ceiling, DeviceProfile
from .sample import Sample

# The telemetry fields a ceiling keeps (SI units, as probes.telemetry.conditions records them).
KEPT = ("mean_sm_clock_mhz", "sm_clock_max_mhz", "max_temperature_c", "mean_power_w", "power_limit_w", "throttle")
# NVML clock-event reasons → what they did to the clocks, in the order they are named.
CAUSES = {
    "power cap": "power-capped",
    "power brake": "power-capped",
    "sw thermal": "thermally capped",
    "hw thermal": "thermally capped",
    "hw slowdown": "slowed down by the hardware",
}


def telemetry_of(s: Sample) -> dict[str, Any]:
    """The GPU telemetry a sample ran under, or {} when none was read (a CPU run, no NVML)."""
    c = s.conditions
    if not c.get("snapshots"):
        return {}
    return {k: c[k] for k in KEPT if c.get(k) not in (None, [])}


def ceiling_conditions(samples: Iterable[Sample], rate: Any, ceilings: Mapping[str, Ceiling],
                       case_of: Any) -> dict[str, dict[str, Any]]:
    """Per ceiling name, the telemetry of the sample that set it (matched by case and value)."""
    by_case: dict[str, list[Sample]] = {}
    for s in samples:
        by_case.setdefault(case_of(s), []).append(s)
    out: dict[str, dict[str, Any]] = {}
    for name, c in ceilings.items():
        for s in by_case.get(c.case, []):
            if rate(s) == c.value:
                t = telemetry_of(s)
                if t:
                    out[name] = t
                break
    return out


def causes(cond: Mapping[str, Any]) -> tuple[str, ...]:
    """The distinct causes among a point's throttle reasons, in CAUSES' order, e.g. ('power-capped',)."""
    throttle = cond.get("throttle", ())
    reasons = set(throttle) if isinstance(throttle, (list, tuple)) else set()
    return tuple(dict.fromkeys(why for r, why in CAUSES.items() if r in reasons))


def _nums(conds: Iterable[Mapping[str, Any]], key: str) -> list[float]:
    """The positive numbers under `key` (a stored or imported file may hold anything there)."""
    out = []
    for c in conds:
        v = c.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            out.append(float(v))
    return out


def _ghz(mhz: list[float]) -> str:
    lo, hi = min(mhz) / 1e3, max(mhz) / 1e3
    return f"{lo:.2f} GHz" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f} GHz"


def capped_line(profile: DeviceProfile) -> str:
    """One line naming the ceilings measured while the GPU was capped, and at what SM clock, e.g.
    'bf16-tc, fp8-tc measured power-capped (700 W) at 1.59–1.76 GHz SM (max 1.98 GHz)'; '' when none was."""
    conds = profile.extra.get("ceiling_conditions")
    if not isinstance(conds, Mapping):
        return ""
    order = [*profile.levels(), *profile.paths()]
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in sorted(conds, key=lambda n: order.index(n) if n in order else len(order)):
        why = causes(conds[name]) if isinstance(conds[name], Mapping) else ()
        if why:
            groups.setdefault(why, []).append(str(name))
    clauses = []
    for why, names in groups.items():
        cs = [conds[n] for n in names]
        text = f"{', '.join(names)} measured {' and '.join(why)}"
        limits = _nums(cs, "power_limit_w")
        if "power-capped" in why and limits:
            text += f" ({max(limits):.0f} W)"
        clocks = _nums(cs, "mean_sm_clock_mhz")
        if clocks:
            text += f" at {_ghz(clocks)} SM"
            maxima = _nums(cs, "sm_clock_max_mhz")
            if maxima:
                text += f" (max {max(maxima) / 1e3:.2f} GHz)"
        clauses.append(text)
    return "; ".join(clauses)
