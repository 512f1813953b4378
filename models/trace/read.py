"""A Chrome / Kineto trace (torch.profiler's `export_chrome_trace`) as device activities, CPU ops and their links.

Pure: takes the trace's decoded events and returns dataclasses; reading the
file is the store's job (`rooftop.store.tracefile`, which decodes straight
into the typed `TraceDoc` below, reading only the fields used here). No torch
is needed to read a trace.

What the events mean, across the formats in use (PyTorch 1.13 … 2.x, CUDA and ROCm):
- `cpu_op` (older: `Operator`) events are the ops the framework dispatched, with
  `Input Dims`, `Input type` and an `External id`; nested ops (aten::linear →
  aten::addmm) are nested intervals on the same thread.
- `kernel`, `gpu_memcpy` and `gpu_memset` events ran on the device (memcpy and
  memset carry their `bytes`). Each names, in `correlation`, the runtime call
  (`cuda_runtime` / `cuda_driver` / `hip_runtime`: cudaLaunchKernel,
  hipLaunchKernel, cudaGraphLaunch, cudaMemcpyAsync, …) that issued it.
- The op that launched a kernel is found as HTA finds it: the kernel's (or its
  launch's) `External id` names the op where that op encloses the launch on the
  launch's thread (PyTorch ≥ 2.0); otherwise the innermost `cpu_op` enclosing
  the launch on its thread (2022–2023 traces, where a kernel's `External id`
  is its launch's correlation). Where the args lack the ids, the `ac2g`
  (older: `async_cpu_to_gpu`) flow from the launch to the kernel links them.
- Where no op encloses a launch, the innermost `user_annotation` range around
  it (a record_function: DeepSeek-style `mlp(F)`) owns the kernel, else the
  `gpu_user_annotation` range around the kernel on its stream; it joins the ops
  with origin "annotation". A ProfilerStep range never owns.
- A CUDA-graph replay is one runtime call (cudaGraphLaunch) issuing many
  kernels that belong to no op of this trace: their time is kept apart.
- A kernel with no launch in the trace whose correlation is below every runtime
  call's (or that started before the first one) was launched before the window
  (in the warm-up step, run during the sync that opens the first step): it is
  told apart from a graph replay, which has its launch.
Times are kept in seconds (the trace counts microseconds) from the trace's
first event (`Trace.origin_us`): a trace stamped in µs since 1970 would lose a
quarter of a µs per time as seconds since then, and hundreds of µs over its
gaps. Events with times that are not finite, non-negative numbers are skipped
and counted, as are exact copies of an event (a trace written twice) and device
activities a gap of over 100× the rest's span sets apart (a wrong timestamp);
shapes that are not lists of non-negative integers are dropped (the op keeps
its time).
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import itertools
import math
import operator
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .commtrace import COMM_NAMES, CommArgs, CommCall, comm_call
from ..counters import RANGE_CAT, Counted, TraceCounters, counted, value
from ..errors import BadInput
from .kernelgrid import SAMPLES as GRID_SAMPLES
from .kernelgrid import units_of
from ..safetext import clean, clean_tree

ITERATION = "execute_"  # how vLLM's and SGLang's iteration annotations begin (a step of the server)

US = 1e-6
STEP_PREFIX = "ProfilerStep#"
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
# event category (as written, and lower-cased for older writers) → what it is here
KINDS = {
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset",
    "cpu_op": "op", "operator": "op",
    "cuda_runtime": "runtime", "cuda_driver": "runtime", "hip_runtime": "runtime", "hip_driver": "runtime",
    "runtime": "runtime", "driver": "runtime",
    "user_annotation": "annotation", "gpu_user_annotation": "gpu", "cuda_profiler_range": "gpu",
    "cuda_sync": "devsync",
}
FLOW_CATS = frozenset(("ac2g", "async_cpu_to_gpu"))
ITEM_OPS = ("aten::item", "aten::_local_scalar_dense")
DEVICE_CATS = ("kernel", "memcpy", "memset")


class TraceError(BadInput, ValueError):
    """A file that is not a usable trace; the message is one line saying what is wrong."""


class EmptyTrace(TraceError):
    """A well-formed trace with nothing to place: no kernels and no CPU ops."""


# -- the schema: only the fields read below (the decoder skips the rest) ----------------------


class EventArgs(CommArgs, gc=False):  # with a collective's message fields
    external_id: Any = msgspec.field(default=None, name="External id")
    correlation: Any = None
    stream: Any = None
    device: Any = None
    bytes: Any = None
    size: Any = None  # a HIP memcpy call's size, where its gpu_memcpy has no bytes
    kind: Any = None
    # the shapes stay raw JSON (a view of the file's bytes): the few distinct ones are decoded once each. None:
    # absent (a Raw field cannot be declared `Raw | None` to msgspec, so the checker is told to let None be)
    dims: msgspec.Raw = msgspec.field(default=None, name="Input Dims")  # type: ignore[assignment]
    dims_old: msgspec.Raw = msgspec.field(default=None, name="Input dims")  # type: ignore[assignment]
    types: msgspec.Raw = msgspec.field(default=None, name="Input type")  # type: ignore[assignment]
    concrete: msgspec.Raw = msgspec.field(default=None, name="Concrete Inputs")  # type: ignore[assignment]
    kernel: msgspec.Raw = None  # type: ignore[assignment]  # a HIP launch call's kernel name: raw, decoded only while a graph is captured
    # a kernel's launch grid (raw: decoded for the first few only) and CUPTI's blocks per SM: the SM count
    grid: msgspec.Raw = None  # type: ignore[assignment]
    blocks_per_sm: Any = msgspec.field(default=None, name="blocks per SM")
    # a cuda_sync event's: the stream its event was recorded on, and the correlation of that cudaEventRecord call
    wait_on_stream: Any = None
    wait_on_record: Any = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")


class Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: EventArgs | None = None


class PlainArgs(EventArgs, gc=False):
    """EventArgs for an event that came as plain JSON (a dict): the shapes already decoded."""

    dims: Any = msgspec.field(default=None, name="Input Dims")
    dims_old: Any = msgspec.field(default=None, name="Input dims")
    types: Any = msgspec.field(default=None, name="Input type")
    concrete: Any = msgspec.field(default=None, name="Concrete Inputs")
    kernel: Any = None
    grid: Any = None


class PlainEvent(Event, gc=False):
    args: PlainArgs | None = None


class TraceDoc(msgspec.Struct, gc=False):
    """A trace file's top level, where the file is read whole (`rooftop.store.tracefile` streams it where it
    can, in `EventChunks`). Its events stay raw JSON (views of the file's bytes, 48 bytes each) until the
    reader decodes them one by one into `Event`, so a million events never exist as objects all at once, and
    one malformed event is skipped without failing the file."""

    traceEvents: list[msgspec.Raw] | None = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    schemaVersion: Any = None
    rooftop_cpu_threads: Any = None  # torch's intra-op threads, written by `rooftop profile` when it runs a program
    baseTimeNanoseconds: Any = None  # Kineto's: the wall-clock time (ns since 1970) of its clock's zero
    hip_runtime_version: Any = None  # the runtime the device ran under (ROCm's HIP, or CUDA): part of its identity
    cuda_runtime_version: Any = None

    def fields(self) -> dict[str, Any]:
        """The top-level fields but the events, by their names in the file."""
        return {k: getattr(self, k) for k in self.__struct_fields__ if k != "traceEvents"}


@dataclass
class EventChunks:
    """A trace's events as a reader decodes them, a bounded piece of the file at a time (each chunk a list of
    `Event`, or of raw events where one in the piece is not an event object), so the file's text and its
    events never exist whole; and its top-level fields, complete once the chunks are spent (a file may write
    some after its events)."""

    chunks: Iterable[list]
    meta: dict[str, Any]


# -- the result -------------------------------------------------------------------------------


@dataclass(slots=True)
class Kernel:
    """One device activity: a kernel, a memcpy or a memset (`cat`)."""

    name: str
    ts: float  # start, seconds (trace clock)
    dur: float  # seconds
    cat: str = "kernel"  # kernel, memcpy, memset
    external_id: int | None = None
    correlation: int | None = None
    stream: int | None = None
    device: int | None = None
    bytes: float | None = None  # memcpy / memset: the bytes Kineto recorded
    direction: str = ""  # memcpy: HtoD, DtoH, DtoD, PtoP, …
    launch_ts: float | None = None  # when its runtime call began on the CPU, seconds
    launch_dur: float | None = None  # how long that call held the CPU, seconds (a long one: a full launch queue)

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(frozen=True, slots=True)
class CapturedLaunch:
    """One launch recorded while a CUDA/HIP graph was captured: it issued no kernel then (the graph replays it)."""

    name: str  # the kernel's name where the launch call gives it (HIP), "" where not (CUDA); a copy: its call's
    cat: str  # kernel, memcpy, memset
    op: int | None  # the op of this trace that issued it (index in Trace.ops)


@dataclass(frozen=True, slots=True)
class CapturedGraph:
    """The launches between a stream's BeginCapture and EndCapture on one thread, in the order they were issued."""

    ts: float  # the capture's window, seconds
    end: float
    launches: tuple[CapturedLaunch, ...]


@dataclass(slots=True)
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
    origin: str = "op"  # what recorded it: "op" (a framework op of this trace), "capture" (the op that launched the
    # kernel when its CUDA/HIP graph was captured, joined from a capture trace), "annotation" (a user range)

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(frozen=True, slots=True)
class HostCall:
    """A runtime call that holds the CPU while the device may wait: a host sync or a memcpy / memset call."""

    name: str
    ts: float
    dur: float
    kind: str  # "sync" or "copy"
    op: str = ""  # the innermost op enclosing it (aten::item for `.item()`)

    @property
    def end(self) -> float:
        return self.ts + self.dur


CALL_KINDS = ("launch", "record", "wait", "sync", "copy")  # RuntimeCalls.kind: an index into this


def call_kind(name: str) -> int | None:
    """What a runtime call does to the order of work (an index into CALL_KINDS), or None for a call that orders
    nothing (cudaFuncSetAttribute, cudaGetErrorString, …: its time is CPU work like an op's)."""
    if "Launch" in name:  # cudaLaunchKernel(ExC), cuLaunchKernelEx, hipExtModuleLaunchKernel, cudaGraphLaunch, …
        return 0
    if "EventRecord" in name:
        return 1
    if "StreamWaitEvent" in name:
        return 2
    if "Synchronize" in name:
        return 3
    if "emcpy" in name or "emset" in name:
        return 4
    return None


@dataclass(frozen=True)
class RuntimeCalls:
    """The runtime calls that order the device's work, by start: launches, event records, stream waits, syncs,
    memcpy / memset calls, each with its thread and correlation (what the critical path's graph joins on). Kept as
    columns (arrays of numbers, names shared) so a million-event trace's hundred thousand launches cost a few MB."""

    name: tuple[str, ...] = ()
    ts: array = field(default_factory=lambda: array("d"))  # start, seconds (trace clock)
    dur: array = field(default_factory=lambda: array("d"))  # seconds
    thread: array = field(default_factory=lambda: array("i"))  # index into `threads`
    correlation: array = field(default_factory=lambda: array("q"))  # -1: none
    kind: bytes = b""  # per call, an index into CALL_KINDS
    threads: tuple[tuple[Any, Any], ...] = ()  # (pid, tid)

    def __len__(self) -> int:
        return len(self.name)


@dataclass(frozen=True, slots=True)
class DeviceSync:
    """Kineto's `cuda_sync` event: what the device (or a host sync) waited on, as CUPTI saw it. "Stream Wait Event":
    `stream` waits for the event recorded (by the cudaEventRecord call of correlation `record`) on `wait_on_stream`;
    "Event Sync": the host waits for that event; "Stream Sync" / "Context Sync": for `stream` / every stream.
    `correlation` is the runtime call's (cudaStreamWaitEvent, cudaEventSynchronize, …)."""

    name: str
    ts: float
    dur: float
    stream: int | None
    correlation: int | None
    wait_on_stream: int | None
    record: int | None


@dataclass(frozen=True)
class Trace:
    """Activities and ops of one trace, linked: `kernel_op[i]` is the index in `ops` of activity i's op."""

    kernels: tuple[Kernel, ...]  # every device activity (kernels, memcpy, memset), by start time
    ops: tuple[CpuOp, ...]
    kernel_op: tuple[int | None, ...]  # per activity: its op (or the annotation standing in), or None
    graph_kernels: frozenset[int] = frozenset()  # activities issued by a CUDA-graph replay
    before_window: frozenset[int] = frozenset()  # activities that ran in the window but were launched before it
    steps: tuple[tuple[float, float], ...] = ()  # ProfilerStep#N intervals (start, end), seconds
    step_names: tuple[str, ...] = ()
    device_name: str = ""
    device_props: Mapping[str, Any] = field(default_factory=dict)  # the first device's name, memory, SMs, …
    metadata: Mapping[str, Any] = field(default_factory=dict)
    host_calls: tuple[HostCall, ...] = ()  # syncs and memcpy / memset calls, by start
    origin_us: float = 0.0  # the trace time (µs) its times count from: its first event's
    wall_base_us: float | None = None  # the wall-clock time (µs since 1970) of the trace clock's zero; None: unknown
    gpu_evidence: bool = False  # runtime calls, device properties or GPU ranges: a GPU program even with 0 kernels
    cpu_threads: int | None = None  # the program's torch threads, when the trace says
    warnings: tuple[str, ...] = ()  # what was skipped or dropped, counted (and what a graph-capture join did)
    comms: tuple[CommCall, ...] = ()  # the collectives the CPU side recorded, by start (rooftop.models.trace.commtrace)
    distributed: Mapping[str, Any] = field(default_factory=dict)  # distributedInfo: backend, rank, world_size, …
    captured: tuple[CapturedGraph, ...] = ()  # the graphs this trace captured (a capture trace's), by start
    graph_join: Mapping[str, Any] = field(default_factory=dict)  # joined to a graph capture: what was (capture.py)
    counters: TraceCounters | None = None  # the per-kernel CUPTI counters its cuda_profiler_range events carried
    # the inference framework's iteration annotations (`execute_…(sq…sk…)`, vLLM's and SGLang's): (start, end, name),
    # by start; each names its step's query and key lengths, which attention's W needs and no shape records
    iterations: tuple[tuple[float, float, str], ...] = ()
    kernel_units: int | None = None  # the SM count its kernels' launch grids say (CUPTI's blocks per SM), or None
    calls: RuntimeCalls = field(default_factory=RuntimeCalls)  # the runtime calls that order the device's work
    device_syncs: tuple[DeviceSync, ...] = ()  # Kineto's cuda_sync events, by start
    annotations: tuple[tuple[float, float, str], ...] = ()  # the CPU's user ranges (start, end, name), by start

    @property
    def range_times(self) -> bool:
        """The kernels are the CUPTI range profiler's ranges (the trace has no kernel events): their times are its
        even split of its window, not measured (it replays each kernel to count it, and times none)."""
        return self.counters is not None and self.counters.as_kernels

    @property
    def on_device(self) -> bool:
        """A GPU trace (device activities ran, or the trace is a GPU program's); otherwise a CPU program."""
        return bool(self.kernels) or self.gpu_evidence

    @property
    def kernel_count(self) -> int:
        return sum(1 for k in self.kernels if k.cat == "kernel")

    @property
    def gpus(self) -> tuple[int, ...]:
        """The devices this one process ran kernels on (HF `device_map="auto"`, DataParallel); () when the
        trace does not say. A rank of a DDP job has one."""
        return tuple(sorted({k.device for k in self.kernels if isinstance(k.device, int) and k.cat == "kernel"}))

    def span(self) -> tuple[float, float]:
        """The window the step split is taken over: first to last device activity on a GPU trace;
        on a CPU trace (or a GPU one with no activity) the profiler steps' extent, else the ops'."""
        if self.kernels:
            return self.kernels[0].ts, max(k.end for k in self.kernels)
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
        intervals, so overlapping kernels on several streams count once. A GPU trace with no
        activity was busy for 0 s, whatever its CPU did."""
        if self.on_device:
            return union_length((k.ts, k.end) for k in self.kernels)
        lo, hi = self.span()
        return union_length((max(o.ts, lo), min(o.end, hi)) for o in self.ops if o.parent is None)


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by a set of intervals (overlaps counted once)."""
    total = 0.0
    cur_s: float | None = None
    cur_e: float | None = None
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]  # set together
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]  # set together
    return total


# -- field checks -------------------------------------------------------------------------------


def _time(v: Any) -> float | None:
    """A finite time in µs, or None (NaN, ±inf, text that is not a number)."""
    t = v.__class__
    if t is float:
        return v if math.isfinite(v) else None
    if t is int:
        return float(v)
    if t is str:
        try:
            f = float(v)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _id(v: Any) -> int | None:
    """An integer id, or None (missing, inf, NaN, a list, text that is no integer)."""
    t = v.__class__
    if t is int:
        return v
    if t is float:
        return int(v) if math.isfinite(v) and v == int(v) else None
    if t is str:
        try:
            return int(v, 0) if v[:2].lower() == "0x" else int(v)
        except ValueError:
            return None
    return None


def _dims(v: Any) -> list | None:
    """Input Dims if every input is [] / a list of non-negative ints / a list of those (a TensorList); else None."""
    if v.__class__ is not list:
        return None
    for d in v:
        if d.__class__ is not list:
            return None
        for x in d:
            if x.__class__ is int:
                if x < 0:
                    return None
            elif x.__class__ is list:
                if any(y.__class__ is not int or y < 0 for y in x):
                    return None
            else:
                return None
    return v


def _strings(v: Any) -> tuple[str, ...] | None:
    if v.__class__ is not list or any(s.__class__ is not str for s in v):
        return None
    return tuple(map(clean, v))


_RAW_DECODE = msgspec.json.Decoder()
_START_LONGEST = operator.itemgetter(0, 1)  # an op row (ts, -dur, …): by start, the enclosing (longer) first
_EVENT = msgspec.json.Decoder(Event)


def _plain(v: Any) -> Any:
    """A raw JSON field decoded (None where it is not JSON or nests too deep); anything else as it is."""
    if v.__class__ is not msgspec.Raw:
        return v
    try:
        return _RAW_DECODE.decode(v)
    except (msgspec.DecodeError, RecursionError):
        return _BAD


_BAD = object()


def shapes_of(dims_v: Any, types_v: Any, conc_v: Any, cache: dict) -> tuple | None:
    """(dims, types, concrete) checked, or None where they are malformed; the raw ones looked up in `cache`, so
    a trace's many identical shapes are decoded once and shared."""
    raw = dims_v.__class__ is msgspec.Raw or types_v.__class__ is msgspec.Raw
    if raw:  # the three JSON texts, apart by a byte that no JSON text holds
        key = b"\0".join((dims_v if dims_v is not None else b"", types_v if types_v is not None else b"",
                          conc_v if conc_v is not None else b""))
        hit = cache.get(key, _BAD)
        if hit is not _BAD:
            return hit
    d, t, c = _plain(dims_v), _plain(types_v), _plain(conc_v)
    dims, types, conc = _dims(d), _strings(t), _strings(c)
    if dims is None or types is None or (c is not None and conc is None):
        out = None
    else:
        out = (tuple(dims), types, conc or ())
    if raw:
        cache[key] = out
    return out


def _thread(v: Any) -> Any:
    """A pid or tid as a key: an int as it is, anything else as text (read as the trace's names are)."""
    return v if v.__class__ is int else clean(v if v.__class__ is str else str(v))


class _Counts:
    """Skipped and dropped events, counted, with the first of each kind named."""

    def __init__(self) -> None:
        self.n: dict[str, int] = {}
        self.first: dict[str, str] = {}

    def add(self, what: str, where: str) -> None:
        self.n[what] = self.n.get(what, 0) + 1
        self.first.setdefault(what, where)

    def lines(self) -> tuple[str, ...]:
        return tuple(f"{n} event{'s' if n > 1 else ''} {what} (first: {self.first[what]})" for what, n in self.n.items())


def _where(i: int, name: Any) -> str:
    text = name if isinstance(name, str) else repr(name)
    return f"event {i}, {text[:60]!r}"


# -- reading ------------------------------------------------------------------------------------


def events_of(data: Any) -> tuple[Iterable[list], Mapping[str, Any]]:
    """The events, in chunks, and the top-level fields of a decoded trace: EventChunks (its fields complete once
    the chunks are spent), a TraceDoc (which gives its events up: the reader frees each as it goes), a list of
    Events, or plain JSON (a dict with traceEvents, or the bare event list) whose events are converted one by
    one. A chunk holds Events, raw events (decoded as they are read) or None (not an event object)."""
    if isinstance(data, EventChunks):
        return data.chunks, data.meta
    if isinstance(data, TraceDoc):
        if data.traceEvents is None:
            raise TraceError("not a Chrome trace: there is no traceEvents list")
        events, data.traceEvents = data.traceEvents, None  # given up, so each event is freed once read
        return _given_up(events), data.fields()
    if isinstance(data, Mapping):
        raw = data.get("traceEvents")
        if not isinstance(raw, list):
            raise TraceError("not a Chrome trace: there is no traceEvents list")
        meta = {k: v for k, v in data.items() if k != "traceEvents"}
    elif isinstance(data, list):
        raw, meta = data, {}
    else:
        raise TraceError("not a Chrome trace: expected a JSON object with traceEvents, or a list of events")
    if all(e.__class__ is Event or e.__class__ is msgspec.Raw for e in raw):
        return (list(raw),), meta
    return _given_up([_convert(e) for e in raw]), meta


def _given_up(events: list, n: int = 4096) -> Iterator[list]:
    """A whole file's events in chunks of `n`, each taken out of the list as it is given: an event is freed once
    its chunk is read."""
    for k in range(0, len(events), n):
        chunk = events[k:k + n]
        events[k:k + n] = [None] * len(chunk)
        yield chunk


def _convert(e: Any) -> Event | PlainEvent | msgspec.Raw | None:
    """One plain-JSON event as a PlainEvent (a counter range as its raw JSON); None when it is not an object or its
    args are not one."""
    if isinstance(e, (Event, PlainEvent)):
        return e
    if not isinstance(e, Mapping):
        return None
    if e.get("cat") == RANGE_CAT:  # kept as JSON: its counters are args no field of PlainArgs holds
        with contextlib.suppress(TypeError, ValueError, OverflowError, RecursionError):
            return msgspec.Raw(msgspec.json.encode(e))
    try:
        return msgspec.convert(e, PlainEvent, strict=False)
    except (msgspec.ValidationError, RecursionError, TypeError):
        return None


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector held off while millions of small acyclic objects (events, ops, tuples) are
    made: each collection would walk all of them again, which costs a long trace about half its reading time.
    Those that outlive it are long-lived: they go straight to the oldest generation (frozen and unfrozen at
    once), so the young collections that follow do not walk them on the way there (0.45 s of the 5 a
    million-event trace took)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def parse_trace(data: Any) -> Trace:
    """Activities, ops and their links from a decoded Chrome trace; TraceError if it is not one."""
    with paused_gc():
        return _parse_trace(data)


def _parse_trace(data: Any) -> Trace:
    """One pass over the events (`_read_events`), then the links it leaves to make (`_linked`)."""
    chunks, meta = events_of(data)
    counts = _Counts()
    return _linked(_read_events(chunks, counts), meta, counts)


@dataclass(slots=True)
class _Read:
    """What one pass over a trace's events keeps, as read (times in µs from `base`), for the linking after it."""

    dev_raw: list[tuple] = field(default_factory=list)  # (ts, dur, cat, name, ext, corr, stream, device, bytes, pid,
    # tid, kind, event index)
    op_raw: dict[tuple, list[tuple]] = field(default_factory=dict)  # (pid, tid) → [(ts, -dur, name, ext, shapes)]
    runtime: dict[int, tuple] = field(default_factory=dict)  # correlation → (pid, tid, ts, dur, name, ext, size)
    host: list[tuple] = field(default_factory=list)  # (pid, tid, ts, dur, name, kind)
    flows: list[tuple] = field(default_factory=list)  # (is the start, flow id, pid, tid, ts): made into look-ups
    # only if a kernel needs them
    steps: list[tuple[float, float, str]] = field(default_factory=list)
    base: float | None = None  # the first event's time, µs: every time is kept from it
    gpu_evidence: bool = False
    comms: list[CommCall] = field(default_factory=list)
    captures: list[tuple] = field(default_factory=list)  # (pid, tid, ts, dur, is the begin): a stream's graph
    # capture opened or closed
    capturing: dict[tuple, int] = field(default_factory=dict)  # (pid, tid) → captures open there, in file order
    launch_names: dict[int, str] = field(default_factory=dict)  # correlation → the kernel a launch made while
    # capturing names (HIP)
    grids: list[tuple] = field(default_factory=list)  # the first kernels' (launch grid, blocks per SM): their SM
    # count (models.kernelgrid)
    ranges: list[tuple] = field(default_factory=list)  # cuda_profiler_range events: (ts, dur, name, pid, tid, event
    # index, counters)
    ann_raw: tuple[dict, dict] = field(default_factory=lambda: ({}, {}))  # user_annotation, gpu_user_annotation
    # rows by (pid, tid), as op_raw
    iterations: list[tuple[float, float, str]] = field(default_factory=list)  # the framework's iteration
    # annotations (start, end, name)
    call_cols: tuple[Any, ...] = field(default_factory=lambda: (array("d"), array("d"), array("i"), array("q"),
                                                                bytearray(), []))  # RuntimeCalls' columns, as read
    call_threads: dict[tuple, int] = field(default_factory=dict)
    dev_syncs: list[DeviceSync] = field(default_factory=list)
    annotations: list[tuple[float, float, str]] = field(default_factory=list)


def _read_events(chunks: Iterable[list], counts: _Counts) -> _Read:
    """Every event read once, in the file's order, into `_Read`'s rows. The frequent kinds (kernels, ops, launches,
    flows) are read here with their containers as locals; the rarer ones by helpers."""
    r = _Read()
    dev_raw, op_raw, flows, grids = r.dev_raw, r.op_raw, r.flows, r.grids
    base: float | None = None
    gpu_evidence = False
    names: dict[str, str] = {}
    empty_args = EventArgs()
    shape_cache: dict = {}
    none3 = ((), (), ())
    op_pid = op_tid = rows = None  # the thread of the last op read, and its rows
    call_kinds: dict[str, int | None] = {}  # name → call_kind(name)
    decode_event = _EVENT.decode
    for i, e in enumerate(itertools.chain.from_iterable(chunks)):  # each chunk freed once read
        raw = e  # a counter range's args are read again from it (its counters are not fields of EventArgs)
        if e.__class__ is msgspec.Raw:
            try:
                e = decode_event(e)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                e = None
        if e is None:
            counts.add("skipped: not a JSON object with object args", f"event {i}")
            continue
        ph, cat = e.ph, e.cat
        if ph != "X":
            if cat.__class__ is str and cat in FLOW_CATS and (ph == "s" or ph == "f" or ph == "t"):
                base = _flow(flows, e, base)
            continue
        kind = KINDS.get(cat) if cat.__class__ is str else None
        if kind is None and (cat.__class__ is not str or (kind := KINDS.get(cat.lower())) is None):
            continue
        name = e.name if e.name.__class__ is str else ("" if e.name is None else str(e.name))
        ts, dur = e.ts, e.dur
        if ts.__class__ is not float or ts - ts != 0.0:  # not a finite float: an int, text, NaN, …
            ts = _time(ts)
        if dur.__class__ is not float or dur - dur != 0.0:
            dur = _time(dur)
        if ts is None or dur is None or dur < 0:
            counts.add("skipped: a time (ts, dur) that is missing, not finite or negative", _where(i, name))
            continue
        if base is None:
            base = ts
        ts -= base
        a = e.args or empty_args
        got = names.get(name)
        if got is None:  # a name seen first: kept once, without the controls a terminal would obey
            got = names[name] = clean(name)
        name = got
        if (kind == "op" or kind == "annotation") and name.startswith(COMM_NAMES) and \
                (c := comm_call(kind, name, ts * US, dur * US, _thread(e.pid), _thread(e.tid), e.args)) is not None:
            r.comms.append(c)  # a collective: kept as one, and read on as an op (or annotation) as any other
        pid = e.pid if e.pid.__class__ is int else _thread(e.pid)
        tid = e.tid if e.tid.__class__ is int else _thread(e.tid)
        if kind == "kernel" or kind == "memcpy" or kind == "memset":
            dev_raw.append((ts, dur, kind, name, a.external_id, a.correlation, a.stream, a.device, a.bytes, pid, tid,
                            a.kind, i))
            if a.blocks_per_sm is not None and len(grids) < GRID_SAMPLES:
                grids.append((a.grid, a.blocks_per_sm))
        elif name.startswith(STEP_PREFIX):
            if kind in ("op", "annotation"):  # the CPU's step, not its copy on the GPU's timeline
                r.steps.append((ts, ts + dur, name))
            else:
                gpu_evidence = True
        elif kind == "op":
            dims_v = a.dims if a.dims is not None else a.dims_old
            shapes = none3 if dims_v is None else shapes_of(dims_v, a.types, a.concrete, shape_cache)
            if shapes is None:
                counts.add("with shapes that are not lists of non-negative integers (shapes dropped, time kept)",
                           _where(i, name))
                shapes = none3
            ext_v = a.external_id
            ext = ext_v if ext_v.__class__ is int else _id(ext_v)
            if ext is None and ext_v is not None:
                counts.add("with an External id that is not an integer (not linked)", _where(i, name))
            if pid != op_pid or tid != op_tid:  # another thread's op than the last one's (an int or a text each)
                op_pid, op_tid = pid, tid
                rows = op_raw.get((pid, tid))
                if rows is None:
                    rows = op_raw[pid, tid] = []
            rows.append((ts, -dur, name, ext, shapes))  # type: ignore[union-attr]  # the thread's rows, set above
        elif kind == "runtime":
            gpu_evidence = True
            _runtime(r, a, pid, tid, ts, dur, name, names, call_kinds)
        elif kind == "annotation" or cat == "gpu_user_annotation":  # a user range: may stand in as an owner
            gpu_evidence = gpu_evidence or kind == "gpu"
            _annotation(r, kind, pid, tid, ts, dur, name)
        elif kind == "devsync":  # what the device waited on (a stream on an event, a host sync), as CUPTI saw it
            gpu_evidence = True
            r.dev_syncs.append(DeviceSync(name, ts * US, dur * US, _id(a.stream), _id(a.correlation),
                                          _id(a.wait_on_stream), _id(a.wait_on_record)))
        elif kind == "gpu":
            gpu_evidence = True
            if cat == RANGE_CAT:
                r.ranges.append(_range(raw, ts, dur, name, e.pid, e.tid, i, counts))
    r.base, r.gpu_evidence = base, gpu_evidence
    return r


def _flow(flows: list[tuple], e: Event, base: float | None) -> float | None:
    """An ac2g flow's start (at a launch) or end (at its activity) kept as (is the start, flow id, pid, tid, ts);
    returns the trace's base time, set here where a flow is the first event with a time."""
    ts, fid = e.ts, e.id
    if ts.__class__ is not float:
        ts = _time(ts)
    if ts is not None and (fid.__class__ is int or fid.__class__ is str):
        if base is None:
            base = ts
        pid, tid = e.pid, e.tid
        flows.append((e.ph == "s", fid, pid if pid.__class__ is int else _thread(pid),
                      tid if tid.__class__ is int else _thread(tid), ts - base))
    return base


def _runtime(r: _Read, a: EventArgs, pid: Any, tid: Any, ts: float, dur: float, name: str, names: dict[str, str],
             call_kinds: dict[str, int | None]) -> None:
    """A runtime call: kept by its correlation (what its activities link to), as a call that orders the device's
    work (`RuntimeCalls`) where it does one, as a host call (`_host_call`) where it is no launch; a launch made while
    its thread captures a graph names its kernel (HIP)."""
    corr = _id(a.correlation)
    if corr is not None:
        r.runtime[corr] = (pid, tid, ts, dur, name, a.external_id, a.size)
    ck = call_kinds.get(name, _BAD)
    if ck is _BAD:
        ck = call_kinds[name] = call_kind(name)
    if ck is not None:
        th = r.call_threads.get((pid, tid))
        if th is None:
            th = r.call_threads[pid, tid] = len(r.call_threads)
        cols = r.call_cols
        cols[0].append(ts * US)
        cols[1].append(dur * US)
        cols[2].append(th)
        cols[3].append(corr if corr is not None and -2**63 < corr < 2**63 else -1)
        cols[4].append(ck)
        cols[5].append(name)
    if "Launch" not in name:
        _host_call(r, pid, tid, ts, dur, name)
    elif r.capturing and corr is not None and (pid, tid) in r.capturing and \
            (k := _plain(a.kernel)).__class__ is str:  # a graph's launch: its kernel is named only here
        got = names.get(k)
        r.launch_names[corr] = got if got is not None else names.setdefault(k, clean(k))


def _host_call(r: _Read, pid: Any, tid: Any, ts: float, dur: float, name: str) -> None:
    """A runtime call other than a launch: a sync or a copy the host waited on, or a stream's graph capture opened
    or closed (a launch holds the CPU for its own cost only)."""
    if "Synchronize" in name:  # cudaDeviceSynchronize, cudaStreamSynchronize, hipEventSynchronize, …
        r.host.append((pid, tid, ts, dur, name, "sync"))
    elif "emcpy" in name or "emset" in name:  # cudaMemcpyAsync, hipMemsetAsync, cuMemcpyDtoH, …
        r.host.append((pid, tid, ts, dur, name, "copy"))
    elif "BeginCapture" in name or "EndCapture" in name:  # cudaStreamBeginCapture, hipStreamEndCapture, …
        begin = "Begin" in name
        r.captures.append((pid, tid, ts, dur, begin))
        n_open = r.capturing.get((pid, tid), 0) + (1 if begin else -1)
        if n_open > 0:
            r.capturing[(pid, tid)] = n_open
        else:
            r.capturing.pop((pid, tid), None)


def _annotation(r: _Read, kind: str, pid: Any, tid: Any, ts: float, dur: float, name: str) -> None:
    """A user range (on the CPU, or its copy on the GPU's timeline): a row that may stand in as an owner; a CPU one
    also kept as an annotation, and as an iteration where the framework names it so."""
    r.ann_raw[kind == "gpu"].setdefault((pid, tid), []).append((ts, -dur, name, None, ((), (), ())))
    if kind == "annotation":
        r.annotations.append((ts * US, (ts + dur) * US, name))
        if name.startswith(ITERATION):
            r.iterations.append(r.annotations[-1])


def _linked(r: _Read, meta: Mapping[str, Any], counts: _Counts) -> Trace:
    """The Trace of one pass's rows: repeats and far-out activities dropped, the op tree made, each device activity
    linked to its launch and its op (`_link_kernels`)."""
    steps = sorted(set(r.steps))  # a step recorded twice is one step
    host = list(dict.fromkeys(r.host))
    comms = list(dict.fromkeys(r.comms))
    runtime, base = r.runtime, r.base
    range_counts = _match_ranges(r.ranges, runtime, r.dev_raw, counts)
    r.dev_raw.sort(key=lambda row: row[0])
    cpu_spans = itertools.chain(((c[2], c[3]) for c in runtime.values()), ((s0, s1 - s0) for s0, s1, _ in steps))
    dev_raw = r.dev_raw = _far_out(_unrepeated(r.dev_raw, counts), r.op_raw, cpu_spans, counts)
    ops, by_ext, threads, op_thread = _op_tree(r.op_raw, counts)
    r.op_raw = {}
    owners = _Annotations(ops, *r.ann_raw)
    kernels, links, graph, before = _link_kernels(r, ops, by_ext, threads, op_thread, owners, counts)
    counters = _kernel_counters(r.ranges, range_counts, dev_raw)
    host_calls = tuple(sorted((HostCall(name, ts * US, dur * US, kind, _enclosing_name(ops, threads, (pid, tid, ts)))
                               for pid, tid, ts, dur, name, kind in host), key=lambda h: h.ts))
    captured = _captured(r.captures, runtime, r.launch_names, {k.correlation for k in kernels},
                         lambda ext, at: _link(ops, by_ext, threads, op_thread, _id(ext), at)) if r.captures else ()
    props, dev = _device_props(meta.get("deviceProperties"))
    threads_v = _id(meta.get("rooftop_cpu_threads"))
    return Trace(
        kernels=tuple(kernels), ops=tuple(ops), kernel_op=tuple(links), graph_kernels=frozenset(graph),
        before_window=frozenset(before),
        steps=tuple((s * US, t * US) for s, t, _ in steps), step_names=tuple(n for *_, n in steps),
        device_name=dev, device_props=props, kernel_units=units_of((_json(g), b) for g, b in r.grids),
        metadata={clean(str(k)): clean(v) if isinstance(v, str) else v for k, v in meta.items()
                  if isinstance(v, (str, int, float)) and not isinstance(v, bool)},
        host_calls=host_calls, origin_us=base or 0.0, wall_base_us=_wall_base(base, meta.get("baseTimeNanoseconds")),
        gpu_evidence=r.gpu_evidence or bool(props), cpu_threads=threads_v if threads_v and threads_v > 0 else None,
        warnings=counts.lines(), comms=tuple(sorted(comms, key=lambda c: c.ts)),
        distributed=clean_tree(dict(meta["distributedInfo"]))  # type: ignore[arg-type]  # a dict in, a dict out
        if isinstance(meta.get("distributedInfo"), Mapping)
        else {}, captured=captured,
        counters=counters, iterations=tuple(sorted(set(r.iterations))), calls=_calls(r.call_cols, r.call_threads),
        device_syncs=tuple(sorted(set(r.dev_syncs), key=lambda d: d.ts)),
        annotations=tuple(sorted(set(r.annotations))),
    )


def _link_kernels(r: _Read, ops: Sequence[CpuOp], by_ext: Mapping[int, int], threads: Mapping,
                  op_thread: Sequence[tuple], owners: _Annotations, counts: _Counts
                  ) -> tuple[list[Kernel], list[int | None], set[int], set[int]]:
    """Each device activity as a Kernel, with its launch (by correlation, else the ac2g flow that ends on it) and its
    op (by External id, else the op or annotation around its launch); the graph-replayed ones and those launched
    before the window, which no op owns."""
    runtime = r.runtime
    first_call = (min(runtime), min(c[2] for c in runtime.values())) if runtime else None
    kernels: list[Kernel] = []
    links: list[int | None] = []
    graph: set[int] = set()
    before: set[int] = set()
    flow_maps: tuple[dict, dict] | None = None
    for ts, dur, cat, name, ext_v, corr_v, stream, device, nbytes, pid, tid, mkind, i in r.dev_raw:
        corr = corr_v if corr_v.__class__ is int else _id(corr_v)
        if corr is None and corr_v is not None:
            counts.add("with a correlation that is not an integer (not linked)", _where(i, name))
        launch = runtime.get(corr) if corr is not None else None
        if launch is None:  # no launch by correlation: follow the ac2g flow that ends on this activity
            if flow_maps is None:
                flow_maps = _flow_maps(r.flows)
            flow_start, flow_end = flow_maps
            flow = flow_end.get((pid, tid, ts))
            if corr is None and flow is not None:
                corr = _id(flow)
                launch = runtime.get(corr) if corr is not None else None
            at = (launch[0], launch[1], launch[2]) if launch else flow_start.get(flow if flow is not None else corr)
        else:
            at = (launch[0], launch[1], launch[2])
        ext = ext_v if ext_v.__class__ is int else _id(ext_v)
        if ext_v is not None and ext is None:
            counts.add("with an External id that is not an integer (not linked)", _where(i, name))
        if not ext and launch is not None:
            ext = _id(launch[5])
        b = None
        direction = ""
        if cat != "kernel":
            if (nbytes is None or _time(nbytes) is None) and launch is not None:
                nbytes = launch[6]  # HIP: the size is on the memcpy call
            b = _time(nbytes)
            if b is not None and b < 0:
                b = None
            if cat == "memcpy":
                direction = clean(mkind) if isinstance(mkind, str) and mkind[:1].isalpha() and "to" in mkind else ""
                if not direction:
                    parts = name.split()
                    direction = parts[1] if len(parts) > 1 and "to" in parts[1] else "other"
        k = Kernel(name, ts * US, dur * US, cat, ext, corr, stream if stream.__class__ is int else _id(stream),
                   device if device.__class__ is int else _id(device), b, direction, at[2] * US if at else None,
                   launch[3] * US if launch is not None else None)
        n = len(kernels)
        kernels.append(k)
        if launch is not None and launch[4] in GRAPH_LAUNCHES:
            graph.add(n)
            links.append(None)
            continue
        if at is None and first_call is not None and (corr < first_call[0] if corr is not None else ts < first_call[1]):
            before.add(n)  # no launch in the trace, issued before its first runtime call: launched before the window
            links.append(None)
            continue
        o = _link(ops, by_ext, threads, op_thread, ext, at)
        links.append(o if o is not None else owners.owner(at, (pid, tid, ts)))
    return kernels, links, graph, before


def _calls(cols: tuple, threads: Mapping[tuple, int]) -> RuntimeCalls:
    """The kept runtime calls as RuntimeCalls, by start (a trace may write each thread's calls apart); a call recorded
    twice (same thread, start, length and name) kept once. Calls already in order with no copy (the usual file) keep
    their columns as read: nothing is made again."""
    ts, dur, th, corr, kind, names = cols
    sorted_ = all(ts[i] <= ts[i + 1] for i in range(len(ts) - 1))
    order = range(len(ts)) if sorted_ else sorted(range(len(ts)), key=ts.__getitem__)
    keep: list[int] | None = None  # the kept calls' places, once a copy is found
    same: list[int] = []  # the kept calls of this start: only they can be copies of the next one
    for n, i in enumerate(order):
        if same and ts[same[0]] != ts[i]:
            same = []
        if same and any(dur[j] == dur[i] and th[j] == th[i] and corr[j] == corr[i] and names[j] == names[i]
                        for j in same):
            if keep is None:
                keep = list(order[:n])
            continue
        same.append(i)
        if keep is not None:
            keep.append(i)
    threads_t = tuple(k for k, _ in sorted(threads.items(), key=lambda kv: kv[1]))
    if keep is None and sorted_:
        return RuntimeCalls(tuple(names), ts, dur, th, corr, bytes(kind), threads_t)
    if keep is None:
        keep = list(order)
    return RuntimeCalls(tuple(map(names.__getitem__, keep)), array("d", map(ts.__getitem__, keep)),
                        array("d", map(dur.__getitem__, keep)), array("i", map(th.__getitem__, keep)),
                        array("q", map(corr.__getitem__, keep)), bytes(map(kind.__getitem__, keep)), threads_t)


GRAPH_CALLS = ("GraphLaunch", "HostFunc")  # launches that put no kernel into the graph being captured


def _captured(marks: Sequence[tuple], runtime: Mapping[int, tuple], names: Mapping[int, str], ran: Collection,
              link: Callable[[Any, tuple], int | None]) -> tuple[CapturedGraph, ...]:
    """The graphs captured in the trace: each BeginCapture paired with the next EndCapture on its thread, and the
    kernel launches, memcpy and memset calls made on that thread between them that ran nothing then (a launch on
    a stream not being captured runs: it has a device activity), each with the op that issued it."""
    windows: dict[tuple, list[tuple[float, float]]] = {}
    open_: dict[tuple, list[float]] = {}
    for pid, tid, ts, dur, begin in sorted(marks, key=lambda m: m[2]):
        if begin:
            open_.setdefault((pid, tid), []).append(ts + dur)
        elif open_.get((pid, tid)):
            windows.setdefault((pid, tid), []).append((open_[(pid, tid)].pop(), ts))
    found: dict[tuple, list[tuple]] = {}
    for corr, (pid, tid, ts, _dur, name, ext, _size) in runtime.items():
        spans = windows.get((pid, tid))
        if not spans or corr in ran:
            continue
        if "Launch" in name and not any(w in name for w in GRAPH_CALLS):
            cat = "kernel"
        elif "emcpy" in name or "emset" in name:
            cat = "memcpy" if "emcpy" in name else "memset"
        else:
            continue
        for lo, hi in spans:
            if lo <= ts <= hi:
                label = names.get(corr, "") if cat == "kernel" else name
                found.setdefault((pid, tid, lo, hi), []).append((ts, corr, CapturedLaunch(label, cat,
                                                                                          link(ext, (pid, tid, ts)))))
                break
    graphs = [CapturedGraph(lo * US, hi * US, tuple(c for *_, c in sorted(rows, key=lambda r: r[:2])))
              for (_p, _t, lo, hi), rows in found.items()]
    return tuple(sorted(graphs, key=lambda g: g.ts))


REPEATED = "skipped: an exact copy of another event (recorded twice: same name, times and ids)"
FAR = 100.0  # an activity this many times the rest's span away from it (and FAR_FLOOR_S at least) is no part of it
FAR_FLOOR_S = 10.0  # so that a gap under 1000 s is never cut, however short the rest
FAR_OUT = (f"skipped: a device activity far outside the rest of the trace (a gap over {FAR:g}× the rest's span: "
           "a wrong timestamp)")


def _unrepeated(rows: list[tuple], counts: _Counts) -> list[tuple]:
    """The device activities (sorted by start) less exact copies: an event written twice (two exports merged)
    would count its time twice. A copy has the same start, so only the rows of one start are compared."""
    out: list[tuple] = []
    group: list[tuple] = []  # the rows of this start
    start = None
    for r in rows:
        if r[0] != start:
            start, group = r[0], [r]
        elif any(g[:-1] == r[:-1] for g in group):  # all but the event's index
            counts.add(REPEATED, _where(r[-1], r[3]))
            continue
        else:
            group.append(r)
        out.append(r)
    return out


def _far_out(rows: list[tuple], op_raw: Mapping[tuple, list[tuple]], cpu: Iterable[tuple[float, float]],
             counts: _Counts) -> list[tuple]:
    """The device activities (sorted by start, µs) less those a gap of over FAR× the rest's span (FAR_FLOOR_S at
    least) sets apart from the rest: one wrong timestamp would stretch the span to years. The CPU's ops, runtime
    calls and steps (`cpu`: start, length) bridge the gaps they cover (a long stall the CPU recorded is no gap);
    where the timeline splits, the side with more activities is kept."""
    if len(rows) < 2 or not _has_far_gap(rows):
        return rows  # the usual case: one pass over the activities
    spans = [(r[0], r[0] + r[1], n) for n, r in enumerate(rows)]
    spans += [(r[0], r[0] - r[1], -1) for ops in op_raw.values() for r in ops]
    spans += [(t, t + d, -1) for t, d in cpu]
    spans.sort()
    for _ in range(16):  # each cut drops at least one activity; a few wrong stamps need a few cuts
        cut = _far_cut(spans)
        if cut is None:
            break
        left, right = spans[:cut], spans[cut:]
        keep, drop = (left, right) if _devices(left) >= _devices(right) else (right, left)
        for *_, n in drop:
            if n >= 0:
                counts.add(FAR_OUT, _where(rows[n][-1], rows[n][3]))
        spans = keep
    kept = sorted(n for *_, n in spans if n >= 0)
    return [rows[n] for n in kept] if len(kept) < len(rows) else rows


def _devices(spans: Sequence[tuple]) -> int:
    return sum(1 for *_, n in spans if n >= 0)


def _has_far_gap(rows: Sequence[tuple]) -> bool:
    """Whether the widest gap between the activities (rows of start, length, …, by start; µs) is over FAR× the
    rest of their extent."""
    end, widest = rows[0][0] + rows[0][1], 0.0
    for r in rows:
        s = r[0]
        if s > end:
            if s - end > widest:
                widest = s - end
            end = s + r[1]
        elif s + r[1] > end:
            end = s + r[1]
    whole = end - rows[0][0]
    return widest > FAR * max(whole - widest, FAR_FLOOR_S / US)


def _far_cut(spans: Sequence[tuple]) -> int | None:
    """Where the widest gap of the intervals (sorted by start) splits them, when it is a far one."""
    end, widest, at = spans[0][1], 0.0, None
    for i, (s, e, _) in enumerate(spans):
        if s > end and s - end > widest:
            widest, at = s - end, i
        end = max(end, e)
    whole = end - spans[0][0]
    return at if at is not None and widest > FAR * max(whole - widest, FAR_FLOOR_S / US) else None


def _flow_maps(flows: Sequence[tuple]) -> tuple[dict, dict]:
    """flow id → (pid, tid, ts) where it starts (the launch); (pid, tid, ts) where it ends (the kernel) → flow id."""
    start: dict = {}
    end: dict = {}
    for is_start, fid, pid, tid, ts in flows:
        if is_start:
            start[fid] = (pid, tid, ts)
        else:
            end[(pid, tid, ts)] = fid
    return start, end


# -- counter ranges: the CUPTI range profiler's per-kernel counters (rooftop.models.counters) ------------------


class _RangeEvent(msgspec.Struct, gc=False):
    """A counter range's args whole: metric name → count (the few such events are decoded twice)."""

    args: dict[str, Any] | None = None


_RANGE = msgspec.json.Decoder(_RangeEvent)
RANGE_IDS = ("correlation", "External id", "device", "stream")  # args of a range that are ids, not counters
LAUNCHES = ("LaunchKernel", "LaunchCooperativeKernel")  # cudaLaunchKernel(ExC), cuLaunchKernel(Ex), …
BAD_COUNTER = "with a counter that is not a finite, non-negative number (that counter left out)"


def _range(raw: Any, ts: float, dur: float, name: str, pid: Any, tid: Any, i: int, counts: _Counts) -> tuple:
    """A cuda_profiler_range event as (ts, dur, name, pid, tid, event index, {metric: value}): its args are its
    counters, read again from the event's JSON (they are no fields of EventArgs)."""
    args: dict[str, Any] = {}
    if raw.__class__ is msgspec.Raw:
        with contextlib.suppress(msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            args = _RANGE.decode(raw).args or {}
    values: dict[str, float] = {}
    for k, v in args.items():
        if k in RANGE_IDS:
            continue
        x = value(v)
        if x is None:
            counts.add(BAD_COUNTER, _where(i, f"{name[:40]}: {k}"))
        else:
            values[clean(k)] = x
    return ts, dur, name, _thread(pid), _thread(tid), i, values


def _match_ranges(ranges: list[tuple], runtime: Mapping[int, tuple], dev_raw: list[tuple],
                  counts: _Counts) -> tuple[dict[int, Counted], int]:
    """Each counter range's kernel, as HTA pairs them: the range profiler replays the kernels in launch order, so
    the n-th range (by start) counts the n-th kernel launch (cudaLaunchKernel and kin, by start), where the trace
    holds as many launches as ranges (on one device: the launches do not say theirs). The launch gives the kernel
    by its correlation; a trace with no kernel events (a range-profiler trace: the profiler records nothing else)
    gets each range as its kernel instead, with its launch's correlation, so it is linked to its op as a kernel is.
    With kernel events but another number of launches, the n-th range is the n-th kernel where there are as many.
    A pairing whose kernel names disagree with the ranges' (most of them) is no pairing. Returns the event index of
    each counted kernel (or range) → its W and Q, and how many ranges were matched; appends the ranges that stand
    for kernels to `dev_raw`."""
    if not ranges:
        return {}, 0
    ranges.sort(key=lambda r: (r[0], r[5]))
    launches = sorted((c[2], corr) for corr, c in runtime.items() if any(n in c[4] for n in LAUNCHES))
    one_device = len({r[3] for r in ranges}) == 1
    kernel_rows = [r for r in dev_raw if r[2] == "kernel"]
    out: dict[int, Counted] = {}
    if not kernel_rows:
        paired = one_device and len(launches) == len(ranges)
        for n, (ts, dur, name, pid, tid, i, values) in enumerate(ranges):
            corr = launches[n][1] if paired else None
            dev = pid if pid.__class__ is int else None
            dev_raw.append((ts, dur, "kernel", name, None, corr, None, dev, None, pid, tid, None, i))
            out[i] = counted(values)
        matched = len(ranges) if paired else 0
    else:
        by_corr = {_id(r[5]): r for r in kernel_rows}
        rows: list[tuple | None] = []
        if one_device and len(launches) == len(ranges):
            rows = [by_corr.get(corr) for _, corr in launches]
        if not _names_agree(ranges, rows) and len(kernel_rows) == len(ranges):
            rows = sorted(kernel_rows, key=lambda r: (r[0], r[-1]))  # type: ignore[index]  # rows as read
        if not _names_agree(ranges, rows):
            rows = []
        for r, k in zip(ranges, rows):
            if k is not None:
                out[k[-1]] = counted(r[6])
        matched = len(out)
    if matched < len(ranges):
        what = (f"(counter ranges) matched to no kernel: {len(ranges)} ranges, {len(launches)} kernel launches, "
                f"{len(kernel_rows)} kernels" + ("" if one_device else ", ranges of several GPUs")
                + " (the n-th range is the n-th launch only where there are as many); "
                + ("each is a kernel no op owns" if not kernel_rows else "their counters are left out"))
        for r in ranges[:len(ranges) - matched]:
            counts.add(what, _where(r[5], r[2]))
    return out, matched


UNNAMED_RANGE = "__missing__"  # a range whose kernel name the profiler did not keep


def _names_agree(ranges: Sequence[tuple], rows: Sequence[tuple | None]) -> bool:
    """Whether a pairing of ranges with kernel rows holds: one row each, most of whose names are the range's."""
    if not rows or len(rows) != len(ranges) or any(k is None for k in rows):
        return False
    named = [(r[2], k[3]) for r, k in zip(ranges, rows) if k is not None and r[2] != UNNAMED_RANGE]
    return sum(a == b for a, b in named) * 2 >= len(named)


def _kernel_counters(ranges: Sequence[tuple], matched: tuple[dict[int, Counted], int],
                     dev_raw: Sequence[tuple]) -> TraceCounters | None:
    """The counters by kernel index (`dev_raw` is in the kernels' order, each row's last field its event's index)."""
    if not ranges:
        return None
    by_event, n = matched
    kernels = {k: by_event[r[-1]] for k, r in enumerate(dev_raw) if r[-1] in by_event}
    metrics = tuple(sorted({m for r in ranges for m in r[6]}))
    own = {r[5] for r in ranges}
    as_kernels = not any(r[2] == "kernel" and r[-1] not in own for r in dev_raw)  # no kernel but the ranges
    return TraceCounters(kernels, metrics, len(ranges), n, as_kernels)


EPOCH_US = 1e15  # a trace time past this (2001 in µs since 1970; 31 years of a clock since boot) is wall clock


def _wall_base(origin: float | None, base_ns: Any) -> float | None:
    """The wall-clock time (µs since 1970) of the trace clock's zero: 0 where its times are µs since 1970, its
    baseTimeNanoseconds where it gives one (Kineto's clock since boot), else unknown."""
    if origin is not None and origin > EPOCH_US:
        return 0.0
    if base_ns.__class__ is int and base_ns > 0:
        return base_ns / 1e3
    return None


def _json(v: Any) -> Any:
    """A raw JSON field decoded (None where it is not JSON); any other value as it is."""
    if v.__class__ is not msgspec.Raw:
        return v
    try:
        return msgspec.json.decode(v)
    except (msgspec.DecodeError, RecursionError):
        return None


def _device_props(v: Any) -> tuple[dict[str, Any], str]:
    """The first device's properties (name, memory, SMs / CUs, compute capability, warp size) and its name."""
    if not isinstance(v, list) or not v or not isinstance(v[0], Mapping):
        return {}, ""
    d = v[0]
    keep = {k: clean(d[k]) if isinstance(d[k], str) else d[k]
            for k in ("name", "totalGlobalMem", "numSms", "computeMajor", "computeMinor", "warpSize")
            if isinstance(d.get(k), (int, float, str)) and not isinstance(d.get(k), bool)}
    return keep, str(keep.get("name", ""))[:200]


def _enclosing(ops: Sequence[CpuOp], threads: Mapping[tuple, tuple[list[float], list[int]]],
               at: tuple) -> int | None:
    """The innermost op enclosing the time `at[2]` (µs) on thread (`at[0]`, `at[1]`)."""
    th = threads.get((at[0], at[1]))
    if th is None:
        return None
    starts, idx = th
    t = at[2] * US
    j = bisect.bisect_right(starts, t) - 1
    if j < 0:
        return None
    o: int | None = idx[j]
    while o is not None:
        op = ops[o]
        if op.ts <= t <= op.end:
            return o
        o = op.parent
    return None


def _enclosing_name(ops: Sequence[CpuOp], threads: Mapping, at: tuple) -> str:
    """The innermost op enclosing a host call, or the `.item()` op around it where there is one."""
    o = _enclosing(ops, threads, at)
    inner = ops[o].name if o is not None else ""
    while o is not None:
        if ops[o].name in ITEM_OPS:
            return ops[o].name
        o = ops[o].parent
    return inner


def _link(ops: Sequence[CpuOp], by_ext: Mapping[int, int], threads: Mapping, op_thread: Sequence[tuple],
          ext: int | None, at: tuple | None) -> int | None:
    """The op that launched an activity: by External id where that op encloses the launch on the launch's thread
    (or no launch is known), else the innermost op enclosing the launch on its thread."""
    o = by_ext.get(ext) if ext not in (None, 0) else None
    if at is None:
        return o
    if o is not None and op_thread[o] == (at[0], at[1]) and ops[o].ts <= at[2] * US <= ops[o].end:
        return o
    return _enclosing(ops, threads, at)


class _Annotations:
    """The user ranges (`user_annotation` on the CPU, `gpu_user_annotation` on the device's streams) that stand in
    as the owner of an activity no framework op launched: DeepSeek-style code launches its kernels inside
    record_function ranges (`mlp(F)`, `dispatch(F)`), not inside aten ops. The innermost CPU range enclosing the
    launch on its thread wins, else the innermost device range enclosing the activity on its stream; a profiler
    step never owns (it is not read as a range here). A range that owns something joins the trace's ops, with
    origin "annotation"."""

    def __init__(self, ops: list[CpuOp], cpu: dict[tuple, list[tuple]], gpu: dict[tuple, list[tuple]]) -> None:
        self.ops = ops
        self.cpu, _, self.cpu_threads, _ = _op_tree(cpu)
        self.gpu, _, self.gpu_threads, _ = _op_tree(gpu)
        self.index: dict[tuple[bool, int], int] = {}  # (on the device, its index there) → its index in ops

    def owner(self, launch: tuple | None, activity: tuple) -> int | None:
        """The op index of the range owning an activity launched at `launch` (pid, tid, µs) that ran at
        `activity` (pid, tid, µs); None when no range encloses it."""
        a = _enclosing(self.cpu, self.cpu_threads, launch) if launch is not None else None
        on_gpu = a is None
        if on_gpu:
            a = _enclosing(self.gpu, self.gpu_threads, activity)
            if a is None:
                return None
        # `a` is a range's index here (None returned above)
        at = self.index.get((on_gpu, a))  # type: ignore[arg-type]
        if at is None:
            r = (self.gpu if on_gpu else self.cpu)[a]  # type: ignore[index]
            at = self.index[(on_gpu, a)] = len(self.ops)  # type: ignore[index]
            self.ops.append(CpuOp(r.name, r.ts, r.dur, r.tid, origin="annotation"))
        return at


def _op_tree(by_thread: dict[tuple, list[tuple]], counts: _Counts | None = None
             ) -> tuple[list[CpuOp], dict[int, int], dict, list[tuple]]:
    """The ops in (thread, time) order with parent/children links (nesting per thread) and self times; the
    External id index; per thread, the ops' start times and indices (for finding the op enclosing a launch).
    Each thread's rows are (ts, -dur, name, ext, shapes) in µs, consumed as they are read, in one pass: an
    exact copy of a row (an op recorded twice: same start and length, so only the rows of one (start, length)
    are compared) is dropped and counted; an op's children and self time are set once its rows are read."""
    ops: list[CpuOp] = []
    by_ext: dict[int, int] = {}
    threads: dict[tuple, tuple[list[float], range]] = {}
    op_thread: list[tuple] = []
    append = ops.append
    for key in sorted(by_thread, key=lambda k: (str(k[0]), str(k[1]))):
        rows = sorted(by_thread.pop(key), key=_START_LONGEST)
        tid = key[1]
        base = len(ops)
        kids: dict[int, list] = {}  # an op with children → [its -dur, its children's time (µs), the children…]
        stack: list[int] = []  # the open ops (indices), innermost last; their ends and -durs (µs)
        ends: list[float] = []
        negs: list[float] = []
        starts: list[float] = []
        first = same = None  # the first row of this (start, length), and the others (only where there are)
        for j in range(len(rows)):
            r = rows[j]
            rows[j] = None  # type: ignore[call-overload]  # let go as read
            ts, negdur, name, ext, (dims, types, conc) = r
            if first is None or ts != first[0] or negdur != first[1]:
                first, same = r, None
            elif r == first or (same is not None and r in same):
                if counts is not None:
                    counts.add(REPEATED, repr(name[:60]))
                continue
            elif same is None:
                same = [r]
            else:
                same.append(r)
            while ends and ends[-1] <= ts:
                stack.pop()
                ends.pop()
                negs.pop()
            n = len(ops)
            up = None
            if stack:
                up = stack[-1]
                k = kids.get(up)
                if k is None:
                    k = kids[up] = [negs[-1], 0.0]
                k[1] -= negdur
                k.append(n)
            dur = -negdur * US
            op = CpuOp(name, ts * US, dur, tid, ext, dims, types, conc, up, (), dur)  # a leaf's self time: its own
            if ext:
                by_ext[ext] = n  # the innermost op wins where an id repeats
            starts.append(op.ts)
            append(op)
            stack.append(n)
            ends.append(ts - negdur)
            negs.append(negdur)
        for up, (negdur, inner, *children) in kids.items():
            op = ops[up]
            op.children = tuple(children)
            self_us = -negdur - inner
            op.self_s = (self_us if self_us > 0 else 0.0) * US
        threads[key] = (starts, range(base, len(ops)))
        op_thread.extend([key] * (len(ops) - base))
    return ops, by_ext, threads, op_thread
