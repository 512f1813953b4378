"""SI units in, human units out.

Everything in code, JSON and the store is in SI base units (FLOP, bytes,
seconds, FLOP/s, bytes/s). Only these formatters turn them into what a person
reads: TFLOP/s, GB/s (10^9), µs/ms, MiB/GiB for sizes.
"""

from __future__ import annotations

import math

KiB = 1024
MiB = 1024**2
GiB = 1024**3


def _scaled(value: float, steps: list[tuple[float, str]], unit: str, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    mag = abs(value)
    for factor, prefix in steps:
        if mag >= factor:
            return f"{_sig(value / factor, digits)} {prefix}{unit}"
    factor, prefix = steps[-1]
    return f"{_sig(value / factor, digits)} {prefix}{unit}"


def _sig(x: float, digits: int) -> str:
    """A number with about `digits` significant figures, no exponent."""
    if x == 0:
        return "0"
    if abs(x) >= 1e6 or abs(x) < 1e-6:  # past the largest prefix: scientific, not sixty digits
        return f"{x:.{max(digits - 1, 0)}e}"
    places = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{places}f}"


_DECIMAL = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]


def fmt_flops(flops: float) -> str:
    """A FLOP count: 1.07 GFLOP."""
    return _scaled(flops, _DECIMAL, "FLOP")


def fmt_flops_rate(rate: float) -> str:
    """A compute rate, always in TFLOP/s so roofs compare at a glance."""
    if rate is None or not math.isfinite(rate):
        return "n/a"
    return f"{_sig(rate / 1e12, 4)} TFLOP/s"


def fmt_bandwidth(rate: float) -> str:
    """A bandwidth in GB/s (10^9 bytes per second)."""
    if rate is None or not math.isfinite(rate):
        return "n/a"
    return f"{_sig(rate / 1e9, 4)} GB/s"


def fmt_bytes(n: float) -> str:
    """A size or traffic volume in binary units (KiB, MiB, GiB)."""
    return _scaled(n, [(1024**4, "Ti"), (GiB, "Gi"), (MiB, "Mi"), (KiB, "Ki"), (1, "")], "B")


def fmt_time(seconds: float) -> str:
    """A duration in ns, µs, ms or s."""
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    mag = abs(seconds)
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if mag >= factor:
            return f"{_sig(seconds / factor, 3)} {unit}"
    return f"{_sig(seconds / 1e-9, 3)} ns"


def fmt_intensity(i: float) -> str:
    """An arithmetic intensity in FLOP/byte."""
    if i is None or not math.isfinite(i):
        return "n/a"
    return f"{_sig(i, 3)} FLOP/B"


def fmt_sig(x: float, digits: int = 3) -> str:
    """A bare number to `digits` significant figures (16.8, 0.0338, 1318): for a list that names its unit once."""
    return "n/a" if x is None or not math.isfinite(x) else _sig(x, digits)


def fmt_count(n: int, noun: str) -> str:
    """'1 run', '3 runs': the plural by adding s, enough for the nouns the reports count."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def fmt_number(x: float) -> str:
    """A plain count or rate: whole with separators from 100 up (1,727), else 3 significant digits (0.122)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def fmt_ratio(x: float) -> str:
    """A ratio to 3 significant figures: ×1.39, ×12.3, ×605, ×605,000 (never ×604734.88)."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if abs(x) < 1000:
        return f"×{_sig(x, 3)}"
    return f"×{float(f'{x:.3g}'):,.0f}"


def fmt_when(t: float | None, fmt: str = "%Y-%m-%d %H:%M", utc: bool = False) -> str:
    """An epoch time as local (or UTC) date and time; "unknown" for a time that is not one
    (NaN, ±inf, before 1970 or past what the platform's clock reaches), "" for none."""
    import time

    if t is None:
        return ""
    try:
        return time.strftime(fmt, time.gmtime(t) if utc else time.localtime(t))
    except (OverflowError, ValueError, OSError, TypeError):
        return "unknown"
