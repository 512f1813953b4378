"""Data-moving families: elementwise, reductions, copies and fills, index / gather / scatter, embedding, optimizers.

Q is the compulsory traffic: every tensor input read once, every output
written once. An in-place op (`add_`, `_foreach_mul_`) reads its self and
writes it back: self counts twice. A fill (`fill_`, `zero_`, `zeros`) only
writes. A gather-like op (gather, index_select, index, embedding) reads the
index and the elements it picks (at most the whole source), and writes its
output; a scatter writes only the elements the index names. A TensorList
counts each member as a tensor (the profiler records no dtype for them: the
kernel's, else fp32). W is rooftop's per-element count (FlopCounterMode counts
none of these ops).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...paths import vector_path
from .base import FLOAT_DTYPES, SCALAR_TYPES, Call, OpCost, Tensor, broadcast, dim_index

# FLOP per output element of the elementwise ops (as a fused kernel computes them).
EW_FLOPS = {
    "add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "neg": 1, "pow": 1, "rsqrt": 2, "sqrt": 1, "reciprocal": 1,
    "exp": 1, "exp2": 1, "expm1": 1, "log": 1, "log2": 1, "log1p": 1, "abs": 1, "relu": 1, "threshold": 1,
    "clamp": 1, "clamp_min": 1, "clamp_max": 1, "maximum": 1, "minimum": 1, "sigmoid": 4, "silu": 5, "gelu": 8,
    "tanh": 4, "cos": 1, "sin": 1, "addcmul": 2, "addcdiv": 2, "lerp": 2, "dropout": 2, "native_dropout": 2,
    "sign": 1, "floor": 1, "ceil": 1, "round": 1, "trunc": 1, "eq": 1, "ne": 1, "lt": 1, "gt": 1, "le": 1, "ge": 1,
    "logical_not": 1, "logical_and": 1, "logical_or": 1, "bitwise_not": 1, "bitwise_and": 1, "bitwise_or": 1,
    "erf": 4, "square": 1, "hardtanh": 1, "leaky_relu": 2, "elu": 3, "softplus": 4, "mish": 8, "hardswish": 3,
    "where": 1, "masked_fill": 1, "nan_to_num": 1, "logit": 3, "fmod": 1, "remainder": 1, "copysign": 1,
    "gelu_backward": 10, "threshold_backward": 1, "sigmoid_backward": 3, "tanh_backward": 3, "silu_backward": 6,
    "hardtanh_backward": 2, "leaky_relu_backward": 2, "elu_backward": 3, "softplus_backward": 4,
    "logit_backward": 3, "hardswish_backward": 3, "native_dropout_backward": 1,
    "mish_backward": 10,
}
BOOL_OUT = frozenset(("eq", "ne", "lt", "gt", "le", "ge", "logical_not", "logical_and", "logical_or"))
# FLOP per input element of the reductions; the output is the input less the reduced dims.
REDUCTIONS = {"mean": 1, "sum": 1, "prod": 1, "max": 1, "min": 1, "amax": 1, "amin": 1, "argmax": 1, "argmin": 1,
              "norm": 2, "linalg_vector_norm": 2, "var": 3, "std": 3, "var_mean": 3, "std_mean": 3,
              "logsumexp": 3, "any": 1, "all": 1, "count_nonzero": 1}

REDUCTION_DIM = {"norm": 2, "linalg_vector_norm": 2}  # where the dim argument is (after p / ord); else 1


def _vec(dtype: str) -> str:
    return vector_path(dtype if dtype in FLOAT_DTYPES else "fp32")


def base_name(name: str) -> tuple[str, bool]:
    """('add', True) for aten::add_: the op's plain name and whether it works in place."""
    b = name.split("::")[-1]
    inplace = b.endswith("_") and not b.endswith("__")
    return (b[:-1] if inplace else b), inplace


def elementwise(c: Call, base: str, inplace: bool) -> OpCost | None:
    ts = [t for t in c.args if isinstance(t, Tensor)]
    if not ts:
        return None
    out = broadcast([t.dims for t in ts])
    n = math.prod(out)
    floats = [t.size for t in ts if t.dtype in FLOAT_DTYPES]
    size = 1.0 if base in BOOL_OUT else (floats[0] if floats else ts[0].size)  # where(cond, a, b) writes a's type
    reads = sum(t.nbytes for t in ts)
    write = ts[0].nbytes if inplace else n * size
    f = EW_FLOPS[base]
    return OpCost(float(f * n), reads + write, _vec(c.dtype), "elementwise",
                  f"W = {f} FLOP per output element; Q = inputs read once, "
                  + ("self written back (in place)" if inplace else "output written once"), {"n": n})


def reduction(c: Call, base: str) -> OpCost | None:
    x = c.tensor(0)
    if x is None:
        return None
    di = REDUCTION_DIM.get(base, 1)
    dims = c.ints(di) if c.text(di) not in ("", "[]") else None
    if dims and all(-max(len(x.dims), 1) <= d < max(len(x.dims), 1) for d in dims):
        kept = [s for i, s in enumerate(x.dims) if i not in {d % max(len(x.dims), 1) for d in dims}]
        n_out = math.prod(kept)
    else:
        n_out = 1  # a full reduction (or the dims were not recorded)
    outs = 2 if base in ("var_mean", "std_mean") else 1
    idx = 8 * n_out if base in ("max", "min") and dims else 0  # max(x, dim) returns the indices too
    f = REDUCTIONS[base]
    return OpCost(float(f * x.numel), x.nbytes + outs * n_out * x.size + idx, _vec(c.dtype), "reduction",
                  f"W = {f} FLOP per input element; Q = input read once, the reduced output written once",
                  {"n": x.numel, "out": n_out})


FILLS = frozenset(("aten::fill_", "aten::zero_", "aten::zeros_like", "aten::ones_like", "aten::full_like",
                   "aten::normal_", "aten::uniform_", "aten::random_", "aten::bernoulli_", "aten::rand_like",
                   "aten::randn_like", "aten::exponential_"))
CREATES = {"aten::zeros": (0, 1), "aten::ones": (0, 1), "aten::full": (0, 2), "aten::rand": (0, 1),
           "aten::randn": (0, 1), "aten::arange": (None, None)}  # (sizes, dtype) argument indices
COPIES = frozenset(("aten::copy_", "aten::cat", "aten::concat", "aten::concatenate", "aten::stack", "aten::repeat",
                    "aten::roll", "aten::flip", "aten::constant_pad_nd", "aten::tril", "aten::triu", "aten::tril_",
                    "aten::triu_", "aten::slice_scatter", "aten::select_scatter", "aten::_foreach_copy_",
                    "aten::index_copy_", "aten::cumsum", "aten::cumsum_"))


def fill(c: Call) -> OpCost | None:
    """Writes only: Q = the output once."""
    x = c.tensor(0)
    if x is None:
        return None
    return OpCost(0.0, x.nbytes, _vec(c.dtype), "copy", "Q = the output written once (a fill reads nothing); W = 0",
                  {"n": x.numel})


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def arange(c: Call) -> OpCost | None:
    """arange(end, …), arange.start(start, end, …), arange.start_step(start, end, step, …), and the out= forms:
    ceil((end − start) / step) elements written (int64 unless a float bound or a dtype says otherwise)."""
    out = c.tensor(len(c.args) - 1) if c.args else None  # the out= forms end in the out tensor
    n_args = len(c.args) - (1 if out is not None else 0)
    nums = [_number(c.text(i)) for i in range(min(n_args, 3))]
    if out is not None:  # (end, out) or (start, end, step, out)
        bounds = nums[:n_args]
    else:  # (end, dtype, layout, device, pin_memory): 5 arguments; .start: 6; .start_step: 7
        bounds = nums[:{5: 1, 6: 2, 7: 3}.get(len(c.args), 0)]
    if not bounds or any(b is None for b in bounds):
        return None
    start: float
    end: float
    step: float
    start, end, step = (0.0, bounds[0], 1.0) if len(bounds) == 1 else (  # type: ignore[assignment]  # none is None
        bounds[0], bounds[1], bounds[2] if len(bounds) == 3 else 1.0)
    if step == 0:
        return None
    n = max(0, math.ceil((end - start) / step))
    integral = all(float(b).is_integer() for b in bounds) and "." not in "".join(  # type: ignore[arg-type]
        c.text(i) for i in range(3))
    dtype_at = {5: 1, 6: 2, 7: 3}.get(len(c.args))
    size = (out.size if out is not None else
            SCALAR_TYPES.get(c.text(dtype_at), ("int64", 8.0) if integral else ("fp32", 4.0))[1] if dtype_at else 8.0)
    return OpCost(0.0, n * size, _vec(c.dtype), "copy", "Q = the new sequence written once; W = 0", {"n": n})


def create(c: Call) -> OpCost | None:
    si, di = CREATES[c.name]
    if si is None:
        return arange(c)
    sizes = c.ints(si)
    if sizes is None or any(s < 0 for s in sizes):
        return None
    size = SCALAR_TYPES.get(c.text(di), ("fp32", 4.0))[1]  # type: ignore[arg-type]  # only arange has None
    n = math.prod(sizes)
    return OpCost(0.0, n * size, _vec(c.dtype), "copy", "Q = the new tensor written once; W = 0", {"n": n})


def copy(c: Call) -> OpCost | None:
    ts = c.tensors
    if not ts:
        return None
    if c.name in ("aten::copy_", "aten::_foreach_copy_", "aten::index_copy_"):
        q = sum(t.nbytes for t in ts)  # src read, dst written (index_copy_: index read too)
    elif c.name == "aten::repeat":
        reps = c.ints(1)
        x = ts[0]
        q = x.nbytes + (x.nbytes * math.prod(reps) if reps else x.nbytes)
    elif c.name == "aten::constant_pad_nd":
        pad = c.ints(1)
        x = ts[0]
        out = list(x.dims)
        for i in range(len(pad or []) // 2):
            if i < len(out):
                out[-1 - i] = max(0, out[-1 - i] + pad[2 * i] + pad[2 * i + 1])  # type: ignore[index]  # pad given
        q = x.nbytes + math.prod(out) * x.size
    elif c.name in ("aten::tril_", "aten::triu_"):
        q = 2 * ts[0].nbytes
    else:  # cat, stack, roll, flip, tril, …: read the inputs, write as much
        q = 2 * sum(t.nbytes for t in ts)
    return OpCost(0.0, q, _vec(c.dtype), "copy", "Q = bytes read + bytes written, each once; W = 0",
                  {"n": max(t.numel for t in ts)})


GATHERS = frozenset(("aten::gather", "aten::index_select", "aten::index", "aten::embedding", "aten::take",
                     "aten::take_along_dim", "aten::_embedding_bag", "aten::embedding_bag"))
SCATTERS = frozenset(("aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::scatter_add_",
                      "aten::scatter_reduce", "aten::scatter_reduce_", "aten::index_put", "aten::index_put_",
                      "aten::_index_put_impl_", "aten::index_add", "aten::index_add_", "aten::masked_scatter_",
                      "aten::embedding_dense_backward", "aten::index_fill_"))


def _picked(c: Call) -> tuple[Tensor, Tensor, int] | None:
    """(source, index, elements picked) of a gather-like op."""
    if c.name == "aten::embedding":  # weight[V, D], indices
        w, idx = c.tensor(0), c.tensor(1)
        if w is None or idx is None or len(w.dims) != 2:
            return None
        return w, idx, idx.numel * w.dims[1]
    if c.name in ("aten::index_select",):  # self, dim, index
        x, idx = c.tensor(0), c.tensor(2)
        if x is None or idx is None:
            return None
        d = dim_index(c.text(1), len(x.dims))
        if d is None:
            return None
        rows = x.numel // x.dims[d] if x.dims and x.dims[d] else 0
        return x, idx, rows * idx.numel
    if c.name == "aten::index":  # self, indices (a TensorList): out = broadcast(indices) + the dims not indexed
        x, ids = c.tensor(0), c.tlist(1)
        if x is None or not ids:
            return None
        out = math.prod(broadcast([t.dims for t in ids])) * math.prod(x.dims[len(ids):])
        idx = Tensor((sum(t.numel for t in ids),), "int64", 8.0)
        return x, idx, out
    x, idx = c.tensor(0), c.tensor(2 if c.name == "aten::gather" else 1)  # gather(self, dim, index); take
    if x is None or idx is None:
        return None
    return x, idx, idx.numel  # gather, take: one element per index


def gather(c: Call) -> OpCost | None:
    if c.name in ("aten::_embedding_bag", "aten::embedding_bag"):
        w, idx = c.tensor(0), c.tensor(1)
        if w is None or idx is None or len(w.dims) != 2:
            return None
        picked = idx.numel * w.dims[1]
        offsets = c.tensor(2)
        bags = offsets.numel if offsets is not None else 1
        q = idx.nbytes + (offsets.nbytes if offsets else 0) + min(picked, w.numel) * w.size + bags * w.dims[1] * w.size
        return OpCost(float(picked), q, _vec(c.dtype), "index",
                      "W = 1 add per picked element; Q = indices, offsets and the picked rows read once, the bags "
                      "written once", {"n": picked})
    got = _picked(c)
    if got is None:
        return None
    src, idx, n = got
    return _gathered(c, src, idx.nbytes, n)


def _gathered(c: Call, src: Tensor, index_bytes: float, n: int, how: str = "") -> OpCost:
    q = index_bytes + min(n, src.numel) * src.size + n * src.size
    return OpCost(0.0, q, _vec(c.dtype), "index",
                  "Q = the index and the elements it picks read once (at most the whole source), the output "
                  f"written once; W = 0{how}", {"n": n})


def index_from_inside(c: Call, out: Sequence[int], indices: Sequence[Tensor]) -> OpCost | None:
    """aten::index (`x[idx]`) whose indices, a list of optional tensors, the profiler recorded as `[]`: the output's
    shape and the index tensors from the ops inside it (ATen restrides the source to the output's shape, an
    `as_strided` whose sizes are recorded, and reshapes each index to broadcast, a `reshape` of it)."""
    x = c.tensor(0)
    if x is None or not indices or not all(isinstance(d, int) and d >= 0 for d in out):
        return None
    return _gathered(c, x, sum(t.nbytes for t in indices), math.prod(out),
                     " (the output's shape and the indices from the ops inside it: the index list is recorded empty)")


def scatter(c: Call) -> OpCost | None:
    """Writes the elements the index names (and reads them back where it accumulates)."""
    name, inplace = base_name(c.name)
    if c.name == "aten::embedding_dense_backward":  # grad_output[..., D], indices, num_weights
        g, idx = c.tensor(0), c.tensor(1)
        if g is None or idx is None or not g.dims:
            return None
        v = c.ints(2, 1)
        rows = min(idx.numel, v[0]) if v else idx.numel
        n = rows * g.dims[-1]
        q = g.nbytes + idx.nbytes + 2 * n * g.size  # the touched rows of grad_weight read and written
        return OpCost(float(g.numel), q, _vec(c.dtype), "index",
                      "W = 1 add per grad_output element; Q = grad_output and indices read once, the rows they touch "
                      "read and written once (zeroing grad_weight is the zeros / zero_ it calls, costed there)",
                      {"n": g.numel, "rows": rows})
    x = c.tensor(0)
    if x is None:
        return None
    if name in ("index_put", "_index_put_impl"):  # self, indices (TensorList), values, accumulate
        ids, vals = c.tlist(1), c.tensor(2)
        n = math.prod(broadcast([t.dims for t in ids])) * math.prod(x.dims[len(ids):]) if ids else 0
        idx_bytes = sum(8.0 * t.numel for t in ids)
        accumulate = c.flag(3)
        src = min(vals.numel, n) * vals.size if vals is not None else 0.0
    elif name == "masked_scatter":
        mask, vals = c.tensor(1), c.tensor(2)
        n = x.numel
        idx_bytes = mask.nbytes if mask else 0.0
        src = min(vals.numel, n) * vals.size if vals is not None else 0.0
        accumulate = False
    elif name in ("index_add", "index_fill"):  # self, dim, index, source|value
        idx, vals = c.tensor(2), c.tensor(3)
        if idx is None:
            return None
        d = dim_index(c.text(1), len(x.dims))
        rows = x.numel // x.dims[d] if d is not None and x.dims[d] else 0
        n = rows * idx.numel
        idx_bytes = idx.nbytes
        src = vals.nbytes if vals is not None and vals.dims else 0.0
        accumulate = name == "index_add"
    else:  # scatter(self, dim, index, src|value, …), scatter_add, scatter_reduce
        idx, vals = c.tensor(2), c.tensor(3)
        if idx is None:
            return None
        n = idx.numel
        idx_bytes = idx.nbytes
        src = n * vals.size if vals is not None and vals.dims else 0.0  # a src tensor is read where the index is
        accumulate = name in ("scatter_add", "scatter_reduce")
    q = idx_bytes + src + n * x.size * (2 if accumulate else 1)
    if not inplace:  # out of place: self copied to the output first
        q += 2 * x.nbytes
    return OpCost(float(n if accumulate else 0), q, _vec(c.dtype), "index",
                  "Q = the index and the source read once, the elements it names written once"
                  + (" (read first: it accumulates)" if accumulate else "")
                  + ("" if inplace else ", self copied to the output") + f"; W = {1 if accumulate else 0} per element",
                  {"n": n})


# fused optimizers: name → (FLOP per parameter element, tensors read and written per element (amsgrad adds 1 each))
FUSED_OPTIMIZERS = {"aten::_fused_adam_": 14, "aten::_fused_adamw_": 14}


def fused_adam(c: Call) -> OpCost | None:
    """Per parameter element: read param, grad, exp_avg, exp_avg_sq; write param, exp_avg, exp_avg_sq
    (amsgrad: max_exp_avg_sq read and written too); ≈ 14 FLOP (decay, two moment updates, bias-corrected
    step)."""
    params = c.tlist(0)
    if not params:
        return None
    amsgrad = c.flag(11)
    n = sum(t.numel for t in params)
    lists = [c.tlist(i) for i in range(1, 4)] + ([c.tlist(4)] if amsgrad else [])
    reads = sum(t.nbytes for t in params) + sum(t.nbytes for lst in lists for t in lst)
    writes = sum(t.nbytes for t in params) + sum(t.nbytes for lst in lists[1:] for t in lst)
    steps = sum(t.nbytes for t in c.tlist(5))
    extra = sum(t.nbytes for t in (c.tensor(13), c.tensor(14)) if t is not None)
    f = FUSED_OPTIMIZERS[c.name] + (1 if amsgrad else 0)
    return OpCost(float(f * n), reads + writes + steps + extra, _vec(c.dtype), "optimizer",
                  f"W = {f} FLOP per parameter element; Q = params, grads and the moments read once, params and "
                  "moments written once", {"n": n, "tensors": len(params)})


def fused_sgd(c: Call) -> OpCost | None:
    """Per element: read param, grad (and momentum buffer); write param (and the buffer); 2 FLOP (+3 momentum)."""
    params, grads, bufs = c.tlist(0), c.tlist(1), c.tlist(2)
    if not params:
        return None
    n = sum(t.numel for t in params)
    p = sum(t.nbytes for t in params)
    q = 2 * p + sum(t.nbytes for t in grads) + 2 * sum(t.nbytes for t in bufs)
    f = 2 + (3 if bufs else 0)
    return OpCost(float(f * n), q, _vec(c.dtype), "optimizer",
                  f"W = {f} FLOP per parameter element; Q = params, grads (and momentum) read once, params (and "
                  "momentum) written once", {"n": n, "tensors": len(params)})


FOREACH_REDUCTIONS = {"norm": 2, "max": 1}


def foreach(c: Call) -> OpCost | None:
    """A `_foreach_*` op over TensorLists: the elementwise op on each member (self, and the other lists' member)."""
    name, inplace = base_name(c.name)
    base = name.removeprefix("_foreach_")
    selves = c.tlist(0)
    if not selves:
        return None
    n = sum(t.numel for t in selves)
    lists = [a for a in c.args if isinstance(a, tuple)]
    reads = sum(t.nbytes for lst in lists for t in lst) + sum(t.nbytes for t in c.args if isinstance(t, Tensor))
    if base == "zero":
        return OpCost(0.0, sum(t.nbytes for t in selves), _vec(c.dtype), "copy",
                      "Q = each member written once (a fill reads nothing); W = 0", {"n": n})
    if base in FOREACH_REDUCTIONS:
        f = FOREACH_REDUCTIONS[base]
        return OpCost(float(f * n), reads + len(selves) * selves[0].size, _vec(c.dtype), "optimizer",
                      f"W = {f} FLOP per element; Q = each member read once, one value per member written",
                      {"n": n, "tensors": len(selves)})
    f = EW_FLOPS.get(base, 1)
    writes = sum(t.nbytes for t in selves)  # in place: self written back; else a new list as big
    return OpCost(float(f * n), reads + writes, _vec(c.dtype), "optimizer",
                  f"W = {f} FLOP per element; Q = every member of every list read once, "
                  + ("self's members written back (in place)" if inplace else "the result list written once"),
                  {"n": n, "tensors": len(selves)})
