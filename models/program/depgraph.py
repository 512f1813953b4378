"""The dependency graph of a trace: what had to happen before what, with the delays the trace observed.

Every activity is an interval with a start point and an end point: a runtime call that orders the device's work
(a launch, cudaEventRecord, cudaStreamWaitEvent, a sync, a memcpy call: `Trace.calls`) and a device activity
(kernel, memcpy, memset). An edge `q → p` is a constraint `q + w ≤ p`:
- duration: an activity's start → its end (a device activity's own time; a call's own time);
- thread: a call's end → the next call's start on its thread (the CPU work between them, which stays as it was);
- join: where a thread ran no op while another made calls (the main thread in `loss.backward()`, autograd's
  engine on its own thread), its call before → the other's first call there, and the other's last call → its call
  after: the path runs through the other thread's work, not over it as the waiting thread's CPU time;
- launch: a launch call's start → its activity's start (correlation); the first launch after a cudaStreamWaitEvent
  on its thread that no cuda_sync event explains is an event edge instead, and so is its activity's stream-order
  edge (it waited on an event the trace does not name: another stream's delay, not the launch's or the queue's);
- stream: an activity's end → the next one's start on its stream (by start);
- event: the activity before a cudaEventRecord on its stream → the first activity the waiting stream launched after
  the matching cudaStreamWaitEvent (Kineto's cuda_sync "Stream Wait Event", by the record's correlation);
- sync: the awaited activity's end → the sync call's end (cudaDeviceSynchronize / a "Context Sync": every stream's
  last activity launched before it; cudaStreamSynchronize: its stream's, or, where the trace does not say which,
  the stream of the thread's last launch; cudaEventSynchronize: the event's record's; a blocking memcpy: its copy;
  and on each such stream the last activity with no launch in the trace, queued before it began, that ended before
  the sync returned: a warm-up's kernels, which the step's first sync waits on);
- queue: a launch call held by its stream's full launch queue (rooftop.models.trace.launchqueue.blocked_launches): the end
  of the activity that freed its slot → the call's end (the CPU waited on the device: a device-bound step);
- peer (several ranks): each collective joined to its counterpart on every other rank (the same collective, process
  group and size, running at once: rooftop.models.program.job.pair_collectives, as the job's alignment pairs them): every
  rank's start → every rank's end, weighted with the collective's time after the last rank arrived (the last to
  arrive sets the end).
An edge whose predecessor happened after its point is no constraint the trace shows (a clock's skew, a sync that
returned before a kernel ended) and is left out, but for an activity's own time and its stream's order.

Weights, so that re-timing the graph with nothing changed gives back the trace's every time exactly: each point's
*binding* in-edge is the one whose predecessor happened last (ties: stream, then launch, then thread), and it
carries the observed delay; every other in-edge weighs 0 (a peer edge: the collective's own time), never more than
its observed slack. A what-if then moves the graph only as the edges allow (rooftop.models.program.retime).

Pure: a Trace in, flat arrays out (a million-event trace's graph is a few hundred thousand points).
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .collectives import collective_kernels
from .job import pair_collectives
from ..trace.launchqueue import LaunchQueue, blocked_launches
from ..trace.read import CALL_KINDS, Kernel, Trace

# edge kinds
DEVICE, LAUNCH_CALL, CALL, THREAD, LAUNCH, STREAM, EVENT, SYNC, PEER, JOIN, QUEUE = range(11)
EDGE_NAMES = ("device", "launch call", "call", "thread", "launch", "stream", "event", "sync", "peer", "join", "queue")
TIE = {STREAM: 0, LAUNCH: 1, THREAD: 2, JOIN: 2, EVENT: 3, SYNC: 4, QUEUE: 4, PEER: 5, DEVICE: 6, LAUNCH_CALL: 6,
       CALL: 6}
_LAUNCH, _RECORD, _WAIT, _SYNC, _COPY = range(len(CALL_KINDS))
NO_WINDOW = -1
DEVICE_ACT, CALL_ACT, WINDOW_END = 0, 1, 2  # DepGraph.act_call: what an activity is
ROUNDS = 64  # the most rounds of moving points an edge runs back to, before Kahn's order is used


@dataclass(frozen=True)
class DepGraph:
    """Points (2a: activity a's start, 2a + 1: its end) with their in-edges in CSR form (point p's are
    `in_start[p]:in_start[p + 1]`), a topological order, and each point's binding in-edge. Activity a is
    (rank `act_rank[a]`, a call when `act_call[a]`, else a device activity, index `act_index[a]` there)."""

    time: array  # per point: its observed time, seconds (on the first trace's clock)
    act_rank: array
    act_call: bytes  # CALL_ACT: a runtime call (index into that rank's Trace.calls); DEVICE_ACT: a device activity
    # (Trace.kernels); WINDOW_END: a window's end on the CPU (index: the window), held by each thread's last call
    act_index: array
    act_window: array  # the window each activity belongs to (NO_WINDOW: none)
    in_start: array
    in_pred: array  # per edge: its predecessor point
    in_from: array  # the same, or the sentinel point `len(time)` (never moved) where the predecessor is in another
    # window: each window is re-timed on its own, what came before it kept as it was
    in_kind: bytes
    in_weight: array  # its weight (seconds): the observed delay on a binding edge, 0 (or a peer's) elsewhere
    in_slack: array  # observed time left on it: point − pred − weight (0 on a binding edge)
    binding: array  # per point: its binding in-edge, or -1 (a source: nothing in the graph held it)
    order: array  # the points in an order where every edge runs forward
    windows: tuple[tuple[float, float], ...]  # per window, its start and end on the CPU (seconds)
    first_device: tuple[int, ...]  # per rank: the activity of its first device activity (its kernels follow in order)
    out_start: array  # out-edges in CSR form (point q's successors: out_dst[out_start[q]:out_start[q + 1]])
    out_dst: array
    pos: array  # each point's place in `order`
    edge_point: array  # per in-edge: the point it leads to
    comm_groups: tuple[tuple[int, ...], ...] = ()  # each collective joined across ranks: its activities, by rank

    def device_act(self, rank: int, kernel: int) -> int:
        """The activity of Trace.kernels[kernel] of rank `rank`."""
        return self.first_device[rank] + kernel

    def duration_edge(self, act: int) -> int:
        """The in-edge of an activity's end from its start: its own time."""
        start, end = 2 * act, 2 * act + 1
        for e in range(self.in_start[end], self.in_start[end + 1]):
            if self.in_pred[e] == start and self.in_kind[e] in (DEVICE, CALL, LAUNCH_CALL):
                return e
        raise ValueError(f"activity {act} has no duration edge")

    @property
    def points(self) -> int:
        return len(self.time)


def duration_edges(g: DepGraph) -> list[int]:
    """Each activity's duration edge (`DepGraph.duration_edge`), found for all of them at once; -1 for none."""
    pred = np.frombuffer(g.in_pred, dtype=np.int32)
    point = np.frombuffer(g.edge_point, dtype=np.int32)
    kind = np.frombuffer(g.in_kind, dtype=np.uint8)
    own = np.flatnonzero((point & 1 == 1) & (pred == point - 1) & np.isin(kind, (DEVICE, CALL, LAUNCH_CALL)))
    out = np.full(g.points // 2, -1, dtype=np.int64)
    acts, first = np.unique(point[own] >> 1, return_index=True)  # the edges are by point: the first of each
    out[acts] = own[first]
    return out.tolist()


def _membership(trace: Trace, windows: Sequence[tuple[float, float]], offset: float) -> tuple[list[int], list[int]]:
    """The window of each call (by its start) and of each device activity (by its launch, as the step split counts
    them; one with no launch in the trace, queued before it began, by its start: the window it ran in, whose syncs
    waited on it)."""
    placed = sorted((lo, hi, w) for w, (lo, hi) in enumerate(windows) if lo < hi)  # a peer's missing one is empty
    starts = [lo for lo, _, _ in placed]

    def which(t: float | None) -> int:
        if t is None:
            return NO_WINDOW
        j = bisect.bisect_right(starts, t) - 1
        return placed[j][2] if j >= 0 and t < placed[j][1] else NO_WINDOW

    calls = trace.calls
    call_w = [which(t + offset) for t in calls.ts]
    dev_w = [which((k.launch_ts if k.launch_ts is not None else k.ts) + offset) for k in trace.kernels]
    return call_w, dev_w


def window_ends_of(trace: Trace, windows: Sequence[tuple[float, float]], offset: float = 0.0) -> list[float]:
    """Each window's end as the graph of the trace would hold it, without building it: the latest end of the calls
    and device activities placed in it (`_membership`) and of its CPU range, `offset` added; -inf for none."""
    call_w, dev_w = _membership(trace, windows, offset)
    out = [hi + offset if lo < hi and hi != math.inf else -math.inf for lo, hi in windows]
    calls = trace.calls
    for i, w in enumerate(call_w):
        if w != NO_WINDOW:
            out[w] = max(out[w], calls.ts[i] + calls.dur[i] + offset)
    for k, w in zip(trace.kernels, dev_w):
        if w != NO_WINDOW:
            out[w] = max(out[w], k.end + offset)
    return out


def _joins(trace: Trace) -> list[tuple[int, int, int]]:
    """Where a thread waited on another: (call, call, JOIN) pairs. Between two consecutive calls of thread A, another
    thread B made calls while A ran no op at all (A was blocked, as the main thread is in `loss.backward()` while
    autograd's engine runs the backward pass on its own thread): A's call before the gap → B's first call there (the
    fork), B's last call there → A's call after it (the join). Without them the path puts B's work on A as CPU time
    between two calls. A thread whose trace records no ops says nothing of being idle, and gets none."""
    calls = trace.calls
    n = len(calls)
    thread = calls.thread
    tids = [tid for _, tid in calls.threads]
    busy: dict[int, tuple[list[float], list[float]] | None] = {}  # a thread → its ops' starts and running max end

    def idle(th: int, a: float, z: float) -> bool:
        if th not in busy:
            tid = tids[th]
            ops = sorted((o.ts, o.end) for o in trace.ops if o.tid == tid and o.origin == "op")
            if not ops:
                busy[th] = None
            else:
                top, ends = -math.inf, []
                for _, e in ops:
                    top = e if e > top else top
                    ends.append(top)
                busy[th] = ([t for t, _ in ops], ends)
        got = busy[th]
        if got is None:
            return False
        j = bisect.bisect_left(got[0], z) - 1
        return j < 0 or got[1][j] <= a

    out: list[tuple[int, int, int]] = []
    if len(calls.threads) < 2:
        return out
    last_on: dict[int, int] = {}
    ts, dur = calls.ts, calls.dur
    for j in range(n):
        th = thread[j]
        i = last_on.get(th)
        last_on[th] = j
        if i is None or j == i + 1:
            continue
        span: dict[int, list[int]] = {}  # another thread → its first and last call in A's gap
        for k in range(i + 1, j):
            if ts[k] >= ts[i] + dur[i] and ts[k] + dur[k] <= ts[j]:
                got = span.get(thread[k])
                if got is None:
                    span[thread[k]] = [k, k]
                else:
                    got[1] = k
        for f, z in span.values():
            if idle(th, ts[f], ts[z] + dur[z]):
                out.append((i, f, JOIN))
                out.append((z, j, JOIN))
    return out


class _Builder:
    def __init__(self) -> None:
        self.time = array("d")
        self.act_rank = array("i")
        self.act_call = bytearray()
        self.act_index = array("i")
        self.act_window = array("i")
        self.src = array("i")
        self.dst = array("i")
        self.kind = bytearray()
        self.first_device: list[int] = []
        self.comm_groups: list[tuple[int, ...]] = []

    def act(self, rank: int, call: int, index: int, ts: float, end: float, window: int, kind: int) -> int:
        a = len(self.act_rank)
        self.act_rank.append(rank)
        self.act_call.append(call)
        self.act_index.append(index)
        self.act_window.append(window)
        self.time.append(ts)
        self.time.append(end)
        self.edge(2 * a, 2 * a + 1, kind)
        return a

    def acts(self, rank: int, call: int, ts: np.ndarray, end: np.ndarray, window: Sequence[int],
             kind: np.ndarray) -> range:
        """Activities index, index + 1, … (`act` for each, whole-array): their numbers."""
        a, k = len(self.act_rank), len(ts)
        self.act_rank.extend(array("i", [rank]) * k)
        self.act_call.extend(bytes([call]) * k)
        self.act_index.extend(array("i", range(k)))
        self.act_window.extend(array("i", window))
        both = np.empty(2 * k, dtype=np.float64)
        both[0::2], both[1::2] = ts, end
        self.time.frombytes(both.tobytes())
        starts = np.arange(2 * a, 2 * (a + k), 2, dtype=np.int32)
        self.src.frombytes(starts.tobytes())
        self.dst.frombytes((starts + 1).tobytes())
        self.kind.extend(kind.astype(np.uint8).tobytes())
        return range(a, a + k)

    def edges(self, src: np.ndarray, dst: np.ndarray, kind: np.ndarray) -> None:
        """Edges src[i] → dst[i] of kind[i], whole-array, in that order (`edge` for each)."""
        self.src.frombytes(np.ascontiguousarray(src, dtype=np.int32).tobytes())
        self.dst.frombytes(np.ascontiguousarray(dst, dtype=np.int32).tobytes())
        self.kind.extend(np.ascontiguousarray(kind, dtype=np.uint8).tobytes())

    def edge(self, q: int, p: int, kind: int) -> None:
        self.src.append(q)
        self.dst.append(p)
        self.kind.append(kind)

    def causal(self, q: int, p: int, kind: int) -> None:
        """An edge the trace can show only where its predecessor came first."""
        if self.time[q] <= self.time[p]:
            self.edge(q, p, kind)


def _add_rank(b: _Builder, rank: int, trace: Trace, windows: Sequence[tuple[float, float]], offset: float,
              blocked: Sequence[tuple[int, int]]) -> None:
    """One rank's activities and edges: thread order and joins, launches, streams, then syncs (in that order, which
    the binding edges' ties depend on). `blocked`: its launches a full queue held (launchqueue.blocked_launches)."""
    calls, kernels = trace.calls, trace.kernels
    call_w, dev_w = _membership(trace, windows, offset)
    ts = np.frombuffer(calls.ts, dtype=np.float64)
    call_kind = np.where(np.frombuffer(calls.kind, dtype=np.uint8) == _LAUNCH, LAUNCH_CALL, CALL)
    call_act = b.acts(rank, CALL_ACT, ts + offset, ts + np.frombuffer(calls.dur, dtype=np.float64) + offset, call_w,
                      call_kind)
    b.first_device.append(len(b.act_rank))
    k_ts = np.fromiter((k.ts for k in kernels), dtype=np.float64, count=len(kernels))
    k_end = np.fromiter((k.end for k in kernels), dtype=np.float64, count=len(kernels))
    dev_act = b.acts(rank, DEVICE_ACT, k_ts + offset, k_end + offset, dev_w, np.full(len(kernels), DEVICE))
    _thread_edges(b, rank, trace, windows, offset, call_act, call_w)
    by_corr, issued, waited = _launch_edges(b, trace, call_act, dev_act, blocked)
    streams = _Streams(b, kernels, k_end, dev_act, waited)
    handled = _sync_edges(b, trace, call_act, dev_act, by_corr, streams)
    _host_sync_edges(b, trace, call_act, dev_act, issued, streams, handled)


def _thread_edges(b: _Builder, rank: int, trace: Trace, windows: Sequence[tuple[float, float]], offset: float,
                  call_act: range, call_w: Sequence[int]) -> None:
    """Thread order, the joins between threads (`_joins`), and each window's end on the CPU (a step's last CPU work
    after its last call) as a point."""
    calls = trace.calls
    thread = np.asarray(calls.thread, dtype=np.int64)
    by_thread = np.argsort(thread, kind="stable")  # each thread's calls, in order
    follows = thread[by_thread[1:]] == thread[by_thread[:-1]]
    prev, nxt = by_thread[:-1][follows], by_thread[1:][follows]
    at = np.argsort(nxt, kind="stable")  # added in the calls' order, as one pass would
    b.edges(2 * (call_act.start + prev[at]) + 1, 2 * (call_act.start + nxt[at]), np.full(len(at), THREAD))
    last_in: dict[tuple[int, int], int] = {}  # (window, thread) → its last call there, by its first
    for i, w in enumerate(call_w):
        if w != NO_WINDOW:
            last_in[(w, calls.thread[i])] = call_act[i]
    for q, p, kind in _joins(trace):
        b.causal(2 * call_act[q] + 1, 2 * call_act[p], kind)
    ends = {w: b.act(rank, WINDOW_END, w, hi + offset, hi + offset, w, CALL) for w, (_, hi) in enumerate(windows)
            if hi != math.inf}
    for (w, _th), a in last_in.items():
        if w in ends:
            b.causal(2 * a + 1, 2 * ends[w], THREAD)


def _launch_edges(b: _Builder, trace: Trace, call_act: range, dev_act: range,
                  blocked: Sequence[tuple[int, int]]) -> tuple[dict[int, int], dict[int, list[int]], np.ndarray]:
    """Launch → activity, by correlation (a graph launch issues many), and queue edges; returns each correlation's
    first call, each call's activities, and which activities waited on an event the trace does not name (a mask).
    Whole-array: a million-event trace has a hundred thousand launches."""
    calls, kernels = trace.calls, trace.kernels
    corr = np.asarray(calls.correlation, dtype=np.int64)
    kind = np.frombuffer(calls.kind, dtype=np.uint8)
    with_id = np.flatnonzero(corr >= 0)
    ids, at = np.unique(corr[with_id], return_index=True)
    first_call = with_id[at]  # each correlation's first call
    by_corr = dict(zip(ids.tolist(), first_call.tolist()))
    # a launch right after a cudaStreamWaitEvent on its thread that no cuda_sync event explains waited on an event
    # the trace does not name (HTA pairs them so): its delay is another stream's, not the launch's or the queue's
    explained = [s.correlation for s in trace.device_syncs if s.name == "Stream Wait Event" and s.correlation is not None]
    wait = (kind == _WAIT) & ~np.isin(corr, np.asarray(explained, dtype=np.int64))
    launch = kind == _LAUNCH
    thread = np.asarray(calls.thread, dtype=np.int32)
    seq = np.flatnonzero(wait | launch)
    seq = seq[np.argsort(thread[seq], kind="stable")]  # per thread, in order
    th = thread[seq]
    after_wait = np.zeros(len(calls), dtype=bool)  # a launch whose thread's last wait or launch was such a wait
    after_wait[seq[1:][(th[1:] == th[:-1]) & wait[seq[:-1]] & launch[seq[1:]]]] = True
    k_corr = np.fromiter((-1 if k.correlation is None else k.correlation for k in kernels), dtype=np.int64,
                         count=len(kernels))
    j = np.minimum(np.searchsorted(ids, k_corr), max(len(ids) - 1, 0))
    linked = np.flatnonzero(ids[j] == k_corr) if len(ids) else np.zeros(0, dtype=np.int64)
    ci = first_call[j[linked]]  # each linked activity's call
    issued: dict[int, list[int]] = {}  # call index → its activities
    for i, c in zip(linked.tolist(), ci.tolist()):
        issued.setdefault(c, []).append(i)
    waited = np.zeros(len(kernels), dtype=bool)  # the activities those launches issued
    waited[linked[after_wait[ci]]] = True
    by_launch = (kind[ci] == _LAUNCH) | (kind[ci] == _COPY)
    src, dst = ci[by_launch], linked[by_launch]
    b.edges(2 * (call_act.start + src), 2 * (dev_act.start + dst), np.where(after_wait[src], EVENT, LAUNCH))
    # a launch a full queue held returned when an activity ahead of it on its stream ended (rooftop.models.trace.launchqueue)
    for launched, freed in blocked:
        c = kernels[launched].correlation
        got = by_corr.get(c) if c is not None else None
        if got is not None:
            b.causal(2 * dev_act[freed] + 1, 2 * call_act[got] + 1, QUEUE)
    return by_corr, issued, waited


class _Streams:
    """Stream order (its edges added when made), and per stream the activities by launch time: what a record or a
    sync follows. `end`: each activity's end, on its trace's clock (as `_add_rank` read them)."""

    def __init__(self, b: _Builder, kernels: Sequence[Kernel], end: np.ndarray, dev_act: range,
                 waited: np.ndarray) -> None:
        self.kernels = kernels
        index: dict[tuple, int] = {}  # (device, stream) → its number, by first activity
        code = np.fromiter((index.setdefault((k.device, k.stream), len(index)) for k in kernels), dtype=np.int64,
                           count=len(kernels))
        launch_ts = np.fromiter((math.nan if k.launch_ts is None else k.launch_ts for k in kernels),
                                dtype=np.float64, count=len(kernels))
        by_code = np.argsort(code, kind="stable")  # each stream's activities, by start (the kernels are)
        bounds = np.searchsorted(code[by_code], np.arange(len(index) + 1))
        self.by_key: dict[tuple, np.ndarray] = {}  # (device, stream) → its activities, by start
        self.launched_on: dict[tuple, tuple[list[float], list[int]]] = {}
        self.unlaunched_on: dict[tuple, tuple[list[float], list[int]]] = {}  # by end: those queued before the trace
        for key, c in index.items():
            ks = by_code[bounds[c]:bounds[c + 1]]
            self.by_key[key] = ks
            un = np.isnan(launch_ts[ks])
            lk = ks[~un]
            lk = lk[np.lexsort((lk, launch_ts[lk]))]
            self.launched_on[key] = (launch_ts[lk].tolist(), lk.tolist())
            if un.any():
                uk = ks[un]
                uk = uk[np.lexsort((uk, end[uk]))]
                self.unlaunched_on[key] = (end[uk].tolist(), uk.tolist())
        ahead, behind = by_code[:-1], by_code[1:]
        same = code[ahead] == code[behind]  # one stream's consecutive activities
        ahead, behind = ahead[same], behind[same]
        b.edges(2 * (dev_act.start + ahead) + 1, 2 * (dev_act.start + behind), np.where(waited[behind], EVENT, STREAM))
        self.keys = {key[1]: key for key in self.by_key}  # a stream id → its (device, stream)

    def last_launched(self, key: tuple, t: float) -> int | None:
        got = self.launched_on.get(key)
        if not got:
            return None
        j = bisect.bisect_right(got[0], t) - 1
        return got[1][j] if j >= 0 else None

    def first_launched(self, key: tuple, t: float) -> int | None:
        got = self.launched_on.get(key)
        if not got:
            return None
        j = bisect.bisect_left(got[0], t)
        return got[1][j] if j < len(got[1]) else None

    def awaited(self, key: tuple | None, t: float, until: float) -> list[int]:
        """What a sync called at `t` and returning at `until` waited on, on one stream: its last activity launched
        before `t`, and its last one queued before the trace began that ended by `until` (it has no launch)."""
        if key is None:
            return []
        got = [ki] if (ki := self.last_launched(key, t)) is not None else []
        un = self.unlaunched_on.get(key)
        if un:
            j = bisect.bisect_right(un[0], until) - 1
            if j >= 0:
                got.append(un[1][j])
        return got


def _sync_edges(b: _Builder, trace: Trace, call_act: Sequence[int], dev_act: Sequence[int],
                by_corr: Mapping[int, int], streams: _Streams) -> set[int]:
    """Event and sync edges from Kineto's cuda_sync events (they name the record's stream and the waiting one);
    returns the calls they covered."""
    calls = trace.calls
    handled: set[int] = set()
    for s in trace.device_syncs:
        ci = by_corr.get(s.correlation) if s.correlation is not None else None
        if ci is None:
            continue
        handled.add(ci)
        t_call = calls.ts[ci]
        if s.name == "Stream Wait Event" or s.name == "Event Sync":
            ri = by_corr.get(s.record) if s.record is not None else None
            src_key = streams.keys.get(s.wait_on_stream)
            if ri is None or src_key is None:
                continue
            src = streams.last_launched(src_key, calls.ts[ri])
            if src is None:
                continue
            if s.name == "Event Sync":
                b.causal(2 * dev_act[src] + 1, 2 * call_act[ci] + 1, SYNC)
                continue
            dst_key = streams.keys.get(s.stream)
            dst = streams.first_launched(dst_key, t_call) if dst_key is not None else None
            if dst is not None:
                b.causal(2 * dev_act[src] + 1, 2 * dev_act[dst], EVENT)
        elif s.name == "Context Sync" or s.name == "Stream Sync":
            keys = list(streams.by_key) if s.name == "Context Sync" else [streams.keys.get(s.stream)]
            for key in keys:
                for ki in streams.awaited(key, t_call, t_call + calls.dur[ci]):
                    b.causal(2 * dev_act[ki] + 1, 2 * call_act[ci] + 1, SYNC)
    return handled


def _host_sync_edges(b: _Builder, trace: Trace, call_act: Sequence[int], dev_act: Sequence[int],
                     issued: Mapping[int, list[int]], streams: _Streams, handled: set[int]) -> None:
    """Host syncs the trace's cuda_sync events did not cover (`handled`), and blocking copies: each waited on what
    its stream (or every stream) had launched before it."""
    calls, kernels = trace.calls, trace.kernels
    thread_stream: dict[int, tuple] = {}  # a thread → the stream of its last launch so far
    for i in range(len(calls)):
        kind = calls.kind[i]
        if kind == _LAUNCH or kind == _COPY:
            for ki in issued.get(i, ()):
                thread_stream[calls.thread[i]] = (kernels[ki].device, kernels[ki].stream)
        if kind == _COPY:
            for ki in issued.get(i, ()):
                b.causal(2 * dev_act[ki] + 1, 2 * call_act[i] + 1, SYNC)
        elif kind == _SYNC and i not in handled:
            name = calls.name[i]
            keys: list[tuple | None]
            if "Device" in name or "Context" in name or "Ctx" in name:
                keys = list(streams.by_key)
            elif "Stream" in name and calls.thread[i] in thread_stream:
                keys = [thread_stream[calls.thread[i]]]
            else:  # an event's sync with no cuda_sync event to say which: whichever ended last before it returned
                keys = list(streams.by_key)
            for key in keys:
                for ki in streams.awaited(key, calls.ts[i], calls.ts[i] + calls.dur[i]):
                    b.causal(2 * dev_act[ki] + 1, 2 * call_act[i] + 1, SYNC)


def build_graph(traces: Sequence[Trace], windows: Sequence[Sequence[tuple[float, float]]],
                queues: Sequence[LaunchQueue | None] = ()) -> DepGraph:
    """The graph of `traces[0]` (and its peers, the other ranks of the job, on its clock by their traces' origins),
    its activities placed in `windows[r]` per rank (one list per trace, as long as the first's). `queues[r]`: rank
    r's launch queues where already found (its Workload's), so they are not swept again; found here where absent."""
    b = _Builder()
    origin = traces[0].origin_us
    for r, (t, w) in enumerate(zip(traces, windows)):
        q = queues[r] if r < len(queues) else None
        blocked = [(x.activity, x.freed_by) for x in q.blocked] if q is not None else blocked_launches(t)
        _add_rank(b, r, t, w, (t.origin_us - origin) * 1e-6, blocked)
    peer_w: dict[int, float] = {}  # an end point → the weight of its peer edges (the collective after the last one came)
    for group in joined_collectives(traces, b.first_device):
        b.comm_groups.append(group)
        last = max(b.time[2 * a] for a in group)
        for a in group:
            end = 2 * a + 1
            peer_w[end] = max(0.0, b.time[end] - last)
            for o in group:
                if o != a:
                    b.edge(2 * o, end, PEER)
    return _finish(b, peer_w, tuple(windows[0]))


def joined_collectives(traces: Sequence[Trace], first_device: Sequence[int]) -> list[tuple[int, ...]]:
    """Each collective kernel of the first trace joined to its counterparts on the others (one activity per rank
    that ran it, the first rank's first): the calls paired as the job's alignment pairs them
    (rooftop.models.program.job.pair_collectives: the same collective, group and size, running at once), a call's kernels
    in order."""
    if len(traces) < 2:
        return []
    colls = [collective_kernels(t) for t in traces]
    ref = [c for c, _ in colls[0]]
    joined: dict[tuple[int, int], list[int]] = {}  # (ref call, its n-th kernel) → an activity per rank
    for i, ks in enumerate(colls[0]):
        for n, k in enumerate(ks[1]):
            joined[(i, n)] = [first_device[0] + k]
    for r in range(1, len(traces)):
        clock = (traces[r].origin_us - traces[0].origin_us) * 1e-6  # as the graph places the rank
        for i, j in pair_collectives(ref, [c for c, _ in colls[r]], clock):
            for n, k in enumerate(colls[r][j][1]):
                if (i, n) in joined:
                    joined[(i, n)].append(first_device[r] + k)
    return [tuple(acts) for _, acts in sorted(joined.items()) if len(acts) > 1]


def _finish(b: _Builder, peer_w: dict[int, float], windows: tuple[tuple[float, float], ...]) -> DepGraph:
    """CSR in-edges, the binding edge of each point and the weights; the topological order. Whole-array work
    (numpy), each temporary freed once used: a million-event window's graph is a few hundred thousand points."""
    n = len(b.time)
    time = np.frombuffer(b.time, dtype=np.float64)
    dst = np.frombuffer(b.dst, dtype=np.int32)
    m = len(dst)
    perm = np.argsort(dst, kind="stable")  # each point's in-edges in the order they were added
    pred = np.frombuffer(b.src, dtype=np.int32)[perm]
    ekind = np.frombuffer(b.kind, dtype=np.uint8)[perm]
    point = dst[perm]
    del perm, dst
    b.src, b.dst, b.kind = array("i"), array("i"), bytearray()
    in_start = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(point, minlength=n), out=in_start[1:])
    # binding edge: the latest predecessor; ties by TIE, then the first added
    tpred = time[pred]
    best_first = np.lexsort((np.arange(m, dtype=np.int32), np.array([TIE[k] for k in range(len(TIE))],
                                                                      dtype=np.int8)[ekind], -tpred, point))
    heads = np.flatnonzero(in_start[1:] > in_start[:-1])
    binding = np.full(n, -1, dtype=np.int32)
    binding[heads] = best_first[in_start[heads]]
    del best_first
    is_best = np.zeros(m, dtype=bool)
    is_best[binding[heads]] = True
    gap = time[point] - tpred
    del tpred
    pw = np.zeros(n, dtype=np.float64)
    for p, w in peer_w.items():
        pw[p] = w
    weight = np.where(ekind == PEER, pw[point], 0.0)
    np.minimum(weight, gap, out=weight)
    weight[gap <= 0] = 0.0
    weight[is_best] = gap[is_best]
    slack = np.maximum(0.0, gap - weight)
    slack[is_best] = 0.0
    del gap, is_best
    win = np.frombuffer(b.act_window, dtype=np.int32)
    ip, bd, ist = _ints(pred), _ints(binding), _ints(in_start)
    order, out_start, out_dst = _ordered(n, time, pred, point, ist, ip, bd)
    pred = np.frombuffer(ip, dtype=np.int32)  # as Kahn's left it, where it broke a cycle
    in_from = np.where(win[pred >> 1] != win[point >> 1], n, pred)  # from another window: a fixed time (the
    # sentinel point never moves)
    pos = np.empty(n, dtype=np.int32)
    pos[np.frombuffer(order, dtype=np.int32)] = np.arange(n, dtype=np.int32)
    return DepGraph(b.time, b.act_rank, bytes(b.act_call), b.act_index, b.act_window, ist, ip, _ints(in_from),
                    ekind.tobytes(), _floats(weight), _floats(slack), bd, order, windows, tuple(b.first_device),
                    out_start, out_dst, _ints(pos), _ints(point), tuple(b.comm_groups))


def _ints(x: np.ndarray) -> array:
    """A numpy array of indices as an array('i'), the graph's type (quick to read one item at a time)."""
    out = array("i")
    out.frombytes(np.ascontiguousarray(x, dtype=np.int32).data.cast("B"))
    return out


def _floats(x: np.ndarray) -> array:
    out = array("d")
    out.frombytes(np.ascontiguousarray(x, dtype=np.float64).data.cast("B"))
    return out


def _ordered(n: int, time: np.ndarray, pred: np.ndarray, point: np.ndarray, in_start: array, in_pred: array,
             binding: array) -> tuple[array, array, array]:
    """A topological order and the out-edges (CSR). The points by time (a start before its end) are nearly one:
    only an edge that runs back in time (a stream's activity starting before the one ahead of it ended) breaks
    it, so each point an edge runs back to is moved just after its predecessor, whole-array, until none does (a
    few rounds). Where that does not settle (a cycle, from a trace's skewed clocks): Kahn's (`_topological`),
    which also breaks the cycle."""
    out_perm = np.argsort(pred, kind="stable")
    out_start = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(pred, minlength=n), out=out_start[1:])
    out_dst = point[out_perm]
    del out_perm
    key = time.copy()
    idx = np.arange(n)
    for _ in range(ROUNDS):
        back = (key[pred] > key[point]) | ((key[pred] == key[point]) & (pred >= point))
        if not back.any():
            return _ints(np.lexsort((idx, key))), _ints(out_start), _ints(out_dst)
        np.maximum.at(key, point[back], np.nextafter(key[pred[back]], np.inf))
    return _topological(n, in_start, in_pred, binding)


def _topological(n: int, in_start: array, in_pred: array, binding: array) -> tuple[array, array, array]:
    """The points in an order where each one's predecessors come first. A cycle (only a trace's clock skew makes
    one) is broken by dropping its remaining points' non-binding in-edges, then their binding ones."""
    indeg = [in_start[p + 1] - in_start[p] for p in range(n)]
    out_count = [0] * (n + 1)
    for e in range(len(in_pred)):
        out_count[in_pred[e] + 1] += 1
    for q in range(n):
        out_count[q + 1] += out_count[q]
    out_start = out_count[:]
    out_dst = [0] * len(in_pred)
    fill = out_count[:-1]
    for p in range(n):
        for e in range(in_start[p], in_start[p + 1]):
            q = in_pred[e]
            out_dst[fill[q]] = p
            fill[q] += 1
    order = [p for p in range(n) if indeg[p] == 0]
    i = 0
    while True:
        while i < len(order):
            q = order[i]
            i += 1
            for j in range(out_start[q], out_start[q + 1]):
                p = out_dst[j]
                indeg[p] -= 1
                if indeg[p] == 0:
                    order.append(p)
        if len(order) == n:
            return array("i", order), array("i", out_start), array("i", out_dst)
        left = [p for p in range(n) if indeg[p] > 0]  # in a cycle, or after one: free the earliest-placed
        p = min(left)
        for e in range(in_start[p], in_start[p + 1]):
            in_pred[e] = p  # a self-loop is skipped by the re-timing: the point keeps its time
        indeg[p] = 0
        binding[p] = -1
        order.append(p)
