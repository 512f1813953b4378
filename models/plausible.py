"""Plausible values: the one set of rules for what a run, its samples and its profile may hold.

A file can say anything; the store must hold only what every view can show and
every formula can use. An import refuses a value outside these bounds (the whole
file, in one line); a read of a store written before the rules existed shows such
a value as unknown instead of failing. Each check returns what is wrong in words
(None when the value is fine), so both sides word it the same way.

The bounds are physical sense with a wide margin, not today's hardware: a DRAM
slope of 1 B/s … 10 PB/s (HBM3e is 5e12), a roof of 1 FLOP/s … 1 EFLOP/s on one
device (B300 fp4 is 1.5e16), a launch of 1 ns … 1 s, a time stamp from 1970 to
the year 2100, sizes and counts whole numbers from 0 to 2^62.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # the one type named from a sibling: a sample is checked here, built there
    from .sample import Sample

BANDWIDTH = (1.0, 1e16)  # bytes/s
PEAK = (1.0, 1e18)  # FLOP/s
LAUNCH = (1e-9, 1.0)  # seconds per kernel launch
CEILING_RANGE = {"bandwidth": BANDWIDTH, "peak": PEAK, "launch": LAUNCH}
CEILING_UNIT = {"bandwidth": "B/s", "peak": "FLOP/s", "launch": "s"}
EPOCH = (0.0, 4102444800.0)  # 1970-01-01 … 2100-01-01 UTC, seconds
MAX_WHOLE = 2**62  # sizes, counts, shape dimensions: SQLite keeps them, products stay finite
MAX_AMOUNT = 1e30  # a sample's W, Q or footprint (FLOP, bytes)
MAX_SECONDS = 1e6  # one timed call (about eleven days)
MAX_WATTS = 1e5
MAX_DEPTH = 32  # nesting of free-form JSON (device facts, conditions, telemetry)
MAX_INT = 2**63 - 1  # what SQLite's INTEGER holds


def is_real(v: Any) -> bool:
    """A finite number: not a bool, not text, not NaN or ±inf."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def real_problem(name: str, v: Any, lo: float, hi: float) -> str | None:
    """`v` must be a finite number in [lo, hi]."""
    if not is_real(v):
        return f"{name} = {shown(v)} is not a {'finite ' if isinstance(v, float) else ''}number"
    if v < lo or v > hi:
        return f"{name} = {shown(v)} is outside [{lo:g}, {hi:g}]"
    return None


def whole_problem(name: str, v: Any, lo: int = 0, hi: int = MAX_WHOLE) -> str | None:
    """`v` must be a whole number in [lo, hi] (an integral float counts: JSON writes 5e7 for sizes)."""
    if not is_real(v) or (isinstance(v, float) and not v.is_integer()):
        return f"{name} = {shown(v)} is not a whole number"
    if v < lo or v > hi:
        return f"{name} = {shown(v)} is outside [{lo}, {'2^62' if hi == MAX_WHOLE else hi}]"
    return None


def optional(problem: str | None, v: Any) -> str | None:
    """A check for a field that may be absent (None)."""
    return None if v is None else problem


def when_problem(name: str, v: Any) -> str | None:
    """A time stamp in epoch seconds between 1970 and 2100."""
    if real_problem(name, v, *EPOCH) is None:
        return None
    return f"{name} = {shown(v)} is not a time between 1970 and 2100"


def ceiling_problem(kind: str, key: str, v: Any) -> str | None:
    """A roof (`peak`), a slope (`bandwidth`) or the launch overhead (`launch`) within CEILING_RANGE."""
    if kind not in CEILING_RANGE:
        return f"{shown(kind)} {key} is not a kind of ceiling (one of: {', '.join(CEILING_RANGE)})"
    lo, hi = CEILING_RANGE[kind]
    problem = real_problem(f"{kind} {key}", v, lo, hi)
    return problem and (problem + f" {CEILING_UNIT[kind]}" if is_real(v) else problem)


FACTS = ("memory_bytes", "l2_bytes", "sm_count", "power_limit_w")


def fact_problem(name: str, v: Any) -> str | None:
    """A device fact (FACTS): absent, or a size/count that is a whole number ≥ 0, or a power in watts."""
    if v is None:
        return None
    if name == "power_limit_w":
        return real_problem(name, v, 0.0, MAX_WATTS)  # 0 is how some drivers say "no limit"
    return whole_problem(name, v)


def free_problem(name: str, v: Any, depth: int = 0) -> str | None:
    """Free-form JSON (device facts, versions, conditions, telemetry): any nesting up to MAX_DEPTH,
    numbers finite and within SQLite's integers."""
    if depth > MAX_DEPTH:
        return f"{name} is nested deeper than {MAX_DEPTH}"
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return None
    if isinstance(v, int):
        return None if -MAX_INT <= v <= MAX_INT else f"{name} = {shown(v)} is too large"
    if isinstance(v, float):
        return None if math.isfinite(v) else f"{name} = {shown(v)} is not a finite number"
    if isinstance(v, Mapping):
        return next((p for k, x in v.items() if (p := free_problem(f"{name}.{k}", x, depth + 1))), None)
    if isinstance(v, (list, tuple)):
        return next((p for i, x in enumerate(v) if (p := free_problem(f"{name}[{i}]", x, depth + 1))), None)
    return f"{name} = {shown(v)} is not a JSON value"


def shown(v: Any) -> str:
    """A value for a one-line message: short, whatever it is."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**15:
        return f"{'-' if v < 0 else ''}a {len(str(abs(v))) if abs(v) < 10**4000 else 'huge'}-digit number"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "…"


def sample_problem(s: Sample) -> str | None:
    """What makes a sample point impossible to keep or show; None when it is fine.

    Its W, Q and footprint are amounts ≥ 0; its times are seconds ≥ 0 (none missing); its
    IQR ratio is ≥ 0 (infinite for a zero median: unstable); repeats and calls are counts.
    """
    # a dtype may be empty: a profiled program's dispatch-and-views row has no tensor of its own
    if not isinstance(s.family, str) or not s.family or not isinstance(s.dtype, str):
        return f"family must be a name and dtype text ({shown(s.family)}, {shown(s.dtype)})"
    if not isinstance(s.shape, Mapping):
        return f"shape = {shown(s.shape)} is not a map of sizes"
    checks = [whole_problem(f"shape {k}", v) for k, v in s.shape.items()]
    checks += [real_problem(k, v, 0.0, MAX_AMOUNT) for k, v in
               (("flops", s.flops), ("bytes", s.bytes), ("footprint_bytes", s.footprint_bytes))]
    if s.stats is not None:
        st = s.stats
        checks += [real_problem(k, v, 0.0, MAX_SECONDS) for k, v in
                   (("median_s", st.median_s), ("p10_s", st.p10_s), ("p90_s", st.p90_s), ("min_s", st.min_s))]
        iqr_bad = isinstance(st.iqr_ratio, bool) or not isinstance(st.iqr_ratio, (int, float)) \
            or math.isnan(st.iqr_ratio) or st.iqr_ratio < 0
        checks += [f"iqr_ratio = {shown(st.iqr_ratio)} is not a number ≥ 0" if iqr_bad else None]
        checks += [whole_problem("repeats", st.repeats), whole_problem("calls", st.calls)]
        checks.append(order_problem(st))
    checks += [optional(real_problem("max_error", s.max_error, -MAX_AMOUNT, MAX_AMOUNT), s.max_error)]
    texts = (s.cache, s.skipped) + (() if s.path is None else (s.path,))
    if not all(isinstance(t, str) for t in texts):
        checks.append(f"path, cache and skipped must be text ({shown(s.path)}, {shown(s.cache)}, {shown(s.skipped)})")
    checks.append(free_problem("conditions", s.conditions))
    return next((c for c in checks if c), None)


ORDER_SLACK = 1e-9  # relative: percentiles of equal times may differ in the last bit


def order_problem(st: Any) -> str | None:
    """A sample's times in the order percentiles have: min ≤ p10 ≤ median ≤ p90 (a file may say otherwise)."""
    names = ("min_s", "p10_s", "median_s", "p90_s")
    times = [getattr(st, n) for n in names]
    if not all(is_real(t) for t in times):
        return None  # said by the range checks
    for (a, x), (b, y) in zip(zip(names, times), zip(names[1:], times[1:])):
        if x > y * (1 + ORDER_SLACK):
            return f"{a} = {shown(x)} is more than {b} = {shown(y)} (times go min ≤ p10 ≤ median ≤ p90)"
    return None


def finite(v: Any) -> Any:
    """`v` (nested dicts, lists, tuples) with every NaN and ±inf as None, for JSON, which has neither.

    rooftop's JSON (`--json`, exports) is strict (RFC 8259), so every parser reads it: a value
    that is not a finite number means "none" or "unbounded" where it arises (a time bound with
    no roof, the IQR ratio of a zero median, a time the store holds as unknown) and is null.
    """
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Mapping):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    return v
