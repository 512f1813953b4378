"""The critical path of each step, and what-ifs re-timed on it, not summed.

Summing the gaps a profile finds ("every op at its roof saves x") is right only when one stream runs everything
back to back. Real steps overlap: compute with communication on another stream, copies with kernels, the CPU
running ahead or falling behind. Speeding an op shortens a step only where the op is on the chain of delays that
set the step's length. So each window (a ProfilerStep#N, by launch time as the step split counts it; a named
annotation; the whole trace where there are no steps) gets its dependency graph (rooftop.models.program.depgraph), the path
back from its last point along the tight edges (rooftop.models.program.retime), that path's time classed into SPLIT_KEYS,
and each what-if re-timed on the graph: an op group's kernels shrunk to their roof bounds (never below), the launch
gaps closed, every op at its roof, communication hidden, the straggler rank as fast as the median one.

Where no graph can be built (a CPU trace, a GPU-only trace, one whose kernels name no launch) the old sums stand in,
labelled as sums (`retimed` False), with the one-line reason.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from . import depgraph as dg
from .depgraph import DepGraph, build_graph, duration_edges
from ..errors import BadInput
from .job import group_label
from ..trace.kernelfamily import kernel_family
from .retime import critical_path as path_edges
from .retime import last_points, retime, retime_few, window_ends, window_starts
from ..trace.read import STEP_PREFIX, Trace, paused_gc
from .workload import COMM, OpGroup, Workload

SPLIT_KEYS = ("cpu", "device", "launch", "kernel_gap", "other_stream", "peers")
# cpu: CPU work between runtime calls, and a runtime call's own time that is not a launch (a sync's return);
# device: device activities (by op group in PathOp), and a launch a full queue held (by the op group of the activity
# whose end freed its slot); launch: a launch call's own time and launch → kernel start;
# kernel_gap: stream-order delay between queued activities; other_stream: an event edge's delay; peers: the path's
# time on another rank (waiting on a collective's peers)
EDGE_SPLIT = {dg.DEVICE: "device", dg.LAUNCH_CALL: "launch", dg.CALL: "cpu", dg.THREAD: "cpu", dg.LAUNCH: "launch",
              dg.STREAM: "kernel_gap", dg.EVENT: "other_stream", dg.SYNC: "cpu", dg.PEER: "device", dg.JOIN: "cpu",
              dg.QUEUE: "device"}
FIX_FIRST = 5
FEW = 20  # a what-if cutting under 1/FEW of the graph's points' edges re-times only what moves (until that passes
# 1/FEW of the points: then the one pass over all of them)
WHOLE = "whole trace"
AT_ROOF, NO_GAPS, HIDDEN, STRAGGLER = ("every op at its roof", "no launch gaps", "communication fully hidden",
                                       "straggler as fast as the median")


class WindowError(BadInput, ValueError):
    """A --window NAME the trace has no annotation of; the message is one line naming those it has."""


@dataclass(frozen=True)
class PathOp:
    key: tuple  # the op group's key in Workload (Workload.kernel_group); a transfer's: (cat, direction)
    label: str  # the op group's label as the report names it
    time_s: float  # its device time on the path
    kernels: int  # its activities on the path


@dataclass(frozen=True)
class StepPath:
    window: str  # "ProfilerStep#4", the window annotation's name, or "whole trace"
    start: float  # seconds, the window (trace clock)
    end: float
    length_s: float  # end − start: the window's start to its last point
    split: Mapping[str, float]  # SPLIT_KEYS → seconds; sums to length_s
    ops: tuple[PathOp, ...]  # by time on the path, largest first


@dataclass(frozen=True)
class WhatIf:
    name: str  # "op:<label>", "no launch gaps", "every op at its roof", "communication fully hidden", …
    length_s: float  # the windows' summed length after (≤ before, ≥ 0)
    saving_s: float  # before − after, ≥ 0
    retimed: bool  # True: re-timed on the graph; False: the old sum, labelled as such (no graph)


@dataclass(frozen=True)
class FixFirst:
    key: tuple
    label: str
    saving_s: float
    regime: str
    fraction_of_roof: float | None
    advice: str


@dataclass(frozen=True)
class CriticalPath:
    window: str  # what was analysed: "ProfilerStep#2–#5 (4 steps)", "whole trace", NAME
    steps: tuple[StepPath, ...]
    length_s: float  # summed over steps
    split: Mapping[str, float]  # summed over steps
    ops: tuple[PathOp, ...]  # summed over steps
    what_if: tuple[WhatIf, ...]
    fix_first: tuple[FixFirst, ...]  # top five op groups by saving (> 0)
    graph: bool  # False: no graph could be built
    why_not: str = ""  # the one-line reason when graph is False (what_if then has retimed=False)


# -- windows ----------------------------------------------------------------------------------


def windows_of(trace: Trace, window: str | None = None) -> tuple[str, list[str], list[tuple[float, float]]]:
    """What is analysed: its label, each window's name and (start, end) on the CPU. `window` names an annotation (a
    record_function range) or a step; WindowError where the trace has none of that name."""
    if window is not None:
        spans = [(a, b) for a, b, n in trace.annotations if n == window]
        spans += [s for s, n in zip(trace.steps, trace.step_names) if n == window]
        if not spans:
            have = sorted({n for *_, n in trace.annotations} | set(trace.step_names))
            named = ", ".join(repr(n) for n in have[:8]) + (f" and {len(have) - 8} more" if len(have) > 8 else "")
            raise WindowError(f"the trace has no annotation named {window!r}: "
                              + (f"it has {named}" if have else "it has no annotations or steps"))
        spans = sorted(set(spans))
        return window, [window] * len(spans), spans
    if trace.steps:
        names = list(trace.step_names) or [f"step {i}" for i in range(len(trace.steps))]
        if len(names) == 1:
            return names[0], names, list(trace.steps)
        last = names[-1][len(STEP_PREFIX) - 1:] if names[-1].startswith(STEP_PREFIX) else names[-1]
        return f"{names[0]}–{last} ({len(names)} steps)", names, list(trace.steps)
    return WHOLE, [WHOLE], [(-math.inf, math.inf)]


def peer_windows(peer: Trace, names: Sequence[str], window: str | None) -> list[tuple[float, float]]:
    """A peer's windows matched to the first rank's by name (the n-th of a repeated name), on its own clock; a window
    it lacks is empty."""
    if names == [WHOLE]:
        return [(-math.inf, math.inf)]
    if window is not None:
        own = sorted({(a, b) for a, b, n in peer.annotations if n == window}
                     | {s for s, n in zip(peer.steps, peer.step_names) if n == window})
        return [own[i] if i < len(own) else (math.inf, math.inf) for i in range(len(names))]
    by_name = dict(zip(peer.step_names, peer.steps))
    return [by_name.get(n, (math.inf, math.inf)) for n in names]


# -- the answer -------------------------------------------------------------------------------


def why_no_graph(trace: Trace) -> str:
    """Why no graph can be built for the trace, or "" where one can."""
    if not trace.on_device:
        return "a CPU trace: no device work for a critical path to run through (the sums stand)"
    if trace.range_times:
        return "the kernels are counter ranges, not timed: no path to re-time (the sums stand)"
    if not trace.kernels:
        return "the trace records no device activity: no path to re-time (the sums stand)"
    corr = set(trace.calls.correlation)
    if not any(k.correlation in corr for k in trace.kernels):
        return ("no kernel is linked to the runtime call that launched it (a GPU-only trace, or one with no launch "
                "links): the order of the step's work is unknown, so the what-ifs are the old sums")
    return ""


def critical_path(trace: Trace, work: Workload, window: str | None = None,
                  peers: Sequence[Trace] = (), peer_works: Sequence[Workload] = ()) -> CriticalPath:
    """The critical path of each window of `trace`, its split, the ops on it, the what-ifs re-timed on the graph and
    the op groups to fix first. `peers`: the job's other ranks' traces (their collectives joined to this one's); a
    job's window ends when its last rank's does, so each window's path runs back from its latest point over every
    rank and each what-if is measured there. `peer_works`: the peers' workloads (as many, in order), so that an op
    group's what-if shrinks its kernels on every rank; without them a peer's kernels keep their times."""
    with paused_gc():  # the graph's arrays and the what-ifs' cuts are acyclic: a full collection would walk the
        # trace's million objects again for nothing (0.3 s of a million-event trace's path)
        return _critical_path(trace, work, window, peers, peer_works)


def _critical_path(trace: Trace, work: Workload, window: str | None, peers: Sequence[Trace],
                   peer_works: Sequence[Workload]) -> CriticalPath:
    label, names, spans = windows_of(trace, window)
    why = why_no_graph(trace)
    if why:
        return _summed(label, work, why)
    traces = [trace, *peers]
    windows = [spans] + [peer_windows(p, names, window) for p in peers]
    works = [work, *peer_works][:len(traces)]
    g = build_graph(traces, windows, [w.launch_queue for w in works])
    groups = work.group_by_key()
    starts = window_starts(g)
    lasts = last_points(g)
    found = (_step(g, trace, work, groups, names[w], starts[w], p) for w, p in enumerate(lasts))
    steps = tuple(s for s in found if s is not None)
    before = sum(s.length_s for s in steps)
    what_if = _what_ifs(g, traces, works, groups, steps, starts, lasts, before)
    split = {k: sum(s.split[k] for s in steps) for k in SPLIT_KEYS}
    ops = _summed_ops(op for s in steps for op in s.ops)
    return CriticalPath(label, steps, before, split, ops, what_if, _fix_first(what_if, work, groups), True)


def _key_of(trace: Trace, work: Workload, i: int) -> tuple:
    key = work.kernel_group[i] if i < len(work.kernel_group) else None
    if key is None:
        k = trace.kernels[i]
        return (k.cat, k.direction)
    return key


def _label(key: tuple, groups: Mapping[tuple, OpGroup]) -> str:
    g = groups.get(key)
    if g is not None:
        return group_label(g)
    return " ".join(str(x) for x in key if x)


def _step(g: DepGraph, trace: Trace, work: Workload, groups: Mapping[tuple, OpGroup], name: str, lo: float,
          last: int) -> StepPath | None:
    """One window's path: each binding edge's time (clipped to the window's start) in its class, the device time by
    op group; what came before the path's first point in the window, by what held it."""
    if last < 0:
        return None
    split = dict.fromkeys(SPLIT_KEYS, 0.0)
    ops: dict[tuple, list] = {}
    time, rank, act_call, act_index = g.time, g.act_rank, g.act_call, g.act_index
    win = g.act_window[last >> 1]

    def device(p: int, t: float, count: int = 1) -> None:
        a = p >> 1
        if rank[a] != 0:
            split["peers"] += t
            return
        split["device"] += t
        key = _key_of(trace, work, act_index[a])
        o = ops.setdefault(key, [0.0, 0])
        o[0] += t
        o[1] += count

    p = last
    reached = False  # the path ran back to the window's start
    for e in path_edges(g, last):
        q = g.in_pred[e]
        tp, tq = time[p], max(time[q], lo)
        piece = tp - tq if tp > lo else 0.0
        kind = g.in_kind[e]
        if rank[p >> 1] != 0:
            split["peers"] += piece
        elif kind == dg.DEVICE or kind == dg.PEER:
            device(p, piece)
        elif kind == dg.QUEUE:  # a launch blocked on a full queue: held by the activity that freed its slot
            device(q, piece, 0)  # (its activity is counted where the path runs through it)
        else:
            split[EDGE_SPLIT[kind]] += piece
        p = q
        if time[q] <= lo:
            reached = True
            break
    lead = time[p] - lo  # before the path's first point: what held it there
    if not reached and lead > 0:
        a = p >> 1
        if rank[a] != 0:
            split["peers"] += lead
        elif act_call[a] == dg.DEVICE_ACT and g.act_window[a] != win:  # the work before the window still running
            device(p, lead)
        elif act_call[a] == dg.DEVICE_ACT:  # queued before the window, held by nothing the trace shows
            split["kernel_gap"] += lead
        else:
            split["cpu"] += lead
    end = time[last]
    path_ops = tuple(sorted((PathOp(k, _label(k, groups), t, n) for k, (t, n) in ops.items()),
                            key=lambda o: -o.time_s))
    return StepPath(name, lo, end, end - lo, split, path_ops)


def _summed_ops(ops: Iterable[PathOp]) -> tuple[PathOp, ...]:
    acc: dict[tuple, list] = {}
    for o in ops:
        a = acc.setdefault(o.key, [o.label, 0.0, 0])
        a[1] += o.time_s
        a[2] += o.kernels
    return tuple(sorted((PathOp(k, lab, t, n) for k, (lab, t, n) in acc.items()), key=lambda o: -o.time_s))


def shrinkable(g: OpGroup) -> float | None:
    """The factor an op group's kernels shrink by at its roof (bound / time, at most 1: never below the bound, an op
    already faster than its roof not slowed), or None where it has no bound to run at (W unknown, no model,
    communication)."""
    if g.bound_s is None or g.time_s <= 0 or not g.timed or not g.modelled or g.regime == COMM:
        return None
    return min(1.0, g.bound_s / g.time_s)


def _lengths(g: DepGraph, shift: Sequence[float], starts: Sequence[float], live: Sequence[int]) -> float:
    ends = window_ends(g, shift)
    return sum(ends[w] - starts[w] for w in live)


def _kernel_cuts(trace: Trace, kernel_group: Sequence[tuple | None], groups: Mapping[tuple, OpGroup],
                 act_window: np.ndarray, own_time: np.ndarray, first: int, per_group: dict[tuple, dict[int, float]],
                 comm: dict[int, float]) -> None:
    """One rank's cuts, added to `per_group` and `comm`: each of its kernels in a window, at its op group's roof (its
    own-time edge weighing dur × (1 − factor) less, where the group shrinks), and gone where it communicates (its
    group's regime, or its name's family). Whole-array over the kernels; the dicts filled in kernel order."""
    kernels = trace.kernels
    n = len(kernels)
    if not n:
        return
    factor = {key: (shrinkable(grp), grp.regime == COMM) for key, grp in groups.items()}  # key → (f, comm)
    number: dict[tuple, int] = {}  # a group key with a factor below 1 → its number, by first kernel
    keys: list[tuple] = []
    code_l, f_l, talks_l = [-1] * n, [1.0] * n, [False] * n
    family: dict[str, bool] = {}
    placed = act_window[first:first + n] >= 0
    for i, (k, inside) in enumerate(zip(kernels, placed.tolist())):
        if not inside:
            continue
        key = kernel_group[i] if i < len(kernel_group) else None
        f, is_comm = factor.get(key, (None, False)) if key is not None else (None, False)
        if f is not None and f < 1.0 and key is not None:
            c = number.get(key)
            if c is None:
                c = number[key] = len(keys)
                keys.append(key)
            code_l[i], f_l[i] = c, f
        if not is_comm and k.cat == "kernel":
            named = family.get(k.name)
            if named is None:
                named = family[k.name] = kernel_family(k.name) == COMM
            is_comm = named
        talks_l[i] = is_comm
    code, talks = np.array(code_l, dtype=np.int64), np.array(talks_l, dtype=bool)
    e = own_time[first:first + n]
    dur = np.fromiter((k.dur for k in kernels), dtype=np.float64, count=n)
    cut = dur * (1.0 - np.array(f_l, dtype=np.float64))
    sel = np.flatnonzero(code >= 0)  # placed, and shrinking
    by_code = sel[np.argsort(code[sel], kind="stable")]
    bounds = np.searchsorted(code[by_code], np.arange(len(keys) + 1))
    for c, key in enumerate(keys):
        idx = by_code[bounds[c]:bounds[c + 1]]
        per_group.setdefault(key, {}).update(zip(e[idx].tolist(), cut[idx].tolist()))
    comm.update(dict.fromkeys(e[talks].tolist(), math.inf))  # placed, and communicating


def _what_ifs(g: DepGraph, traces: Sequence[Trace], works: Sequence[Workload], groups: Mapping[tuple, OpGroup],
              steps: Sequence[StepPath], starts: Sequence[float], lasts: Sequence[int], before: float,
              ) -> tuple[WhatIf, ...]:
    """Each what-if's cuts re-timed on the graph; the windows' summed length after, never above before. An op
    group's cuts are its kernels' on every rank with a workload (`works[r]`, by the group's key), communication
    every rank's."""
    live = [w for w, p in enumerate(lasts) if p >= 0]
    per_group: dict[tuple, dict[int, float]] = {}
    comm: dict[int, float] = {}
    act_window = np.frombuffer(g.act_window, dtype=np.int32)
    own_time = duration_edges(g)
    own_np = np.asarray(own_time, dtype=np.int64)
    for r, trace in enumerate(traces):
        work = works[r] if r < len(works) else None
        own = groups if r == 0 else work.group_by_key() if work is not None else {}
        _kernel_cuts(trace, work.kernel_group if work is not None else (), own, act_window, own_np,
                     g.device_act(r, 0), per_group, comm)

    def run(name: str, cuts: Mapping[int, float], held: bool = True) -> WhatIf:
        moved = None
        if not cuts:
            after = before
        elif held and len(cuts) * FEW < g.points:  # a few edges cut: re-time what moves, while that is few
            moved = retime_few(g, cuts, g.points // FEW)
        if moved is not None:
            ends = window_ends(g, moved)
            after = sum(ends[w] - starts[w] for w in live)
        elif cuts:
            after = _lengths(g, retime(g, cuts, held), starts, live)
        after = min(before, max(0.0, after))
        return WhatIf(name, after, before - after, True)

    out: list[WhatIf] = []
    # each op group on the path, by what it could save at most (its kernels' shrink on the path: a path no longer
    # than before less its cut edges), until none left could pass the fifth saving found
    shrink_on_path: dict[tuple, float] = {}
    for s in steps:
        for o in s.ops:
            grp = groups.get(o.key)
            f = shrinkable(grp) if grp is not None else None
            if f is not None:
                shrink_on_path[o.key] = shrink_on_path.get(o.key, 0.0) + o.time_s * (1.0 - f)
    if len(traces) > 1:  # a peer's kernels on the path (its wait, in the split): their op groups' cuts there too
        key_of = {e: key for key, cuts in per_group.items() for e in cuts}
        for last in lasts:
            for e in path_edges(g, last) if last >= 0 else ():
                key = key_of.get(e)
                if key is not None and g.act_rank[g.in_pred[e] >> 1] != 0:
                    shrink_on_path[key] = shrink_on_path.get(key, 0.0) + per_group[key][e]
    found: list[float] = []
    for key in sorted(shrink_on_path, key=lambda k: -shrink_on_path[k]):
        if shrink_on_path[key] <= 0 or (len(found) >= FIX_FIRST and shrink_on_path[key] <= found[FIX_FIRST - 1]):
            break
        w = run(f"op:{_label(key, groups)}", per_group.get(key, {}))
        out.append(w)
        found = sorted([*found, w.saving_s], reverse=True)
    kinds = np.frombuffer(g.in_kind, dtype=np.uint8)
    gaps = dict.fromkeys(np.flatnonzero(np.isin(kinds, (dg.LAUNCH_CALL, dg.LAUNCH, dg.STREAM))).tolist(), math.inf)
    out.append(run(NO_GAPS, gaps))
    every: dict[int, float] = {}
    for cuts in per_group.values():
        every.update(cuts)
    out.append(run(AT_ROOF, every))
    if comm or g.comm_groups:
        hidden = dict(comm)
        for group in g.comm_groups:  # every rank's collective: no time of its own, no wait for the others' data
            for a in group:
                hidden[own_time[a]] = math.inf
                for e in range(g.in_start[2 * a + 1], g.in_start[2 * a + 2]):
                    if g.in_kind[e] == dg.PEER:
                        hidden[e] = math.inf
        out.append(run(HIDDEN, hidden))
    if len(traces) > 1 and g.comm_groups:
        out.append(run(STRAGGLER, _straggler_cuts(g), held=False))
    return tuple(out)


def _straggler_cuts(g: DepGraph) -> dict[int, float]:
    """The rank that arrived last at most collectives (ties: the most time late) made to arrive at each as the median
    rank did (the lower median): the delays that held its arrival (the binding edges back from its collective's
    start, on its own rank, to its previous collective), latest first, shortened by its lateness. What did not hold
    its arrival (work on another stream, its CPU after) keeps its time, and still bounds the step."""
    late: dict[int, list[float]] = {}
    arrivals = []
    for group in g.comm_groups:
        starts = [g.time[2 * a] for a in group]
        med = statistics.median_low(starts)
        r = max(range(len(group)), key=lambda i: starts[i])
        lt = late.setdefault(g.act_rank[group[r]], [0, 0.0])
        lt[0] += 1
        lt[1] += starts[r] - med
        arrivals.append((group, starts, med))
    worst = max(late, key=lambda r: (late[r][0], late[r][1]))
    joined = {a for group in g.comm_groups for a in group}
    cuts: dict[int, float] = {}
    for group, starts, med in arrivals:
        for a, s in zip(group, starts):
            if g.act_rank[a] != worst or s <= med:
                continue
            left = _cut_chain(g, 2 * a, s - med, joined, cuts)
            if left > 0:  # held by what the trace does not show (CPU time before the window's first call): its
                for b in group:  # start's edges to every rank's end weigh the rest less
                    end = 2 * b + 1
                    for e in range(g.in_start[end], g.in_start[end + 1]):
                        if g.in_pred[e] == 2 * a:
                            cuts[e] = cuts.get(e, 0.0) + left
    return cuts


def _cut_chain(g: DepGraph, p: int, late: float, joined: set[int], cuts: dict[int, float]) -> float:
    """Cut up to `late` seconds off the binding edges back from point p (latest first, each at most its weight), on
    p's rank and window, up to a point of another collective (`joined`): what made the arrival at p late. The
    lateness no edge there explains is returned."""
    rank, win = g.act_rank[p >> 1], g.act_window[p >> 1]
    while late > 0:
        e = g.binding[p]
        if e < 0:
            break
        q = g.in_pred[e]
        if q == p or g.act_rank[q >> 1] != rank or g.act_window[q >> 1] != win:
            break
        w = g.in_weight[e] - cuts.get(e, 0.0)
        if w > 0:
            c = min(w, late)
            cuts[e] = cuts.get(e, 0.0) + c
            late -= c
        if (q >> 1) in joined:
            break
        p = q
    return late


def advice_for(g: OpGroup) -> str:
    """What to do about an op group, by its regime (the roofline's rule: below the ridge cut bytes or raise I, above
    it fewer FLOPs or a higher roof)."""
    frac = g.fraction_of_roof
    at = f" at {frac:.0%} of its roof" if frac is not None else ""
    if g.regime == "memory":
        return f"memory-bound{at}: cut bytes or raise I (fuse it with its neighbours, a narrower dtype)"
    if g.regime == "compute":
        return f"compute-bound{at}: fewer FLOPs or a higher roof (a lower-precision path{f' than {g.path}' if g.path else ''})"
    return f"{g.regime or 'unplaced'}{at}: its roof bound is the most it can save"


def _fix_first(what_if: Sequence[WhatIf], work: Workload, groups: Mapping[tuple, OpGroup]) -> tuple[FixFirst, ...]:
    by_label = {f"op:{group_label(g)}": g for g in groups.values()}
    rows = []
    for w in what_if:
        g = by_label.get(w.name)
        if g is not None and w.saving_s > 0:
            rows.append(FixFirst(g.key, group_label(g), w.saving_s, g.regime, g.fraction_of_roof, advice_for(g)))
    rows.sort(key=lambda r: -r.saving_s)
    return tuple(rows[:FIX_FIRST])


def _summed(label: str, work: Workload, why: str) -> CriticalPath:
    """No graph: the old sums, labelled (retimed False): each op group at its roof saves its time alone less its share
    at bound / time (Amdahl), no gaps leaves the busy time, hidden communication its time alone off."""
    span = work.span_s
    what: list[WhatIf] = []
    for g in work.groups:
        f = shrinkable(g)
        if f is not None and f < 1.0:
            save = min(span, g.alone_s * (1.0 - f))
            what.append(WhatIf(f"op:{group_label(g)}", span - save, save, False))
    if work.on_device:
        what.append(WhatIf(NO_GAPS, work.no_gaps_s, max(0.0, span - work.no_gaps_s), False))
    what.append(WhatIf(AT_ROOF, max(0.0, span - work.roof_saves_s), min(span, work.roof_saves_s), False))
    comm = sum(g.alone_s for g in work.groups if g.regime == COMM)
    if comm > 0:
        what.append(WhatIf(HIDDEN, max(0.0, span - comm), min(span, comm), False))
    groups = work.group_by_key()
    if work.on_device:
        split = {**dict.fromkeys(SPLIT_KEYS, 0.0), "device": work.busy_s, "kernel_gap": work.idle_s}
    else:
        split = {**dict.fromkeys(SPLIT_KEYS, 0.0), "cpu": span}
    return CriticalPath(label, (), span, split, (), tuple(what), _fix_first(what, work, groups), False, why)
