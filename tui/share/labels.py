"""Point labels that do not overlap: each op point's name set beside it where it covers no other label, no
point and stays inside the axes; a label that fits nowhere near is left to the legend, which names every point.

Greedy in the order the points come (the ops a command was given first), trying the spots around the point
nearest first, measured on the figure's own renderer, so what is checked is what is drawn.
"""

from __future__ import annotations

from typing import Any

# The spots around a point, offsets in points with the alignment that keeps the text off the point, tried
# nearest ring first (RINGS: how far out); a label past the first two rings gets a leader line to its point.
DIRECTIONS = ((7, 5, "left", "bottom"), (7, -5, "left", "top"), (-7, 5, "right", "bottom"),
              (-7, -5, "right", "top"), (0, 9, "center", "bottom"), (0, -9, "center", "top"))
RINGS = (1, 2.2, 3.6, 5.5, 8)
NEAR_RINGS = 2  # the ridges' I* labels stay this close, with no line: they are the chart's least important text
MARKER_PT = 4.5  # half the box a point's marker covers, in points


def _boxes_overlap(a: Any, b: Any, pad: float = 2.0) -> bool:
    return not (a.x1 + pad < b.x0 or b.x1 + pad < a.x0 or a.y1 + pad < b.y0 or b.y1 + pad < a.y0)


def _inside(box: Any, frame: Any) -> bool:
    return frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


def _line_points(ax: Any, steps: int = 60) -> list[tuple[float, float]]:
    """Points along every drawn line, in pixels: a label that covers none of them hides no roof or slope."""
    out: list[tuple[float, float]] = []
    for line in ax.get_lines():
        if line.get_linestyle() in ("None", "none", " ", "") or len(line.get_xdata()) < 2:
            continue
        px = ax.transData.transform(list(zip(line.get_xdata(), line.get_ydata())))
        for (x0, y0), (x1, y1) in zip(px[:-1], px[1:]):
            out += [(x0 + (x1 - x0) * t / steps, y0 + (y1 - y0) * t / steps) for t in range(steps + 1)]
    return out


def _covers(box: Any, points: list[tuple[float, float]]) -> bool:
    return any(box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1 for x, y in points)


def _annotate(ax: Any, xy: tuple[float, float], text: str, color: str, spot: tuple, style: tuple,
              leader: bool) -> Any:
    """The label at `spot` (offset in points, alignment) from its point, with a thin line from its corner
    nearest the point if `leader`."""
    dx, dy, ha, va = spot
    size, weight = style
    corner = ({"left": 0.0, "right": 1.0}.get(ha, 0.5), 0.0 if va == "bottom" else 1.0)
    return ax.annotate(
        text, xy, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=size,
        color=color, fontweight=weight, zorder=6,
        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
        arrowprops={"arrowstyle": "-", "color": color, "lw": 0.7, "shrinkA": 0, "shrinkB": 4, "relpos": corner}
        if leader else None)


def place_labels(fig: Any, ax: Any, drawn: Any) -> int:
    """Label `drawn.anchors` (op points), then `drawn.ridges` (I* values, smaller, where room is left);
    returns how many labels were placed."""
    # deferred: matplotlib is the optional extra rooftop[share]
    from matplotlib.transforms import Bbox

    fig.canvas.draw()  # lay the figure out (constrained layout moves the axes), then measure in pixels
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    scale = fig.dpi / 72.0
    taken = []
    for x, y in [*drawn.xy, *((rx, ry) for rx, ry, _, _ in drawn.ridges)]:
        px, py = ax.transData.transform((x, y))
        taken.append(Bbox.from_extents(px - MARKER_PT * scale, py - MARKER_PT * scale,
                                       px + MARKER_PT * scale, py + MARKER_PT * scale))
    lines = _line_points(ax)
    placed = 0
    for anchors, style, rings in ((drawn.anchors, (8.5, "bold"), RINGS), (drawn.ridges, (7.5, "normal"),
                                                                             RINGS[:NEAR_RINGS])):
        for anchor in anchors:
            box = _first_spot(ax, renderer, frame, anchor, style, taken, lines, rings)
            if box is not None:
                taken.append(box)
                placed += 1
    return placed


def _first_spot(ax: Any, renderer: Any, frame: Any, anchor: tuple, style: tuple, taken: list,
                lines: list[tuple[float, float]], rings: tuple[float, ...] = RINGS) -> Any:
    """The box of the nearest spot where the label fits: inside the axes, over no other label or point, and
    over no line where a spot on the same ring allows; None, and no label, where none fits."""
    x, y, text, color = anchor
    for ring in rings:
        for strict in (True, False):
            for dx, dy, ha, va in DIRECTIONS:
                spot = (dx * ring, dy * ring, ha, va)
                note = _annotate(ax, (x, y), text, color, spot, style, leader=False)  # measured without its line
                box = note.get_window_extent(renderer)
                if (_inside(box, frame) and not any(_boxes_overlap(box, t) for t in taken)
                        and not (strict and _covers(box, lines))):
                    if ring > RINGS[1]:  # far from its point: a leader line says whose it is
                        note.remove()
                        _annotate(ax, (x, y), text, color, spot, style, leader=True)
                    return box
                note.remove()
    return None
