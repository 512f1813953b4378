"""Re-time a dependency graph (rooftop.models.program.depgraph) with some edges made lighter, and walk its critical path.

Re-timing works in shifts, not times: each point moves by the most any of its in-edges lets it,
`shift(p) = max over q → p of shift(q) − slack(q → p) − cut(q → p)`, with a point no edge holds (and anything in
another window) kept where it was. With no cut every shift is exactly 0, so the trace's times come back exactly (no
rounding of `time + weight` sums); a cut (a kernel shrunk to its roof, a launch gap closed) can only move points
earlier, and never by more than the edges allow.

The critical path of a window runs back from its last point along binding (tight) edges to a point nothing in the
window held: the chain of delays that set the window's length, each of which a what-if can shorten.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import numpy as np

from .depgraph import DepGraph


def retime(g: DepGraph, cuts: Mapping[int, float] | None = None, held: bool = True) -> list[float]:
    """Each point's shift (seconds, ≤ 0) when edge e weighs `cuts[e]` less: held to [0, its weight] (a kernel at
    most gone, a gap at most closed), or, with `held` False, as given (a straggler arriving as early as another
    rank: more than its collective's own time). The list has one more entry, the sentinel point's (0: what lies
    outside a window stays)."""
    n = g.points
    cut = _cut_list(g, cuts, held)
    shift = [0.0] * (n + 1)
    in_start, in_from, slack = g.in_start, g.in_from, g.in_slack
    for p in g.order:
        lo, hi = in_start[p], in_start[p + 1]
        if hi - lo == 1:
            q = in_from[lo]
            if q != p:
                shift[p] = shift[q] - slack[lo] - cut[lo]
            continue
        best = None
        for e in range(lo, hi):
            q = in_from[e]
            if q == p:
                continue
            d = shift[q] - slack[e] - cut[e]
            if best is None or d > best:
                best = d
        if best is not None:
            shift[p] = best
    return shift


def _cut_list(g: DepGraph, cuts: Mapping[int, float] | None, held: bool) -> list[float]:
    """Each edge's cut (`retime`'s): whole-array, as a what-if may cut most of the graph's edges (every launch gap)."""
    e = len(g.in_kind)
    if not cuts:
        return [0.0] * e
    at = np.fromiter(cuts.keys(), dtype=np.int64, count=len(cuts))
    c = np.fromiter(cuts.values(), dtype=np.float64, count=len(cuts))
    if held:
        w = np.frombuffer(g.in_weight, dtype=np.float64)[at]
        c = np.where(w > 0, np.minimum(c, w), 0.0)
    out = np.zeros(e)
    out[at] = np.maximum(c, 0.0)
    return out.tolist()


def retime_few(g: DepGraph, cuts: Mapping[int, float], most: int | None = None) -> dict[int, float] | None:
    """The shifts (held cuts, as `retime`) of only the points that move: from the cut edges' points on, in the
    graph's order, a point is looked at only where an edge into it was cut or a predecessor moved. One op group's
    kernels shrunk moves a small part of a CPU-bound step (the slack before the next launch takes it up), so this
    costs what moves, not the whole graph. None where more than `most` points were looked at (a GPU-bound step,
    where a shrunk kernel moves all the work after it): `retime`'s one pass is then the cheaper way."""
    weight, slack, in_start, in_from = g.in_weight, g.in_slack, g.in_start, g.in_from
    cut: dict[int, float] = {}
    for e, c in cuts.items():
        w = weight[e]
        if w > 0 and c > 0:
            cut[e] = min(c, w)
    pos, order, out_start, out_dst = g.pos, g.order, g.out_start, g.out_dst
    heap = sorted({pos[g.edge_point[e]] for e in cut})
    queued = set(heap)
    shift: dict[int, float] = {}
    get = shift.get
    looked = 0
    while heap:
        i = heapq.heappop(heap)
        looked += 1
        if most is not None and looked > most:
            return None
        p = order[i]
        best = None
        for e in range(in_start[p], in_start[p + 1]):
            q = in_from[e]
            if q == p:
                continue
            d = get(q, 0.0) - slack[e] - cut.get(e, 0.0)
            if best is None or d > best:
                best = d
        if best is None or best == get(p, 0.0):
            continue
        if best == 0.0:
            shift.pop(p, None)
        else:
            shift[p] = best
        for j in range(out_start[p], out_start[p + 1]):
            k = pos[out_dst[j]]
            if k not in queued:
                queued.add(k)
                heapq.heappush(heap, k)
    return shift


def _point_windows(g: DepGraph) -> np.ndarray:
    """Each point's window (NO_WINDOW: none), as a numpy array."""
    return np.frombuffer(g.act_window, dtype=np.int32)[np.arange(g.points) >> 1]


def _times(g: DepGraph) -> np.ndarray:
    return np.frombuffer(g.time, dtype=np.float64)


def window_ends(g: DepGraph, shift: Sequence[float] | Mapping[int, float] | None = None) -> list[float]:
    """Each window's end: its latest point over every rank (shifted: by a list, as `retime`'s, or by the few
    points `retime_few` moved), or -inf for a window with none. A job's step ends when its last rank's does, so a
    what-if that speeds one rank is bounded by the others' work."""
    t = _times(g)
    if isinstance(shift, Mapping):
        if shift:
            t = t.copy()
            moved = np.fromiter(shift.keys(), dtype=np.int64, count=len(shift))
            t[moved] += np.fromiter(shift.values(), dtype=np.float64, count=len(shift))
    elif shift is not None:
        t = t + np.fromiter(shift, dtype=np.float64, count=len(shift))[:g.points]  # (twice asarray's speed)
    win = _point_windows(g)
    out = np.full(len(g.windows), -np.inf)
    placed = win >= 0
    np.maximum.at(out, win[placed], t[placed])
    return out.tolist()


def window_starts(g: DepGraph) -> list[float]:
    """Each window's start: its CPU range's, or the first rank's first point where it has none (the whole trace)."""
    out = [lo for lo, _ in g.windows]
    if any(lo == float("-inf") for lo in out):
        win = _point_windows(g)
        own = np.frombuffer(g.act_rank, dtype=np.int32)[np.arange(g.points) >> 1] == 0
        first = np.full(len(out), np.inf)
        mask = own & (win >= 0)
        np.minimum.at(first, win[mask], _times(g)[mask])
        for w, lo in enumerate(out):
            if lo == float("-inf"):
                out[w] = float(first[w]) if first[w] != np.inf else 0.0
    return out


def last_points(g: DepGraph) -> list[int]:
    """Each window's last point over every rank (the latest; ties: the first found, the first rank's before its
    peers'), -1 for a window with none: where its path runs back from."""
    best = [-1] * len(g.windows)
    win = _point_windows(g)
    pts = np.flatnonzero(win >= 0)
    if len(pts):
        t = _times(g)[pts]
        w = win[pts]
        ranked = pts[np.lexsort((pts, -t, w))]  # by window, latest first, the first found first
        heads = np.flatnonzero(np.r_[True, win[ranked][1:] != win[ranked][:-1]])
        for p in ranked[heads].tolist():
            best[win[p]] = p
    return best


def critical_path(g: DepGraph, last: int) -> list[int]:
    """The binding edges from point `last` back to a point nothing in its window held, last first."""
    edges: list[int] = []
    win = g.act_window
    w = win[last >> 1]
    p = last
    seen = 0
    while True:
        e = g.binding[p]
        if e < 0:
            return edges
        q = g.in_pred[e]
        if q == p or win[q >> 1] != w:
            edges.append(e)  # held from outside the window: the caller classes the time before it
            return edges
        edges.append(e)
        p = q
        seen += 1
        if seen > g.points:  # a cycle of binding edges cannot be (each runs back in time or is an own duration)
            return edges

