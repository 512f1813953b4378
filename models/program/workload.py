"""A profiled program on the roofline: each op's W and Q from its shapes, grouped, against a device's roofs.

W and Q are estimates: rooftop's own op models (`models.ops`) applied to the
shapes and dtypes the profiler recorded, counted as everywhere else in rooftop
(each array read or written once, an FMA is 2 FLOP). Ops without a model keep
their time with W and Q unknown (regime "W unknown", no bound). Time is
measured: a kernel's duration on a GPU trace, an op's own (self) time on a CPU
trace. The step split (kernel time vs the gaps between kernels) is measured
too; only W and Q are modelled.

Where the trace carries the GPU's counters (CUPTI `cuda_profiler_range`
events, `rooftop.models.counters` says how they count W and Q), each op group
and top kernel also has its W and Q as measured, beside the model's. A trace
of ranges alone (the range profiler records no kernel events) has them as its
kernels, with the profiler's times: an even split of its window, not measured,
so no fraction of a roof, MFU or speed-up is read from them.

Every kernel has an owner (OWNERS): the op that launched it, else a user
annotation around its launch, else, for kernels launched before the window, its
twin's op in the first step (models.spillover); what is left is grouped by its
kernel family, time only. The coverage says how much of the kernel time each
kind owns and how much has a W and Q model. MFU and bandwidth utilisation leave
out the op groups a wrong count puts far above their roof, and never pass the
busy fraction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import msgspec

from .. import roofline
from ..calibrate import ABOVE_ROOF
from .collectives import sized_collective_ops
from ..trace.commtrace import is_comm_op
from ..counters import Counted, TraceCounters
from ..trace.kernelfamily import TF32, fp32_math, kernel_family
from ..links import link_on
from ..paths import LEVELS, matmul_ladder, matmul_path
from .opcontext import OpContext, needs_context
from ..profile import Ceiling, DeviceProfile, NoRoof
from .shapecost import NO_MODEL, OpCost, cost_op, element_from_kernel, op_dtype
from ..trace.spillover import twins
from ..trace.launchqueue import LaunchQueue, launch_queue
from ..trace.timeline import IdleCause, StepSplit, idle_causes, step_splits, sweep
from ..trace.read import CpuOp, Trace, paused_gc
from ..units import fmt_percent

# who owns a group's kernels, in the order a kernel's owner is looked for: the op that launched it, the op that
# launched it when its graph was captured, the annotation enclosing its launch, its kernel family by name; and
# kernels that ran in the window but were launched before it (no launch event to own them)
OWNERS = ("op", "graph", "annotation", "family", "before window")
OWNER_OF = {"op": "op", "capture": "graph", "annotation": "annotation"}  # CpuOp.origin → its groups' owner
OWNER_TAGS = {"graph": "(graph)", "before window": "(before window)"}  # what a label says first of such an owner
MEASURED, RANGES = "measured", "counter ranges"  # what a GPU trace's kernel times are (Workload.kernel_times)
FAMILY_MODEL = "kernel family"  # a group of kernels no op owns, by their family: time only
ANNOTATION_MODEL = "annotation"  # kernels a user range owns: time only
# the models that give no W and Q of their own: such a group keeps its measured time in "every op at its roof"
NOT_MODELLED = NO_MODEL | frozenset(("unattributed", "none", ANNOTATION_MODEL, FAMILY_MODEL))
W_UNKNOWN = "W unknown"  # the regime of a group with no W model: never memory- or compute-bound
WRONG_COUNT = 1.5  # an op group this far above its roof has a wrong W or Q: it stays out of MFU and bandwidth
# the rows of kernels no op owns, by why: launched before the window, a graph's replay, no op around the launch
LOOSE_LABEL = {"before window": "(before window)", "graph": "(graph)", "no op": "(no op)"}
TOP_KERNELS = 10
COMM = "comm"  # the regime of communication: its roof is a link's (the job's collectives table), never DRAM's
# a collective's W and Q are its link's (the collectives table has them, with its size and group), not DRAM traffic
COMM_COST = OpCost(0.0, 0.0, "", "collective", "communication: its bytes cross a link, not DRAM; the collectives "
                   "table places it on its link's roof")
# a memcpy's direction → the level whose slope it runs against (host copies cross the host link)
TRANSFER_LEVEL = {"HtoD": "pcie", "DtoH": "pcie", "HtoH": "pcie", "HtoA": "pcie", "AtoH": "pcie",
                  "DtoD": "dram", "PtoP": "nvlink"}


# -- grouping -------------------------------------------------------------------


class Rates:
    """W / t and Q / t of something with flops, bytes and time_s (an op group, a kernel)."""

    flops: float
    bytes: float
    time_s: float

    @property
    def achieved_flops(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0

    @property
    def achieved_bandwidth(self) -> float:
        return self.bytes / self.time_s if self.time_s > 0 else 0.0


def owner_tag(owner: str, family: str) -> str:
    """What an op group's label says first of who owns its kernels ('' for an op's own, and for a family row, whose
    name says it already): two groups of one op and shapes, one an op's and one its twins' launched before the
    window, read apart."""
    return "" if family else OWNER_TAGS.get(owner, "")


@dataclass
class OpGroup(Rates):
    """All calls of one op with the same input shapes and dtype: their time, W and Q, on the roofline."""

    op: str
    shapes: list  # Input Dims as recorded
    dtype: str
    model: str
    path: str
    counting: str
    shape: Mapping[str, int] = field(default_factory=dict)  # the model's dimensions, as in OpCost
    calls: int = 0
    time_s: float = 0.0
    flops: float = 0.0
    bytes: float = 0.0
    kernels: int = 0
    alone_s: float = 0.0  # the part of time_s when nothing else ran on the device: its share of the span
    comm_kernels: int = 0  # of its kernels, those of a communication library (kernel family "comm")
    owner: str = "op"  # who owns its kernels (OWNERS): the op that launched them, or what stands in for it
    measured_flops: float | None = None  # W as the GPU's counters counted it, where the trace has them for each kernel
    measured_bytes: float | None = None  # Q (DRAM bytes read and written) as they counted it
    timed: bool = True  # False: its time is the range profiler's split of its window, not its kernels' time
    family: str = ""  # a group of kernels no op owns: their kernel family (models.kernelfamily)
    sized: int = 0  # a collective's calls whose message size the trace gives (costed on their link with it)
    # against the device, set by place():
    bound_s: float | None = None
    regime: str = ""
    peak: float | None = None
    bandwidth: float | None = None
    key: tuple = ()  # its key among the groups (what Workload.kernel_group names); () where it was read back

    @property
    def intensity(self) -> float | None:
        if self.bytes > 0:
            return self.flops / self.bytes
        return None if self.flops == 0 else math.inf

    @property
    def fraction_of_roof(self) -> float | None:
        """bound / time: 1 at the roof, small far below it (= achieved / attainable where W > 0)."""
        if self.bound_s is None or self.time_s <= 0 or self.bound_s <= 0 or not self.timed:
            return None
        return self.bound_s / self.time_s

    @property
    def measured_intensity(self) -> float | None:
        """I from the counters' W and Q, where both were counted."""
        return measured_intensity(self.measured_flops, self.measured_bytes)

    @property
    def modelled(self) -> bool:
        """Its W and Q come from an op model: an op (the op that launched it at capture, or its twin's op for a
        kernel launched before the window) whose model counts them, not the tensors' sizes, an uncosted record, an
        annotation or a kernel family. A collective's cost is its link's: it is modelled where the trace gives the
        size of each of its calls (the collectives table places it on its link with it), not where it does not."""
        if self.owner not in ("op", "graph", "before window") or self.model in NOT_MODELLED:
            return False
        return self.model != COMM_COST.model or 0 < self.calls <= self.sized

    @property
    def shapes_text(self) -> str:
        parts = []
        for d in self.shapes:
            if isinstance(d, list) and d and all(isinstance(x, int) for x in d):
                parts.append("×".join(str(x) for x in d))
            elif isinstance(d, list) and d and all(isinstance(x, list) for x in d):
                parts.append("[" + ", ".join("×".join(str(x) for x in m) for m in d) + "]")
        return " · ".join(parts)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], flops: float | None = None, nbytes: float | None = None) -> OpGroup:
        """An op group back from `to_dict` (a --json row, or the record the store keeps): the one reader of it.

        `flops` and `nbytes` stand for the record's totals where the reader keeps them elsewhere (the store keeps
        each group's W and Q per call, in its sample). Raises ValueError on a record `to_dict` could not have
        written (an edited import)."""
        try:
            calls = int(d.get("calls") or 0)
            bound = d.get("bound_s")
            return cls(
                op=str(d.get("op", "?")), shapes=list(d.get("shapes") or []), dtype=str(d.get("dtype") or ""),
                model=str(d.get("model") or ""), path=str(d.get("path") or ""), counting=str(d.get("counting") or ""),
                shape={str(k): int(v) for k, v in dict(d.get("shape") or {}).items()}, calls=calls,
                time_s=float(d.get("time_s") or 0.0),
                flops=float(d.get("flops") or 0.0) if flops is None else flops,
                bytes=float(d.get("bytes") or 0.0) if nbytes is None else nbytes, kernels=int(d.get("kernels") or 0),
                bound_s=None if bound is None else float(bound), regime=str(d.get("regime") or ""),
                alone_s=float(d.get("time_alone_s", d.get("time_s")) or 0.0), owner=str(d.get("owner") or "op"),
                **measured_from(d),
                family=str(d.get("family") or ""),
                # a collective kept before its sized calls were: as it was counted then
                sized=int(d["sized"]) if "sized" in d else calls if d.get("modelled") else 0,
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"a stored op group is malformed ({exc})") from None

    def to_dict(self) -> dict[str, Any]:
        i = self.intensity
        return {
            "op": self.op, "shapes": self.shapes, "dtype": self.dtype, "calls": self.calls,
            "kernels": self.kernels, "time_s": self.time_s, "flops": self.flops, "bytes": self.bytes,
            "intensity": i if i is None or math.isfinite(i) else None,
            "regime": self.regime, "bound_s": self.bound_s, "fraction_of_roof": self.fraction_of_roof,
            "achieved_flops": self.achieved_flops if self.timed else None,
            "achieved_bandwidth": self.achieved_bandwidth if self.timed else None,
            "path": self.path, "model": self.model, "counting": self.counting, "estimate": True,
            "shape": dict(self.shape), "time_alone_s": self.alone_s, "owner": self.owner, "family": self.family,
            "modelled": self.modelled, **({"sized": self.sized} if self.model == COMM_COST.model else {}),
            **measured_dict(self.measured_flops, self.measured_bytes, self.timed),
        }


def measured_intensity(flops: float | None, nbytes: float | None) -> float | None:
    """W / Q as counted; None unless both were (and Q > 0)."""
    return flops / nbytes if flops is not None and nbytes else None


def measured_dict(flops: float | None, nbytes: float | None, timed: bool) -> dict[str, Any]:
    """The measured fields of an op group or a kernel in --json and the store: W and Q as the counters counted
    them (null where not counted), their I, and whether its time was measured."""
    return {"measured_flops": flops, "measured_bytes": nbytes, "measured_intensity": measured_intensity(flops, nbytes),
            "time_measured": timed}


def measured_from(d: Mapping[str, Any]) -> dict[str, Any]:
    """measured_dict's fields back as keyword arguments (an op group or kernel kept before them has none)."""
    def opt(k: str) -> float | None:
        v = d.get(k)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{k} = {v!r:.40} is not a count")
        return float(v)

    return {"measured_flops": opt("measured_flops"), "measured_bytes": opt("measured_bytes"),
            "timed": d.get("time_measured") is not False}


@dataclass(frozen=True)
class Workload:
    """A profiled program on one device: op groups, the step split and what each fix would give."""

    groups: tuple[OpGroup, ...]  # by time, largest first
    device: DeviceProfile
    on_device: bool  # a GPU trace (kernel time) or a CPU one (op self time)
    kernels: int
    span_s: float
    busy_s: float
    device_name: str = ""
    notes: tuple[str, ...] = field(default=())
    transfers: tuple[Transfer, ...] = ()  # memcpy / memset rows
    overlap_s: float = 0.0  # time two or more activities ran at once (streams overlapping)
    idle_causes: tuple[IdleCause, ...] = ()
    top_kernels: tuple[TopKernel, ...] = ()
    steps: tuple[StepSplit, ...] = ()
    flags: tuple[Flag, ...] = ()  # faster than a roof: the roof is low (or a model is wrong)
    device_note: str = ""  # how the device was chosen, or that the trace's device has no reference here
    gpus: int = 1  # GPUs one process drove: MFU and bandwidth utilisation are over that many of the roofs
    graph_capture: Mapping[str, Any] = field(default_factory=dict)  # the graph-capture join (GraphJoin.to_dict)
    counted_by: str = ""  # how the trace's counters gave W and Q (counters.rule); "" where it has none
    kernel_times: str = MEASURED  # RANGES: the kernels are counter ranges, timed by the profiler's split
    launch_queue: LaunchQueue | None = None  # per stream, the launches queued ahead of the device; None: no launch
    # per Trace.kernels index, the key of the op group whose time it is (OpGroup.key; None: a memcpy / memset, or a
    # CPU trace's), so the critical path can shrink one group's kernels on the graph (rooftop.models.program.critpath)
    kernel_group: tuple[tuple | None, ...] = ()

    def group_by_key(self) -> dict[tuple, OpGroup]:
        """The op groups by their key (what kernel_group names)."""
        return {g.key: g for g in self.groups if g.key}

    @property
    def idle_s(self) -> float:
        return max(0.0, self.span_s - self.busy_s)

    @property
    def op_time_s(self) -> float:
        return sum(g.time_s for g in self.groups)

    def shares(self) -> dict[str, float]:
        """Each row's share of the span: op groups and transfers by their time alone, the overlap, the idle
        time. They add up to the span (to 100%), never past it."""
        span = self.span_s
        if span <= 0:
            return {}
        out = {"idle": self.idle_s / span, "overlap": self.overlap_s / span}
        out["ops"] = sum(g.alone_s for g in self.groups) / span
        out["transfers"] = sum(t.alone_s for t in self.transfers) / span
        return out

    @property
    def flops(self) -> float:
        return sum(g.flops for g in self.groups)

    @property
    def bytes(self) -> float:
        return sum(g.bytes for g in self.groups)

    @property
    def roof_saves_s(self) -> float:
        """What running every op at its roof takes off the busy time (Amdahl): each group's time alone less its
        share at bound/time, an op already faster than its roof saving nothing (its bound is not its time)."""
        saved = 0.0
        for g in self.groups:
            if g.bound_s is not None and g.time_s > 0 and g.timed and g.modelled:  # no model: no bound to run at
                saved += g.alone_s * max(0.0, 1.0 - g.bound_s / g.time_s)
        return saved

    @property
    def bound_s(self) -> float:
        """The step with both fixes, every op at its roof and no gaps: the busy time less what the roofs save
        (overlapped time, transfers and ops the roofline cannot place kept as they ran). Never above either
        fix alone."""
        return max(0.0, self.busy_s - self.roof_saves_s)

    @property
    def at_roof_s(self) -> float:
        """The step if every op ran at its roof and the gaps stayed."""
        return self.idle_s + self.bound_s

    @property
    def no_gaps_s(self) -> float:
        """The step if the gaps between kernels went (ops as they ran)."""
        return self.busy_s

    @property
    def busy_fraction(self) -> float | None:
        """The share of the span the device worked: neither MFU nor bandwidth utilisation can pass it."""
        return min(1.0, self.busy_s / self.span_s) if self.span_s > 0 else None

    @property
    def left_out(self) -> tuple[OpGroup, ...]:
        """The op groups above their roof by more than WRONG_COUNT: no roof is that far off, their W or Q is
        (a wrong recorded shape, a model counting work the kernels did not do). MFU and bandwidth leave them out."""
        return tuple(g for g in self.groups if (g.fraction_of_roof or 0.0) > WRONG_COUNT)

    def _counted(self) -> list[OpGroup]:
        out = set(map(id, self.left_out))
        return [g for g in self.groups if id(g) not in out]

    def mfu_path_of(self, groups: Sequence[OpGroup]) -> str | None:
        """The matmul path on which `groups` have the most FLOPs (one this device has a roof for)."""
        by: dict[str, float] = {}
        ladder = matmul_ladder(self.device.kind)
        for g in groups:
            path = self.device.path_name(g.path) if g.path else ""  # a group kept under the path's other name
            if path in ladder and path in self.device.peak:
                by[path] = by.get(path, 0.0) + g.flops
        return max(by, key=by.__getitem__) if by else None

    @property
    def mfu_path(self) -> str | None:
        """The matmul path that carries most of the FLOPs (of the groups MFU counts): MFU is read against its roof."""
        return self.mfu_path_of(self._counted())

    def mfu_over(self, groups: Sequence[OpGroup]) -> float | None:
        """The groups' FLOPs over the span, over the peak of their main matmul path (none held back)."""
        p = self.mfu_path_of(groups)
        if p is None or self.span_s <= 0 or self.kernel_times != MEASURED:
            return None
        return sum(g.flops for g in groups) / self.span_s / (self.gpus * self.device.F(p))

    def bandwidth_over(self, groups: Sequence[OpGroup]) -> float | None:
        """The groups' bytes (as counted) over the span, over the DRAM bandwidth (none held back)."""
        if self.span_s <= 0 or "dram" not in self.device.bandwidth or self.kernel_times != MEASURED:
            return None
        return sum(g.bytes for g in groups) / self.span_s / (self.gpus * self.device.B("dram"))

    def _held(self, x: float | None) -> float | None:
        busy = self.busy_fraction
        return x if x is None or busy is None else min(x, busy)

    @property
    def mfu(self) -> float | None:
        """Model FLOPs over the span, over the peak of the main matmul path: the op groups above their roof by more
        than WRONG_COUNT left out, and never above the busy fraction (a device busy 14% of the span cannot have
        used more than 14% of its peak; past it, the roofs are low, and the flags say so)."""
        return self._held(self.mfu_over(self._counted()))

    @property
    def bandwidth_utilisation(self) -> float | None:
        """Bytes moved (as counted) over the span, over the DRAM bandwidth; held as MFU is."""
        return self._held(self.bandwidth_over(self._counted()))

    def headline(self) -> dict[str, Any]:
        """What MFU and bandwidth utilisation leave out and where they were held at the busy fraction, as JSON:
        the figure users read first says what it does not count."""
        counted = self._counted()
        mfu, bw = self.mfu_over(counted), self.bandwidth_over(counted)
        busy = self.busy_fraction
        kernel_s = self.op_time_s
        out = [{"op": g.op, "dtype": g.dtype, "shapes": g.shapes, "time_s": g.time_s,
                "fraction_of_roof": g.fraction_of_roof} for g in self.left_out]
        left_s = sum(g.time_s for g in self.left_out)
        return {"left_out": out, "left_out_s": left_s, "left_out_share": left_s / kernel_s if kernel_s > 0 else None,
                "busy_fraction": busy, "wrong_count_above": WRONG_COUNT,
                "mfu_held": mfu is not None and busy is not None and mfu > busy, "mfu_counted": mfu,
                "bandwidth_held": bw is not None and busy is not None and bw > busy, "bandwidth_counted": bw}

    def coverage(self) -> dict[str, Any]:
        """How much of the kernel time (op time on a CPU trace) has an owner (an op of the trace or of the graph's
        capture, or an annotation), by kind of owner, how much is only grouped by kernel family, and how much has a
        W and Q model: the share of the time the rest of the report can speak for; of it, communication costed on
        its link with its size (`comm_sized`), and apart, communication whose size the trace does not give
        (`comm_unsized`, time only). On a trace of counter ranges,
        whose times are the profiler's split and not measured, the shares are of the kernels (`of`: "kernels")."""
        timed = self.kernel_times == MEASURED

        def weight(g: OpGroup) -> float:
            return g.time_s if timed else float(g.kernels)

        total = self.op_time_s if timed else float(sum(g.kernels for g in self.groups))
        by: dict[str, float] = dict.fromkeys(OWNERS, 0.0)
        modelled = families = comm_sized = comm_unsized = 0.0
        for g in self.groups:
            by[g.owner] = by.get(g.owner, 0.0) + weight(g)
            modelled += weight(g) if g.modelled else 0.0
            families += weight(g) if g.model == FAMILY_MODEL else 0.0
            if g.regime == COMM:  # on its link with its size (modelled), or of a size the trace does not give
                comm_sized += weight(g) if g.modelled else 0.0
                comm_unsized += 0.0 if g.modelled else weight(g)
        share = (lambda x: x / total) if total > 0 else (lambda x: None)
        return {"time_s": self.op_time_s, "of": "kernel time" if timed else "kernels",
                "owned": share(by["op"] + by["graph"] + by["annotation"]),
                "modelled": share(modelled), "by_family": share(families),
                "comm_sized": share(comm_sized), "comm_unsized": share(comm_unsized),
                "by_owner": {k: share(v) for k, v in by.items()}}

    def measured(self) -> tuple[float | None, float | None]:
        """The program's W and Q as counted: the sums over the op groups, where every group with kernels has
        them (a part would read as the whole)."""
        kerneled = [g for g in self.groups if g.kernels]
        if not self.counted_by:
            return None, None
        return every([g.measured_flops for g in kerneled]), every([g.measured_bytes for g in kerneled])

    def summary(self) -> dict[str, Any]:
        timed = self.kernel_times == MEASURED
        mw, mq = self.measured()
        return {
            "device": self.device.id, "trace_device": self.device_name, "on_device": self.on_device,
            "kernels": self.kernels, "gpus": self.gpus, "span_s": self.span_s, "device_busy_s": self.busy_s, "idle_s": self.idle_s,
            "idle_share": self.idle_s / self.span_s if self.span_s > 0 else None,
            "op_time_s": self.op_time_s, "bound_s": self.bound_s if timed else None, "flops": self.flops,
            "bytes": self.bytes, "mfu": self.mfu, "mfu_path": self.mfu_path,
            "bandwidth_utilisation": self.bandwidth_utilisation,
            "busy_fraction": self.busy_fraction, "headline": self.headline(), "coverage": self.coverage(),
            "step_at_roof_s": self.at_roof_s if timed else None, "step_without_gaps_s": self.no_gaps_s if timed else None,
            "speedup_at_roof": self.span_s / self.at_roof_s if self.at_roof_s > 0 and timed else None,
            "speedup_without_gaps": self.span_s / self.no_gaps_s if self.no_gaps_s > 0 and timed else None,
            "largest_share": self.largest_share(),
            "overlap_s": self.overlap_s, "transfer_time_s": sum(t.time_s for t in self.transfers),
            "transfer_bytes": sum(t.bytes for t in self.transfers), "device_note": self.device_note,
            "shares": self.shares(), "kernel_times": self.kernel_times, "counted_by": self.counted_by,
            "measured_flops": mw, "measured_bytes": mq,
            **({"graph_capture": dict(self.graph_capture)} if self.graph_capture else {}),
        }

    def largest_share(self) -> str:
        """What takes most of the span: 'idle' (gaps between kernels / outside ops) or the top op."""
        top = max(self.groups, key=lambda g: g.alone_s, default=None)
        if top is None or self.idle_s >= top.alone_s:
            return "idle"
        return top.op

    def rows(self) -> dict[str, Any]:
        """The rows beside the op groups, as JSON: memcpy / memset, overlap, idle causes, top kernels, steps,
        flags (kept with a stored profile as they are)."""
        span = self.span_s
        return {
            "transfers": [{**t.to_dict(), "share": t.alone_s / span if span > 0 else None} for t in self.transfers],
            "overlap": {"time_s": self.overlap_s, "share": self.overlap_s / span if span > 0 else None},
            "idle_causes": [{**c.to_dict(), "share": c.time_s / span if span > 0 else None}
                            for c in self.idle_causes],
            "top_kernels": [t.to_dict() for t in self.top_kernels],
            "steps": [s.to_dict() for s in self.steps],
            "flags": [f.to_dict() for f in self.flags],
            "launch_queue": self.launch_queue.to_dict() if self.launch_queue is not None else None,
        }

    def to_dict(self) -> dict[str, Any]:
        span = self.span_s
        ops = [{**g.to_dict(), "share": g.alone_s / span if span > 0 else None} for g in self.groups]
        return {"ops": ops, "summary": self.summary(), "notes": list(self.notes), **self.rows()}


def _key(op: CpuOp, element: tuple[str, float] | None = None) -> tuple[str, bytes, str]:
    dtype = op_dtype(op.types) or (element[0] if element and "TensorList" in op.types else "")
    return op.name, msgspec.json.encode(op.dims), dtype


def _launcher_key(op: CpuOp, element: tuple[str, float] | None = None) -> tuple:
    """The group of an op that launched kernels on a GPU trace: by name, shapes and dtype, and by who owns the
    kernels (OWNER_OF its origin), so an op replayed in a graph (joined from its capture) is a row of its own beside
    the same op run eagerly. The one rule for the groups, their counted W and Q, and their twins' rows."""
    return (*_key(op, element), OWNER_OF.get(op.origin, "op"))


def _early_key(op: CpuOp, element: tuple[str, float] | None = None) -> tuple:
    """The row of the kernels launched before the window that are costed as their twin's op `op`."""
    return (*_key(op, element), "before window")


def _loose_row(why: str, family: str) -> tuple:
    """The row of kernels no op owns, by why and by kernel family: its key (name first) and, last, its owner."""
    return (f"{LOOSE_LABEL[why]} {family} kernels", "", "", "before window" if why == "before window" else "family")


def _loose_key(trace: Trace, ki: int, name: str) -> tuple[str, str]:
    """Why no op owns kernel `ki` (launched before the window, replayed by a graph, no op around its launch), and
    its kernel family: the row it is grouped in."""
    why = "before window" if ki in trace.before_window else "graph" if ki in trace.graph_kernels else "no op"
    return why, kernel_family(name)


def _group(groups: dict, key: tuple, cost: OpCost, shapes: list, dtype: str) -> OpGroup:
    g = groups.get(key)
    if g is None:
        g = groups[key] = OpGroup(op=key[0], shapes=shapes, dtype=dtype, model=cost.model, path=cost.path,
                                  counting=cost.counting, shape=dict(cost.shape), key=key)
    return g


STRONG = ("gemm", "conv", "attention", "norm", "softmax")  # models that own the copies and views they call


def _less(cost: OpCost, flops: float, nbytes: float) -> OpCost:
    """An op's own share of its cost: what its model counts beyond `flops` and `nbytes`, the work the ops it
    calls count themselves (never below 0: a child that moved more than the parent's model says keeps it)."""
    if flops <= 0 and nbytes <= 0:
        return cost
    f, b = max(0.0, cost.flops - flops), max(0.0, cost.bytes - nbytes)
    if f == cost.flops and b == cost.bytes:
        return cost
    return dataclasses.replace(cost, flops=f, bytes=b,
                               counting=cost.counting + "; less what the ops it calls count themselves")


def work_ops(trace: Trace, costs: OpCosts) -> list[OpCost | None]:
    """Each op's own work on a CPU trace (None where it owns none), so no W or Q is counted twice or dropped.

    An op's model costs the whole call. An op with a GEMM / attention / norm /
    softmax model owns all of it unless an op inside it has one of those too
    (the innermost wins: aten::linear is dispatch around the aten::addmm that
    does the GEMM; the copy inside addmm that broadcasts the bias is part of the
    GEMM). Any other op owns what its model counts beyond what the ops inside it
    count: aten::relu nothing beyond its clamp_min, aten::nll_loss_backward the
    N values it writes beyond the zero_ that clears grad_input, aten::sum the
    input it reads beyond the fill_ that sets its output.
    """
    n = len(trace.ops)
    strong_below = [False] * n
    total = [(0.0, 0.0)] * n  # W and Q counted in each op's subtree
    own: list[OpCost | None] = [None] * n
    for i in reversed(range(n)):  # children come after parents in the ops' order
        o = trace.ops[i]
        sb = any(strong_below[k] or costs[k].model in STRONG for k in o.children)
        bf = sum(total[k][0] for k in o.children)
        bb = sum(total[k][1] for k in o.children)
        c = costs[i]
        if c.model in STRONG:
            own[i] = None if sb else c
            total[i] = (bf, bb) if sb else (c.flops, c.bytes)
        elif c.model in NO_MODEL:  # W unknown: a leaf is its own group, a composite's ops inside carry its work
            own[i] = None if bf > 0 or bb > 0 or sb else c
            total[i] = (bf, bb)
        else:
            mine = _less(c, bf, bb)
            own[i] = mine if mine.flops > 0 or mine.bytes > 0 or mine is COMM_COST else None  # a collective's time
            total[i] = (bf + mine.flops, bb + mine.bytes)
        strong_below[i] = sb or c.model in STRONG
    return own


def launch_work(trace: Trace, costs: OpCosts, launched: Collection[int]) -> dict[int, OpCost]:
    """Each op that launched device activity on a GPU trace: its own work, its cost less what the launching ops
    inside it count (nll_loss_backward's own kernel writes N values; the fill kernel its zero_ launched clears
    grad_input and is costed as zero_)."""
    ops = trace.ops
    inside: dict[int, list[int]] = {}
    for oi in launched:
        j = ops[oi].parent
        while j is not None and j not in launched:
            j = ops[j].parent
        if j is not None:
            inside.setdefault(j, []).append(oi)
    total: dict[int, tuple[float, float]] = {}
    out: dict[int, OpCost] = {}
    for oi in sorted(launched, reverse=True):  # children come after parents in the ops' order
        kids = inside.get(oi)
        if kids is None:  # most launching ops launch no op that launches: their cost is their own
            mine = out[oi] = costs[oi]
            total[oi] = (mine.flops, mine.bytes)
            continue
        bf, bb = sum(total[k][0] for k in kids), sum(total[k][1] for k in kids)
        mine = out[oi] = _less(costs[oi], bf, bb)
        total[oi] = (bf + mine.flops, bb + mine.bytes)
    return out


def _owner(trace: Trace, own: Sequence[OpCost | None]) -> list[int | None]:
    """Each op's owner: the nearest enclosing-or-self op that owns work and has a strong model, else the
    op itself when it owns work, else None (dispatch, views)."""
    out: list[int | None] = []
    for i, o in enumerate(trace.ops):
        j: int | None = o.parent
        found = None
        while j is not None:
            c = own[j]
            if c is not None and c.model in STRONG:
                found = j
                break
            j = trace.ops[j].parent
        out.append(found if found is not None else (i if own[i] is not None else None))
    return out


ANNOTATION_COST = OpCost(0.0, 0.0, "", ANNOTATION_MODEL, "kernels launched inside a user annotation (a "
                         "record_function range) where no framework op encloses their launch: time only, no W or Q")
EARLY_COUNTING = ("; kernels launched before the window, costed as the op of their twins at the same place in "
                  "the first recorded step (the same shapes assumed)")
LOOSE_COUNTING = {
    "before window": "kernels that ran in the trace's window but were launched before it began (no launch event "
                     "names their op): time only, by kernel family",
    "graph": "kernels a CUDA/HIP graph replayed (one launch, no op of this trace): time only, by kernel family",
    "no op": "kernels whose launch no op of this trace encloses: time only, by kernel family",
}


EARLY = ("ran in the window but were launched before it (queued in the step before the first one recorded, run "
         "behind the sync that opens the window): no launch in the trace names their op")


def owner_notes(early: Mapping[int, list], loose: Mapping[tuple[str, str], list], ranges: Sequence[OpGroup],
                kernel_s: float, first_step: str) -> list[str]:
    """A note per kind of stand-in owner: kernels launched before the window (costed as their twins' ops, or by
    family), graph replays and other kernels with no op (by family, and what would give them ops), annotations:
    how many, their time and share of the kernel time."""
    def head(n: int, t: float) -> str:
        part = f", {fmt_percent(t / kernel_s)} of kernel time" if kernel_s > 0 else ""
        return f"{n} kernel{'s' if n != 1 else ''} ({t * 1e3:.3g} ms{part})"

    out = []
    if early:
        out.append(f"{head(sum(v[0] for v in early.values()), sum(v[1] for v in early.values()))} {EARLY}; they "
                   f"are, kernel for kernel, the tail of {first_step}, so each is costed as the op of its twin there "
                   "(the same shapes assumed), in rows of their own, and counted in no step")
    for why in LOOSE_LABEL:
        mine = {f: v for (w, f), v in loose.items() if w == why}
        if not mine:
            continue
        what = head(sum(v[0] for v in mine.values()), sum(v[1] for v in mine.values()))
        fams = ", ".join(f"{f} {v[1] * 1e3:.3g} ms" for f, v in sorted(mine.items(), key=lambda x: -x[1][1]))
        if why == "before window":
            out.append(f"{what} {EARLY}, so they are grouped by kernel family ({fams}) and counted in no step")
        elif why == "graph":
            out.append(f"{what} are CUDA/HIP graph replays, with no op in this trace: grouped by kernel family "
                       f"({fams}); `--graph-capture CAPTURE`, the trace of the graphs' capture, gives them their ops")
        else:
            out.append(f"{what} have no op of the trace around their launch: grouped by kernel family ({fams})")
    if ranges:
        names = ", ".join(g.op[:40] for g in sorted(ranges, key=lambda g: -g.time_s)[:3])
        out.append(f"{head(sum(g.kernels for g in ranges), sum(g.time_s for g in ranges))} were launched inside user "
                   f"annotations and no framework op ({names}{', …' if len(ranges) > 3 else ''}): the innermost "
                   "annotation owns them, with their time and no W or Q")
    return out


NO_WORK_GROUP = "(dispatch and views)"
NO_WORK = "no work"  # the regime of a group that, by its shapes, computes and moves nothing (a 0-sized conv)


class OpCosts(Protocol):
    """Each op's W and Q by its index in Trace.ops: a list, or `_Costs`, which costs an op when first asked."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> OpCost: ...


class _Costs:
    """Each op's W and Q, computed when first asked for (a GPU trace needs only the ops that launched work); ops
    with the same name, shapes, types and arguments are costed once (a long trace repeats a few hundred distinct
    calls; the reader shares one object among identical shapes, so their ids key the memo). An op its own record
    cannot cost is costed from the ops around it where they say more (`models.opcontext`), call by call."""

    def __init__(self, trace: Trace, elements: Mapping[int, tuple[str, float]]) -> None:
        self.ops, self.elements = trace.ops, elements
        self.done: list[OpCost | None] = [None] * len(trace.ops)
        self.memo: dict[tuple, OpCost] = {}
        self.context = OpContext(trace)

    def __len__(self) -> int:
        return len(self.done)

    def __getitem__(self, i: int) -> OpCost:
        c = self.done[i]
        if c is None:
            o, el = self.ops[i], self.elements.get(i)
            key = (o.name, id(o.dims), id(o.types), id(o.concrete), el)
            c = self.memo.get(key)
            if c is None:
                c = self.memo[key] = COMM_COST if is_comm_op(o.name) else cost_op(o.name, o.dims, o.types, el,
                                                                                    o.concrete)
            if c.model in NO_MODEL and needs_context(o.name):
                c = self.context.cost(i) or c
            self.done[i] = c
        return c


def build_workload(trace: Trace, device: DeviceProfile, device_note: str = "") -> Workload:
    """Group the trace's work by (op, shapes, dtype), cost each group and place it on `device`; on a GPU trace
    also the memcpy / memset rows, the overlap of streams, the idle time by cause, the top kernels, the steps."""
    with paused_gc():
        return _build_workload(trace, device, device_note)


def _build_workload(trace: Trace, device: DeviceProfile, device_note: str) -> Workload:
    """The groups of a GPU trace (`_device_rows`) or of a CPU one (`_host_rows`), placed on `device`."""
    elements: dict[int, tuple[str, float]] = {}
    for k, oi in zip(trace.kernels, trace.kernel_op):
        if oi is not None and oi not in elements and k.cat == "kernel" and "TensorList" in trace.ops[oi].types:
            found = element_from_kernel(k.name)
            if found:
                elements[oi] = found
    costs = _Costs(trace, elements)
    notes: list[str] = list(trace.warnings)
    if trace.on_device:
        rows = _device_rows(trace, costs, elements, device, notes)
    else:
        rows = _host_rows(trace, costs, notes)
    placed = [place(g, device) for g in rows.groups.values() if g.time_s > 0 or g.flops > 0 or g.bytes > 0]
    placed.sort(key=lambda g: -g.time_s)
    for t in rows.top:
        place_kernel(t, device)
    steps = step_splits(trace) if trace.steps and not trace.range_times else []  # ranges: no step was timed
    work = Workload(
        groups=tuple(placed), device=device, on_device=trace.on_device, kernels=trace.kernel_count,
        span_s=trace.span_s, busy_s=rows.busy_s, device_name=trace.device_name, notes=tuple(notes),
        transfers=tuple(rows.transfers), overlap_s=rows.overlap_s,
        idle_causes=tuple(rows.causes), top_kernels=tuple(rows.top),
        steps=tuple(steps), device_note=device_note, gpus=max(1, len(trace.gpus)), graph_capture=trace.graph_join,
        counted_by=trace.counters.rule if trace.counters is not None else "",
        kernel_times=RANGES if trace.range_times else MEASURED, kernel_group=rows.kernel_group,
        launch_queue=launch_queue(trace) if trace.on_device else None,
    )
    flags = roof_flags(work, trace.cpu_threads)
    return dataclasses.replace(work, flags=tuple(flags))


@dataclass
class _Rows:
    """What the grouping of one trace gives the Workload: its op groups by key, and on a GPU trace its memcpy /
    memset rows, idle causes, top kernels and each kernel's group."""

    groups: dict[tuple, OpGroup]
    busy_s: float
    overlap_s: float = 0.0
    transfers: list[Transfer] = field(default_factory=list)  # placed, longest first
    causes: list[IdleCause] = field(default_factory=list)
    top: list[TopKernel] = field(default_factory=list)
    kernel_group: tuple[tuple | None, ...] = ()


@dataclass
class _Owned:
    """A GPU trace's kernels, each counted under whoever owns it: [kernels, time, time alone, communication
    kernels] per op, per op of a twin (launched before the window) and per (why, family) with no op; the memcpy /
    memset rows; per kernel, how it is grouped (the key rule and its op, or None and its loose row)."""

    per_op: dict[int, list] = field(default_factory=dict)
    early: dict[int, list] = field(default_factory=dict)
    loose: dict[tuple[str, str], list] = field(default_factory=dict)
    range_families: dict[int, set[str]] = field(default_factory=dict)  # an annotation → its kernels' families
    moves: dict[tuple[str, str], Transfer] = field(default_factory=dict)
    whose: list[tuple | None] = field(default_factory=list)


def _owned(trace: Trace, alone_s: Sequence[float], twin: Mapping[int, int]) -> _Owned:
    """Each kernel's time counted under its op, its twin's op, or its loose row; memcpy / memset as transfers."""
    got = _Owned(whose=[None] * len(trace.kernels))
    per_op, early, loose, whose = got.per_op, got.early, got.loose, got.whose
    comm_names: dict[str, int] = {}  # kernel name → 1 for a communication library's kernel, else 0
    for ki, (k, oi) in enumerate(zip(trace.kernels, trace.kernel_op)):
        alone = alone_s[ki]
        if k.cat != "kernel":  # memcpy / memset: rows of their own, with their bytes
            key = (k.cat, k.direction)
            t = got.moves.get(key)
            if t is None:
                t = got.moves[key] = Transfer(k.cat, k.direction)
            t.calls += 1
            t.time_s += k.dur
            t.alone_s += alone
            t.bytes += k.bytes or 0.0
            if oi is not None:  # the op is still a call (its W and Q count), with no kernel time
                per_op.setdefault(oi, [0, 0.0, 0.0, 0])
            continue
        is_comm = comm_names.get(k.name)
        if is_comm is None:
            is_comm = comm_names[k.name] = int(kernel_family(k.name) == COMM)
        if oi is None and ki in twin and (twin_op := trace.kernel_op[twin[ki]]) is not None:  # launched before the
            e = early.setdefault(twin_op, [0, 0.0, 0.0, 0])  # window: costed as its twin's op
            whose[ki] = (_early_key, twin_op)
        elif oi is None:  # no op owns it: grouped by why and by its kernel family
            lk = _loose_key(trace, ki, k.name)
            e = loose.setdefault(lk, [0, 0.0, 0.0, 0])
            whose[ki] = (None, lk)
        else:
            e = per_op.setdefault(oi, [0, 0.0, 0.0, 0])
            whose[ki] = (_launcher_key, oi)
            if trace.ops[oi].origin == "annotation":  # what its kernels are, where they are all one family
                got.range_families.setdefault(oi, set()).add(kernel_family(k.name))
        e[0] += 1
        e[1] += k.dur
        e[2] += alone
        e[3] += is_comm
    return got


def _device_rows(trace: Trace, costs: _Costs, elements: Mapping[int, tuple[str, float]], device: DeviceProfile,
                 notes: list[str]) -> _Rows:
    """A GPU trace's groups: each op with the kernels it launched (`_owned`), the twins' ops' share before the
    window, the loose rows by kernel family; the transfers, idle causes and top kernels; its notes added."""
    sw = sweep(trace.kernels)
    rows = _Rows(groups={}, busy_s=sw.busy_s, overlap_s=sw.overlap_s)
    if trace.range_times:  # the ranges tile the profiler's window: no gap or overlap but the floats' rounding
        rows.busy_s, rows.overlap_s = trace.span_s, 0.0
    groups = rows.groups
    sized = sized_collective_ops(trace)  # the collectives whose size the trace gives
    twin = twins(trace)
    owned = _owned(trace, sw.alone_s, twin)
    per_op = owned.per_op
    mine = launch_work(trace, costs, per_op)
    group_families: dict[tuple, set[str]] = {}
    made: dict[tuple, tuple] = {}  # (the key rule, an op) → its group key, as `owned.whose` names them
    keys: dict[tuple, tuple] = {}  # an op's name, shapes and types (the reader shares equal ones), origin, element
    ops = trace.ops
    for oi, (n, t, alone, nc) in per_op.items():
        o = ops[oi]
        owner = OWNER_OF.get(o.origin, "op")
        if owner == "annotation":
            mine[oi] = ANNOTATION_COST
        el = elements.get(oi)
        seen = (o.name, id(o.dims), id(o.types), o.origin, el)
        key = keys.get(seen)
        if key is None:
            key = keys[seen] = _launcher_key(o, el)
        made[(_launcher_key, oi)] = key
        cost = mine[oi]
        g = groups.get(key)
        if g is None:
            g = _group(groups, key, cost, list(o.dims), key[2])
        g.owner = owner
        if oi in owned.range_families:
            group_families.setdefault(key, set()).update(owned.range_families[oi])
        g.calls += 1
        g.sized += oi in sized
        g.kernels += n
        g.comm_kernels += nc
        g.time_s += t
        g.alone_s += alone
        g.flops += cost.flops
        g.bytes += cost.bytes
    for key, fams in group_families.items():  # an annotation's kernels of one family: the family says the roof
        groups[key].family = next(iter(fams)) if len(fams) == 1 else ""
    for oi, (n, t, alone, nc) in owned.early.items():  # a share of the twin's op: its kernels before the window
        o, part = trace.ops[oi], n / per_op[oi][0]
        key = _early_key(o, elements.get(oi))
        g = _group(groups, key, dataclasses.replace(mine[oi], counting=mine[oi].counting + EARLY_COUNTING),
                   list(o.dims), key[2])
        g.owner = "before window"
        g.calls += math.ceil(part)
        g.sized += math.ceil(part) if oi in sized else 0
        g.kernels += n
        g.comm_kernels += nc
        g.time_s += t
        g.alone_s += alone
        g.flops += mine[oi].flops * part
        g.bytes += mine[oi].bytes * part
    for (why, family), (n, t, alone, nc) in owned.loose.items():
        key = _loose_row(why, family)
        g = OpGroup(op=key[0], shapes=[], dtype="", model=FAMILY_MODEL, path="", counting=LOOSE_COUNTING[why],
                    owner=key[-1], family=family, key=key)
        g.calls = g.kernels = n
        g.comm_kernels = nc
        g.time_s, g.alone_s = t, alone
        groups[key] = g
    rows.kernel_group = _kernel_groups(trace, owned.whose, elements, made)
    tf32_paths(trace, groups, rows.kernel_group)
    kernel_s = sum(k.dur for k in trace.kernels if k.cat == "kernel")
    notes += owner_notes(owned.early, owned.loose, [g for g in groups.values() if g.owner == "annotation"], kernel_s,
                         trace.step_names[0] if trace.step_names else "the first step")
    if trace.counters is not None:
        _add_counted(trace, trace.counters, groups, elements, twin)
        notes.extend(_counter_notes(trace, trace.counters, rows.busy_s))
    rows.transfers = sorted((place_transfer(t, device) for t in owned.moves.values()), key=lambda t: -t.time_s)
    rows.causes = idle_causes(trace)
    rows.top = top_kernels(trace, mine)
    if trace.counters is not None:
        _count_top(trace, trace.counters, rows.top)
    notes.extend(_device_notes(trace))
    return rows


FP32_PATH, TF32_PATH = matmul_path("fp32"), matmul_path("tf32")
TF32_COUNTING = "; fp32 on TF32 tensor cores (from its kernels' names)"


def kernel_path(path: str, name: str) -> str:
    """The path of one kernel of an op on `path`: an fp32 GEMM's kernel whose name says TF32 ran on tf32-tc."""
    return TF32_PATH if path == FP32_PATH and fp32_math(name) == TF32 else path


def tf32_paths(trace: Trace, groups: Mapping[tuple, OpGroup], kernel_group: Sequence[tuple | None]) -> None:
    """Place each fp32 GEMM / conv group whose kernels ran on TF32 tensor cores (allow_tf32, cuDNN's default) on the
    tf32-tc path: the op's dtype says fp32 either way, the kernels' names say which unit did the math. Where a
    group's kernels disagree, the larger share of the time of those that say decides, and its counting says so."""
    split: dict[tuple, list[float]] = {}  # group key → [time in TF32 kernels, time in FP32 ones]
    for k, key in zip(trace.kernels, kernel_group):
        if key is None or k.cat != "kernel":
            continue
        g = groups.get(key)
        if g is None or g.path != FP32_PATH or g.dtype != "fp32":
            continue
        unit = fp32_math(k.name)  # a helper kernel (split-K reduce, epilogue) says neither and has no vote
        if unit:
            split.setdefault(key, [0.0, 0.0])[0 if unit == TF32 else 1] += k.dur
    for key, (tc, fp32) in split.items():
        if tc <= 0:
            continue
        g = groups[key]
        if fp32 <= 0:
            g.path, g.counting = TF32_PATH, g.counting + TF32_COUNTING
            continue
        part = f"{fmt_percent(tc / (tc + fp32))} of its matrix kernels' time ran in TF32 kernels"
        if tc > fp32:
            g.path = TF32_PATH
            g.counting += f"{TF32_COUNTING}: {part}, the rest in FP32 ones, so it is placed by the larger share"
        else:
            g.counting += (f"; fp32 on the FP32 path (from its kernels' names): only {part}, the rest in FP32 ones, "
                           "so it is placed by the larger share")


def _device_notes(trace: Trace) -> list[str]:
    """What a reader of a GPU trace's numbers should know of its GPUs: several in one process, or no activity."""
    out = []
    if len(trace.gpus) > 1:
        out.append(f"one process ran kernels on {len(trace.gpus)} GPUs ({', '.join(map(str, trace.gpus))}): "
                   "busy is the time any of them worked and idle the time none did, the overlap row "
                   f"counts them running at once, and MFU and bandwidth utilisation are over "
                   f"{len(trace.gpus)} × the roofs")
    if not trace.kernels:
        out.append("the trace records no kernels, memcpy or memset (GPU activity was not recorded): the device "
                   "was busy for 0 s as far as it shows")
    return out


def _host_rows(trace: Trace, costs: _Costs, notes: list[str]) -> _Rows:
    """A CPU trace's groups: each op's self time under the op whose work it is part of (`_owner`), the time around
    the work in one row; scaled to the busy time where ops ran on several threads at once."""
    busy_s = trace.busy_s
    sized = sized_collective_ops(trace)  # the collectives whose size the trace gives
    groups: dict[tuple, OpGroup] = {}
    work = work_ops(trace, costs)
    no_work = (NO_WORK_GROUP,)  # the time around the work's key (a group's key is its op, shapes, dtype)
    owners = _owner(trace, work)
    for i, o in enumerate(trace.ops):
        own = owners[i]
        if own is None:  # time around the work: the framework's dispatch, views, allocation
            g = groups.get(no_work)
            if g is None:
                g = groups[no_work] = OpGroup(
                    op=NO_WORK_GROUP, shapes=[], dtype="", model="none", path="",
                    counting="ops that move no data (views, metadata) and the dispatch around ops that do: "
                             "time only")
            g.time_s += o.self_s
            g.calls += 1
            continue
        w, mine_w = trace.ops[own], work[own]
        assert mine_w is not None  # an owner owns work (`_owner`)
        key = _key(w)
        g = _group(groups, key, mine_w, list(w.dims), key[2])
        g.time_s += o.self_s
        if own == i:
            g.calls += 1
            g.sized += i in sized
            g.flops += mine_w.flops
            g.bytes += mine_w.bytes
    groups = {k: g for k, g in groups.items() if g.time_s > 0 or g.flops > 0}
    total = sum(g.time_s for g in groups.values())
    scale = busy_s / total if total > busy_s > 0 else 1.0  # ops on several threads at once
    for g in groups.values():
        g.alone_s = g.time_s * scale
    if scale < 1.0:
        notes.append(f"ops ran on several threads at once ({(total - busy_s) * 1e3:.3g} ms counted twice): each "
                     "group's share is scaled to the busy time")
    return _Rows(groups=groups, busy_s=busy_s)


def _kernel_groups(trace: Trace, whose: Sequence[tuple | None], elements: Mapping[int, tuple[str, float]],
                   made: Mapping[tuple, tuple] | None = None) -> tuple[tuple | None, ...]:
    """Each kernel's op group key, from how the build grouped it: (the key rule, its op) or (None, its loose row);
    each op's key made once (its shapes' JSON is the costly part), or taken from `made` where the build made it."""
    keys: dict[tuple, tuple] = dict(made or {})
    out: list[tuple | None] = []
    for w in whose:
        if w is None:
            out.append(None)
            continue
        got = keys.get(w)
        if got is None:
            rule, x = w
            got = keys[w] = _loose_row(*x) if rule is None else rule(trace.ops[x], elements.get(x))
        out.append(got)
    return tuple(out)


def every(xs: Sequence[float | None]) -> float | None:
    """The sum of counted figures, None unless there is at least one and every one was counted (a part would
    read as the whole)."""
    return None if not xs or any(x is None for x in xs) else sum(xs)  # type: ignore[arg-type]


def _sum_counted(counts: Sequence[Counted | None]) -> tuple[float | None, float | None]:
    """W and Q over kernels as counted: None for either unless every kernel has it."""
    return every([c.flops if c else None for c in counts]), every([c.bytes if c else None for c in counts])


def _add_counted(trace: Trace, counters: TraceCounters, groups: Mapping[tuple, OpGroup],
                 elements: Mapping[int, tuple[str, float]], twin: Mapping[int, int]) -> None:
    """Each op group's W and Q as the trace's counters measured them: the sums over its kernels, where every kernel
    of the group was counted. On a trace of ranges alone no group's time is measured (the profiler's split). A
    kernel is found in the group the grouping put it in: its op's, its twin's (launched before the window), or its
    row by why no op owns it and its family."""
    by: dict[tuple, list[Counted | None]] = {}
    for ki, (k, oi) in enumerate(zip(trace.kernels, trace.kernel_op)):
        if k.cat != "kernel":
            continue
        if oi is not None:
            key = _launcher_key(trace.ops[oi], elements.get(oi))
        elif ki in twin and (t := trace.kernel_op[twin[ki]]) is not None:
            key = _early_key(trace.ops[t], elements.get(t))
        else:
            key = _loose_row(*_loose_key(trace, ki, k.name))
        by.setdefault(key, []).append(counters.kernels.get(ki))
    for key, counts in by.items():
        g = groups.get(key)
        if g is None:
            continue
        g.measured_flops, g.measured_bytes = _sum_counted(counts)
    for g in groups.values():
        g.timed = not counters.as_kernels


def _count_top(trace: Trace, counters: TraceCounters, top: Sequence[TopKernel]) -> None:
    """Each top kernel's W and Q as counted (all its calls counted, else None)."""
    want = {t.name: t for t in top}
    by: dict[str, list[Counted | None]] = {}
    for ki, k in enumerate(trace.kernels):
        if k.cat == "kernel" and k.name in want:
            by.setdefault(k.name, []).append(counters.kernels.get(ki))
    for name, counts in by.items():
        t = want[name]
        t.measured_flops, t.measured_bytes = _sum_counted(counts)
        if counters.as_kernels:
            t.timed, t.fraction_of_roof, t.roof = False, None, ""


def _counter_notes(trace: Trace, c: TraceCounters, busy_s: float) -> list[str]:
    """What the counters are and what they missed: a trace of ranges alone says its times are not measured."""
    out = []
    if c.as_kernels and c.ranges:
        out.append(f"the trace has no kernel events: its {c.ranges} CUPTI counter ranges stand for its kernels, timed "
                   f"by the range profiler's even split of its window ({busy_s / c.ranges * 1e3:.3g} ms each), not "
                   "measured: no fraction of a roof, MFU or speed-up is read from them; their counted W and Q are")
    missed = sum(1 for k in trace.kernels if k.cat == "kernel") - len(c.kernels)
    if missed > 0 and not c.as_kernels:
        out.append(f"{missed} kernel{'s' if missed != 1 else ''} have no counter range: an op group with one of "
                   "them has no counted W or Q")
    return out


def top_kernels(trace: Trace, costs: Mapping[int, OpCost], n: int = TOP_KERNELS) -> list[TopKernel]:
    """The kernels by total time (by name), with W and Q from their ops (`costs`: each launching op's own work):
    an op's W and Q split over its kernels in proportion to their time (one GEMM kernel per aten::mm takes all
    of it)."""
    op_time: dict[int, float] = {}
    for k, oi in zip(trace.kernels, trace.kernel_op):
        if oi is not None and k.cat == "kernel":
            op_time[oi] = op_time.get(oi, 0.0) + k.dur
    by: dict[str, TopKernel] = {}
    for k, oi in zip(trace.kernels, trace.kernel_op):
        if k.cat != "kernel":
            continue
        t = by.get(k.name)
        if t is None:
            t = by[k.name] = TopKernel(k.name)
        t.calls += 1
        t.time_s += k.dur
        if oi is not None and op_time.get(oi):
            share = k.dur / op_time[oi]
            t.flops += costs[oi].flops * share
            t.bytes += costs[oi].bytes * share
            if costs[oi].flops > 0 and not t.path:
                t.path = kernel_path(costs[oi].path, k.name)
    return sorted(by.values(), key=lambda t: -t.time_s)[:n]


def place(g: OpGroup, device: DeviceProfile) -> OpGroup:
    """Set the group's bound T = max(W/F, Q/B) and regime against the device (analysis's rule), and its
    path by the device's name for it (a bf16 GEMM on a CPU is bf16-matmul). Communication's roof is its link's,
    not the DRAM's: a collective of any library, or a group whose kernels are all a communication library's
    (DeepEP's dispatch under an annotation), gets regime "comm" and no bound here (its time counts as it is; the
    job's collectives table places it on its link)."""
    if g.path:
        g.path = device.path_name(g.path)
    if is_comm_op(g.op) or (g.kernels and g.comm_kernels == g.kernels):
        g.regime, g.bound_s, g.peak, g.bandwidth = COMM, None, None, None
        return g
    if g.model in NO_MODEL:  # W and Q unknown: no point, no bound; its time stays as it ran at any roof
        g.regime, g.bound_s = W_UNKNOWN, None
        return g
    if g.model == "none" and g.kernels:  # an autograd node (a custom op's backward) that launches its own kernels
        g.regime, g.bound_s = W_UNKNOWN, None
        g.counting = "launches kernels of its own, which no model counts: W and Q unknown, not counted"
        return g
    if g.model in (FAMILY_MODEL, ANNOTATION_MODEL):  # kernels with no op's shapes: no W and Q to place them by
        g.regime = "comm" if g.family == "comm" else W_UNKNOWN
        g.bound_s = None
        return g
    if g.model == "unattributed" or (g.flops == 0 and g.bytes == 0):
        # nothing for the roofline to place: no bound (not a bound of 0 s, which read as "at its roof it takes
        # 0 ns" and took its time off every op at its roof); its time stays as it ran
        g.regime = NO_WORK if g.model != "unattributed" else "unknown"
        g.bound_s = None
        return g
    try:
        bw = device.B("dram")
    except NoRoof:
        return g
    try:
        peak: float | None = device.F(g.path) if g.flops > 0 else None
    except NoRoof:
        peak = None
    g.bandwidth, g.peak = bw, peak
    t_mem = g.bytes / bw
    t_comp = g.flops / peak if peak else 0.0
    g.bound_s = max(t_mem, t_comp)
    if peak is None:
        g.regime = "memory" if g.flops == 0 else f"no {g.path or 'compute'} roof"  # the device lacks its path
    else:
        g.regime = roofline.regime(roofline.intensity(g.flops, g.bytes), peak, bw)
    return g


# -- memcpy / memset, top kernels, flags ------------------------------------------------------


@dataclass
class Transfer:
    """All memcpy of one direction (or all memset): their time, bytes and achieved rate against the level they
    cross: the host link (`pcie`) for host↔device, DRAM for device↔device copies (read + write) and memsets."""

    cat: str  # memcpy, memset
    direction: str = ""  # memcpy: HtoD, DtoH, DtoD, PtoP, …
    calls: int = 0
    time_s: float = 0.0
    alone_s: float = 0.0
    bytes: float = 0.0
    level: str = ""
    bandwidth: float | None = None  # the level's slope on the device, when it has one
    traffic: float = 1.0  # bytes through the level per byte copied (2 for a DtoD copy: read and write)

    @property
    def label(self) -> str:
        return f"memcpy {self.direction}".strip() if self.cat == "memcpy" else self.cat

    @property
    def achieved_bandwidth(self) -> float:
        return self.bytes / self.time_s if self.time_s > 0 else 0.0

    @property
    def fraction_of_roof(self) -> float | None:
        if not self.bandwidth or self.time_s <= 0 or self.bytes <= 0:
            return None
        return self.bytes * self.traffic / self.time_s / self.bandwidth

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.label, "cat": self.cat, "direction": self.direction, "calls": self.calls,
                "time_s": self.time_s, "time_alone_s": self.alone_s, "bytes": self.bytes, "level": self.level,
                "bandwidth": self.bandwidth, "achieved_bandwidth": self.achieved_bandwidth,
                "fraction_of_roof": self.fraction_of_roof, "traffic_per_byte": self.traffic}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Transfer:
        bw = d.get("bandwidth")
        return cls(str(d["cat"]), str(d.get("direction") or ""), int(d["calls"]), float(d["time_s"]),
                   float(d.get("time_alone_s") or 0.0), float(d.get("bytes") or 0.0), str(d.get("level") or ""),
                   None if bw is None else float(bw), float(d.get("traffic_per_byte") or 1.0))


def place_transfer(t: Transfer, device: DeviceProfile) -> Transfer:
    t.level = "dram" if t.cat == "memset" else TRANSFER_LEVEL.get(t.direction, "pcie")
    t.traffic = 2.0 if t.cat == "memcpy" and t.level == "dram" else 1.0
    t.level, key = link_on(device, t.level)  # a peer copy on an AMD GPU crosses its xGMI
    t.bandwidth = device.bandwidth[key].value if key is not None else None
    return t


@dataclass
class TopKernel(Rates):
    """One kernel (by name): calls, time, and W and Q from the ops that launched it (estimates)."""

    name: str
    calls: int = 0
    time_s: float = 0.0
    flops: float = 0.0
    bytes: float = 0.0
    path: str = ""
    fraction_of_roof: float | None = None
    roof: str = ""  # the roof that bounds it: a compute path or "dram"
    measured_flops: float | None = None  # W and Q as the trace's counters counted them (all its calls), else None
    measured_bytes: float | None = None
    timed: bool = True  # False: its time is the range profiler's split of its window

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "calls": self.calls, "time_s": self.time_s, "flops": self.flops,
                "bytes": self.bytes, "achieved_flops": self.achieved_flops if self.timed else None,
                "achieved_bandwidth": self.achieved_bandwidth if self.timed else None, "path": self.path,
                "fraction_of_roof": self.fraction_of_roof, "roof": self.roof, "estimate": True,
                **measured_dict(self.measured_flops, self.measured_bytes, self.timed)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TopKernel:
        f = d.get("fraction_of_roof")
        return cls(str(d["name"]), int(d["calls"]), float(d["time_s"]), float(d.get("flops") or 0.0),
                   float(d.get("bytes") or 0.0), str(d.get("path") or ""), None if f is None else float(f),
                   str(d.get("roof") or ""), **measured_from(d))


def _bound(flops: float, nbytes: float, path: str, device: DeviceProfile) -> tuple[float | None, str]:
    """max(W/F, Q/B) on the device and the roof that sets it; (None, '') where it has no roof to use."""
    bw = device.bandwidth.get("dram")
    peak = device.peak.get(path) if flops > 0 else None
    t_mem = nbytes / bw.value if bw and nbytes > 0 else 0.0
    t_comp = flops / peak.value if peak and flops > 0 else 0.0
    if t_mem == 0.0 and t_comp == 0.0:
        return None, ""
    return (t_comp, path) if t_comp >= t_mem else (t_mem, "dram")


def place_kernel(t: TopKernel, device: DeviceProfile) -> TopKernel:
    """A kernel on the roof of its W and Q (from its ops); a communication kernel's roof is a link's, not here."""
    if kernel_family(t.name) == COMM:
        t.flops, t.bytes, t.path, t.roof, t.fraction_of_roof = 0.0, 0.0, "", "link", None
        return t
    if t.path:
        t.path = device.path_name(t.path)
    bound, roof = _bound(t.flops, t.bytes, t.path, device)
    if bound is not None and t.time_s > 0 and t.timed:
        t.fraction_of_roof, t.roof = bound / t.time_s, roof
    return t


@dataclass(frozen=True)
class Flag:
    """Something ran faster than its roof (so the roof is low, or a count is wrong): which roof, and from where."""

    kind: str  # op, kernel, transfer, mfu, threads, model
    subject: str
    roof: str  # "bf16-tc", "dram", …
    roof_value: float | None
    source: str  # the run or profile the roof came from, and how it was measured
    ratio: float  # achieved over the roof (> 1)
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Flag:
        v = d.get("roof_value")
        return cls(str(d["kind"]), str(d["subject"]), str(d.get("roof") or ""), None if v is None else float(v),
                   str(d.get("source") or ""), float(d.get("ratio") or 0.0), str(d.get("text") or ""))


def _ceiling(device: DeviceProfile, roof: str) -> Ceiling | None:
    return device.peak.get(roof) or device.bandwidth.get(roof)


def roof_source(device: DeviceProfile, roof: str) -> str:
    """Where a roof of `device` came from, in words: the profile, its source and the case that measured it."""
    c = _ceiling(device, roof)
    if c is None:
        return f"{device.id}"
    case = f", {c.case}" if c.case else ""
    threads = f", {device.threads} threads" if device.threads else ""
    return f"{device.id} ({c.source}{case}{threads})"


def _roof_text(device: DeviceProfile, roof: str) -> str:
    c = _ceiling(device, roof)
    if c is None:
        return roof
    v = c.value / 1e12 if roof in device.peak else c.value / 1e9
    return f"{roof} {v:.4g} {'TFLOP/s' if roof in device.peak else 'GB/s'}"


REMEASURE = "re-measure the roofs under the program's conditions (`rooftop measure` on that machine, same threads)"


def roof_flags(w: Workload, program_threads: int | None = None) -> list[Flag]:
    """A flag for every group, kernel and transfer above its roof, an MFU above 100%, a sum of bounds above the
    measured time (a model error), and a CPU roof measured with fewer threads than the program used."""
    dev = w.device
    out: list[Flag] = []

    def flag(kind: str, subject: str, roof: str, ratio: float, what: str) -> None:
        c = _ceiling(dev, roof)
        why = ("far faster than any roof is off, so its W or Q is overcounted (a wrong recorded shape)"
               if ratio > IMPLAUSIBLE else f"faster than its roof, so the roof is low; {REMEASURE}")
        out.append(Flag(kind, subject, roof, c.value if c else None, roof_source(dev, roof), ratio,
                        f"{what} ran at {fmt_percent(ratio, 0)} of the {_roof_text(dev, roof)} roof of "
                        f"{roof_source(dev, roof)}: {why}"))

    for g in w.groups:
        f = g.fraction_of_roof
        if f is not None and f > ABOVE_ROOF:
            roof = g.path if g.regime == "compute" and g.path in dev.peak else "dram"
            label = " ".join(x for x in (g.op, g.dtype, g.shapes_text) if x)  # the shape and dtype that ran faster
            flag("op", g.op, roof, f, label)
    for t in w.top_kernels:
        if t.fraction_of_roof is not None and t.fraction_of_roof > ABOVE_ROOF:
            flag("kernel", t.name, t.roof, t.fraction_of_roof, f"kernel {t.name[:60]}")
    for tr in w.transfers:
        f = tr.fraction_of_roof
        if f is not None and f > ABOVE_ROOF:
            flag("transfer", tr.label, tr.level, f, tr.label)
    mfu = w.mfu_over(w.groups)  # every op's FLOPs, none held back: above 100% a roof or a count is wrong
    mfu_path = w.mfu_path_of(w.groups)
    if mfu is not None and mfu > 1.0 and mfu_path:
        flag("mfu", "MFU", mfu_path, mfu, "the program's matmul FLOPs over the span")
    bounds = sum(g.bound_s for g in w.groups if g.bound_s is not None)
    measured = sum(g.time_s for g in w.groups if g.bound_s is not None)
    if measured > 0 and bounds > measured * ABOVE_ROOF:
        out.append(Flag("model", "every op at its roof", "", None, dev.id, bounds / measured,
                        f"the ops' bounds add up to {bounds * 1e3:.4g} ms, more than the {measured * 1e3:.4g} ms "
                        "they took: a bound above the measured time is a model error (W or Q over-counted) or "
                        f"low roofs, not a bound; {REMEASURE}"))
    if dev.kind == "cpu" and dev.threads and program_threads and dev.threads < program_threads:
        out.append(Flag("threads", dev.id, "", None, roof_source(dev, "dram"), program_threads / dev.threads,
                        f"the CPU roofs of {dev.id} were measured with {dev.threads} thread"
                        f"{'s' if dev.threads > 1 else ''}, the program ran with {program_threads}: its ops can "
                        f"run above them; re-measure with `rooftop measure --threads {program_threads}`"))
    return out


def flag_lines(flags: Sequence[Flag]) -> list[str]:
    """The flags in a few lines: one per kind and roof (how many, how far above, which, the roof's source);
    the others (MFU, threads, a model error) as they are."""
    out: list[str] = []
    by: dict[tuple[str, str], list[Flag]] = {}
    for f in flags:
        if f.kind in ("op", "kernel", "transfer"):
            by.setdefault((f.kind, f.roof), []).append(f)
        else:
            out.append(f.text)
    what = {"op": "op group", "kernel": "kernel", "transfer": "transfer"}
    for (kind, roof), fs in by.items():
        top = max(f.ratio for f in fs)
        names = ", ".join(dict.fromkeys(f.subject[:50] for f in sorted(fs, key=lambda f: -f.ratio)[:3]))
        more = ", …" if len({f.subject for f in fs}) > 3 else ""
        v = fs[0].roof_value
        compute = roof not in LEVELS  # a compute path's roof, not a memory level's or a link's
        value = "" if v is None else (f" {v / 1e12:.4g} TFLOP/s" if compute else f" {v / 1e9:.4g} GB/s")
        head = (f"{len(fs)} {what[kind]}{'s' if len(fs) > 1 else ''} ran above the {roof}{value} roof of "
                f"{fs[0].source} (up to {fmt_percent(top, 0)} of it: {names}{more})")
        if top > IMPLAUSIBLE:  # no roof is off by that much: the count is
            out.append(f"{head}: far faster than any roof is off, so W or Q is overcounted — a recorded shape "
                       "that is wrong, or an op whose model counts work its kernels did not do; check its shapes")
        else:
            fewer = (", or its kernels do fewer FLOPs than the op's count (a Winograd or FFT convolution)"
                     if compute else "")
            out.append(f"{head}: faster than the roof, so the roof is low (measured under other conditions: threads, "
                       f"clocks, TF32, or a cache kept the data){fewer}; {REMEASURE}")
    return out


IMPLAUSIBLE = 10.0  # a point this many times its roof is a miscount: roofs are not off by 10×
