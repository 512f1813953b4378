"""Launch-queue depth: per stream, how many launched activities had not yet finished, over time.

A launch joins its stream's queue when its runtime call begins (`Kernel.launch_ts`) and leaves it when its
activity (kernel, memcpy, memset) ends. Holistic Trace Analysis counts the same launches (the calls that
launch one activity; a CUDA-graph replay's kernels are left out, as HTA leaves them: one call issued them
all) but lets each go when its activity *starts*. Here an activity holds its place until it ends: a blocked
launch returns after one of its stream's activities *ends* (the trace shows that end inside the call), so an
end is what frees a slot, and that activity is what the critical path goes through (`blocked_launches`).
The two counts differ by the activities running at the time: at most one on a stream that runs in order.

A full queue blocks the CPU: the driver takes no more launches on the stream until one finishes (1024 on
CUDA by default; the trace's own plateau where it shows one). A launch call `LONG_CALL` × the median
launch or longer, that began with the queue at its plateau and returned after one of the stream's activities
ended, was blocked: the CPU waited the call's time beyond the median. Such a call holds no slot while it
waits, so it joins the queue when its slot is freed (HTA counts it from its start: one above the cap for as
long as the CPU is blocked). A queue at its cap is the sign of a device-bound step: the CPU is as far ahead
as the driver lets it be. A queue that runs near empty is the opposite: the device waits on each launch.

The mean is over time (HTA's summary describes its change points, so a burst of launches weighs as much as
a long stretch at one depth); the span is from the first counted launch to the last counted activity's end.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .read import Kernel, Trace

CUDA_CAP = 1024  # CUDA's launch queue holds this many pending launches per stream by default
LONG_CALL = 4.0  # a launch call at least this many times the median one is a candidate for blocked
MIN_WAIT_S = 10e-6  # and at least this much longer than the median (a short median makes 4× mere noise)
MIN_PLATEAU = 64  # a queue saturating lower than this is not a launch queue's cap (a slow call at depth 1 is not)
MIN_BLOCKED = 3  # a cap blocks every launch that meets it: one slow call at a queue's peak is not a plateau


@dataclass(frozen=True)
class StreamQueue:
    """One stream's queue: its launches and depth over the span."""

    stream: int | None
    device: int | None
    launches: int
    mean: float  # time-weighted over the span
    max: int
    cap: int  # the plateau the queue saturates at: its own where it shows one, else the trace's or CUDA's
    at_cap_s: float  # time with the depth at or above the cap
    at_cap_fraction: float  # of the span
    blocked: int  # launch calls that waited on this stream's full queue
    blocked_s: float  # the CPU time they waited (beyond the median launch)
    plateau: bool  # the cap is this stream's own saturation, seen in the trace

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StreamQueue:
        def opt(k: str) -> int | None:
            return None if d.get(k) is None else int(d[k])

        return cls(opt("stream"), opt("device"), int(d["launches"]), float(d["mean"]), int(d["max"]),
                   int(d["cap"]), float(d["at_cap_s"]), float(d["at_cap_fraction"]), int(d.get("blocked") or 0),
                   float(d.get("blocked_s") or 0.0), bool(d.get("plateau")))


@dataclass(frozen=True)
class BlockedLaunch:
    """A launch call held by a full queue, and the activity whose end let it return."""

    activity: int  # index in Trace.kernels of the activity the call launched
    correlation: int | None  # the call's correlation (it names the runtime call)
    call_ts: float  # the call, seconds
    call_end: float
    freed_by: int  # index in Trace.kernels of the activity (same stream) whose end freed the slot
    wait_s: float  # the call's time beyond the median launch


@dataclass(frozen=True)
class LaunchQueue:
    """The trace's launch queues, per stream (busiest first), and the CPU time blocked on a full one."""

    streams: tuple[StreamQueue, ...]
    span_s: float
    median_launch_s: float
    blocked: tuple[BlockedLaunch, ...] = ()

    @property
    def blocked_s(self) -> float:
        return sum(s.blocked_s for s in self.streams)

    @property
    def deepest(self) -> StreamQueue | None:
        """The stream whose queue went deepest (ties: the longer at its cap, then the higher mean)."""
        return max(self.streams, key=lambda s: (s.max, s.at_cap_s, s.mean), default=None)

    @property
    def verdict(self) -> str:
        """"device-bound": a queue sat at its cap (the CPU ran as far ahead as it could); "CPU-bound": the
        busiest queue held under one launch on average (the device waited on each); "" between."""
        if any(s.at_cap_s > 0 or s.blocked for s in self.streams):
            return "device-bound"
        busiest = max(self.streams, key=lambda s: s.mean, default=None)
        return "CPU-bound" if busiest is not None and busiest.mean < 1.0 else ""

    def to_dict(self) -> dict[str, Any]:
        return {"per_stream": [s.to_dict() for s in self.streams], "blocked_s": self.blocked_s,
                "blocked": len(self.blocked), "span_s": self.span_s, "median_launch_s": self.median_launch_s,
                "verdict": self.verdict}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LaunchQueue:
        """As `to_dict` wrote it (the blocked launches themselves are not kept: only their count and time)."""
        return cls(tuple(StreamQueue.from_dict(s) for s in d.get("per_stream") or ()), float(d["span_s"]),
                   float(d["median_launch_s"]))


@dataclass
class _Stream:
    """A stream's counted activities and the depth each launch found."""

    acts: list[int]  # indices in Trace.kernels, by launch time
    found: list[int]  # per launch: the stream's activities queued when it joined (itself not counted)
    at_depth: dict[int, float]  # depth → time spent at it
    max: int = 0


def counted(trace: Trace) -> list[int]:
    """The activities that went through a launch queue: launched by a call in the trace, not by a graph replay."""
    graph = trace.graph_kernels
    return [i for i, k in enumerate(trace.kernels) if k.launch_ts is not None and i not in graph]


@dataclass
class _Columns:
    """The counted activities' launch times and leaves (as `_leaves`), by index in Trace.kernels: read from the
    activities once, for the sweeps to take whole arrays."""

    launch: np.ndarray
    leave: np.ndarray

    @classmethod
    def of(cls, kernels: Sequence[Kernel], acts: Sequence[int], hta: bool) -> _Columns:
        n = len(kernels)
        launch = np.zeros(n)
        leave = np.zeros(n)
        idx = np.asarray(acts, dtype=np.int64)
        launch[idx] = [kernels[i].launch_ts for i in acts]
        t = np.array([kernels[i].ts for i in acts], dtype=np.float64)
        if not hta:
            t = t + np.array([kernels[i].dur for i in acts], dtype=np.float64)
        # a leave never before its join (clocks a µs apart)
        leave[idx] = np.where(t >= launch[idx], t, launch[idx])
        return cls(launch, leave)


def _sweep(cols: _Columns, acts: list[int], joins: Mapping[int, float] | None = None) -> _Stream:
    """Walk the stream's joins (+1 at the call's start, or at `joins[i]`) and leaves (−1 at the activity's end,
    or start) in time order: an activity leaving at the instant another joins leaves first ([join, leave)).

    Whole-array: the joins and leaves are merged by (time, leave before join), each step's depth is the running
    count before it, and the time to the next step is added to that depth's total where it is positive, in
    time order (np.bincount adds in the order given: the same sums a walk of the steps makes)."""
    ids = np.asarray(acts, dtype=np.int64)
    at = cols.launch[ids]
    if joins:
        at = at.copy()
        for n, i in enumerate(acts):
            if i in joins:
                at[n] = joins[i]
    joined = np.argsort(at, kind="stable")  # each join's n, in time order (ties by n)
    leave = np.sort(cols.leave[ids])
    m = len(ids)
    times = np.concatenate((leave, at[joined]))
    is_join = np.concatenate((np.zeros(m, dtype=np.int8), np.ones(m, dtype=np.int8)))
    step = np.lexsort((np.arange(2 * m), is_join, times))  # by time, a leave before a join, then as listed
    x = times[step]
    depth = np.concatenate(([0], np.cumsum(np.where(is_join[step] == 1, 1, -1))[:-1]))
    found = np.empty(m, dtype=np.int64)
    at_join = is_join[step] == 1
    found[joined[step[at_join] - m]] = depth[at_join]
    dt = np.diff(x)
    moved = np.flatnonzero(dt > 0)
    at_depth: dict[int, float] = {}
    if len(moved):
        d = depth[1:][moved]
        levels, first, which = np.unique(d, return_index=True, return_inverse=True)
        sums = np.bincount(which, weights=dt[moved], minlength=len(levels))
        for k in np.argsort(first, kind="stable").tolist():  # each depth where first reached, as a walk finds them
            at_depth[int(levels[k])] = float(sums[k])
    top = int(found.max()) + 1 if m else 0
    return _Stream(acts, found.tolist(), at_depth, max(top, 0))


def _freed_by(kernels: Sequence[Kernel], ends: list[tuple[float, int]], c0: float, c1: float) -> int | None:
    """The stream's activity, queued before the call began, that ended last while the call ran."""
    j = bisect.bisect_right(ends, (c1, len(kernels)))
    while j > 0:
        end, i = ends[j - 1]
        if end < c0:
            return None
        if (launched := kernels[i].launch_ts) is not None and launched < c0:
            return i
        j -= 1
    return None


def _blocked(kernels: Sequence[Kernel], s: _Stream, median: float) -> tuple[int, list[BlockedLaunch]]:
    """The stream's plateau (the most launches any call found queued) and the calls that waited at it; (0, [])
    where fewer than MIN_BLOCKED did."""
    if not s.acts:
        return 0, []
    top = max(s.found)
    if top < MIN_PLATEAU:
        return 0, []
    slack = max(1, top // 100)
    ends = sorted((kernels[i].end, i) for i in s.acts)
    out = []
    for n, i in enumerate(s.acts):
        k = kernels[i]
        d = k.launch_dur
        if d is None or s.found[n] < top - slack or d < LONG_CALL * median or d - median < MIN_WAIT_S:
            continue
        c0 = k.launch_ts or 0.0
        j = _freed_by(kernels, ends, c0, c0 + d)
        if j is not None:
            out.append(BlockedLaunch(i, k.correlation, c0, c0 + d, j, d - median))
    return (top, out) if len(out) >= MIN_BLOCKED else (0, [])


@dataclass
class _Queues:
    """Every stream's sweep, its own plateau (0: none) and its blocked launches; the median launch call."""

    streams: dict[tuple[int | None, int | None], tuple[_Stream, int, list[BlockedLaunch]]]
    median: float
    span: tuple[float, float]  # the first counted launch, the last leave


def _queues(trace: Trace, acts: Sequence[int], hta: bool) -> _Queues:
    """Sweep each stream with every launch joining at its call's start, find the calls a full queue held, then
    (unless `hta`) sweep again with each of those joining when its slot was freed: while it waited it held none.
    HTA's count keeps the first sweep (a blocked call counts from its start, one above the cap)."""
    kernels = trace.kernels
    cols = _Columns.of(kernels, acts, hta)
    by: dict[tuple[int | None, int | None], list[int]] = {}
    idx = np.asarray(acts, dtype=np.int64)
    for i in idx[np.argsort(cols.launch[idx], kind="stable")].tolist():  # by launch time, ties by index
        k = kernels[i]
        by.setdefault((k.device, k.stream), []).append(i)
    durs: list[float] = [kernels[i].launch_dur for i in acts if kernels[i].launch_dur is not None]  # type: ignore[misc]
    median = statistics.median(durs) if durs else 0.0
    out = {}
    for key, ids in by.items():
        s = _sweep(cols, ids)
        own, calls = _blocked(kernels, s, median)
        if calls and not hta:
            s = _sweep(cols, ids, {b.activity: kernels[b.freed_by].end for b in calls})
        out[key] = (s, own, calls)
    return _Queues(out, median, (float(cols.launch[idx].min()), float(cols.leave[idx].max())))


def time_at_depth(trace: Trace, hta: bool = False) -> dict[tuple[int | None, int | None], dict[int, float]]:
    """Per (device, stream): the seconds its queue spent at each depth, from its first launch to its last leave."""
    return {key: s.at_depth for key, (s, _, _) in _queues(trace, counted(trace), hta).streams.items()}


def launch_queue(trace: Trace, hta: bool = False) -> LaunchQueue | None:
    """The launch queue of each stream of `trace` (None: no activity was launched by a call in the trace, or
    the activities are counter ranges, whose times the profiler made up). `hta` counts as HTA does: each
    launch from its call's start to its activity's start."""
    acts = counted(trace)
    if not acts or trace.range_times:
        return None
    qs = _queues(trace, acts, hta)
    span = qs.span[1] - qs.span[0]
    trace_cap = max((own for _, own, _ in qs.streams.values()), default=0) or CUDA_CAP
    streams = []
    blocked: list[BlockedLaunch] = []
    for key, (s, own, calls) in qs.streams.items():
        cap = own or trace_cap
        at_cap = sum(t for depth, t in s.at_depth.items() if depth >= cap)
        area = sum(depth * t for depth, t in s.at_depth.items())
        streams.append(StreamQueue(
            stream=key[1], device=key[0], launches=len(s.acts), mean=area / span if span > 0 else 0.0, max=s.max,
            cap=cap, at_cap_s=at_cap, at_cap_fraction=at_cap / span if span > 0 else 0.0, blocked=len(calls),
            blocked_s=sum(b.wait_s for b in calls), plateau=bool(own)))
        blocked += calls
    streams.sort(key=lambda s: (-s.mean, -s.max, str(s.device), str(s.stream)))
    return LaunchQueue(tuple(streams), span, qs.median, tuple(sorted(blocked, key=lambda b: b.call_ts)))


def blocked_launches(trace: Trace) -> list[tuple[int, int]]:
    """The launches a full queue held: (the launched activity's index, the index of the activity whose end
    freed its slot), both in Trace.kernels, by the call's start. The critical path joins the freeing
    activity's end to the launch call's end (the call's correlation is the launched activity's)."""
    q = launch_queue(trace)
    return [(b.activity, b.freed_by) for b in q.blocked] if q is not None else []
