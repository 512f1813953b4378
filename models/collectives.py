"""A rank's collectives from its trace, matched to the kernels that ran them, placed on the communication roofline.

Pure. Each collective the CPU recorded (`rooftop.models.commtrace`) is matched
to the NCCL / RCCL kernel(s) launched inside it (the launch falls within the
collective's CPU interval); the kernel's duration is its time. On a CPU
backend (gloo) the backend's own range on its worker thread is the time the
collective ran. The message S is elements × element size; algbw = S / t and
busbw = algbw × nccl-tests' bus factor (`rooftop.models.comm`, as `rooftop
comm` reports them), so a collective read from a trace and one measured by
`rooftop comm` sit on the same roofline.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import comm
from .commtrace import SOURCES, CommCall
from .trace import Kernel, Trace

COMM_KERNEL_WORDS = ("nccl", "rccl")
NO_WIRE = ("wait", "barrier")  # recorded as collectives, but they move no message
GPUS_PER_NODE = 8  # where the trace does not say: the usual GPU server
LINKS = ("nvlink", "pcie", "net")


def is_comm_kernel(k: Kernel) -> bool:
    """A kernel of the collective library (ncclKernel_…, ncclDevKernel_…, rccl…)."""
    n = k.name[:16].lower()
    return k.cat == "kernel" and any(w in n for w in COMM_KERNEL_WORDS)


def bus_factor(collective: str, world: int) -> float | None:
    """busbw / algbw as nccl-tests defines it, with all-to-all's (n−1)/n and reduce's 1; None where it
    defines none (gather, scatter, waits)."""
    if world < 1:
        return None
    if collective == "alltoall":
        return (world - 1) / world
    if collective == "reduce":
        return 1.0
    try:
        return comm.bus_factor(collective, world)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class RankCollective:
    """One collective on one rank: its message, its group, and the time it ran (kernel or backend range)."""

    collective: str
    bytes: float | None
    group_size: int
    group: str  # the process group's name or ranks, as the trace gives them
    cpu_ts: float  # when the CPU issued it (trace clock, s)
    start: float | None  # when it ran: the first kernel's start (or the backend range's); None if never seen
    end: float | None
    time_s: float | None  # its kernels' time (or the backend range's duration)
    kernels: int = 0
    group_ranks: tuple[int, ...] = ()
    elem_bytes: int | None = None

    @property
    def key(self) -> tuple[str, float | None, str]:
        return self.collective, self.bytes, self.group


def pick_source(calls: Sequence[CommCall]) -> list[CommCall]:
    """The richest writer's calls only (record_param_comms, else the backend's ranges, else c10d's ops), so
    that a collective recorded three ways counts once."""
    for s in SOURCES:
        mine = [c for c in calls if c.source == s]
        if mine:
            return mine
    return []


def _group_of(c: CommCall, dist: Mapping[str, Any]) -> tuple[int, str, tuple[int, ...]]:
    """(group size, group label, ranks): the call's own, else the only process group, else the whole world."""
    if c.group_size:
        ranks = c.group_ranks
        label = c.group_name or (f"[{ranks[0]}..{ranks[-1]}]" if ranks else f"{c.group_size} ranks")
        return c.group_size, label, ranks
    pgs = dist.get("pg_config")
    if isinstance(pgs, list) and len(pgs) == 1 and isinstance(pgs[0], Mapping):
        pg = pgs[0]
        ranks = tuple(r for r in pg.get("ranks") or () if isinstance(r, int))
        size = pg.get("pg_size") if isinstance(pg.get("pg_size"), int) else len(ranks)
        if size:
            return size, str(pg.get("pg_name", "0")), ranks
    world = dist.get("world_size")
    if isinstance(world, int) and world > 0:
        return world, "world", ()
    return 1, "?", ()


def rank_collectives(trace: Trace) -> list[RankCollective]:
    """Every collective of the trace, in issue order, each with the kernels it launched (GPU) or its backend
    range (CPU backends run the collective inside that range, on their worker thread)."""
    calls = pick_source(trace.comms)
    if not calls:
        return []
    dist = trace.distributed
    on_cpu = not any(is_comm_kernel(k) for k in trace.kernels)
    matched: list[list[Kernel]] = [[] for _ in calls]
    if not on_cpu:
        starts = [c.ts for c in calls]
        longest = max(c.dur for c in calls)
        for k in trace.kernels:
            if not is_comm_kernel(k) or k.launch_ts is None:
                continue
            j = _enclosing_call(calls, starts, longest, k.launch_ts)
            if j is not None:
                matched[j].append(k)
        _match_in_order(calls, matched, [k for k in trace.kernels if is_comm_kernel(k) and k.launch_ts is None])
    out = []
    for c, ks in zip(calls, matched):
        size, label, ranks = _group_of(c, dist)
        if ks:
            start, end, t = min(k.ts for k in ks), max(k.end for k in ks), sum(k.dur for k in ks)
        elif on_cpu and c.source == "backend":
            start, end, t = c.ts, c.end, c.dur
        else:
            start = end = t = None
        out.append(RankCollective(c.collective, c.message_bytes, size, label, c.ts, start, end, t, len(ks), ranks,
                                  c.elem_bytes))
    return out


def _match_in_order(calls: Sequence[CommCall], matched: list[list[Kernel]], loose: Sequence[Kernel]) -> None:
    """Kernels whose launch the trace does not link: each to the next call without a kernel issued before it
    started (a collective's kernels run in the order they were issued)."""
    free = [j for j, ks in enumerate(matched) if not ks and calls[j].collective not in NO_WIRE]
    i = 0
    for k in sorted(loose, key=lambda k: k.ts):
        if i < len(free) and calls[free[i]].ts <= k.ts:
            matched[free[i]].append(k)
            i += 1


def _enclosing_call(calls: Sequence[CommCall], starts: Sequence[float], longest: float, t: float) -> int | None:
    """The innermost call whose CPU interval holds the launch at `t`."""
    j = bisect.bisect_right(starts, t) - 1
    best = None
    while j >= 0 and starts[j] >= t - longest:
        c = calls[j]
        if c.end >= t and (best is None or c.dur < calls[best].dur):
            best = j
        j -= 1
    return best


# -- the link each group crossed ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkRoof:
    """A link's ceiling (busbw it can carry, bytes/s) and latency floor α, with where each came from."""

    level: str
    bandwidth: float | None
    alpha_s: float | None = None
    source: str = ""  # "datasheet h200-ds", "measured: rooftop comm run 1a2b3c4d", …


def link_of(group_size: int, ranks: Sequence[int], backend: str, world: int | None,
            per_node: int | None = None, given: str = "") -> tuple[str, str]:
    """(link, why): `given` (--link); a CPU backend's sockets (net); else intra-node (nvlink) when the group's
    ranks share a node (`per_node` ranks each: torchrun's --nproc-per-node, else 8 GPUs), inter-node (net)
    otherwise."""
    if given:
        return given, "as given"
    if backend in ("gloo", "mpi"):
        return "net", f"{backend} moves the data over sockets"
    n = per_node or GPUS_PER_NODE
    assumed = "" if per_node else f" (assuming {GPUS_PER_NODE} GPUs per node; --link says otherwise)"
    if world is not None and world <= n and group_size <= n:
        return "nvlink", f"the job's {world} ranks fit in one node{assumed}"
    if ranks and len({r // n for r in ranks}) == 1:
        return "nvlink", f"the group's ranks {ranks[0]}..{ranks[-1]} share a node{assumed}"
    if group_size > n:
        return "net", f"a group of {group_size} ranks spans nodes{assumed}"
    return "net", f"the group's ranks are not known to share a node{assumed}"


# -- across ranks: groups on the roofline ------------------------------------------------------------------------


@dataclass
class CollectiveGroup:
    """All calls of one (collective, message size, process group) over the ranks read, on its link."""

    collective: str
    bytes: float | None
    group_size: int
    group: str
    calls: int = 0  # over all ranks read
    ranks: int = 0
    time_s: float = 0.0  # kernel (or backend range) time, summed over the calls
    timed_calls: int = 0
    wait_s: float = 0.0  # of time_s: waiting for the slowest rank (from the aligned starts)
    waited_calls: int = 0
    link: str = ""
    link_why: str = ""
    roof: LinkRoof | None = None
    group_ranks: tuple[int, ...] = field(default=())
    elem_bytes: int | None = None

    @property
    def mean_s(self) -> float | None:
        return self.time_s / self.timed_calls if self.timed_calls and self.time_s > 0 else None

    @property
    def factor(self) -> float | None:
        return bus_factor(self.collective, self.group_size)

    @property
    def algbw(self) -> float | None:
        """S over the mean time of a call."""
        t = self.mean_s
        return self.bytes / t if t and self.bytes else None

    @property
    def busbw(self) -> float | None:
        a, f = self.algbw, self.factor
        return a * f if a is not None and f is not None else None

    @property
    def own_s(self) -> float:
        """The kernels' own time: their time less the wait for the slowest rank."""
        return max(0.0, self.time_s - self.wait_s)

    @property
    def busbw_own(self) -> float | None:
        """busbw on the kernels' own time (the wait for other ranks taken out)."""
        f = self.factor
        if not self.bytes or f is None or not self.timed_calls or self.own_s <= 0:
            return None
        return self.bytes / (self.own_s / self.timed_calls) * f

    @property
    def fraction_of_link(self) -> float | None:
        b = self.busbw
        if b is None or self.roof is None or not self.roof.bandwidth:
            return None
        return b / self.roof.bandwidth

    @property
    def expected_s(self) -> float | None:
        """The α-β expectation for one call of this size: α + S·factor / B (α = 0 where none was measured)."""
        f = self.factor
        if self.roof is None or not self.roof.bandwidth or f is None or self.bytes is None:
            return None
        return (self.roof.alpha_s or 0.0) + self.bytes * f / self.roof.bandwidth

    @property
    def wire_bytes(self) -> float | None:
        """Q of one call: the bytes each rank puts on its link, S × the bus factor (a ring's traffic)."""
        f = self.factor
        return self.bytes * f if self.bytes and f is not None else None

    @property
    def flops(self) -> float:
        """W of one call: the reduction's additions ((n−1)/n of the elements for all-reduce and reduce-scatter)."""
        if not self.bytes or not self.elem_bytes or self.collective not in ("allreduce", "reducescatter"):
            return 0.0
        return comm.reduce_flops(self.collective, self.group_size, self.bytes / self.elem_bytes)

    def roofline_point(self) -> tuple[float, float] | None:
        """(I, W/t) on the roofline: W / Q and the reduction's FLOP/s. It sits on its link's slope B·I at the
        fraction busbw / B; a collective that adds nothing (all-gather, broadcast) has no such point."""
        q, t = self.wire_bytes, self.mean_s
        if not self.flops or not q or not t:
            return None
        return self.flops / q, self.flops / t

    def to_dict(self) -> dict[str, Any]:
        r = self.roof
        pt = self.roofline_point()
        return {
            "op": self.collective, "bytes": self.bytes, "group_size": self.group_size, "group": self.group,
            "calls": self.calls, "ranks": self.ranks, "time_s": self.time_s, "mean_s": self.mean_s,
            "wait_s": self.wait_s if self.waited_calls else None, "own_s": self.own_s if self.waited_calls else None,
            "algbw": self.algbw, "busbw": self.busbw, "bus_factor": self.factor,
            "busbw_own": self.busbw_own if self.waited_calls else None,
            "link": self.link, "link_why": self.link_why,
            "link_bandwidth": r.bandwidth if r else None, "link_source": r.source if r else "",
            "alpha_s": r.alpha_s if r else None, "expected_s": self.expected_s,
            "fraction_of_link": self.fraction_of_link,
            "wire_bytes": self.wire_bytes, "flops": self.flops,
            "intensity": pt[0] if pt else None, "achieved_flops": pt[1] if pt else None,
        }


def group_collectives(per_rank: Mapping[int, Sequence[RankCollective]], waits: Mapping[int, Sequence[float | None]],
                      backend: str, world: int | None, roofs: Mapping[str, LinkRoof],
                      per_node: int | None = None, link: str = "") -> list[CollectiveGroup]:
    """The collectives of every rank grouped by (collective, size, group), each on the roof of the link it
    crossed; `waits[rank][i]` is call i's wait for the slowest rank (None where it was not aligned). Collectives
    that move no message (waits, barriers) are left out. Largest total time first."""
    groups: dict[tuple, CollectiveGroup] = {}
    seen: dict[tuple, set[int]] = {}
    for rank, calls in per_rank.items():
        w = waits.get(rank, ())
        for i, c in enumerate(calls):
            if c.collective in NO_WIRE or not c.bytes:
                continue
            g = groups.get(c.key)
            if g is None:
                lk, why = link_of(c.group_size, c.group_ranks, backend, world, per_node, link)
                g = groups[c.key] = CollectiveGroup(c.collective, c.bytes, c.group_size, c.group, link=lk,
                                                    link_why=why, roof=roofs.get(lk), group_ranks=c.group_ranks,
                                                    elem_bytes=c.elem_bytes)
            seen.setdefault(c.key, set()).add(rank)
            g.calls += 1
            if c.time_s is not None:
                g.time_s += c.time_s
                g.timed_calls += 1
                wi = w[i] if i < len(w) else None
                if wi is not None:
                    g.wait_s += min(wi, c.time_s)
                    g.waited_calls += 1
    for k, g in groups.items():
        g.ranks = len(seen[k])
    return sorted(groups.values(), key=lambda g: -g.time_s)


