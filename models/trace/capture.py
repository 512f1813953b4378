"""Graph replays joined to their capture: each replayed kernel gets the op that launched it when its graph was captured.

A CUDA / HIP graph replay is one runtime call (cudaGraphLaunch, hipGraphLaunch) whose kernels no op of the replay
trace launched. A trace of the capture (vLLM's `capture_torch_profiler`, SGLang's `--enable-profile-cuda-graph`)
records each launch the graph was made of, inside the op that issued it and with its shapes, but no kernel ran
then (`rooftop.models.trace.read.CapturedGraph`). Pure: traces in, a joined trace and what was joined out.

How a replay is matched, per graph launch:
- by graph: its activities (by start, per stream) against every captured graph's launches (in the order the CPU
  issued them), kernel by name (HIP's launch calls name their kernel), memcpy and memset by kind. A captured graph
  with the same sequence is the match. Failing that, one that holds the replayed kernels in order with a few
  launches more (a launch the profiler recorded that put no node in the graph), where every way of fitting them
  gives each kernel the same op; with several streams, the sequences of each stream in the capture's order.
- within the graph, by order and name: the k-th kernel gets the op of the launch it was matched to. The ops are
  copied into the joined trace once per replay (`CpuOp.origin == "capture"`), so calls and W count per replay:
  the launching ops and the ops around them, and all the ops inside one whose W is read from them (a MoE
  layer's top-k and expert weights, `models.opcontext`), though they launched nothing.
- where the launch calls name no kernel (CUDA), a graph matches by the count and kind of its activities alone,
  and the note says so.
- captured graphs that all match but whose ops' shapes differ (two batch sizes with the same kernels) leave the
  launch unjoined: joining one of them would give owners nothing tells apart.
A launch that matches no captured graph keeps its kernels as they were (a graph replay with no op): never a
partial match, so no kernel gets another's op. The report says how much was joined and, for the rest, what did not
match.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import BadInput
from .read import CapturedGraph, CpuOp, Kernel, Trace
from ..units import fmt_percent, fmt_time

PASS_OVER = 0.25  # at most this share of a captured graph's launches (or PASS_OVER_MIN) may have no replayed kernel
PASS_OVER_MIN = 2
AMBIGUOUS = "ambiguous"  # a fit that gives a kernel different ops depending on how it is made
# why a graph launch was not joined (the key kept in --json's not_joined) → in words
NOT_JOINED = {"no_match": "as no captured graph has the same kernels",
              "other_shapes": "as several captures match with other shapes",
              "ambiguous_fit": "as the kernels fit a capture in more than one way"}


class CaptureError(BadInput, ValueError):
    """Nothing to join: a capture trace with no captured graph, or a replay with no graph launch (one line)."""


@dataclass(frozen=True)
class _Graph:
    """A captured graph ready to match: its launches' keys and the signature of each launch's op."""

    source: str  # the capture trace's name
    number: int  # its place among that trace's captured graphs, from 1
    trace: Trace
    graph: CapturedGraph
    keys: tuple[str, ...]
    named: bool  # every kernel launch names its kernel

    @property
    def label(self) -> str:
        return f"{self.source} graph {self.number}"

    def owner(self, i: int) -> tuple:
        """Launch i's op as it counts: name, shapes, dtypes and arguments (None: no op)."""
        oi = self.graph.launches[i].op
        if oi is None:
            return ()
        o = self.trace.ops[oi]
        return o.name, msgspec.json.encode(o.dims), o.types, o.concrete


@dataclass(frozen=True)
class _Match:
    graph: _Graph
    to: tuple[int, ...]  # per replayed activity, the captured launch it is
    passed: int = 0  # captured launches with no replayed activity


@dataclass
class GraphJoin:
    """What the join did: graph launches and replayed kernels joined to a captured op, and what did not match."""

    sources: tuple[str, ...]
    graphs: int  # captured graphs read
    launches: int = 0  # graph launches in the replay
    joined: int = 0
    kernels: int = 0  # replayed kernels (not memcpy / memset)
    kernels_joined: int = 0  # of them, given the op that launched them at capture
    time_s: float = 0.0  # the replayed kernels' time
    time_joined_s: float = 0.0
    passed_over: int = 0  # captured launches with no replayed kernel, fitted around
    by_order: int = 0  # launches matched by the count and kind of activities only (the capture names no kernel)
    failed: dict[str, list[str]] = field(default_factory=dict)  # why (NOT_JOINED) → a line per launch not joined
    failed_kernels: int = 0
    failed_time_s: float = 0.0

    @property
    def share(self) -> float | None:
        """The share of the replayed kernels' time that got an op from the capture."""
        return min(1.0, self.time_joined_s / self.time_s) if self.time_s > 0 else None  # sums in another order

    def to_dict(self) -> dict[str, Any]:
        return {"captures": list(self.sources), "graphs": self.graphs, "launches": self.launches,
                "joined": self.joined, "kernels": self.kernels, "kernels_joined": self.kernels_joined,
                "time_s": self.time_s, "time_joined_s": self.time_joined_s, "share": self.share,
                "passed_over": self.passed_over, "by_order": self.by_order,
                "not_joined": {why: len(v) for why, v in self.failed.items()}}

    def lines(self) -> list[str]:
        """The join in a few lines for the report's notes: how much, how, and what did not match."""
        files = ", ".join(self.sources)
        out = [f"graph capture ({files}): {self.joined} of {self.launches} graph launch"
               f"{'es' if self.launches != 1 else ''} joined to {'its' if self.launches == 1 else 'their'} "
               f"capture; {self.kernels_joined:,} of {self.kernels:,} replayed kernels ({fmt_percent(self.share)} "
               "of their time) have the op that launched them" + (", shown as (graph) rows" if self.kernels_joined
                                                                   else "")]
        if self.passed_over:
            out.append(f"{self.passed_over:,} captured launch{'es' if self.passed_over != 1 else ''} had no "
                       "replayed kernel and were fitted around (each kernel's op is the same whichever way)")
        if self.by_order:
            out.append(f"{self.by_order} graph launch{'es' if self.by_order != 1 else ''} matched by the count and "
                       "kind of their activities only: the capture's launch calls name no kernel (CUDA records "
                       "the name only on the kernel that runs)")
        for why, lines in self.failed.items():
            n = len(lines)
            more = f" (and {n - 1} more)" if n > 1 else ""
            out.append(f"{n} graph launch{'es' if n != 1 else ''} not joined, {NOT_JOINED[why]}: {lines[0]}{more}; "
                       "their kernels stay a graph replay with no op")
        return out


def replay_key(k: Kernel) -> str:
    """What a replayed activity is matched by: its kernel's name, or its kind (a memset may run as a fill kernel)."""
    if k.cat != "kernel":
        return f"({k.cat})"
    return "(memset)" if "fillBuffer" in k.name else k.name


def _graphs(captures: Sequence[tuple[str, Trace]]) -> list[_Graph]:
    out: list[_Graph] = []
    for source, trace in captures:
        if not trace.captured:
            raise CaptureError(f"{source}: no graph capture in this trace (no launches between a stream's "
                               "BeginCapture and EndCapture): give the trace written while the graphs were captured")
        for n, g in enumerate(trace.captured, start=1):
            keys = tuple(x.name if x.cat == "kernel" else f"({x.cat})" for x in g.launches)
            named = all(x.name for x in g.launches if x.cat == "kernel")
            out.append(_Graph(source, n, trace, g, keys, named))
    return out


def _fit(keys: Sequence[str], g: _Graph) -> _Match | str | None:
    """The replayed keys as a subsequence of the graph's launches, where every fit gives each kernel the same op
    (AMBIGUOUS where not; None where they do not fit): the earliest fit and the latest bound every other, so a
    kernel whose launches between them all share one op has that op in any fit."""
    cap = g.keys
    extra = len(cap) - len(keys)
    if extra < 0 or extra > max(PASS_OVER_MIN, PASS_OVER * len(cap)):
        return None
    first: list[int] = []
    c = 0
    for k in keys:
        while c < len(cap) and cap[c] != k:
            c += 1
        if c == len(cap):
            return None
        first.append(c)
        c += 1
    last = [0] * len(keys)
    c = len(cap) - 1
    for j in range(len(keys) - 1, -1, -1):
        while cap[c] != keys[j]:
            c -= 1
        last[j] = c
        c -= 1
    for j, (lo, hi) in enumerate(zip(first, last)):
        if lo != hi and any(cap[c] == keys[j] and g.owner(c) != g.owner(lo) for c in range(lo + 1, hi + 1)):
            return AMBIGUOUS
    return _Match(g, tuple(first), extra)


def _streams(keys: Sequence[str], streams: Sequence[Any], g: _Graph) -> _Match | None:
    """Kernels on several streams against the captured launches (one order): each launch is the next kernel of
    a stream whose next kernel has its name (of two, the one that goes on matching longer). Every launch and every
    kernel matched once, or None."""
    if len(g.keys) != len(keys):
        return None
    queues: dict[Any, deque[int]] = {}
    for j, s in enumerate(streams):
        queues.setdefault(s, deque()).append(j)
    to = [-1] * len(keys)
    for c, key in enumerate(g.keys):
        heads = [s for s, q in queues.items() if q and keys[q[0]] == key]
        if not heads:
            return None
        s = heads[0] if len(heads) == 1 else max(heads, key=lambda s: _run(keys, queues[s], g.keys, c))
        to[queues[s].popleft()] = c
    return _Match(g, tuple(to))


def _run(keys: Sequence[str], queue: deque[int], cap: Sequence[str], c: int) -> int:
    n = 0
    while n < len(queue) and c + n < len(cap) and keys[queue[n]] == cap[c + n]:
        n += 1
    return n


def _why_not(keys: Sequence[str], graphs: Sequence[_Graph]) -> str:
    """Where the replayed sequence parts from the captured graph most like it, in words."""
    def common(g: _Graph) -> int:
        n = 0
        while n < min(len(keys), len(g.keys)) and keys[n] == g.keys[n]:
            n += 1
        return n

    best = max(graphs, key=lambda g: (common(g), -abs(len(g.keys) - len(keys))))
    n = common(best)
    head = f"{len(keys)} activities; the closest capture, {best.label}, has {len(best.keys)} launches"
    if n == min(len(keys), len(best.keys)):
        return f"{head}, the same for the first {n}"
    return (f"{head} and parts from it at activity {n + 1}: the replay ran {_short(keys[n])}, the capture launched "
            f"{_short(best.keys[n])}")


def _short(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "…"


def _choose(found: Sequence[_Match]) -> tuple[_Match | None, str]:
    """The match to use, or None and why: matches that give the kernels different ops are ambiguous."""
    fewest = min(m.passed for m in found)
    found = [m for m in found if m.passed == fewest]
    owners = {tuple(m.graph.owner(c) for c in m.to) for m in found}
    if len(owners) == 1:
        return found[0], ""
    names = ", ".join(m.graph.label for m in found[:3]) + (", …" if len(found) > 3 else "")
    return None, (f"{len(found)} captured graphs ({names}) have its kernels with different shapes; give only the "
                  "capture of the batch size that ran")


class _Matcher:
    """Each graph launch's activities matched against the captured graphs, once per distinct sequence."""

    def __init__(self, graphs: Sequence[_Graph]) -> None:
        self.graphs = graphs
        self.exact: dict[tuple[str, ...], list[_Graph]] = {}
        for g in graphs:
            if g.named:
                self.exact.setdefault(g.keys, []).append(g)
        self.memo: dict[tuple, tuple[_Match | None, str, str]] = {}

    def match(self, acts: Sequence[Kernel]) -> tuple[_Match | None, str, str]:
        """(the match, '', '') or (None, why it failed (NOT_JOINED), the line that says how)."""
        keys = tuple(replay_key(k) for k in acts)
        streams = tuple(k.stream for k in acts)
        several = len(set(streams)) > 1
        memo_key = (keys, streams if several else ())
        hit = self.memo.get(memo_key)
        if hit is None:
            hit = self.memo[memo_key] = self._match(keys, streams, several)
        return hit

    def _match(self, keys: tuple[str, ...], streams: tuple, several: bool) -> tuple[_Match | None, str, str]:
        m: _Match | str | None  # a match by streams, then a fit (AMBIGUOUS, or None)
        named = [g for g in self.graphs if g.named]
        found = [_Match(g, tuple(range(len(keys)))) for g in self.exact.get(keys, ())]
        if not found and several:
            found = [m for g in named if (m := _streams(keys, streams, g)) is not None]
        unsure: list[_Graph] = []
        if not found and not several:
            for g in named:
                m = _fit(keys, g)
                if isinstance(m, _Match):
                    found.append(m)
                elif m == AMBIGUOUS:
                    unsure.append(g)
        if not found and unsure:
            return None, "ambiguous_fit", (
                f"{len(keys)} activities fit {unsure[0].label} ({len(unsure[0].keys)} launches) with kernels left "
                "over, and which launch each kernel is would change its op")
        if not found:
            kinds = tuple(k if k.startswith("(") else "kernel" for k in keys)
            found = [_Match(g, tuple(range(len(keys)))) for g in self.graphs if not g.named
                     and tuple(k if k.startswith("(") else "kernel" for k in g.keys) == kinds]
        if not found:
            return None, "no_match", _why_not(keys, self.graphs)
        chosen, why = _choose(found)
        if chosen is None:
            return None, "other_shapes", why
        return chosen, "", ""


def _launches(trace: Trace) -> list[list[int]]:
    """The replay's graph launches: the indices of each one's activities, by start; launches in order."""
    by: dict[Any, list[int]] = {}
    for i in sorted(trace.graph_kernels):
        by.setdefault(trace.kernels[i].correlation, []).append(i)
    return sorted(by.values(), key=lambda ix: trace.kernels[ix[0]].ts)


def _template(g: _Graph, whole_subtree: Callable[[str], bool]) -> tuple[list[int], dict[int, int]]:
    """The capture trace's ops a graph's launches need (the launching ops and the ops around them, parents first;
    the whole subtree of an op whose W is read from the ops inside it, as a MoE layer's experts are), and each
    one's place in that list."""
    ops = g.trace.ops
    need: set[int] = set()
    for x in g.graph.launches:
        oi = x.op
        while oi is not None and oi not in need:
            need.add(oi)
            oi = ops[oi].parent
    inside = [oi for oi in need if whole_subtree(ops[oi].name)]
    while inside:
        oi = inside.pop()
        need.add(oi)
        inside.extend(c for c in ops[oi].children if c not in need)
    order = sorted(need)  # the reader keeps a parent before its children
    return order, {oi: n for n, oi in enumerate(order)}


def _copies(g: _Graph, order: Sequence[int], place: dict[int, int], base: int, at: float) -> list[CpuOp]:
    """The graph's ops for one replay: indices from `base`, at the replay's launch time `at` (no CPU time of
    their own: the CPU ran them at capture), origin "capture"."""
    ops = g.trace.ops
    out = []
    for oi in order:
        o = ops[oi]
        parent = base + place[o.parent] if o.parent in place else None
        kids = tuple(base + place[c] for c in o.children if c in place)
        out.append(CpuOp(o.name, at, 0.0, o.tid, None, o.dims, o.types, o.concrete, parent, kids, 0.0, "capture"))
    return out


def join_captures(replay: Trace, captures: Sequence[tuple[str, Trace]], *,
                  whole_subtree: Callable[[str], bool]) -> tuple[Trace, GraphJoin]:
    """The replay with each graph-replayed kernel linked to the op that launched it at capture (its ops appended,
    origin "capture"; the join's lines lead its notes, its figures in `graph_join`), and what was joined.
    `whole_subtree(name)` says which ops are copied with every op inside them, not only the ones that launched
    kernels: those whose W is read from the ops inside (a MoE layer's experts), which the op-cost room knows
    (`rooftop.models.program.opcontext.reads_inside`); reading a trace knows no op's cost.
    CaptureError when there is nothing to join."""
    graphs = _graphs(captures)
    launches = _launches(replay)
    if not launches:
        raise CaptureError("the trace has no graph launch (cudaGraphLaunch / hipGraphLaunch): there is no graph "
                           "replay to join a capture to")
    report = GraphJoin(tuple(s for s, _ in captures), len(graphs), launches=len(launches))
    matcher = _Matcher(graphs)
    templates: dict[int, tuple[list[int], dict[int, int]]] = {}
    links = list(replay.kernel_op)
    added: list[CpuOp] = []
    kernels = replay.kernels
    for ix in launches:
        acts = [kernels[i] for i in ix]
        mine = [k for k in acts if k.cat == "kernel"]
        t = sum(k.dur for k in mine)
        report.kernels += len(mine)
        report.time_s += t
        m, why, line = matcher.match(acts)
        if m is None:
            report.failed.setdefault(why, []).append(f"the one at {fmt_time(acts[0].ts)} ({line})")
            report.failed_kernels += len(mine)
            report.failed_time_s += t
            continue
        report.joined += 1
        report.passed_over += m.passed
        report.by_order += not m.graph.named
        tpl = templates.get(id(m.graph))
        if tpl is None:
            tpl = templates[id(m.graph)] = _template(m.graph, whole_subtree)
        order, place = tpl
        base = len(replay.ops) + len(added)
        at = acts[0].launch_ts if acts[0].launch_ts is not None else acts[0].ts
        added += _copies(m.graph, order, place, base, at)
        for i, c in zip(ix, m.to):
            oi = m.graph.graph.launches[c].op
            if oi is None:
                continue
            links[i] = base + place[oi]
            if kernels[i].cat == "kernel":
                report.kernels_joined += 1
                report.time_joined_s += kernels[i].dur
    joined = dataclasses.replace(replay, ops=replay.ops + tuple(added), kernel_op=tuple(links),
                                 warnings=(*report.lines(), *replay.warnings), graph_join=report.to_dict())
    return joined, report
