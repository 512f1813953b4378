"""A distributed job: one small summary per rank, the ranks aligned by their collectives, the straggler.

Pure. A rank's trace is reduced to a `RankSummary` (times, its top op groups,
its collectives) as soon as it is read, so a job of a thousand ranks never
holds more than one trace. Ranks run on hosts whose clocks differ, so they are
aligned by their collectives, not by wall clock: the i-th matching collective
ends at about the same moment on every rank of its group (none can finish
before the slowest has joined), so each rank's clock offset is the median gap
between its collectives' ends and the reference rank's. After that shift, the
spread of one collective's starts is the time the early ranks waited for the
slowest: that part of its kernel time is waiting, the rest is the transfer.
"""

from __future__ import annotations

import bisect
import difflib
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .collectives import (
    CollectiveGroup,
    LinkRoof,
    RankCollective,
    group_collectives,
    is_comm_kernel,
    rank_collectives,
)
from ..trace.commtrace import is_comm_op
from ..trace.read import US, Trace, union_length
from ..units import fmt_time
from .workload import COMM, Workload, owner_tag

TOP_GROUPS = 40  # op groups kept per rank for the straggler's diff
MAX_WORLD = 2**20  # a world size beyond this is no job anyone ran: a damaged or hand-made distributedInfo
# what a rank keeps of each of those groups, so that any rank's op groups can be opened, not only the lowest's
ROW_KEYS = ("time_s", "time_alone_s", "calls", "intensity", "regime", "fraction_of_roof")
STRAGGLER_GROUPS = 3
PER_RANK_SIZES = ("alltoall", "gather", "scatter", "sendrecv")  # collectives whose message differs per rank


@dataclass(frozen=True)
class RankSummary:
    """One rank, reduced: the step split into compute and communication, MFU, its op groups' times, its
    collectives."""

    rank: int
    path: str
    step_s: float  # median profiler step (the span where the trace marks no steps)
    span_s: float
    busy_s: float
    compute_s: float  # union of the non-communication kernels (a CPU trace: its top-level ops outside collectives)
    comm_s: float  # union of the communication kernels, of every library (a CPU backend: its worker threads' ranges)
    comm_exposed_s: float  # communication with no compute running at the same time
    mfu: float | None
    on_device: bool
    groups: Mapping[str, float] = field(default_factory=dict)  # compute op group → time, the largest TOP_GROUPS
    collectives: tuple[RankCollective, ...] = ()
    rows: tuple[Mapping[str, Any], ...] = ()  # those groups as the Profile tab lists them (ROW_KEYS), largest first
    origin_us: float = 0.0  # the trace time (µs) the rank's times count from (rooftop.models.trace.read.Trace.origin_us)
    wall_base_us: float | None = None  # the wall-clock time of its trace clock's zero (Trace.wall_base_us)

    @property
    def idle_s(self) -> float:
        return max(0.0, self.span_s - self.busy_s)

    @property
    def comm_overlapped_s(self) -> float:
        return max(0.0, self.comm_s - self.comm_exposed_s)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "file": self.path, "step_s": self.step_s, "span_s": self.span_s,
                "busy_s": self.busy_s, "idle_s": self.idle_s, "compute_s": self.compute_s, "comm_s": self.comm_s,
                "comm_exposed_s": self.comm_exposed_s, "comm_overlapped_s": self.comm_overlapped_s,
                "mfu": self.mfu, "collectives": len(self.collectives),
                "op_groups": [dict(r) for r in self.rows] or [{"op": k, "time_s": v} for k, v in self.groups.items()]}


def group_label(g: Any) -> str:
    """An op group as the rank table and the critical path name it: who owns its kernels where that is not its op
    (`(before window)`, `(graph)`), op, dtype, shapes: one label per op group."""
    tag = owner_tag(getattr(g, "owner", "op"), getattr(g, "family", ""))
    return " ".join(x for x in (tag, g.op, g.dtype, g.shapes_text) if x)


def exposed(comm: Sequence[tuple[float, float]], compute: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """(communication, compute, communication not overlapped by compute): unions, and comm − |comm ∩ compute|,
    which is |comm ∪ compute| − compute, held within [0, comm] (the unions' sums round in the last digit)."""
    c, k = union_length(comm), union_length(compute)
    both = union_length([*comm, *compute])
    return c, k, min(c, max(0.0, both - k))


def summarize(trace: Trace, work: Workload, rank: int, path: str) -> RankSummary:
    """The rank's summary; the trace can be dropped after this."""
    colls = rank_collectives(trace)
    if trace.on_device:
        comm = [(k.ts, k.end) for k in trace.kernels if is_comm_kernel(k)]
        compute = [(k.ts, k.end) for k in trace.kernels if k.cat == "kernel" and not is_comm_kernel(k)]
    else:
        comm = [(c.start, c.end) for c in colls if c.start is not None and c.end is not None]
        compute = [(o.ts, o.end) for o in trace.ops if o.parent is None and not is_comm_op(o.name)]
    comm_s, compute_s, exposed_s = exposed(comm, compute)
    steps = [e - s for s, e in trace.steps]
    compute_groups = [g for g in work.groups if g.regime != COMM]
    groups = {group_label(g): g.time_s for g in compute_groups[:TOP_GROUPS]}
    rows = tuple({"op": group_label(g), **{k: d[k] for k in ROW_KEYS}}
                 for g, d in ((g, g.to_dict()) for g in compute_groups[:TOP_GROUPS]))
    return RankSummary(rank=rank, path=path, step_s=statistics.median(steps) if steps else trace.span_s,
                       span_s=trace.span_s, busy_s=work.busy_s, compute_s=compute_s, comm_s=comm_s,
                       comm_exposed_s=exposed_s, mfu=work.mfu, on_device=trace.on_device, groups=groups,
                       collectives=tuple(colls), rows=rows, origin_us=trace.origin_us,
                       wall_base_us=trace.wall_base_us)


# -- alignment ---------------------------------------------------------------------------------------------------


def _loose_key(c: RankCollective) -> tuple:
    """A collective's key, its size left out where each rank may send its own (all-to-all, gather, …): an
    all-reduce of another size on another rank is another call, never its counterpart."""
    return c.collective, None if c.collective in PER_RANK_SIZES else c.bytes, c.group, c.via


def _pairs(ref: Sequence[RankCollective], other: Sequence[RankCollective]) -> list[tuple[int, int]]:
    """Matching collectives of two ranks, in order: by (collective, size, group), else with the size left out
    where the ranks' sizes may differ (all-to-all sizes differ per rank)."""
    ri = [i for i, c in enumerate(ref) if c.end is not None]
    oi = [j for j, c in enumerate(other) if c.end is not None]
    for key in (lambda c: c.key, _loose_key):
        sm = difflib.SequenceMatcher(None, [key(ref[i]) for i in ri], [key(other[j]) for j in oi], autojunk=False)
        pairs = [(ri[b.a + n], oi[b.b + n]) for b in sm.get_matching_blocks() for n in range(b.size)]
        if len(pairs) * 2 >= min(len(ri), len(oi)) and pairs:
            return pairs
    return []


def pair_collectives(ref: Sequence[RankCollective], other: Sequence[RankCollective],
                     clock_offset: float | None = None) -> list[tuple[int, int]]:
    """Which of two ranks' collectives are one call, as (ref index, other index) by ref: the same collective,
    process group and library, and size where every rank sends one (`_loose_key`); on the two clocks aligned,
    running at once (neither ended before the other began: no collective ends before its last rank joins) and,
    among those, the nearest by end, each call paired once. The clocks are aligned by the median gap between the
    ends of the calls paired in order (`_pairs`), or by `clock_offset` (seconds to add to `other`'s times to read
    `ref`'s: the traces' own clocks, one job's within its hosts' skew) where that pairs more calls, or as many
    nearer. Order alone pairs the n-th call of a kind on each rank, which a trace that samples or drops calls (or
    an all-to-all whose size differs per rank) mispairs."""
    first = _pairs(ref, other)
    offsets = [statistics.median(ref[i].end - other[j].end for i, j in first)] if first else []  # type: ignore[operator]
    if clock_offset is not None:
        offsets.append(clock_offset)
    best: tuple[int, float] | None = None
    pairs: list[tuple[int, int]] = []
    for off in offsets:
        got, gap = _pair_by_ends(ref, other, off)
        if got and (best is None or (len(got), -gap) > best):
            best, pairs = (len(got), -gap), got
    return pairs


def _pair_by_ends(ref: Sequence[RankCollective], other: Sequence[RankCollective],
                  off: float) -> tuple[list[tuple[int, int]], float]:
    """pair_collectives on clocks `off` apart: the pairs, and their ends' summed gap."""
    by_key: dict[tuple, list[tuple[float, float, int]]] = {}  # key → (end, start, index), by end
    for j, c in enumerate(other):
        if c.start is not None and c.end is not None:
            by_key.setdefault(_loose_key(c), []).append((c.end + off, c.start + off, j))
    longest: dict[tuple, float] = {}
    for key, xs in by_key.items():
        xs.sort()
        longest[key] = max(e - s for e, s, _ in xs)
    cand: list[tuple[float, int, int]] = []
    for i, c in enumerate(ref):
        c_start, c_end = c.start, c.end
        if c_start is None or c_end is None:
            continue
        near = by_key.get(_loose_key(c))
        if not near:
            continue
        most = longest[_loose_key(c)]
        k = bisect.bisect_right(near, (c_start, math.inf, 0))  # the first that ends after c began
        while k < len(near) and near[k][0] - most < c_end:  # … and may begin before c ends
            end, start, j = near[k]
            if start < c_end and c_start < end:
                cand.append((abs(c_end - end), i, j))
            k += 1
    cand.sort()
    used_i: set[int] = set()
    used_j: set[int] = set()
    pairs, gap = [], 0.0
    for d, i, j in cand:
        if i not in used_i and j not in used_j:
            used_i.add(i)
            used_j.add(j)
            pairs.append((i, j))
            gap += d
    return sorted(pairs), gap


@dataclass(frozen=True)
class Alignment:
    """Each rank's clock offset to the reference rank, and each collective's wait for the slowest rank."""

    reference: int | None
    offsets: Mapping[int, float]  # rank → seconds to add to its clock (its trace's, before its times were counted
    # from its first event) to read the reference rank's
    matched: Mapping[int, int]  # rank → collectives matched with the reference's
    waits: Mapping[int, tuple[float | None, ...]]  # rank → per collective: wait for the slowest rank

    def to_dict(self) -> dict[str, Any]:
        return {"reference_rank": self.reference, "by": "collective ends",
                "offsets_s": {str(r): o for r, o in self.offsets.items()},
                "matched": {str(r): n for r, n in self.matched.items()}}


def align(ranks: Sequence[RankSummary]) -> Alignment:
    """Align every rank to the first (lowest) one by its collectives' ends; the waits from the aligned starts."""
    if not ranks:
        return Alignment(None, {}, {}, {})
    ref = ranks[0]
    offsets: dict[int, float] = {ref.rank: 0.0}
    matched: dict[int, int] = {ref.rank: len(ref.collectives)}
    # reference collective index → [(rank, its index, aligned start, aligned end)]
    at: dict[int, list[tuple[int, int, float, float]]] = {}
    for i, c in enumerate(ref.collectives):
        if c.start is not None and c.end is not None:
            at[i] = [(ref.rank, i, c.start, c.end)]
    for r in ranks[1:]:
        pairs = pair_collectives(ref.collectives, r.collectives, (r.origin_us - ref.origin_us) * US)
        matched[r.rank] = len(pairs)
        if not pairs:
            continue
        off = statistics.median(ref.collectives[i].end - r.collectives[j].end for i, j in pairs)  # type: ignore[operator]
        offsets[r.rank] = off + (ref.origin_us - r.origin_us) * US  # µs apart, exact, before the scale
        for i, j in pairs:
            c = r.collectives[j]
            if i in at and c.start is not None and c.end is not None:
                at[i].append((r.rank, j, c.start + off, c.end + off))
    waits: dict[int, list[float | None]] = {r.rank: [None] * len(r.collectives) for r in ranks}
    for entries in at.values():
        if len(entries) < 2 or not _joined(entries):
            continue
        latest = max(e[2] for e in entries)
        for rank, j, s, _ in entries:
            waits[rank][j] = latest - s
    return Alignment(ref.rank, offsets, matched, {r: tuple(w) for r, w in waits.items()})


def _joined(entries: Sequence[tuple[int, int, float, float]]) -> bool:
    """Whether calls paired across ranks can be one collective: none can end before the last rank has joined
    (after the alignment). Calls that cannot be one (a sampled trace's all-to-alls paired in order) have no
    wait to tell, rather than a wait of their whole time."""
    latest = max(e[2] for e in entries)
    return min(e[3] for e in entries) > latest


# -- one job or several ---------------------------------------------------------------------------------------------

WALL_SKEW_S = 10.0  # one job's ranks end a collective together: in wall time within the hosts' clock skew and
# Kineto's base time, which it writes to the whole second


def process_groups(dist: Mapping[str, Any]) -> dict[str, tuple[int | None, tuple[int, ...]]]:
    """A trace's process groups (distributedInfo's pg_config) by name: (size, ranks). Every rank names a group
    as the others do (torch names them in the order all ranks create them), so one name is one set of ranks."""
    out: dict[str, tuple[int | None, tuple[int, ...]]] = {}
    pgs = dist.get("pg_config")
    for pg in pgs if isinstance(pgs, list) else ():
        if not isinstance(pg, Mapping) or pg.get("pg_name") is None:
            continue
        ranks = pg.get("ranks")
        ranks = tuple(ranks) if isinstance(ranks, list) and all(_count(r) for r in ranks) else ()
        size = pg.get("pg_size") if _count(pg.get("pg_size")) else None
        out[str(pg["pg_name"])] = (size, ranks)
    return out


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def group_conflicts(known: Mapping[str, tuple[int | None, tuple[int, ...]]],
                    mine: Mapping[str, tuple[int | None, tuple[int, ...]]]) -> list[tuple[str, str, str]]:
    """The process groups of one name whose size or ranks differ: (name, mine, known), as text."""
    out = []
    for name, (size, ranks) in mine.items():
        if name not in known:
            continue
        k_size, k_ranks = known[name]
        if (size is not None and k_size is not None and size != k_size) or (ranks and k_ranks and ranks != k_ranks):
            out.append((name, _group_text(size, ranks), _group_text(k_size, k_ranks)))
    return out


def _group_text(size: int | None, ranks: tuple[int, ...]) -> str:
    if ranks:
        shown = ", ".join(map(str, ranks[:8])) + (", …" if len(ranks) > 8 else "")
        return f"ranks [{shown}]"
    return f"{size} ranks"


def foreign_ranks(ranks: Sequence[RankSummary], al: Alignment) -> dict[int, str]:
    """The ranks (by rank) that cannot be of the reference rank's job, and why: their collectives in a group
    both used pair with none of the reference's, or their paired collectives ended over WALL_SKEW_S apart in
    wall time (both traces tell it): another run of the program, or other steps of it."""
    if not ranks:
        return {}
    ref = ranks[0]
    out: dict[int, str] = {}
    for r in ranks[1:]:
        shared = {c.group for c in ref.collectives} & {c.group for c in r.collectives}
        mine = [c for c in r.collectives if c.group in shared and c.end is not None]
        theirs = [c for c in ref.collectives if c.group in shared and c.end is not None]
        if mine and theirs and not _pairs(theirs, mine):
            out[r.rank] = (f"its {len(mine)} collectives pair with none of rank {ref.rank}'s {len(theirs)} in the "
                           "process groups both used (by collective, size and order): another job")
            continue
        off = al.offsets.get(r.rank)
        if off is not None and ref.wall_base_us is not None and r.wall_base_us is not None:
            apart = abs((ref.wall_base_us - r.wall_base_us) * US + off)
            if apart > WALL_SKEW_S:
                out[r.rank] = (f"its collectives ended {fmt_time(apart)} apart from rank {ref.rank}'s in wall-clock "
                               "time: another run, or other steps")
    return out


def without(al: Alignment, gone: set[int]) -> Alignment:
    """The alignment less some ranks (each rank's is its own: pairing it with the reference's)."""
    return Alignment(al.reference, {r: o for r, o in al.offsets.items() if r not in gone},
                     {r: n for r, n in al.matched.items() if r not in gone},
                     {r: w for r, w in al.waits.items() if r not in gone})


# -- the straggler -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Straggler:
    """The rank furthest above the median, on compute or step time, and the op groups where it lost time."""

    rank: int
    metric: str  # "compute" or "step"
    value_s: float
    median_s: float
    groups: tuple[tuple[str, float], ...]  # (op group, its time on this rank less the median), largest first

    @property
    def by_s(self) -> float:
        return self.value_s - self.median_s

    @property
    def by_fraction(self) -> float | None:
        return self.by_s / self.median_s if self.median_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "metric": self.metric, "value_s": self.value_s, "median_s": self.median_s,
                "by_s": self.by_s, "by_fraction": self.by_fraction,
                "groups": [{"op": g, "excess_s": d} for g, d in self.groups]}


def straggler(ranks: Sequence[RankSummary]) -> Straggler | None:
    """The rank whose compute or step time is furthest above the median (relative); None for fewer than 2."""
    if len(ranks) < 2:
        return None
    best: tuple[float, RankSummary, str, float, float] | None = None
    for metric in ("compute", "step"):
        vals = [getattr(r, f"{metric}_s") for r in ranks]
        med = statistics.median(vals)
        if med <= 0:
            continue
        for r, v in zip(ranks, vals):
            rel = (v - med) / med
            if best is None or rel > best[0]:
                best = (rel, r, metric, v, med)
    if best is None or best[0] <= 0:
        return None
    _, r, metric, v, med = best
    labels = {k for x in ranks for k in x.groups}
    diff = []
    for k in labels:
        d = r.groups.get(k, 0.0) - statistics.median(x.groups.get(k, 0.0) for x in ranks)
        if d > 0:
            diff.append((k, d))
    diff.sort(key=lambda kd: -kd[1])
    return Straggler(r.rank, metric, v, med, tuple(diff[:STRAGGLER_GROUPS]))


# -- the job -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """The ranks read, aligned; the straggler; the collectives on the communication roofline."""

    ranks: tuple[RankSummary, ...]  # by rank
    world: int | None
    backend: str
    alignment: Alignment
    straggler: Straggler | None
    collectives: tuple[CollectiveGroup, ...]
    problems: tuple[str, ...] = ()  # one line per file left out, and the ranks missing

    @property
    def missing(self) -> str:
        """The ranks of the world with no trace, as ranges (never one entry per rank: a world may be large)."""
        return missing_text({r.rank for r in self.ranks}, self.world) if self.world else ""

    def to_dict(self) -> dict[str, Any]:
        return {"world": self.world, "backend": self.backend, "ranks": [r.to_dict() for r in self.ranks],
                "straggler": self.straggler.to_dict() if self.straggler else None,
                "collectives": [g.to_dict() for g in self.collectives], "alignment": self.alignment.to_dict(),
                "missing_ranks": self.missing, "problems": list(self.problems)}


def missing_ranges(have: set[int], world: int) -> list[tuple[int, int]]:
    """The gaps of 0..world-1 that `have` leaves, as (first, last) pairs: as many as the ranks read, at most."""
    out, nxt = [], 0
    for r in sorted(x for x in have if 0 <= x < world):
        if r > nxt:
            out.append((nxt, r - 1))
        nxt = r + 1
    if nxt < world:
        out.append((nxt, world - 1))
    return out


def missing_text(have: set[int], world: int) -> str:
    """0-3, 7, 9-127: the ranks of 0..world-1 not in `have`, in a line."""
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in missing_ranges(have, world))


def missing_count(have: set[int], world: int) -> int:
    """How many ranks of 0..world-1 are not in `have`."""
    return sum(b - a + 1 for a, b in missing_ranges(have, world))


def build_job(ranks: Sequence[RankSummary], world: int | None, backend: str, roofs: Mapping[str, LinkRoof],
              per_node: int | None = None, link: str = "", problems: Sequence[str] = (),
              alignment: Alignment | None = None, intra: str = "nvlink") -> Job:
    """Align the ranks (unless `alignment` has them aligned), find the straggler and place the collectives of all
    ranks on their links (`intra`: the link between one node's GPUs, nvlink or xgmi)."""
    ordered = tuple(sorted(ranks, key=lambda r: r.rank))
    al = alignment if alignment is not None else align(ordered)
    groups = group_collectives({r.rank: r.collectives for r in ordered}, al.waits, backend, world, roofs,
                               per_node, link, intra)
    return Job(ordered, world, backend, al, straggler(ordered), tuple(groups), tuple(problems))
