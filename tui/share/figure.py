"""A chart drawn for a document: the roofline (or a measurement's curves) as SVG or PNG, with matplotlib.

The same series the terminal draws (models.plotdata), in the same colours and names as its legend
(render.chart.line_colors, point_markers), on log-log axes with decade ticks labelled as the terminal
labels them. The legend stands below the axes, so it never covers a roof; op points are labelled beside
them where a label fits without covering another; in the SVG every point carries a <title> (its name,
I, rate, and the notes its Series holds) that a browser shows on hover.

matplotlib is imported inside the functions (it is the optional `share` extra), and only its Figure and
canvases are used, never pyplot: no global backend, no state shared between threads.
"""

from __future__ import annotations

import hashlib
import io
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Callable

from rooftop.models.plotdata import Series
from rooftop.models.safetext import clean
from rooftop.models.units import fmt_bandwidth, fmt_bytes, fmt_intensity, fmt_sig
from rooftop.tui.render.chart import binary_label, decade_label, line_colors, point_markers
from rooftop.tui.share.files import need_matplotlib
from rooftop.tui.share.labels import place_labels

KINDS = ("roofline", "bandwidth", "gemm", "fma")
LINES = ("roof", "slope", "curve")

# The terminal's colour names (render.chart.LINE_COLORS), as hues that read on white paper.
HUES = {"cyan": "#0a8fa3", "magenta": "#b8237d", "green": "#2e8b2e", "yellow": "#c08a00",
        "blue": "#2a5db0", "red": "#c73232"}
# The terminal's point glyphs (render.chart FAMILY_MARKERS, OP_MARKERS) as matplotlib markers.
GLYPHS = {"●": ("o", True), "○": ("o", False), "▲": ("^", True), "■": ("s", True), "◆": ("D", True),
          "★": ("*", True), "✚": ("P", True), "✖": ("X", True), "▼": ("v", True), "◇": ("d", False)}
POINT_HUES = ("#222222", "#6a3d9a", "#e6550d", "#1b7837", "#8c510a", "#01665e", "#c51b7d")
DEVICE_DASHES = ("-", "--", ":", "-.")  # the first device solid, an overlaid one dashed, …
LABELLED_POINTS = 16  # op points labelled beside them; more would crowd the chart (each is in the legend)
SVG_NS = "http://www.w3.org/2000/svg"


@dataclass(frozen=True)
class Chart:
    """What one shared chart shows: its series, which axes (KINDS), a title and a line under it (the
    device, where its roofs came from, and when)."""

    kind: str
    series: list[Series] = field(default_factory=list)
    title: str = ""
    subtitle: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"chart kind {self.kind!r} is not one of {', '.join(KINDS)}")


@dataclass(frozen=True)
class Axes:
    """A chart kind's axes: labels, the scale its y values are divided by, and how x decades are named."""

    xlabel: str
    ylabel: str
    yscale: float
    xticks: Callable[[int], str]
    hover: Callable[[float, float], str]  # a point's (x, y) in words


def _rate_hover(xname: str, unit: str, scale: float) -> Callable[[float, float], str]:
    """A point's place in words, its rate in the axis's unit (TFLOP/s or GFLOP/s)."""
    def hover(x: float, y: float) -> str:
        where = f"I = {fmt_intensity(x)}" if xname == "I" else f"{xname} = {fmt_sig(x, 4)}"
        return f"{where}, {fmt_sig(y / scale, 4)} {unit}FLOP/s"
    return hover


def chart_axes(chart: Chart) -> Axes:
    """The axes of `chart`: FLOP/s in T or G by the highest value drawn, as the terminal scales them."""
    top = max((y for s in chart.series for y in s.ys if math.isfinite(y)), default=1e12)
    unit, scale = ("T", 1e12) if top >= 1e12 else ("G", 1e9)
    rate = f"performance ({unit}FLOP/s)"
    if chart.kind == "bandwidth":
        return Axes("working set (bytes)", "bandwidth (GB/s)", 1e9, binary_label,
                    lambda x, y: f"working set {fmt_bytes(x)}, {fmt_bandwidth(y)}")
    if chart.kind == "gemm":
        return Axes("n (n×n×n) or M (M×N×K)", rate, scale, decade_label, _rate_hover("size", unit, scale))
    if chart.kind == "fma":
        return Axes("R, FMAs per element", rate, scale, decade_label, _rate_hover("R", unit, scale))
    return Axes("arithmetic intensity I (FLOP/byte)", rate, scale, decade_label, _rate_hover("I", unit, scale))


def _positive(xs: tuple[float, ...], ys: tuple[float, ...]) -> list[tuple[int, float, float]]:
    """The points a log-log chart can place: index, x, y, both finite and above zero."""
    return [(i, x, y) for i, (x, y) in enumerate(zip(xs, ys))
            if 0 < x < math.inf and 0 < y < math.inf]


def device_of(label: str) -> str:
    """The device a roof's or slope's label names first ("h100 dram 3352 GB/s" → "h100")."""
    return label.split(" ", 1)[0] if label else ""


def chart_colors(series: list[Series]) -> dict[str, str]:
    """Each line's colour: the terminal's (line_colors) for the first device's lines; an overlaid device's roof
    or slope takes the colour of the first device's line of the same path or level, so that one path is one
    colour and the dash tells the devices apart (the terminal, with no dashes, cycles its colours on)."""
    colors = {label: HUES[name] for label, name in line_colors(series).items()}
    by_role: dict[str, str] = {}
    for s in series:
        if s.kind in ("roof", "slope") and s.label in colors:
            role = s.label.split(" ")[1] if " " in s.label else s.label
            colors[s.label] = by_role.setdefault(role, colors[s.label])
    return colors


def hover_text(s: Series, i: int, x: float, y: float, axes: Axes) -> str:
    """A point's tooltip: its series' name, where it sits, and the series' note for it where there is one."""
    lines = [clean(s.label), axes.hover(x, y)]
    if i < len(s.notes) and s.notes[i]:
        lines.append(clean(s.notes[i]))
    return "\n".join(lines)


@dataclass
class Drawn:
    """What was put on the axes, for the labels to avoid and the SVG to annotate: point ids and hovers."""

    gid: str
    hovers: dict[str, str] = field(default_factory=dict)
    anchors: list[tuple[float, float, str, str]] = field(default_factory=list)  # x, y, label, colour
    ridges: list[tuple[float, float, str, str]] = field(default_factory=list)
    xy: list[tuple[float, float]] = field(default_factory=list)


def _draw_lines(ax: Any, chart: Chart, axes: Axes, drawn: Drawn) -> None:
    """Roofs, slopes and curves in the terminal's colours, one dash per device; ridges on their roofs."""
    colors = chart_colors(chart.series)
    devices = list(dict.fromkeys(device_of(s.label) for s in chart.series if s.kind in ("roof", "slope")))
    last, roof = "#555555", ""
    for s in chart.series:
        pts = _positive(s.xs, s.ys)
        if s.kind in LINES:
            last = colors.get(s.label, "#555555")
            roof = clean(s.label)
            dash = DEVICE_DASHES[devices.index(device_of(s.label)) % len(DEVICE_DASHES)] \
                if s.kind != "curve" and device_of(s.label) in devices else "-"
            if pts:
                ax.plot([x for _, x, _ in pts], [y / axes.yscale for _, _, y in pts], color=last, ls=dash,
                        lw=2.0 if s.kind == "roof" else 1.6, label=clean(s.label), zorder=2,
                        marker="o" if s.kind == "curve" else None, ms=3.5)
            if s.kind == "curve":
                for i, x, y in pts:
                    drawn.hovers[_point(ax, drawn, x, y / axes.yscale, last, "o", True, 0.0)] = \
                        hover_text(s, i, x, y, axes)
        elif s.kind == "ridge":
            for _, x, y in pts:
                gid = _point(ax, drawn, x, y / axes.yscale, last, "o", False, 6.0)
                drawn.hovers[gid] = f"{roof}\nridge I* = {fmt_intensity(x)}: compute-bound to the right"
                drawn.ridges.append((x, y / axes.yscale, f"I* = {fmt_sig(x, 3)}", last))


def _point(ax: Any, drawn: Drawn, x: float, y: float, color: str, marker: str, filled: bool,
           size: float = 8.0) -> str:
    """One point as its own artist, with an id the SVG's <title> is attached to."""
    gid = f"{drawn.gid}-p{len(drawn.xy)}"
    if size:
        ax.plot([x], [y], ls="none", marker=marker, ms=size, mfc=color if filled else "white", mec=color,
                mew=1.3, zorder=5, gid=gid)
    else:  # a curve's own marker is drawn with the line: an invisible target carries the hover
        ax.plot([x], [y], ls="none", marker="o", ms=7, alpha=0.0, zorder=5, gid=gid)
    drawn.xy.append((x, y))
    return gid


def _draw_points(ax: Any, chart: Chart, axes: Axes, drawn: Drawn) -> None:
    """Measured points and op points, each family or op by its terminal marker, each point hoverable."""
    markers = point_markers(chart.series)
    n = 0
    for s in chart.series:
        if s.kind in LINES or s.kind == "ridge":
            continue
        marker, filled = GLYPHS.get(markers.get(s.label, "●"), ("o", True))
        color = "#8a8a8a" if s.label.endswith("unstable") else POINT_HUES[n % len(POINT_HUES)]
        n += 1
        pts = _positive(s.xs, s.ys)
        size = 11.0 if marker == "*" else 8.0 if len(pts) == 1 else 6.0
        for i, x, y in pts:
            gid = _point(ax, drawn, x, y / axes.yscale, color, marker, filled, size)
            drawn.hovers[gid] = hover_text(s, i, x, y, axes)
        ax.plot([], [], ls="none", marker=marker, ms=7, mfc=color if filled else "white", mec=color,
                label=clean(s.label))
        if len(pts) == 1 and len(drawn.anchors) < LABELLED_POINTS:
            drawn.anchors.append((pts[0][1], pts[0][2] / axes.yscale, clean(s.label), color))


def _decade_axes(ax: Any, drawn_x: list[float], drawn_y: list[float], axes: Axes) -> None:
    """Log-log, decade-aligned limits, a tick at each decade labelled as the terminal labels it."""
    # deferred: matplotlib is the optional extra rooftop[share]
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    x0, x1 = math.floor(math.log10(min(drawn_x, default=0.1))), math.ceil(math.log10(max(drawn_x, default=1e4)))
    y0, y1 = math.floor(math.log10(min(drawn_y, default=0.1))), math.ceil(math.log10(max(drawn_y, default=1e3)))
    x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)
    ax.set_xlim(10.0 ** x0, 10.0 ** x1)
    ax.set_ylim(10.0 ** y0, 10.0 ** y1)
    ax.xaxis.set_major_locator(FixedLocator([10.0 ** e for e in range(x0, x1 + 1)]))
    ax.yaxis.set_major_locator(FixedLocator([10.0 ** e for e in range(y0, y1 + 1)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: axes.xticks(round(math.log10(v)))))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: decade_label(round(math.log10(v)))))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10)), numticks=100))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(axes.xlabel)
    ax.set_ylabel(axes.ylabel)
    ax.grid(True, which="major", color="#d9d9d9", lw=0.8)
    ax.grid(True, which="minor", color="#f0f0f0", lw=0.5)
    ax.set_axisbelow(True)


def wrap_parts(text: str, width: int = 120, sep: str = " · ") -> str:
    """A long device line broken between its parts (at `sep`), so that no line runs past the figure."""
    lines: list[str] = []
    for part in text.split(sep):
        if lines and len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines.append(part)
    return "\n".join(lines)


def _figure(chart: Chart) -> tuple[Any, Drawn]:
    """The chart on a matplotlib Figure (Agg canvas): lines, points, axes, legend below, labels placed."""
    need_matplotlib()
    # deferred: matplotlib is the optional extra rooftop[share]
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    axes = chart_axes(chart)
    key = hashlib.sha1("\0".join([chart.kind, chart.title, *(s.label for s in chart.series)]).encode()).hexdigest()
    drawn = Drawn(gid=f"rt{key[:8]}")
    fig = Figure(figsize=(10, 6.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _draw_lines(ax, chart, axes, drawn)
    _draw_points(ax, chart, axes, drawn)
    xs = [x for s in chart.series for _, x, _ in _positive(s.xs, s.ys)]
    ys = [y / axes.yscale for s in chart.series for _, _, y in _positive(s.xs, s.ys)]
    _decade_axes(ax, xs, ys, axes)
    if not xs:
        ax.text(0.5, 0.5, "nothing to draw: no point has a positive x and y", transform=ax.transAxes,
                ha="center", va="center", color="#777777")
    fig.suptitle(clean(chart.title), fontsize=13, fontweight="bold")
    if chart.subtitle:
        ax.set_title(wrap_parts(clean(chart.subtitle)), fontsize=9.5, color="#555555")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=2 if len(labels) < 24 else 3,
                   fontsize=8.5, frameon=False, handlelength=2.6)

    place_labels(fig, ax, drawn)  # draws once, to lay out and measure
    fig.set_layout_engine("none")  # the layout is done: a save draws it as measured, and in half the time
    return fig, drawn


def chart_png(chart: Chart, dpi: int = 150) -> bytes:
    """The chart as a PNG image (Agg)."""
    fig, _ = _figure(chart)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white", metadata={"Software": "rooftop"})
    return buf.getvalue()


def _svg_tree(chart: Chart) -> ET.Element:
    """The chart's SVG as a tree, every point's group given a <title> (its hover) and the whole one too."""
    matplotlib = need_matplotlib()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "rooftop"}):
        fig, drawn = _figure(chart)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", facecolor="white", metadata={"Date": None, "Creator": "rooftop"})
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    root = ET.fromstring(buf.getvalue())
    title = ET.Element(f"{{{SVG_NS}}}title")
    title.text = clean(" — ".join(t for t in (chart.title, chart.subtitle) if t))
    root.insert(0, title)
    for g in root.iter(f"{{{SVG_NS}}}g"):
        hover = drawn.hovers.get(g.get("id", ""))
        if hover is not None:
            tip = ET.Element(f"{{{SVG_NS}}}title")
            tip.text = hover
            g.insert(0, tip)
            g.set("class", "rooftop-point")
    return root


def chart_svg_inline(chart: Chart) -> str:
    """The chart as an <svg> element with no XML prolog, to embed in an HTML page."""
    return ET.tostring(_svg_tree(chart), encoding="unicode")


def chart_svg(chart: Chart) -> str:
    """The chart as a standalone SVG document."""
    return '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + chart_svg_inline(chart) + "\n"
