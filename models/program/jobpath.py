"""A distributed job's critical path: each collective joined across its ranks, the last rank to arrive setting its
end, from the rank whose steps end last.

A job is read one rank at a time so that its size does not bound memory; the path needs every rank's trace at once
(their collectives are one graph). So the ranks' traces are held for it only up to PATH_RANKS ranks and PATH_EVENTS
events in all; above that only the lowest rank's is kept, and its own path (its collectives not joined to its
peers') is given, said so in one line.

Pure: traces and workloads in (rooftop.models.program.critpath does the graph and the path).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .critpath import CriticalPath, WindowError, critical_path, peer_windows, why_no_graph, windows_of
from .depgraph import window_ends_of
from ..trace.read import Trace
from .workload import Workload

PATH_RANKS = 8  # the most ranks' traces held at once for the job's path
PATH_EVENTS = 4_000_000  # the most events (ops, runtime calls, device activities) they may hold in all


def trace_events(t: Trace) -> int:
    """The events a trace holds, as the path's limit counts them: its ops, runtime calls and device activities."""
    return len(t.ops) + len(t.calls.ts) + len(t.kernels)


@dataclass(frozen=True)
class Joined:
    """Whose path a job's is and which ranks it joined: `rank`'s steps, its collectives joined to each of `ranks`
    (itself among them; () when it stands alone); `alone`: why it stands alone ("" when joined)."""

    rank: int
    ranks: tuple[int, ...]
    alone: str = ""


@dataclass(frozen=True)
class RankTrace:
    rank: int
    trace: Trace
    work: Workload


class HeldRanks:
    """The ranks' traces (and workloads) held for the job's path as they are read: every one while they are within
    `ranks` ranks and `events` events in all; past that, the lowest rank's alone (at most two traces alive: it and
    the one being read)."""

    def __init__(self, ranks: int | None = None, events: int | None = None) -> None:
        self.max_ranks = PATH_RANKS if ranks is None else ranks
        self.max_events = PATH_EVENTS if events is None else events
        self.held: list[RankTrace] = []
        self.events = 0
        self.read = 0  # ranks offered, all told
        self.over = False

    def add(self, rank: int, trace: Trace, work: Workload) -> None:
        self.read += 1
        n = trace_events(trace)
        self.events += n
        if not self.over and (self.read > self.max_ranks or self.events > self.max_events):
            self.over = True
            self.held = [min(self.held, key=lambda h: h.rank)] if self.held else []
        if not self.over:
            self.held.append(RankTrace(rank, trace, work))
        elif not self.held or rank < self.held[0].rank:
            self.held = [RankTrace(rank, trace, work)]

    def of(self, ranks: set[int]) -> list[RankTrace]:
        """The held ranks among `ranks` (those the job kept), lowest first."""
        return sorted((h for h in self.held if h.rank in ranks), key=lambda h: h.rank)

    def limit_text(self) -> str:
        return f"{self.max_ranks} ranks, {self.max_events:,} events"


def last_to_end(traces: Sequence[Trace], window: str | None = None) -> int:
    """The index of the trace whose windows (traces[0]'s, matched in each by name) end last on the job's clock: the
    latest last point in most windows (ties: the latest ends summed). Read from each trace's windows as the graph
    places its activities, without building the graph (critical_path builds it once, from that rank)."""
    if len(traces) < 2:
        return 0
    _, names, spans = windows_of(traces[0], window)
    origin = traces[0].origin_us
    ends = [window_ends_of(t, spans if r == 0 else peer_windows(t, names, window), (t.origin_us - origin) * 1e-6)
            for r, t in enumerate(traces)]
    last = [max(range(len(traces)), key=lambda r: ends[r][w]) for w in range(len(spans))
            if any(e[w] > float("-inf") for e in ends)]
    return max(range(len(traces)), key=lambda r: (last.count(r), sum(e for e in ends[r] if e > float("-inf"))))


def job_path(ranks: Sequence[RankTrace], window: str | None = None, alone: str = "") -> tuple[CriticalPath, Joined,
                                                                                               Workload]:
    """The job's critical path from the rank whose steps end last, its collectives joined to every other held rank's
    (the last to arrive sets each one's end); with `alone` (why not), or one rank held, the lowest rank's own path.
    Its Joined, and the workload of the rank it follows (its op groups name the path's)."""
    ranks = sorted(ranks, key=lambda h: h.rank)
    low = ranks[0]
    if len(ranks) == 1 and not alone:
        alone = "no other rank's trace was read"
    if alone or why_no_graph(low.trace):  # no graph: the lowest rank's sums, as for one trace
        return critical_path(low.trace, low.work, window), Joined(low.rank, (), alone), low.work
    base = ranks[last_to_end([h.trace for h in ranks], window)]
    try:
        windows_of(base.trace, window)
    except WindowError:  # the rank that ends last has no such annotation: the lowest (which has) leads
        base = low
    others = [h for h in ranks if h is not base]
    cp = critical_path(base.trace, base.work, window, [h.trace for h in others], [h.work for h in others])
    return cp, Joined(base.rank, tuple(h.rank for h in ranks)), base.work
