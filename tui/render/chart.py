"""Draw roofline series with plotext, on log-log axes we compute ourselves.

plotext 5's xscale("log") re-logs data on every redraw and breaks on resize,
so we plot log10 values and label the decades (0.1, 1, 10, 1k).
Works with the plotext module itself (the CLI) and a PlotextPlot's `plt`.
Axis labels are short: plotext drops a label that does not fit, and at 80
columns a chart is 35–55 wide; "(log-log)" on x says both axes are.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Iterable

from rooftop.models.plotdata import Series

# One glyph per kernel family on every chart (Live, Roofline, History, `rooftop plot`), so that a
# glyph means the same in every run; ops (What-if, pins, LLM layers) take the others in turn.
FAMILY_MARKERS = {"triad": "●", "read_reduce": "○", "gemm": "▲", "fma": "■", "unstable": "◆"}
OP_MARKERS = "★✚✖▼◇"


def decade_label(exp: int) -> str:
    """10^exp as a short tick label: 1e-4, 0.001, 0.01, 0.1, 1, 10, 100, 1k, 10k, 1M.

    Short, because the y labels' width comes out of an 80-column chart.
    """
    if exp < -3:
        return f"1e{exp}"
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


LINE_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")  # names plotext and Rich both know


def line_colors(series: list[Series]) -> dict[str, str]:
    """The colour each line (roof, slope, curve) gets when a side legend stands for the chart's own."""
    lines = [s for s in series if s.kind in ("roof", "slope", "curve")]
    return {s.label: LINE_COLORS[i % len(LINE_COLORS)] for i, s in enumerate(lines)}


def point_family(label: str) -> str | None:
    """The kernel family a measured series is of: its label ends in it, or in it and a dtype
    ("local gemm", "lab-box unstable", "gemm bf16"); None for an op's point."""
    words = label.split()
    return next((w for w in reversed(words[-2:]) if w in FAMILY_MARKERS), None)


def point_markers(series: list[Series]) -> dict[str, str]:
    """The marker each point series gets in draw_loglog, by label: a legend must use the same.
    A family's glyph is fixed (FAMILY_MARKERS); ops take OP_MARKERS in the order they come."""
    points = [s for s in series if s.kind not in ("roof", "slope", "curve", "ridge")]
    ops = [s.label for s in points if point_family(s.label) is None]
    return {s.label: FAMILY_MARKERS[fam] if (fam := point_family(s.label)) else
            OP_MARKERS[ops.index(s.label) % len(OP_MARKERS)] for s in points}


def _log(values: Iterable[float]) -> list[float]:
    return [math.log10(v) for v in values]


def binary_label(exp: int) -> str:
    """10^exp bytes as a short size label: 1K, 10K, 100K, 1M, 10M, 100M, 1G (decimal decades)."""
    for power, suffix in ((9, "G"), (6, "M"), (3, "K")):
        if exp >= power:
            return f"{10 ** (exp - power)}{suffix}"
    return str(10**exp) if exp >= 0 else f"{10.0 ** exp:.{-exp}f}"


def draw_loglog(
    plt: Any,
    series: list[Series],
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    yscale: float = 1.0,
    xlabels: Any = decade_label,
    color: bool = True,
    legend: bool = True,
) -> None:
    """Lines, ridges and points on log-log axes: log10 of the data, decade ticks labelled by `xlabels`.

    legend=False leaves plotext's legend out (it covers the chart's upper left, and plotext drops
    it when it has more entries than rows) and colours the lines by line_colors, for a side legend.
    """
    plt.clear_data()
    if not color:
        plt.theme("clear")
    xs_all: list[float] = []
    ys_all: list[float] = []
    markers = point_markers(series)
    colors = line_colors(series) if color and not legend else {}
    for s in series:
        xs, ys = _log(s.xs), _log(y / yscale for y in s.ys)
        xs_all += xs
        ys_all += ys
        label = s.label if legend else None
        if s.kind in ("roof", "slope", "curve"):
            plt.plot(xs, ys, label=label, marker="braille", color=colors.get(s.label))
        elif s.kind == "ridge":
            plt.scatter(xs, ys, marker="┼")
        else:
            plt.scatter(xs, ys, label=label, marker=markers[s.label])
    if xs_all:
        xt, _ = decade_ticks(min(xs_all), max(xs_all))
        yt, yl = decade_ticks(min(ys_all), max(ys_all))
        plt.xticks(xt, [xlabels(e) for e in xt])
        plt.yticks(yt, yl)
        plt.xlim(xt[0], xt[-1])
        plt.ylim(yt[0], yt[-1])
    if xlabel:
        plt.xlabel(xlabel)
    if ylabel:
        plt.ylabel(ylabel)
    if title:
        plt.title(title)


def draw_roofline(plt: Any, series: list[Series], title: str = "", color: bool = True, legend: bool = True) -> None:
    """Draw roofs, slopes, ridges and points; y in TFLOP/s, x in FLOP/byte."""
    draw_loglog(plt, series, title, "I, FLOP/byte (log-log)", "TFLOP/s", 1e12, color=color, legend=legend)


def draw_bandwidth(plt: Any, series: list[Series], title: str = "", color: bool = True, legend: bool = True) -> None:
    """Bandwidth against working set (seed 000 figure 2): launch region, cache plateau, DRAM plateau."""
    draw_loglog(plt, series, title, "working set (log-log)", "GB/s", 1e9, binary_label, color, legend)


def draw_gemm(plt: Any, series: list[Series], title: str = "", color: bool = True, legend: bool = True) -> None:
    """GEMM throughput against n (squares) or M (the M sweep)."""
    draw_loglog(plt, series, title, "n or M (log-log)", "TFLOP/s", 1e12, color=color, legend=legend)


def draw_fma(plt: Any, series: list[Series], title: str = "", color: bool = True, legend: bool = True) -> None:
    """FMA-sweep throughput against R, the FMAs per element."""
    draw_loglog(plt, series, title, "R, FMAs/element (log-log)", "TFLOP/s", 1e12, color=color, legend=legend)


def roofline_text(series: list[Series], title: str, width: int | None = None, height: int | None = None,
                  max_height: int = 1000) -> str:
    """The roofline as text for stdout: the terminal's size unless given (80 columns when piped), and
    colour only on a terminal without NO_COLOR, so a file or a pipe gets no escape codes."""
    # deferred: plotext (~25 ms), only when a roofline is drawn as text
    import plotext

    tty = sys.stdout.isatty()
    size = os.get_terminal_size(sys.stdout.fileno()) if tty else os.terminal_size((80, 30))
    color = tty and "NO_COLOR" not in os.environ
    plotext.clf()
    plotext.limitsize(False, False)
    cols = width or size.columns
    plotext.plotsize(cols, height or max(20, min(max_height, size.lines - 4)))
    draw_roofline(plotext, series, title, color=color, legend=False)
    chart = plotext.build()
    chart = chart if color else plotext.uncolorize(chart)
    paint = plotext.colorize if color else (lambda text, _color: text)
    return chart + "\n" + "\n".join(legend_lines(series, cols, paint))


def legend_lines(series: list[Series], width: int, paint: Any = lambda text, _color: text,
                 lines_too: bool = True) -> list[str]:
    """The chart's legend below it, packed into lines of `width`: lines in their colours (`paint`
    colours a swatch), points with their markers. Inside the chart plotext's legend covers the upper
    left, where the slopes rise, and it leaves it out when it has more entries than rows."""
    colors, markers = line_colors(series), point_markers(series)
    entries = [(f"── {s.label}", "── ", colors[s.label]) for s in series
               if lines_too and s.kind in ("roof", "slope", "curve")]
    entries += [(f"{markers[s.label]} {s.label}", "", "") for s in series if s.kind == "point"]
    lines: list[str] = []
    plain, shown = "", ""
    for text, swatch, color in entries:
        piece = paint(swatch, color) + text[len(swatch):] if swatch else text
        if plain and len(plain) + 3 + len(text) > width:
            lines.append(shown)
            plain, shown = "", ""
        plain, shown = (f"{plain}   {text}", f"{shown}   {piece}") if plain else (text, piece)
    return lines + ([shown] if shown else [])
