"""A rank's collectives from its trace, matched to the kernels that ran them, placed on the communication roofline.

Pure. Each collective the CPU recorded (`rooftop.models.trace.commtrace`) is matched
to the communication kernel(s) launched inside it (the launch falls within the
collective's CPU interval); the kernels' duration is its time. A communication
kernel is one of kernel family "comm" (`rooftop.models.trace.kernelfamily`): NCCL and
RCCL, torch's symmetric memory, vLLM's and SGLang's custom and quick
all-reduce, DeepEP's dispatch and combine. A kernel no recorded collective
launched (DeepEP records none; a graph replays its custom all-reduce) is a
collective of its own, named from its kernel, its size unknown: its time is on
its link, with no fraction of it. On a CPU backend (gloo) the backend's own
range on its worker thread is the time the collective ran. The message S is
elements × element size; algbw = S / t and busbw = algbw × nccl-tests' bus
factor (`rooftop.models.comm`, as `rooftop comm` reports them), so a collective
read from a trace and one measured by `rooftop comm` sit on the same roofline.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dataclasses
import re

from .. import comm
from ..trace.commtrace import LIBRARY, SOURCES, CommCall, collective_in, collective_name, is_comm_op
from ..trace.kernelfamily import kernel_family
from ..links import GPUS_PER_NODE, LINK_LEVELS, link_name
from ..trace.read import Kernel, Trace

NO_WIRE = ("wait", "barrier")  # recorded as collectives, but they move no message
LINKS = LINK_LEVELS
# the libraries that move data only between one node's GPUs, through their peer memory (NVLink, xGMI)
INTRA_NODE = frozenset(("symm_mem", "custom all-reduce", "quick all-reduce", "aiter"))
# a communication kernel's name → the library it is of, tried in order
KERNEL_LIBRARIES = (("cross_device_reduce", "custom all-reduce"), ("quickreduce", "quick all-reduce"),
                    ("quick_all_reduce", "quick all-reduce"), ("multimem", "symm_mem"), ("symm_mem", "symm_mem"),
                    ("one_shot_all_reduce", "symm_mem"), ("two_shot_all_reduce", "symm_mem"), ("mscclpp", "mscclpp"),
                    ("aiter", "aiter"))
NCCL_KERNEL = re.compile(r"nccl(?:dev)?kernel_([a-z]+)")  # ncclDevKernel_AllReduce_…, ncclKernel_SendRecv_…


def is_comm_kernel(k: Kernel) -> bool:
    """A kernel of a communication library (kernel family "comm": NCCL, RCCL, symm_mem, custom all-reduce,
    DeepEP, …)."""
    return k.cat == "kernel" and kernel_family(k.name) == "comm"


def kernel_collective(name: str) -> tuple[str, str, bool]:
    """(collective, library, intra-node) a communication kernel's name says: `ncclDevKernel_AllGather_RING_LL` is
    an all-gather of the backend (library ""), DeepEP's dispatch and combine are all-to-alls, vLLM's
    `cross_device_reduce_1stage` a custom all-reduce (within a node); "collective" where the name says no more."""
    low = name.lower()
    if "deep_ep" in low or "deepep" in low:
        what = "combine" if "combine" in low else "dispatch" if "dispatch" in low else ""
        return "alltoall", f"DeepEP {what}".rstrip(), "intranode" in low
    lib = next((lb for word, lb in KERNEL_LIBRARIES if word in low), "")
    m = NCCL_KERNEL.search(low)
    coll = collective_name(m.group(1)) if m else collective_in(low)
    if coll not in comm.COLLECTIVES and coll not in ("alltoall", "reduce", "gather", "scatter"):
        coll = "allreduce" if lib in INTRA_NODE and "reduce" in low else "collective"
    return coll, lib, lib in INTRA_NODE


def bus_factor(collective: str, world: int) -> float | None:
    """busbw / algbw as nccl-tests defines it, with all-to-all's (n−1)/n and reduce's 1; None where it
    defines none (gather, scatter, waits)."""
    if world < 1:
        return None
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
    bytes: float | None  # S; None where the trace does not say (a kernel no recorded collective launched)
    group_size: int
    group: str  # the process group's name or ranks, as the trace gives them
    cpu_ts: float  # when the CPU issued it (trace clock, s)
    start: float | None  # when it ran: the first kernel's start (or the backend range's); None if never seen
    end: float | None
    time_s: float | None  # its kernels' time (or the backend range's duration)
    kernels: int = 0
    group_ranks: tuple[int, ...] = ()
    elem_bytes: int | None = None
    via: str = ""  # the library that ran it ("symm_mem", "custom all-reduce", "DeepEP dispatch", …); "": the backend
    intra_node: bool = False  # its library moves data only between one node's GPUs

    @property
    def key(self) -> tuple[str, float | None, str, str]:
        return self.collective, self.bytes, self.group, self.via


def pick_source(calls: Sequence[CommCall]) -> list[CommCall]:
    """torch.distributed's calls of the richest writer only (record_param_comms, else the backend's ranges, else
    c10d's ops), so that a collective recorded three ways counts once; a backend range takes the output size of
    the c10d op around it (an all-gather's range records only its input)."""
    for s in SOURCES:
        mine = [c for c in calls if c.source == s]
        if mine:
            return _with_outputs(mine, [c for c in calls if c.source == "c10d"]) if s == "backend" else mine
    return []


def _inside(inner: CommCall, outer: CommCall) -> bool:
    return inner is not outer and inner.pid == outer.pid and inner.tid == outer.tid and \
        outer.ts <= inner.ts and inner.end <= outer.end


def _with_outputs(ranges: list[CommCall], ops: Sequence[CommCall]) -> list[CommCall]:
    """Each backend range with the larger buffer of the c10d op enclosing it (`c10d::_allgather_base_` records the
    gathered output beside the input its range has), and an all-gather's or a reduce-scatter's group size from
    the two where nothing else gives it (the output is the input × the ranks)."""
    if not ops:
        return ranges
    ops = sorted(ops, key=lambda c: c.ts)
    starts = [c.ts for c in ops]
    longest = max(c.dur for c in ops)
    out = []
    for r in ranges:
        j, op = bisect.bisect_right(starts, r.ts) - 1, None
        while j >= 0 and starts[j] >= r.ts - longest:
            if _inside(r, ops[j]) and ops[j].collective == r.collective:
                op = ops[j]
                break
            j -= 1
        if op is not None and op.out_elems and op.out_elems > (r.in_elems or 0):
            size = r.group_size
            if size is None and op.in_elems and r.collective in ("allgather", "reducescatter") and \
                    op.out_elems % op.in_elems == 0 and op.out_elems // op.in_elems > 1:
                size = op.out_elems // op.in_elems
            r = dataclasses.replace(r, in_elems=r.in_elems or op.in_elems, out_elems=op.out_elems, group_size=size)
        out.append(r)
    return out


def comm_calls(calls: Sequence[CommCall]) -> list[CommCall]:
    """The trace's collectives, each once: torch.distributed's (`pick_source`) and the collective libraries' own
    ops, less a library call that wraps another recorded call (`vllm::all_reduce` around the
    `symm_mem::multimem_all_reduce_` or the record_param_comms that ran it), by start."""
    picked = pick_source([c for c in calls if c.source != LIBRARY])
    lib = [c for c in calls if c.source == LIBRARY]
    if lib:
        every = sorted(calls, key=lambda c: (c.ts, -c.dur))
        starts = [c.ts for c in every]

        def wraps(c: CommCall) -> bool:
            j = bisect.bisect_left(starts, c.ts)
            while j < len(every) and starts[j] <= c.end:
                if _inside(every[j], c):
                    return True
                j += 1
            return False

        picked = sorted(picked + [c for c in lib if not wraps(c)], key=lambda c: c.ts)
    return picked


def sized_collective_ops(trace: Trace) -> frozenset[int]:
    """The trace's collective ops (`is_comm_op`) whose message size the trace gives: each overlaps, on its thread
    (or anywhere, for a backend's range on its worker thread), a collective the collectives table reads with its
    size, from its own record or the `nccl:*` range inside it. Those are costed on their link with their size;
    the rest (no size recorded) have their time and no W or Q."""
    sized = [c for c in comm_calls(trace.comms) if c.message_bytes is not None]
    if not sized:
        return frozenset()
    sized.sort(key=lambda c: c.ts)
    starts = [c.ts for c in sized]
    longest = max(c.dur for c in sized)
    out = set()
    for i, o in enumerate(trace.ops):
        if not is_comm_op(o.name):
            continue
        j = bisect.bisect_right(starts, o.end)  # the calls that begin before the op ends …
        while j > 0 and starts[j - 1] >= o.ts - longest:
            c = sized[j - 1]
            if c.end >= o.ts and (c.tid == o.tid or c.source == "backend"):  # … and end after it begins
                out.add(i)
                break
            j -= 1
    return frozenset(out)


def _group_of(c: CommCall | None, dist: Mapping[str, Any]) -> tuple[int, str, tuple[int, ...]]:
    """(group size, group label, ranks): the call's own, else the only process group, else the whole world."""
    if c is not None and c.group_size:
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


def _message(c: CommCall, size: int) -> float | None:
    """S: the larger buffer; an all-gather whose output is not recorded gathers its input from every rank."""
    s = c.message_bytes
    if s is not None and c.collective == "allgather" and c.out_elems is None and size > 1:
        return s * size
    return s


def rank_collectives(trace: Trace) -> list[RankCollective]:
    """Every collective of the trace, in issue order, each with the kernels it launched (GPU) or its backend
    range (CPU backends run the collective inside that range, on their worker thread); a communication kernel
    no recorded collective launched is one of its own, its size unknown."""
    return [c for c, _ in collective_kernels(trace)]


def collective_kernels(trace: Trace) -> list[tuple[RankCollective, tuple[int, ...]]]:
    """rank_collectives, each with the indices (in Trace.kernels, by start) of the kernels that ran it: what a
    collective joined across ranks joins."""
    index = {id(k): i for i, k in enumerate(trace.kernels)}
    return [(c, tuple(sorted(index[id(k)] for k in ks))) for c, ks in _collectives(trace)]


def _collectives(trace: Trace) -> list[tuple[RankCollective, list[Kernel]]]:
    calls = comm_calls(trace.comms)
    kernels = [k for k in trace.kernels if is_comm_kernel(k)]
    if not calls and not kernels:
        return []
    dist = trace.distributed
    on_cpu = not kernels
    matched: list[list[Kernel]] = [[] for _ in calls]
    loose: list[Kernel] = []
    if calls and not on_cpu:
        starts = [c.ts for c in calls]
        longest = max(c.dur for c in calls)
        unlinked = []
        for k in kernels:
            if k.launch_ts is None:
                unlinked.append(k)
                continue
            j = _enclosing_call(calls, starts, longest, k.launch_ts)
            if j is None:
                loose.append(k)
            else:
                matched[j].append(k)
        loose += _match_in_order(calls, matched, unlinked)
    else:
        loose = kernels
    out = []
    start: float | None  # None: never seen (as RankCollective says)
    end: float | None
    t: float | None
    for c, ks in zip(calls, matched):
        size, label, ranks = _group_of(c, dist)
        if ks:
            start, end, t = min(k.ts for k in ks), max(k.end for k in ks), sum(k.dur for k in ks)
        elif on_cpu and c.source == "backend":
            start, end, t = c.ts, c.end, c.dur
        else:
            start = end = t = None
        out.append((RankCollective(c.collective, _message(c, size), size, label, c.ts, start, end, t, len(ks), ranks,
                                   c.elem_bytes, c.library, c.library in INTRA_NODE), ks))
    if loose:
        size, label, ranks = _group_of(None, dist)
        for k in loose:
            coll, lib, intra = kernel_collective(k.name)
            out.append((RankCollective(coll, None, size, label, k.launch_ts if k.launch_ts is not None else k.ts,
                                       k.ts, k.end, k.dur, 1, ranks, None, lib, intra), [k]))
        out.sort(key=lambda c: c[0].cpu_ts)
    return out


def _match_in_order(calls: Sequence[CommCall], matched: list[list[Kernel]], loose: Sequence[Kernel]) -> list[Kernel]:
    """Kernels whose launch the trace does not link: each to the next call without a kernel issued before it
    started (a collective's kernels run in the order they were issued); the kernels left over."""
    free = [j for j, ks in enumerate(matched) if not ks and calls[j].collective not in NO_WIRE]
    i = 0
    left = []
    for k in sorted(loose, key=lambda k: k.ts):
        if i < len(free) and calls[free[i]].ts <= k.ts:
            matched[free[i]].append(k)
            i += 1
        else:
            left.append(k)
    return left


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
            per_node: int | None = None, given: str = "", intra: str = "nvlink", via: str = "",
            intra_node: bool = False) -> tuple[str, str]:
    """(link, why): `given` (--link); a CPU backend's sockets (net); the GPU link (`intra`: nvlink, or xgmi on
    AMD) for a library that moves data only within a node (`intra_node`: symm_mem, custom all-reduce) and when
    the group's ranks share a node (`per_node` ranks each: torchrun's --nproc-per-node, else 8 GPUs); inter-node
    (net) otherwise."""
    if given:
        return given, "as given"
    name = link_name(intra)
    if intra_node:
        return intra, f"{via} moves the data between one node's GPUs, through their peer memory ({name})"
    if backend in ("gloo", "mpi") and not via:
        return "net", f"{backend} moves the data over sockets"
    n = per_node or GPUS_PER_NODE
    assumed = "" if per_node else f" (assuming {GPUS_PER_NODE} GPUs per node; --link says otherwise)"
    if world is not None and world <= n and group_size <= n:
        return intra, f"the job's {world} ranks fit in one node, over {name}{assumed}"
    if ranks and len({r // n for r in ranks}) == 1:
        return intra, f"the group's ranks {ranks[0]}..{ranks[-1]} share a node, over {name}{assumed}"
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
    via: str = ""  # the library that ran it; "": the job's backend

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
            "via": self.via, "link": self.link, "link_why": self.link_why,
            "link_bandwidth": r.bandwidth if r else None, "link_source": r.source if r else "",
            "alpha_s": r.alpha_s if r else None, "expected_s": self.expected_s,
            "fraction_of_link": self.fraction_of_link,
            "wire_bytes": self.wire_bytes, "flops": self.flops,
            "intensity": pt[0] if pt else None, "achieved_flops": pt[1] if pt else None,
        }


def group_collectives(per_rank: Mapping[int, Sequence[RankCollective]], waits: Mapping[int, Sequence[float | None]],
                      backend: str, world: int | None, roofs: Mapping[str, LinkRoof],
                      per_node: int | None = None, link: str = "", intra: str = "nvlink") -> list[CollectiveGroup]:
    """The collectives of every rank grouped by (collective, size, group, library), each on the roof of the link
    it crossed (`intra`: the GPU link, nvlink or xgmi); `waits[rank][i]` is call i's wait for the slowest rank
    (None where it was not aligned). Collectives that move no message (waits, barriers, an empty buffer) are left
    out; one whose size the trace does not give keeps its time, on its link, with no fraction of it. Largest
    total time first."""
    groups: dict[tuple, CollectiveGroup] = {}
    seen: dict[tuple, set[int]] = {}
    for rank, calls in per_rank.items():
        w = waits.get(rank, ())
        for i, c in enumerate(calls):
            if c.collective in NO_WIRE or c.bytes == 0:
                continue
            g = groups.get(c.key)
            if g is None:
                lk, why = link_of(c.group_size, c.group_ranks, backend, world, per_node, link, intra, c.via,
                                  c.intra_node)
                g = groups[c.key] = CollectiveGroup(c.collective, c.bytes, c.group_size, c.group, link=lk,
                                                    link_why=why, roof=roofs.get(lk), group_ranks=c.group_ranks,
                                                    elem_bytes=c.elem_bytes, via=c.via)
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


