"""A profiled program on the roofline: each op's W and Q from its shapes, grouped, against a device's roofs.

W and Q are estimates: rooftop's own op models (`models.ops`) applied to the
shapes and dtypes the profiler recorded, counted as everywhere else in rooftop
(each array read or written once, an FMA is 2 FLOP). Ops without a model keep
their time, with Q estimated from their tensors' sizes and W = 0. Time is
measured: a kernel's duration on a GPU trace, an op's own (self) time on a CPU
trace. The step split (kernel time vs the gaps between kernels) is measured
too; only W and Q are modelled.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from . import roofline
from .calibrate import ABOVE_ROOF
from .paths import MATMUL_LADDER
from .profile import DeviceProfile, NoRoof
from .shapecost import OpCost, cost_op, element_from_kernel, op_dtype
from .trace import CpuOp, Trace

UNATTRIBUTED = "(unattributed kernels)"
GRAPH_REPLAY = "(CUDA graph replay)"


# -- grouping -------------------------------------------------------------------


@dataclass
class OpGroup:
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
    # against the device, set by place():
    bound_s: float | None = None
    regime: str = ""
    peak: float | None = None
    bandwidth: float | None = None

    @property
    def intensity(self) -> float | None:
        if self.bytes > 0:
            return self.flops / self.bytes
        return None if self.flops == 0 else math.inf

    @property
    def achieved_flops(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0

    @property
    def achieved_bandwidth(self) -> float:
        return self.bytes / self.time_s if self.time_s > 0 else 0.0

    @property
    def fraction_of_roof(self) -> float | None:
        """bound / time: 1 at the roof, small far below it (= achieved / attainable where W > 0)."""
        if self.bound_s is None or self.time_s <= 0 or self.bound_s <= 0:
            return None
        return self.bound_s / self.time_s

    @property
    def shapes_text(self) -> str:
        parts = []
        for d in self.shapes:
            if isinstance(d, list) and d and all(isinstance(x, int) for x in d):
                parts.append("×".join(str(x) for x in d))
            elif isinstance(d, list) and d and all(isinstance(x, list) for x in d):
                parts.append("[" + ", ".join("×".join(str(x) for x in m) for m in d) + "]")
        return " · ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        i = self.intensity
        return {
            "op": self.op, "shapes": self.shapes, "dtype": self.dtype, "calls": self.calls,
            "kernels": self.kernels, "time_s": self.time_s, "flops": self.flops, "bytes": self.bytes,
            "intensity": i if i is None or math.isfinite(i) else None,
            "regime": self.regime, "bound_s": self.bound_s, "fraction_of_roof": self.fraction_of_roof,
            "achieved_flops": self.achieved_flops, "achieved_bandwidth": self.achieved_bandwidth,
            "path": self.path, "model": self.model, "counting": self.counting, "estimate": True,
            "shape": dict(self.shape),
        }


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

    @property
    def idle_s(self) -> float:
        return max(0.0, self.span_s - self.busy_s)

    @property
    def op_time_s(self) -> float:
        return sum(g.time_s for g in self.groups)

    @property
    def flops(self) -> float:
        return sum(g.flops for g in self.groups)

    @property
    def bytes(self) -> float:
        return sum(g.bytes for g in self.groups)

    @property
    def bound_s(self) -> float:
        """The sum of each op's bound, and the time of ops the roofline cannot place (kept as they are)."""
        return sum(g.bound_s if g.bound_s is not None else g.time_s for g in self.groups)

    @property
    def at_roof_s(self) -> float:
        """The step if every op ran at its roof and the gaps stayed (Amdahl)."""
        return self.idle_s + max(0.0, self.busy_s - (self.op_time_s - self.bound_s))

    @property
    def no_gaps_s(self) -> float:
        """The step if the gaps between kernels went (ops as they ran)."""
        return self.busy_s

    @property
    def mfu_path(self) -> str | None:
        """The matmul path that carries most of the FLOPs: MFU is read against its roof."""
        by: dict[str, float] = {}
        for g in self.groups:
            if g.path in MATMUL_LADDER and g.path in self.device.peak:
                by[g.path] = by.get(g.path, 0.0) + g.flops
        return max(by, key=by.get) if by else None

    @property
    def mfu(self) -> float | None:
        """Model FLOPs over the span, over the peak of the main matmul path."""
        p = self.mfu_path
        if p is None or self.span_s <= 0:
            return None
        return self.flops / self.span_s / self.device.F(p)

    @property
    def bandwidth_utilisation(self) -> float | None:
        """Bytes moved (as counted) over the span, over the DRAM bandwidth."""
        if self.span_s <= 0 or "dram" not in self.device.bandwidth:
            return None
        return self.bytes / self.span_s / self.device.B("dram")

    def summary(self) -> dict[str, Any]:
        return {
            "device": self.device.id, "trace_device": self.device_name, "on_device": self.on_device,
            "kernels": self.kernels, "span_s": self.span_s, "device_busy_s": self.busy_s, "idle_s": self.idle_s,
            "idle_share": self.idle_s / self.span_s if self.span_s > 0 else None,
            "op_time_s": self.op_time_s, "bound_s": self.bound_s, "flops": self.flops, "bytes": self.bytes,
            "mfu": self.mfu, "mfu_path": self.mfu_path, "bandwidth_utilisation": self.bandwidth_utilisation,
            "step_at_roof_s": self.at_roof_s, "step_without_gaps_s": self.no_gaps_s,
            "speedup_at_roof": self.span_s / self.at_roof_s if self.at_roof_s > 0 else None,
            "speedup_without_gaps": self.span_s / self.no_gaps_s if self.no_gaps_s > 0 else None,
            "largest_share": self.largest_share(),
        }

    def largest_share(self) -> str:
        """What takes most of the span: 'idle' (gaps between kernels / outside ops) or the top op."""
        top = self.groups[0] if self.groups else None
        if top is None or self.idle_s >= top.time_s:
            return "idle"
        return top.op

    def to_dict(self) -> dict[str, Any]:
        span = self.span_s
        ops = [{**g.to_dict(), "share": g.time_s / span if span > 0 else None} for g in self.groups]
        return {"ops": ops, "summary": self.summary(), "notes": list(self.notes)}


def _key(op: CpuOp, element: tuple[str, float] | None = None) -> tuple[str, str, str]:
    dtype = op_dtype(op.types) or (element[0] if element and "TensorList" in op.types else "")
    return op.name, json.dumps(list(op.dims)), dtype


def _group(groups: dict, key: tuple, cost: OpCost, shapes: list, dtype: str) -> OpGroup:
    g = groups.get(key)
    if g is None:
        g = groups[key] = OpGroup(op=key[0], shapes=shapes, dtype=dtype, model=cost.model, path=cost.path,
                                  counting=cost.counting, shape=dict(cost.shape))
    return g


STRONG = ("gemm", "conv", "attention", "norm", "softmax")  # models that own the copies and views they call


def work_ops(trace: Trace, costs: Sequence[OpCost]) -> list[bool]:
    """Which ops own work on a CPU trace, so no W or Q is counted twice.

    An op with a GEMM / attention / norm / softmax model owns its work unless an
    op inside it has one of those too (the innermost wins: aten::linear is
    dispatch around the aten::addmm that does the GEMM; the copy inside addmm
    that broadcasts the bias is part of the GEMM). Any other op with W or Q
    owns work when nothing inside it does.
    """
    n = len(trace.ops)
    strong_below = [False] * n
    any_below = [False] * n
    work = [False] * n
    for i in reversed(range(n)):  # children come after parents in the ops' order
        o = trace.ops[i]
        sb = any(strong_below[c] or costs[c].model in STRONG for c in o.children)
        ab = any(any_below[c] or work[c] for c in o.children)
        c = costs[i]
        if c.model in STRONG:
            work[i] = not sb
        else:
            work[i] = (c.flops > 0 or c.bytes > 0) and not ab
        strong_below[i] = sb or c.model in STRONG
        any_below[i] = ab or work[i]
    return work


def _owner(trace: Trace, work: Sequence[bool], costs: Sequence[OpCost]) -> list[int | None]:
    """Each op's owner: the nearest enclosing-or-self op that owns work and has a strong model, else the
    op itself when it owns work, else None (dispatch, views)."""
    out: list[int | None] = []
    for i, o in enumerate(trace.ops):
        j: int | None = o.parent
        found = None
        while j is not None:
            if work[j] and costs[j].model in STRONG:
                found = j
                break
            j = trace.ops[j].parent
        out.append(found if found is not None else (i if work[i] else None))
    return out


NO_WORK_GROUP = "(dispatch and views)"


def build_workload(trace: Trace, device: DeviceProfile) -> Workload:
    """Group the trace's work by (op, shapes, dtype), cost each group and place it on `device`."""
    elements: dict[int, tuple[str, float]] = {}
    for k, oi in zip(trace.kernels, trace.kernel_op):
        if oi is not None and oi not in elements and "TensorList" in trace.ops[oi].types:
            found = element_from_kernel(k.name)
            if found:
                elements[oi] = found
    costs = [cost_op(o.name, o.dims, o.types, elements.get(i), o.concrete) for i, o in enumerate(trace.ops)]
    groups: dict[tuple, OpGroup] = {}
    notes: list[str] = []
    if trace.on_device:
        per_op: dict[int, float] = {}
        kcount: dict[int, int] = {}
        loose: dict[str, list[float]] = {}
        for ki, (k, oi) in enumerate(zip(trace.kernels, trace.kernel_op)):
            if oi is None:
                name = GRAPH_REPLAY if ki in trace.graph_kernels else UNATTRIBUTED
                loose.setdefault(name, []).append(k.dur)
                continue
            per_op[oi] = per_op.get(oi, 0.0) + k.dur
            kcount[oi] = kcount.get(oi, 0) + (k.cat == "kernel")  # memcpy / memset: time, not kernels
        for oi, t in per_op.items():
            o = trace.ops[oi]
            key = _key(o, elements.get(oi))
            g = _group(groups, key, costs[oi], list(o.dims), key[2])
            g.calls += 1
            g.kernels += kcount[oi]
            g.time_s += t
            g.flops += costs[oi].flops
            g.bytes += costs[oi].bytes
        for name, durs in loose.items():
            g = OpGroup(op=name, shapes=[], dtype="", model="unattributed", path="",
                        counting="kernels no op of this trace launched (a CUDA graph replays them as one launch): "
                                 "time only, no W or Q")
            g.calls = g.kernels = len(durs)
            g.time_s = sum(durs)
            groups[(name, "", "")] = g
            notes.append(f"{len(durs)} kernels ({sum(durs) * 1e3:.3g} ms) are {name.strip('()')}: "
                         "their time is unattributed, with no W or Q")
    else:
        work = work_ops(trace, costs)
        owners = _owner(trace, work, costs)
        for i, o in enumerate(trace.ops):
            own = owners[i]
            if own is None:  # time around the work: the framework's dispatch, views, allocation
                g = groups.get(NO_WORK_GROUP)
                if g is None:
                    g = groups[NO_WORK_GROUP] = OpGroup(
                        op=NO_WORK_GROUP, shapes=[], dtype="", model="none", path="",
                        counting="ops that move no data (views, metadata) and the dispatch around ops that do: "
                                 "time only")
                g.time_s += o.self_s
                g.calls += 1
                continue
            w = trace.ops[own]
            key = _key(w)
            g = _group(groups, key, costs[own], list(w.dims), key[2])
            g.time_s += o.self_s
            if own == i:
                g.calls += 1
                g.flops += costs[i].flops
                g.bytes += costs[i].bytes
        groups = {k: g for k, g in groups.items() if g.time_s > 0 or g.flops > 0}
    placed = [place(g, device) for g in groups.values()]
    placed.sort(key=lambda g: -g.time_s)
    above = [g for g in placed if (g.fraction_of_roof or 0.0) > ABOVE_ROOF]
    if above:  # a time under its bound: the roof is not this run's, or the bytes are not all counted
        top = max(g.fraction_of_roof or 0.0 for g in above)
        names = ", ".join(dict.fromkeys(g.op for g in above[:3])) + (", …" if len(above) > 3 else "")
        notes.append(f"{len(above)} op group{'s' if len(above) > 1 else ''} ran above the roofs of {device.id} "
                     f"(up to {100 * (top - 1):.0f}% above: {names}): the roofs were measured under other "
                     "conditions (threads, clocks) or a cache kept the data, so the bytes are under-counted")
    return Workload(
        groups=tuple(placed), device=device, on_device=trace.on_device, kernels=trace.kernel_count,
        span_s=trace.span_s, busy_s=trace.busy_s, device_name=trace.device_name, notes=tuple(notes),
    )


def place(g: OpGroup, device: DeviceProfile) -> OpGroup:
    """Set the group's bound T = max(W/F, Q/B) and regime against the device (analysis's rule)."""
    if g.model == "unattributed" or (g.flops == 0 and g.bytes == 0):
        g.regime = "none" if g.model != "unattributed" else "unknown"
        g.bound_s = None if g.model == "unattributed" else 0.0
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
        g.regime = "memory" if g.flops == 0 else "no roof"  # the device has no roof for its path
    else:
        g.regime = roofline.regime(roofline.intensity(g.flops, g.bytes), peak, bw)
    return g
