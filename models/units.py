"""SI units in, human units out.

Everything in code, JSON and the store is in SI base units (FLOP, bytes,
seconds, FLOP/s, bytes/s). Only these formatters turn them into what a person
reads: TFLOP/s, GB/s (10^9), µs/ms, MiB/GiB for sizes.
"""

from __future__ import annotations

import math
import time

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
    """A ratio to 3 significant figures: ×1.39, ×12.3, ×605, ×605,000 (never ×604734.88); from a million
    (an overcounted shape's speed-up) ×1.2e+30, not thirty digits."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if abs(x) < 1000:
        return f"×{_sig(x, 3)}"
    if abs(x) >= 1e6:
        return f"×{x:.1e}"
    return f"×{float(f'{x:.3g}'):,.0f}"


PERCENT_POWERS = 100.0  # a fraction this large (10⁴%, a hundred times a roof) is written as a power of ten


def fmt_percent(fraction: float | None, decimals: int = 1, none: str = "") -> str:
    """A fraction as a percentage, the one rule for a share, a fraction of a roof or of a link, MFU, and a
    measured time explained: `decimals` places, below the last of them two significant digits (0.0021%); from 10⁴% — a
    hundred times a roof, which no kernel reaches: an overcounted shape or a time too small to be one — as
    1.7e+301%, and past any float as >1e+308%: never "inf%", nor the hundred digits of `f"{1e98:.1f}"`.
    "n/a" for NaN; `none` for None: "" (a blank table cell), or "n/a" where the text must say there is none."""
    if fraction is None:
        return none
    if math.isnan(fraction):
        return "n/a"
    if math.isinf(fraction):
        return ">1e+308%" if fraction > 0 else "<-1e+308%"
    if abs(fraction) >= PERCENT_POWERS:  # the exponent moved by 2 by hand: 100 × 1.7e307 would overflow
        mantissa, exponent = f"{fraction:.1e}".split("e")
        return f"{mantissa}e{int(exponent) + 2:+03d}%"
    p = 100 * fraction
    if abs(p) < 10.0 ** -decimals:  # below the last place shown: two significant digits, not 0.0%
        return f"{p:.2g}%"
    return f"{p:.{decimals}f}%"


def fmt_when(t: float | None, fmt: str = "%Y-%m-%d %H:%M", utc: bool = False) -> str:
    """An epoch time as local (or UTC) date and time; "unknown" for a time that is not one
    (NaN, ±inf, before 1970 or past what the platform's clock reaches), "" for none."""
    if t is None:
        return ""
    try:
        return time.strftime(fmt, time.gmtime(t) if utc else time.localtime(t))
    except (OverflowError, ValueError, OSError, TypeError):
        return "unknown"
