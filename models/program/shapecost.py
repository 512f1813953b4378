"""W and Q of one recorded op call from its name, its inputs' shapes and dtypes: rooftop's op models.

torch.profiler (with `record_shapes`) records each op's `Input Dims`,
`Input type` and `Concrete Inputs`; the models in `models.opcost` turn them
into estimates (conventions in its docstring: FLOPs as FlopCounterMode counts
them, causal attention at half the score matrix, Q the compulsory traffic).
An op without a model has W and Q unknown: both 0 here, model "tensors" (its
inputs' sizes are no measure of its traffic: a KV-cache write or an embedding
lookup takes the whole cache or table as an input and touches a few rows of
it), so it is placed nowhere on the roofline (regime "W unknown"). Views and
metadata move nothing. A record whose shapes describe no real tensors (a
negative or non-integer dimension, a stride of 0) is left uncosted, never a
crash and never a NaN, infinite or negative figure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .opcost import embedding, inference, matmul, memory, rows
from .opcost.base import (
    FLOAT_DTYPES,
    TORCH_TYPES,
    BadShape,
    Call,
    OpCost,
    Tensor,
    broadcast,
    element_from_kernel,
    make_call,
    op_dtype,
)
from ..paths import vector_path

__all__ = [
    "NO_MODEL",
    "NO_WORK",
    "TORCH_TYPES",
    "OpCost",
    "Tensor",
    "broadcast",
    "cost_op",
    "cost_with",
    "element_from_kernel",
    "op_dtype",
    "tensors_of",
]

# Ops that move no data: views, metadata, allocation, and the dispatch around a copy_ that does the work.
NO_WORK = frozenset(
    "aten::" + n for n in (
        "view", "reshape", "_reshape_alias", "_unsafe_view", "as_strided", "as_strided_", "transpose", "t",
        "permute", "unsqueeze", "squeeze", "expand", "expand_as", "slice", "select", "alias", "detach", "detach_",
        "lift_fresh", "empty", "empty_like", "empty_strided", "resize_", "result_type", "split", "chunk", "narrow",
        "unbind", "flatten", "unflatten", "size", "stride", "numel", "is_nonzero", "item", "_local_scalar_dense",
        "set_", "split_with_sizes", "view_as", "type_as", "contiguous", "to", "_to_copy", "clone",
        "broadcast_to", "movedim", "swapaxes", "diagonal", "values", "indices", "is_same_size", "resolve_conj",
        "resolve_neg", "broadcast_tensors", "_has_compatible_shallow_copy_type", "requires_grad_", "zeros_like_",
        "scalar_tensor", "lift_fresh_copy", "meshgrid", "unfold", "view_as_real", "view_as_complex", "real", "imag",
    )
)

# the models of a cost with W and Q unknown: no model for the op, or a malformed record
NO_MODEL = frozenset(("tensors", "uncosted"))

# autograd's own records: a graph node (MmBackward0) or the engine around it; the aten ops they call do the work
AUTOGRAD_NODE = re.compile(r"(autograd::|torch::autograd::|[A-Za-z0-9_]*Backward\d*$)")

Model = Callable[[Call], "OpCost | None"]


@dataclass(frozen=True)
class _Starts:
    """The op names that start with `prefix`, as a container (`name in _Starts(…)`) for the table below."""

    prefix: str

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.startswith(self.prefix)


# aten ops by name → their model, the first match winning (`aten::_foreach_copy_` is a foreach, not a copy)
_BY_NAME: tuple[tuple[Container[str], Model], ...] = (
    (matmul.GEMMS, matmul.gemm), (matmul.CONVS, matmul.conv), (matmul.CONV_BACKWARDS, matmul.conv_backward),
    (matmul.ATTENTION, matmul.attention), (rows.NORMS, rows.norm), (rows.SOFTMAXES, rows.softmax),
    (rows.SOFTMAX_BACKWARD, rows.softmax), (rows.NLL, rows.nll_loss), (rows.NLL_BACKWARD, rows.nll_loss),
    (frozenset({"aten::cross_entropy_loss"}), rows.cross_entropy), (rows.ELEMENTWISE_LOSSES, rows.elementwise_loss),
    (rows.POOLS, rows.pool), (rows.POOL_BACKWARD, rows.pool), (rows.ADAPTIVE, rows.pool),
    (memory.FUSED_OPTIMIZERS, memory.fused_adam), (frozenset({"aten::_fused_sgd_"}), memory.fused_sgd),
    (_Starts("aten::_foreach_"), memory.foreach), (memory.FILLS, memory.fill), (memory.CREATES, memory.create),
    (memory.COPIES, memory.copy), (memory.GATHERS, memory.gather), (memory.SCATTERS, memory.scatter),
)


def _family(name: str) -> Model | None:
    """The op model for `name`, or None (the generic fallback)."""
    if not name.startswith("aten::") and "::" in name:  # an inference framework's op (vLLM, SGLang, aiter, fbgemm)
        return inference.model_for(inference.base_name(name)) or embedding.model_for(name)
    for names, model in _BY_NAME:
        if name in names:
            return model
    base, inplace = memory.base_name(name) if name.startswith("aten::") else ("", False)
    if base in memory.REDUCTIONS and not inplace:
        return lambda c: memory.reduction(c, base)
    if base in memory.EW_FLOPS:
        return lambda c: memory.elementwise(c, base, inplace)
    return None


def _vector(dtype: str) -> str:
    return vector_path(dtype if dtype in FLOAT_DTYPES else "fp32")


def _uncosted(dtype: str, why: str) -> OpCost:
    return OpCost(0.0, 0.0, _vector(dtype), "uncosted", f"not costed: {why}")


def _sane(c: OpCost) -> bool:
    try:
        return all(math.isfinite(float(v)) and float(v) >= 0 for v in (c.flops, c.bytes))
    except (OverflowError, TypeError, ValueError):
        return False


def tensors_of(dims: Sequence[Any], types: Sequence[str], list_element: tuple[str, float] = ("fp32", 4.0),
               ) -> list[Tensor]:
    """The tensor inputs of an op (scalars left out; a TensorList's members included); BadShape if malformed."""
    return make_call("", dims, types, list_element, ()).tensors


def cost_with(name: str, dims: Sequence[Any], types: Sequence[str], concrete: Sequence[str], model: Model,
              ) -> OpCost | None:
    """One call costed by `model`, a model the ops around it chose (`models.opcontext`: a convolution's output
    size from the op that reads it, a MoE's experts from the ops inside it): None where it does not fit the
    record. Never raises, never a NaN, infinite or negative figure."""
    try:
        call = make_call(name, dims, types, ("fp32", 4.0), concrete if isinstance(concrete, (list, tuple)) else ())
        cost = model(call)
    except (ArithmeticError, ValueError, TypeError, IndexError, KeyError):  # BadShape is a ValueError
        return None
    return _frozen(cost) if cost is not None and _sane(cost) else None


def _frozen(cost: OpCost) -> OpCost:
    """The cost with its figures as floats and its shape read-only (shared by every call with the same record)."""
    return OpCost(float(cost.flops), float(cost.bytes), cost.path, cost.model, cost.counting,
                  MappingProxyType(dict(cost.shape)))


# A trace repeats the same records step after step: each distinct one is costed once.
_MEMO: dict[tuple, OpCost] = {}
_MEMO_SIZE = 200_000


def cost_op(name: str, dims: Sequence[Any], types: Sequence[str],
            list_element: tuple[str, float] | None = None, concrete: Sequence[str] = ()) -> OpCost:
    """W and Q of one call, from the op's name and its inputs' shapes and types (an estimate).

    Never raises and never returns a NaN, infinite or negative figure: a record
    that is malformed comes back with model "uncosted", W = Q = 0, and the reason.
    """
    key = (name, repr(dims), repr(types), repr(list_element), repr(concrete))
    hit = _MEMO.get(key)
    if hit is None:
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.clear()
        hit = _MEMO[key] = _cost_op(name, dims, types, list_element, concrete)
    return hit


def _cost_op(name: str, dims: Sequence[Any], types: Sequence[str], list_element: tuple[str, float] | None,
             concrete: Sequence[str]) -> OpCost:
    dtype = ""
    try:
        dtype = op_dtype([str(t) for t in types]) if isinstance(types, (list, tuple)) else ""
        if not isinstance(dims, (list, tuple)) or not isinstance(types, (list, tuple)):
            raise BadShape("the input dims or types are not lists")
        call = make_call(name, dims, types, list_element or ("fp32", 4.0),
                         concrete if isinstance(concrete, (list, tuple)) else ())
        dtype = call.dtype
        if name in NO_WORK or ("::" not in name and "aten::" + name in NO_WORK) or (
                AUTOGRAD_NODE.match(name) and not embedding.is_node(name)):  # fbgemm's nodes do work of their own
            return OpCost(0.0, 0.0, _vector(dtype), "none", "a view, metadata or allocation: moves no data")
        model = _family(name)
        cost = model(call) if model else None
        if cost is None:
            ts = call.tensors
            cost = OpCost(0.0, 0.0, _vector(dtype), "tensors",
                          "no model for this op: W and Q unknown, not counted (its inputs hold "
                          f"{sum(t.nbytes for t in ts):.4g} B, which says nothing of what it reads or writes)",
                          {"n": max((t.numel for t in ts), default=0)})
    except BadShape as exc:
        return _uncosted(dtype, f"{exc}")
    except (ArithmeticError, ValueError, TypeError, IndexError, KeyError) as exc:
        return _uncosted(dtype, f"the recorded shapes and arguments do not fit {name} ({type(exc).__name__})")
    if not _sane(cost):
        return _uncosted(dtype, "the recorded shapes give a figure out of range")
    return _frozen(cost)
