"""The collectives a trace recorded on the CPU side: what was sent, in which group, as the profiler wrote it.

Pure: the trace reader (`rooftop.models.trace.read`) hands each `cpu_op` and
`user_annotation` event here, and keeps what comes back. Three writers are in use:
- `record_param_comms` ops (PyTorch ≥ 2.1 with NCCL) carry `Collective name`,
  `In msg nelems`, `Out msg nelems`, `dtype`, `Group size` and
  `Process Group Ranks`: the message in full;
- the backend's own range, `nccl:all_reduce`, `gloo:all_reduce`, `rccl:…`,
  carries the tensor's `Input Dims` and `Input type` (older NCCL traces, and
  gloo, whose range runs on the backend's worker thread while the work runs);
- the `c10d::allreduce_` op that enqueued it, with its TensorList's dims.
The reader keeps all three; `rooftop.models.program.collectives` takes, per trace, the
richest one present, so no collective is counted twice.

Collectives that bypass torch.distributed are ops of their own library (source
"library"): torch's symmetric memory (`symm_mem::multimem_all_reduce_`,
`one_shot_all_reduce`, `two_shot_all_reduce_`, …), vLLM's and SGLang's custom
and quick all-reduce (`_C_custom_ar::all_reduce`, `sgl_kernel::qr_all_reduce`),
aiter's, and the frameworks' own wrappers (`vllm::all_reduce`,
`sglang::outplace_all_reduce`) around whichever library ran it. Each carries
its tensor's `Input Dims` and `Input type`; a wrapper is dropped where the call
it wraps was recorded too. DeepEP's dispatch and combine record no op at all:
only their kernels say they ran (`rooftop.models.program.collectives`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import msgspec

from ..safetext import clean
from .types import TORCH_TYPES

# c10 ScalarType names (record_param_comms' `dtype`) → bytes per element
SCALAR_TYPES: dict[str, int] = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
    "ComplexFloat": 8, "ComplexDouble": 16,
}
BACKEND_PREFIXES = ("nccl:", "gloo:", "rccl:", "mpi:", "ucc:")
SOURCES = ("record_param_comms", "backend", "c10d")  # torch.distributed's writers, richest first
LIBRARY = "library"  # the source of a collective library's own op (symm_mem, custom all-reduce, …)
# namespaces every op of which is communication (a collective, its signalling or its buffers), and the library
# each is, as the collectives table names it ("" for torch.distributed's functional collectives)
COMM_NAMESPACES = {"symm_mem::": "symm_mem", "_C_custom_ar::": "custom all-reduce", "_c10d_functional::": "",
                   "c10d_functional::": "", "deep_ep::": "DeepEP", "mscclpp::": "mscclpp"}
# namespaces that hold some collectives among other ops: an op of these is one when its name says a collective
MIXED_NAMESPACES = {"vllm::": "vLLM", "sglang::": "SGLang", "sgl_kernel::": "custom all-reduce", "aiter::": "aiter",
                    "trtllm::": "TensorRT-LLM", "flashinfer::": "FlashInfer"}
# the words of a name that say which collective it is (tried in order: reduce_scatter before a reduce)
COLLECTIVE_WORDS = (("reduce_scatter", "reducescatter"), ("reducescatter", "reducescatter"),
                    ("all_reduce", "allreduce"), ("allreduce", "allreduce"), ("all_gather", "allgather"),
                    ("allgather", "allgather"), ("all_to_all", "alltoall"), ("alltoall", "alltoall"))
# the prefixes of every event that may record a collective (the reader's first, cheap test)
COMM_NAMES = ("record_param_comms", "c10d::", *BACKEND_PREFIXES, *COMM_NAMESPACES, *MIXED_NAMESPACES)


def collective_in(name: str) -> str:
    """The collective a library op's or kernel's name says (allreduce, allgather, reducescatter, alltoall), or ''."""
    low = name.lower()
    return next((coll for word, coll in COLLECTIVE_WORDS if word in low), "")


@functools.lru_cache(maxsize=4096)
def library_of(name: str) -> str | None:
    """The collective library an op is of ("symm_mem", "custom all-reduce", "vLLM", …; "" for torch.distributed's
    own ops), or None where the op is no communication."""
    if name.startswith(("record_param_comms", "c10d::", *BACKEND_PREFIXES)):
        return ""
    for ns, lib in COMM_NAMESPACES.items():
        if name.startswith(ns):
            return "quick all-reduce" if "qr_" in name else lib
    for ns, lib in MIXED_NAMESPACES.items():
        if name.startswith(ns) and collective_in(name[len(ns):]):
            return "quick all-reduce" if "qr_" in name else lib
    return None


def is_comm_op(name: str) -> bool:
    """An op that is communication (torch.distributed's, or a collective library's: symm_mem, vLLM and SGLang's
    custom all-reduce, …): its time is communication, its roof a link's, not the DRAM's."""
    return name.startswith(COMM_NAMES) and library_of(name) is not None

# the names each writer uses → rooftop's (models.comm's, plus the ones nccl-tests adds)
_NAMES = {
    "allreduce": "allreduce", "all_reduce": "allreduce", "allreduce_coalesced": "allreduce",
    "allreduce_sparse": "allreduce",
    "allgather": "allgather", "all_gather": "allgather", "_allgather_base": "allgather",
    "_all_gather_base": "allgather", "all_gather_into_tensor": "allgather", "allgather_into_tensor_coalesced":
        "allgather", "allgather_coalesced": "allgather",
    "reduce_scatter": "reducescatter", "reducescatter": "reducescatter", "_reduce_scatter_base": "reducescatter",
    "reduce_scatter_tensor": "reducescatter", "reduce_scatter_tensor_coalesced": "reducescatter",
    "broadcast": "broadcast", "reduce": "reduce",
    "alltoall": "alltoall", "all_to_all": "alltoall", "alltoall_base": "alltoall", "all_to_allv": "alltoall",
    "send": "sendrecv", "recv": "sendrecv", "recv_any_source": "sendrecv", "sendrecv": "sendrecv",
    "gather": "gather", "scatter": "scatter", "barrier": "barrier", "wait": "wait",
}


def collective_name(raw: str) -> str:
    """rooftop's name for a collective as a writer spells it (`all_reduce`, `_allgather_base_`, …); the
    written name where rooftop has none."""
    s = raw.strip()
    for p in BACKEND_PREFIXES + ("c10d::",):
        s = s.removeprefix(p)
    s = s.rstrip("_")  # c10d's in-place names: allreduce_, _allgather_base_
    return _NAMES.get(s, _NAMES.get(s.lstrip("_"), s.lower()))


class CommArgs(msgspec.Struct, gc=False):
    """The args fields a collective's message is in (record_param_comms'); the trace reader's event args
    extend this, so the decoder reads them with the rest."""

    coll_name: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    coll_dtype: Any = msgspec.field(default=None, name="dtype")
    group_size: Any = msgspec.field(default=None, name="Group size")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")


@dataclass(frozen=True, slots=True)
class CommCall:
    """One collective as the CPU side recorded it: when, on which thread, what it moved and among whom."""

    source: str  # record_param_comms, backend (nccl:… / gloo:… range), c10d (the enqueueing op)
    collective: str  # rooftop's name: allreduce, allgather, reducescatter, broadcast, alltoall, sendrecv, …
    name: str  # as written
    ts: float  # seconds, trace clock
    dur: float
    pid: Any
    tid: Any
    in_elems: int | None = None
    out_elems: int | None = None
    elem_bytes: int | None = None
    dtype: str = ""
    group_size: int | None = None
    group_ranks: tuple[int, ...] = ()
    group_name: str = ""
    library: str = ""  # the collective library that ran it ("symm_mem", "custom all-reduce", …); "": the backend's

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def message_bytes(self) -> float | None:
        """S as nccl-tests counts it: the larger of the input and the output buffer (all-gather: the gathered
        whole; reduce-scatter: the whole input; all-reduce and broadcast: the buffer)."""
        if self.elem_bytes is None:
            return None
        n = max(x for x in (self.in_elems, self.out_elems, 0) if x is not None)
        return float(n * self.elem_bytes)


def _int(v: Any) -> int | None:
    if v.__class__ is int:
        return v if v >= 0 else None
    if v.__class__ is float and math.isfinite(v) and v == int(v) and v >= 0:
        return int(v)
    if v.__class__ is str and v.strip().isdigit():
        return int(v)
    return None


def _ranks(v: Any) -> tuple[int, ...]:
    """`Process Group Ranks` as written: a list, or its text ("[0, 1]")."""
    if v.__class__ is str:
        v = [x.strip() for x in v.strip("[] ").split(",") if x.strip()]
    if v.__class__ is not list:
        return ()
    out = [_int(x) for x in v]
    return tuple(x for x in out if x is not None) if all(x is not None for x in out) else ()


def _elements(dims: Any) -> int | None:
    """Elements of the tensors in `Input Dims`: one list per input, or a TensorList's list of lists."""
    if dims.__class__ is not list:
        return None
    total, seen = 0, False
    for d in dims:
        if d.__class__ is not list or not d:
            continue
        shapes = d if all(x.__class__ is list for x in d) else [d]
        for s in shapes:
            if not all(x.__class__ is int and x >= 0 for x in s):
                return None
            total += math.prod(s)
            seen = True
    return total if seen else None


def _each(dims: Any) -> list[int] | None:
    """Elements of each tensor input in `Input Dims` (a TensorList's summed), scalars left out; None where a
    shape is not a list of non-negative integers."""
    if dims.__class__ is not list:
        return None
    out = []
    for d in dims:
        if d.__class__ is list and d:
            n = _elements([d])
            if n is None:
                return None
            out.append(n)
    return out


def _type_bytes(types: Any) -> tuple[int | None, str]:
    if types.__class__ is not list:
        return None, ""
    for t in types:
        if t.__class__ is str and t in TORCH_TYPES:
            return int(TORCH_TYPES[t][1]), TORCH_TYPES[t][0]
    return None, ""


def _json(v: Any) -> Any:
    """A field the reader keeps as raw JSON (shapes, types), decoded; None where it is not JSON."""
    if v.__class__ is msgspec.Raw:
        try:
            return msgspec.json.decode(v)
        except (msgspec.DecodeError, RecursionError):
            return None
    return v


def comm_call(kind: str, name: str, ts: float, dur: float, pid: Any, tid: Any, a: Any) -> CommCall | None:
    """The collective an op or annotation event records (times in seconds), or None when it records none.
    `a` is the event's args (`rooftop.models.trace.read.EventArgs`)."""
    if a is None:
        return None
    if name == "record_param_comms":
        coll = a.coll_name
        if coll.__class__ is not str or not coll:
            return None
        coll = clean(coll)  # the args' text, as the trace's names, without the controls a terminal would obey
        dt = clean(a.coll_dtype) if a.coll_dtype.__class__ is str else ""
        ranks = _ranks(a.pg_ranks)
        return CommCall("record_param_comms", collective_name(coll), coll, ts, dur, pid, tid,
                        in_elems=_int(a.in_nelems), out_elems=_int(a.out_nelems), elem_bytes=SCALAR_TYPES.get(dt),
                        dtype=dt, group_size=_int(a.group_size) or (len(ranks) or None), group_ranks=ranks,
                        group_name=clean(a.pg_name) if a.pg_name.__class__ is str else "")
    if kind == "annotation" and name.startswith(BACKEND_PREFIXES):
        size, dt = _type_bytes(_json(a.types))
        n = _elements(_json(a.dims if a.dims is not None else a.dims_old))
        return CommCall("backend", collective_name(name), name, ts, dur, pid, tid, in_elems=n, out_elems=None,
                        elem_bytes=size, dtype=dt)
    if kind != "op":
        return None
    c10d = name.startswith("c10d::")
    lib = "" if c10d else library_of(name)
    if not c10d and (lib is None or not _library_collective(name)):  # no collective (signalling, buffers, others)
        return None
    each = _each(_json(a.dims if a.dims is not None else a.dims_old)) or []
    size, dt = _type_bytes(_json(a.types))
    if c10d:  # (output, input) for the base ops, the tensors for an all-reduce: S is the larger
        return CommCall("c10d", collective_name(name), name, ts, dur, pid, tid, in_elems=min(each, default=None),
                        out_elems=max(each, default=None), elem_bytes=size, dtype=dt)
    coll = _library_collective(name)
    first = each[0] if each else None  # the input; an all-gather's output, where recorded, is the largest
    return CommCall(LIBRARY, coll, name, ts, dur, pid, tid, in_elems=first,
                    out_elems=max(each) if each and max(each) > (first or 0) else None, elem_bytes=size, dtype=dt,
                    library=lib or "")


@functools.lru_cache(maxsize=4096)
def _library_collective(name: str) -> str:
    """The collective a library op's name says, after its namespace."""
    return collective_in(name.split("::", 1)[-1])
