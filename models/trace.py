"""A Chrome / Kineto trace (torch.profiler's `export_chrome_trace`) as kernels, CPU ops and their links.

Pure: takes the trace's parsed JSON (a dict with `traceEvents`, or the bare
event list) and returns dataclasses; reading the file is the store's job
(`rooftop.store.tracefile`). No torch is needed to read a trace.

What the events mean (torch.profiler with `record_shapes=True`):
- `cpu_op` events are the ops the framework dispatched, with `Input Dims`,
  `Input type` and an `External id`; nested ops (aten::linear → aten::addmm)
  are nested intervals on the same thread.
- `kernel` (and `gpu_memcpy`, `gpu_memset`) events ran on the device; a
  kernel's `External id` is the op that launched it, and its `correlation`
  names the runtime call (cudaLaunchKernel, cudaGraphLaunch, …) that issued it.
  `ac2g` flow events link the same pair where the args lack the ids.
- A CUDA-graph replay is one runtime call (cudaGraphLaunch) issuing many
  kernels that belong to no op of this trace: their time is unattributed.
Times are kept in seconds (the trace counts microseconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

US = 1e-6
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
OP_CATS = ("cpu_op", "operator")  # "operator": older torch versions' name for the same events
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "hip_runtime")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
STEP_PREFIX = "ProfilerStep#"


class TraceError(ValueError):
    """A file that is not a usable trace; the message is one line saying what is wrong."""


class EmptyTrace(TraceError):
    """A well-formed trace with nothing to place: no kernels and no CPU ops."""


@dataclass(frozen=True)
class Kernel:
    """One device activity: a kernel, or a memcpy / memset (`cat`)."""

    name: str
    ts: float  # start, seconds (trace clock)
    dur: float  # seconds
    cat: str = "kernel"
    external_id: int | None = None
    correlation: int | None = None
    stream: int | None = None
    device: int | None = None

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(frozen=True)
class CpuOp:
    """One dispatched op with its inputs' shapes and types, and its place in the op tree."""

    name: str
    ts: float
    dur: float
    tid: Any
    external_id: int | None = None
    dims: tuple = ()  # Input Dims as recorded: one list per input ([] for scalars, a list of lists for a TensorList)
    types: tuple[str, ...] = ()  # Input type, one per input ("c10::BFloat16", "float", "Scalar", …)
    concrete: tuple[str, ...] = ()  # Concrete Inputs: the scalar and list arguments as text ("[2, 2]", "1")
    parent: int | None = None  # index of the enclosing op in Trace.ops
    children: tuple[int, ...] = ()
    self_s: float = 0.0  # dur less the children's

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(frozen=True)
class Trace:
    """Kernels and ops of one trace, linked: `kernel_op[i]` is the index in `ops` of kernel i's op."""

    kernels: tuple[Kernel, ...]
    ops: tuple[CpuOp, ...]
    kernel_op: tuple[int | None, ...]  # per kernel: its op, or None (unattributed)
    graph_kernels: frozenset[int] = frozenset()  # kernels issued by a CUDA-graph replay
    steps: tuple[tuple[float, float], ...] = ()  # ProfilerStep#N intervals (start, end), seconds
    device_name: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def on_device(self) -> bool:
        """A GPU trace (kernels ran); otherwise a CPU program whose ops are the work."""
        return any(k.cat == "kernel" for k in self.kernels)

    @property
    def kernel_count(self) -> int:
        return sum(1 for k in self.kernels if k.cat == "kernel")

    def span(self) -> tuple[float, float]:
        """The window the step split is taken over: first to last device activity on a GPU trace;
        on a CPU trace the profiler steps' extent, else the ops'."""
        if self.on_device:
            return min(k.ts for k in self.kernels), max(k.end for k in self.kernels)
        if self.steps:
            return self.steps[0][0], max(e for _, e in self.steps)
        tops = [o for o in self.ops if o.parent is None]
        if not tops:
            return 0.0, 0.0
        return min(o.ts for o in tops), max(o.end for o in tops)

    @property
    def span_s(self) -> float:
        lo, hi = self.span()
        return hi - lo

    @property
    def busy_s(self) -> float:
        """Time the device (the CPU, for a CPU trace) was doing work: the union of the activities'
        intervals, so overlapping kernels on several streams count once."""
        if self.on_device:
            return union_length((k.ts, k.end) for k in self.kernels)
        lo, hi = self.span()
        return union_length((max(o.ts, lo), min(o.end, hi)) for o in self.ops if o.parent is None)


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by a set of intervals (overlaps counted once)."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def _num(e: Mapping[str, Any], key: str) -> float | None:
    v = e.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        try:
            return float(v)  # some writers quote numbers
        except (TypeError, ValueError):
            return None
    return float(v)


def parse_trace(data: Any) -> Trace:
    """Kernels, ops and their links from a Chrome trace's JSON; TraceError if it is not one."""
    if isinstance(data, Mapping):
        events = data.get("traceEvents")
        if not isinstance(events, list):
            raise TraceError("not a Chrome trace: there is no traceEvents list")
        meta = {k: v for k, v in data.items() if k != "traceEvents"}
    elif isinstance(data, list):
        events, meta = data, {}
    else:
        raise TraceError("not a Chrome trace: expected a JSON object with traceEvents, or a list of events")

    raw_kernels: list[dict] = []
    raw_ops: list[dict] = []
    runtime: dict[int, str] = {}  # correlation → runtime call name
    runtime_ext: dict[int, int] = {}  # correlation → the runtime call's External id
    flow_end: dict[tuple, Any] = {}  # (pid, tid, ts) of a flow's end → flow id
    steps: list[tuple[float, float]] = []
    for e in events:
        if not isinstance(e, Mapping):
            continue
        ph, cat = e.get("ph"), e.get("cat")
        if ph in ("s", "f") and cat == "ac2g":
            if ph == "f":
                flow_end[(e.get("pid"), e.get("tid"), _num(e, "ts"))] = e.get("id")
            continue
        if ph != "X":
            continue
        ts, dur = _num(e, "ts"), _num(e, "dur")
        if ts is None or dur is None:
            continue
        args = e.get("args") if isinstance(e.get("args"), Mapping) else {}
        name = str(e.get("name", ""))
        if name.startswith(STEP_PREFIX):
            steps.append((ts * US, (ts + dur) * US))
            continue
        if cat in DEVICE_CATS:
            raw_kernels.append({**e, "args": args, "ts": ts, "dur": dur})
        elif cat in OP_CATS:
            raw_ops.append({**e, "args": args, "ts": ts, "dur": dur})
        elif cat in RUNTIME_CATS:
            corr = _int(args.get("correlation"))
            ext = _int(args.get("External id"))
            if corr is not None:
                runtime[corr] = name
                if ext is not None:
                    runtime_ext[corr] = ext

    ops, by_ext = _op_tree(raw_ops)
    kernels: list[Kernel] = []
    links: list[int | None] = []
    graph: set[int] = set()
    for e in sorted(raw_kernels, key=lambda e: e["ts"]):
        a = e["args"]
        corr = _int(a.get("correlation"))
        if corr is None:  # no correlation in the args: follow the ac2g flow that ends on this kernel
            corr = _int(flow_end.get((e.get("pid"), e.get("tid"), e["ts"])))
        ext = _int(a.get("External id"))
        if ext in (None, 0) and corr is not None:
            ext = runtime_ext.get(corr)
        k = Kernel(
            name=str(e.get("name", "")), ts=e["ts"] * US, dur=e["dur"] * US, cat=str(e.get("cat")),
            external_id=ext, correlation=corr, stream=_int(a.get("stream")), device=_int(a.get("device")),
        )
        i = len(kernels)
        kernels.append(k)
        if corr is not None and runtime.get(corr) in GRAPH_LAUNCHES:
            graph.add(i)
            links.append(None)
        else:
            links.append(by_ext.get(ext) if ext not in (None, 0) else None)
    props = meta.get("deviceProperties")
    dev = ""
    if isinstance(props, list) and props and isinstance(props[0], Mapping):
        dev = str(props[0].get("name", ""))
    return Trace(
        kernels=tuple(kernels), ops=tuple(ops), kernel_op=tuple(links), graph_kernels=frozenset(graph),
        steps=tuple(sorted(steps)), device_name=dev,
        metadata={k: v for k, v in meta.items() if isinstance(v, (str, int, float))},
    )


def _op_tree(raw: Sequence[dict]) -> tuple[list[CpuOp], dict[int, int]]:
    """The ops in time order with parent/children links (nesting per thread) and self times."""
    order = sorted(range(len(raw)), key=lambda i: (str(raw[i].get("pid")), str(raw[i].get("tid")),
                                                    raw[i]["ts"], -raw[i]["dur"]))
    parent: dict[int, int | None] = {}
    kids: dict[int, list[int]] = {i: [] for i in order}
    stack: list[int] = []
    thread = None
    for i in order:
        e = raw[i]
        t = (e.get("pid"), e.get("tid"))
        if t != thread:
            stack, thread = [], t
        while stack and raw[stack[-1]]["ts"] + raw[stack[-1]]["dur"] <= e["ts"]:
            stack.pop()
        parent[i] = stack[-1] if stack else None
        if stack:
            kids[stack[-1]].append(i)
        stack.append(i)
    pos = {i: n for n, i in enumerate(order)}
    ops: list[CpuOp] = []
    by_ext: dict[int, int] = {}
    for i in order:
        e, a = raw[i], raw[i]["args"]
        child_dur = sum(raw[c]["dur"] for c in kids[i])
        dims = a.get("Input Dims")
        types = a.get("Input type")
        concrete = a.get("Concrete Inputs")
        ext = _int(a.get("External id"))
        op = CpuOp(
            name=str(e.get("name", "")), ts=e["ts"] * US, dur=e["dur"] * US, tid=e.get("tid"), external_id=ext,
            dims=tuple(dims) if isinstance(dims, list) else (),
            types=tuple(str(t) for t in types) if isinstance(types, list) else (),
            concrete=tuple(str(c) for c in concrete) if isinstance(concrete, list) else (),
            parent=pos[parent[i]] if parent[i] is not None else None,
            children=tuple(pos[c] for c in kids[i]),
            self_s=max(0.0, e["dur"] - child_dur) * US,
        )
        if ext not in (None, 0):
            by_ext[ext] = len(ops)  # the innermost op wins where an id repeats
        ops.append(op)
    return ops, by_ext
