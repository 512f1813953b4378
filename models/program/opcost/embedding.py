"""fbgemm_gpu's table-batched embedding (TBE) ops: the pooled lookup forward and its fused-optimizer backward.

A TBE op looks up T tables at once. Its record (torch.profiler, `record_shapes`) has
`fbgemm::split_embedding_codegen_lookup_{optimizer}_function(placeholder, dev_weights, uvm_weights,
lxu_cache_weights, weights_placements, weights_offsets, D_offsets [T + 1], total_D, max_D, hash_size_cumsum,
total_hash_size_bits, indices [N], offsets [T·B + 1], pooling_mode, indice_weights, …)` (fbgemm_gpu's
`embedding_backward_split_host_template.cpp`); its backward is the autograd node
`torch::autograd::CppNode<SplitLookupFunction_{optimizer}_Op>`, whose record is grad_output [B, total_D] alone.
The shapes give the tables T, the batch B and the lookups N; the width of each table is a tensor's contents
(D_offsets), not a shape. total_D = Σ D_t is a scalar argument (`Concrete Inputs`, where the trace records them),
else the width of the backward's grad_output (`models.opcontext` pairs the two). Each lookup is assumed to be
of the mean width D = total_D / T: an estimate, exact where the tables are one width or are looked up alike.

Bytes as fbgemm's own benchmark counts them (`fbgemm_gpu/bench/split_table_batched_embeddings_benchmark.py`,
pooled: `read_write_bytes = output_size_multiplier * B * sum(Ds) + param_size_multiplier * B * sum(Ds) * L`,
L the lookups per bag, so B·Σ D·L = N·D; its backward reports `2 * read_write_bytes`), plus what it leaves out:
- forward: Q = the N looked-up rows read (N·D at the weights' element size), the pooled output B·total_D written,
  the indices and offsets (and per-lookup weights) read; W = N·D (a pooling sum: one add per element; two with
  per-lookup weights, a multiply and an add);
- backward with its fused optimizer: Q = grad_output read once, each touched row read and written back (rows
  touched counted as lookups, as fbgemm's benchmark does: duplicates make them fewer), the optimizer's state of
  those rows read and written, the indices and offsets read; W = N·D (the gradients summed per row) + the
  optimizer's FLOP per element of each touched row. The sort of the indices the backward does first (a radix
  sort, in its own kernels) is counted only as their read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...paths import vector_path
from .base import FLOAT_DTYPES, Call, OpCost, Tensor

FORWARD = re.compile(r"^fbgemm::split_embedding_codegen_lookup_([a-z0-9_]+?)_function$")
BACKWARD = re.compile(r"^torch::autograd::CppNode<SplitLookupFunction_([a-z0-9_]+?)_Op>$")
# the backward of permute_pooled_embs: the pooled gradients permuted back, grad [B, total_D] its one input
PERMUTE_BACKWARD = re.compile(r"^torch::autograd::CppNode<fbgemm_gpu::PermutePooledEmbsFunction<.*>\s*>$")

# where the forward's schema keeps what the model reads
DEV_WEIGHTS, D_OFFSETS, TOTAL_D, INDICES, OFFSETS, POOLING, INDICE_WEIGHTS = 1, 6, 7, 11, 12, 13, 14
POOL_NONE = 2  # fbgemm's PoolingMode.NONE: one output row per lookup (sequence embeddings)


@dataclass(frozen=True)
class Optimizer:
    """A fused optimizer's update of each touched row: its FLOP per element, its state's bytes per element and per
    row (read and written back)."""

    flops: float
    state_per_element: float
    state_per_row: float


# FLOP per element: sgd w −= lr·g (2); rowwise adagrad Σg² over the row (2) and w −= (lr / (√m + ε))·g (2);
# exact adagrad m += g² (2) and w −= lr·g / (√m + ε) (4: root, add, divide, multiply-subtract counted 1 each)
OPTIMIZERS: dict[str, Optimizer] = {
    "sgd": Optimizer(2.0, 0.0, 0.0),
    "approx_sgd": Optimizer(2.0, 0.0, 0.0),
    "rowwise_adagrad": Optimizer(4.0, 0.0, 4.0),  # one fp32 momentum per row
    "approx_rowwise_adagrad": Optimizer(4.0, 0.0, 4.0),
    "adagrad": Optimizer(6.0, 4.0, 0.0),  # one fp32 momentum per element
}


def optimizer_of(name: str) -> str | None:
    """The fused optimizer a TBE forward or backward node is named for, or None if the name is not one's."""
    m = FORWARD.match(name) or BACKWARD.match(name)
    return m.group(1) if m else None


def is_tbe(name: str) -> bool:
    """A TBE forward or backward of an optimizer this module models (costed with what the ops around it say)."""
    return optimizer_of(name) in OPTIMIZERS


def is_node(name: str) -> bool:
    """An fbgemm autograd node with a model here: not a mere autograd record that moves no data."""
    return bool(BACKWARD.match(name) or PERMUTE_BACKWARD.match(name))


@dataclass(frozen=True)
class Lookup:
    """What a TBE forward's shapes say: tables, batch, lookups, the weights' element, indices and offsets."""

    tables: int
    batch: int
    lookups: int
    weight: Tensor
    index_bytes: float  # the indices, offsets and per-lookup weights, read once
    weighted: bool
    pooled: bool


def lookup_of(c: Call) -> Lookup | None:
    """The forward's tables, batch and lookups from its shapes; None where they are not a TBE's."""
    w, d_off, idx, off = c.tensor(DEV_WEIGHTS), c.tensor(D_OFFSETS), c.tensor(INDICES), c.tensor(OFFSETS)
    if w is None or d_off is None or idx is None or off is None or w.dtype not in FLOAT_DTYPES:
        return None
    if any(len(t.dims) != 1 for t in (d_off, idx, off)) or d_off.dims[0] < 2 or off.dims[0] < 2:
        return None
    tables = d_off.dims[0] - 1
    if (off.dims[0] - 1) % tables:  # a variable batch per table (VBE): the output is not [B, total_D]
        return None
    per = c.tensor(INDICE_WEIGHTS)
    weighted = per is not None and per.numel > 0
    return Lookup(tables, (off.dims[0] - 1) // tables, idx.numel, w,
                  idx.nbytes + off.nbytes + (per.nbytes if per is not None and weighted else 0.0), weighted,
                  c.text(POOLING) != str(POOL_NONE))


def sizes(dims: Sequence[Any]) -> tuple[int, int] | None:
    """(B, N) from a forward's raw `Input Dims`: its batch and lookups, what its backward's grad_output has as its
    first dimension (pooled: B; not pooled: N); None where they are not a TBE's."""
    try:
        t, n, o = dims[D_OFFSETS][0] - 1, dims[INDICES][0], dims[OFFSETS][0] - 1
    except (IndexError, KeyError, TypeError):
        return None
    if not all(isinstance(x, int) for x in (t, n, o)) or t < 1 or o < 1 or o % t:
        return None
    return o // t, n


def total_d(c: Call) -> int | None:
    """total_D where the record has the scalar arguments (`Concrete Inputs`), else None."""
    got = c.ints(TOTAL_D, 1)
    return got[0] if got and got[0] > 0 else None


def _width(look: Lookup, width: int) -> float:
    return width / look.tables if look.pooled else float(width)


def _output(look: Lookup, width: int) -> float:
    """Elements of the forward's output (its backward's grad_output): [B, total_D] pooled, [N, D] not."""
    return float(look.batch * width) if look.pooled else float(look.lookups * width)


def forward(c: Call, width: int | None = None, out_size: float = 4.0) -> OpCost | None:
    """The lookup forward, total_D from its record or given (`width`: the backward's grad_output); the output's
    element size given (the grad_output's), else fp32, fbgemm's default output dtype."""
    look = lookup_of(c)
    width = width or total_d(c)
    if look is None or width is None:
        return None
    d = _width(look, width)
    rows = look.lookups * d
    q = rows * look.weight.size + _output(look, width) * out_size + look.index_bytes
    per = 2.0 if look.weighted else 1.0
    return OpCost(per * rows, q, vector_path("fp32"), "index",
                  f"estimate: the tables' widths are not recorded, each lookup taken at their mean D = total_D / T "
                  f"= {d:.4g}; W = {per:g} per element of each looked-up row ("
                  + ("×weight and " if look.weighted else "") + "the pooling sum); Q = the rows read, the output "
                  "written (as fbgemm's benchmark counts), the indices and offsets read",
                  {"tables": look.tables, "b": look.batch, "lookups": look.lookups, "total_d": width})


def backward(c: Call, grad: Tensor) -> OpCost | None:
    """The backward with its fused optimizer, from the forward's record `c` and the node's grad_output."""
    look = lookup_of(c)
    opt = OPTIMIZERS.get(optimizer_of(c.name) or "")
    if look is None or opt is None or len(grad.dims) != 2:
        return None
    if grad.dims[0] != (look.batch if look.pooled else look.lookups):
        return None
    width = grad.dims[1]
    d = _width(look, width)
    rows = look.lookups * d
    state = look.lookups * (d * opt.state_per_element + opt.state_per_row)
    q = grad.nbytes + 2 * rows * look.weight.size + 2 * state + look.index_bytes
    return OpCost((1.0 + opt.flops) * rows, q, vector_path("fp32"), "optimizer",
                  f"estimate: the tables' widths are not recorded, each lookup taken at their mean D = total_D / T "
                  f"= {d:.4g}, and every lookup's row as touched (duplicates make them fewer); W = 1 per element "
                  f"(the gradients summed per row) + {opt.flops:g} (the fused optimizer's update); Q = grad_output "
                  "read, the rows and their optimizer state read and written back, the indices and offsets read",
                  {"tables": look.tables, "b": look.batch, "lookups": look.lookups, "total_d": width})


def permute_backward(c: Call) -> OpCost | None:
    """permute_pooled_embs' backward: the pooled gradients [B, total_D] read and written in the inverse order."""
    g = c.tensor(0)
    if g is None or len(g.dims) != 2 or g.dtype not in FLOAT_DTYPES:
        return None
    return OpCost(0.0, 2 * g.nbytes, vector_path(g.dtype), "copy", "Q = the pooled gradients read and written in "
                  "the inverse order, each once (the small offset and permute lists not recorded); W = 0",
                  {"n": g.numel})


def model_for(name: str) -> Callable[[Call], OpCost | None] | None:
    """The model an fbgemm TBE op's own record can cost (a forward with total_D recorded; a permute's backward)."""
    if FORWARD.match(name) and is_tbe(name):
        return forward
    if PERMUTE_BACKWARD.match(name):
        return permute_backward
    return None
