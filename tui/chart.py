"""Draw roofline series with plotext, on log-log axes we compute ourselves.

plotext 5's xscale("log") re-logs data on every redraw and breaks on resize
(DESIGN.md), so we plot log10 values and label the decades (0.1, 1, 10, 1k).
Works with the plotext module itself (the CLI) and a PlotextPlot's `plt`.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from rooftop.models.plotdata import Series

POINT_MARKERS = "●◆▲■★✚"


def decade_label(exp: int) -> str:
    """10^exp as a short tick label: 0.01, 0.1, 1, 10, 100, 1k, 10k, 1M."""
    if exp < 0:
        return f"{10.0 ** exp:.{-exp}f}"
    for power, suffix in ((6, "M"), (3, "k")):
        if exp >= power:
            return f"{10 ** (exp - power)}{suffix}"
    return str(10**exp)


def decade_ticks(lo: float, hi: float) -> tuple[list[int], list[str]]:
    """Integer log10 positions from lo to hi (log10 values) and their labels."""
    first, last = math.floor(lo), math.ceil(hi)
    exps = list(range(first, last + 1))
    return exps, [decade_label(e) for e in exps]


def _log(values: Iterable[float]) -> list[float]:
    return [math.log10(v) for v in values]


def draw_roofline(plt: Any, series: list[Series], title: str = "", color: bool = True) -> None:
    """Draw roofs, slopes, ridges and points; y in TFLOP/s, x in FLOP/byte."""
    plt.clear_data()
    if not color:
        plt.theme("clear")
    xs_all: list[float] = []
    ys_all: list[float] = []
    marker_i = 0
    for s in series:
        xs, ys = _log(s.xs), _log(y / 1e12 for y in s.ys)
        xs_all += xs
        ys_all += ys
        if s.kind in ("roof", "slope"):
            plt.plot(xs, ys, label=s.label, marker="braille")
        elif s.kind == "ridge":
            plt.scatter(xs, ys, marker="┼")
        else:
            plt.scatter(xs, ys, label=s.label, marker=POINT_MARKERS[marker_i % len(POINT_MARKERS)])
            marker_i += 1
    if xs_all:
        xt, xl = decade_ticks(min(xs_all), max(xs_all))
        yt, yl = decade_ticks(min(ys_all), max(ys_all))
        plt.xticks(xt, xl)
        plt.yticks(yt, yl)
        plt.xlim(xt[0], xt[-1])
        plt.ylim(yt[0], yt[-1])
    plt.xlabel("arithmetic intensity I (FLOP/byte, log)")
    plt.ylabel("TFLOP/s (log)")
    if title:
        plt.title(title)
