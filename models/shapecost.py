"""W and Q of one recorded op call from its name, its inputs' shapes and dtypes: rooftop's op models.

torch.profiler (with `record_shapes`) records each op's `Input Dims`,
`Input type` and `Concrete Inputs`; these are estimates made from them with
the models of `models.ops`, counted as everywhere in rooftop (each array read
or written once, an FMA is 2 FLOP). An op without a model keeps Q = its input
tensors' sizes and W = 0; views and metadata move nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .ops import Attention, Cost, Gemm, Norm, Softmax
from .paths import matmul_path, vector_path

# torch's type names in `Input type` → (rooftop dtype or a plain name, bytes per element)
TORCH_TYPES: dict[str, tuple[str, float]] = {
    "double": ("fp64", 8), "float": ("fp32", 4), "c10::Half": ("fp16", 2), "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1), "c10::Float8_e5m2": ("fp8", 1), "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "long int": ("int64", 8), "long": ("int64", 8), "int": ("int32", 4), "short int": ("int16", 2),
    "short": ("int16", 2), "signed char": ("int8", 1), "unsigned char": ("uint8", 1), "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8), "c10::complex<double>": ("complex128", 16),
}
FLOAT_DTYPES = ("fp64", "fp32", "fp16", "bf16", "fp8")

# Ops that move no data: views, metadata, allocation.
NO_WORK = frozenset(
    "aten::" + n for n in (
        "view", "reshape", "_reshape_alias", "_unsafe_view", "as_strided", "transpose", "t", "permute",
        "unsqueeze", "squeeze", "expand", "expand_as", "slice", "select", "alias", "detach", "lift_fresh",
        "empty", "empty_like", "empty_strided", "resize_", "result_type", "split", "chunk", "narrow", "unbind",
        "flatten", "unflatten", "size", "stride", "numel", "is_nonzero", "item", "_local_scalar_dense",
        "set_", "split_with_sizes", "view_as", "type_as", "contiguous", "to", "_to_copy", "clone",
        "broadcast_to", "movedim", "swapaxes", "diagonal", "values", "indices", "is_same_size",
    )
)
COPIES = frozenset(("aten::copy_", "aten::cat", "aten::stack", "aten::index_select", "aten::embedding",
                    "aten::fill_", "aten::zero_", "aten::zeros", "aten::ones", "aten::full", "aten::arange",
                    "aten::index", "aten::index_put_", "aten::gather", "aten::scatter_", "aten::where",
                    "aten::masked_fill", "aten::masked_fill_", "aten::repeat", "aten::roll", "aten::flip",
                    "aten::constant_pad_nd", "aten::tril", "aten::triu", "aten::slice_scatter"))
# FLOP per output element of the elementwise ops (as a fused kernel computes them).
EW_FLOPS = {
    "add": 1, "sub": 1, "mul": 1, "div": 1, "neg": 1, "pow": 1, "rsqrt": 2, "sqrt": 1, "reciprocal": 1,
    "exp": 1, "log": 1, "abs": 1, "relu": 1, "threshold": 1, "clamp": 1, "clamp_min": 1, "clamp_max": 1,
    "maximum": 1, "minimum": 1, "sigmoid": 4, "silu": 5, "gelu": 8, "tanh": 4, "cos": 1, "sin": 1,
    "addcmul": 2, "addcdiv": 2, "lerp": 2, "mean": 1, "sum": 1, "max": 1, "min": 1, "amax": 1, "argmax": 1,
    "argmin": 1, "norm": 2, "var": 3, "std": 3, "log_softmax": 5, "dropout": 2, "native_dropout": 2,
    "sign": 1, "floor": 1, "ceil": 1, "round": 1, "eq": 1, "ne": 1, "lt": 1, "gt": 1, "le": 1, "ge": 1,
    "logical_not": 1, "bitwise_not": 1, "erf": 4, "square": 1, "mse_loss": 3, "hardtanh": 1, "leaky_relu": 2,
}
REDUCTIONS = frozenset(("mean", "sum", "max", "min", "amax", "argmax", "argmin", "norm", "var", "std", "mse_loss"))
GEMMS = frozenset(("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
                   "aten::_addmm_activation"))
ATTENTION = frozenset((
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math",
    "aten::_cudnn_attention_forward", "aten::_efficient_attention_forward", "aten::_flash_attention_forward",
))
# These two take q, k, v as (batch, seq, heads, dim); the others as (batch, heads, seq, dim).
BSHD_ATTENTION = frozenset(("aten::_efficient_attention_forward", "aten::_flash_attention_forward"))
NORMS = {"aten::layer_norm": "layer", "aten::native_layer_norm": "layer", "aten::rms_norm": "rms",
         "aten::_fused_rms_norm": "rms", "aten::group_norm": "layer", "aten::native_group_norm": "layer"}
# Where each convolution op keeps (stride, padding, dilation, groups) among its arguments.
CONVS = {
    "aten::convolution": (3, 4, 5, 8), "aten::_convolution": (3, 4, 5, 8), "aten::conv1d": (3, 4, 5, 6),
    "aten::conv2d": (3, 4, 5, 6), "aten::conv3d": (3, 4, 5, 6), "aten::cudnn_convolution": (3, 2, 4, 5),
    "aten::mkldnn_convolution": (4, 3, 5, 6),
}
SOFTMAXES = frozenset(("aten::softmax", "aten::_softmax", "aten::_safe_softmax"))


@dataclass(frozen=True)
class Tensor:
    dims: tuple[int, ...]
    dtype: str  # a rooftop dtype (fp32, bf16, …) or int64 / bool / …
    size: float  # bytes per element

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> float:
        return self.numel * self.size


@dataclass(frozen=True)
class OpCost:
    """W and Q of one call of an op, how they were counted, and the path it runs on."""

    flops: float
    bytes: float
    path: str
    model: str  # gemm, conv, attention, norm, softmax, elementwise, copy, none (no data moved), tensors (Q from sizes)
    counting: str
    shape: Mapping[str, int] = field(default_factory=dict)  # the model's dimensions (m, n, k; b, h, t, d; n)


def tensors_of(dims: Sequence[Any], types: Sequence[str], list_element: tuple[str, float] = ("fp32", 4.0),
               ) -> list[Tensor]:
    """The tensor inputs of an op (scalars left out; a TensorList's members included).

    The profiler records no dtype for a TensorList's members: `list_element` is
    taken for them (fp32 unless the kernel's name says otherwise).
    """
    out: list[Tensor] = []
    for d, t in zip(dims, types):
        if t == "TensorList" and isinstance(d, list):
            out += [Tensor(tuple(int(x) for x in m), *list_element) for m in d if isinstance(m, list)]
            continue
        known = TORCH_TYPES.get(t)
        if known is None or not isinstance(d, list) or not all(isinstance(x, int) for x in d):
            continue
        out.append(Tensor(tuple(d), known[0], float(known[1])))
    return out


KERNEL_TYPES = (("c10::BFloat16", ("bf16", 2.0)), ("c10::Half", ("fp16", 2.0)), ("__nv_bfloat16", ("bf16", 2.0)),
                ("OpaqueType<1u>", ("", 1.0)), ("OpaqueType<2u>", ("", 2.0)), ("OpaqueType<4u>", ("", 4.0)),
                ("OpaqueType<8u>", ("", 8.0)), ("<float,", ("fp32", 4.0)), ("<double,", ("fp64", 8.0)))


def element_from_kernel(kernel_name: str) -> tuple[str, float] | None:
    """The element type (or only its size) a templated kernel's name shows, e.g. `OpaqueType<2u>` → 2 bytes."""
    for token, elem in KERNEL_TYPES:
        if token in kernel_name:
            return elem
    return None


def op_dtype(types: Sequence[str]) -> str:
    """The op's element type: its first floating input's, else its first tensor's, else ''."""
    names = [TORCH_TYPES[t][0] for t in types if t in TORCH_TYPES]
    floats = [n for n in names if n in FLOAT_DTYPES]
    return (floats or names or [""])[0]


def broadcast(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy broadcasting of shapes (the output shape of an elementwise op)."""
    n = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        sizes = [s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0]
        out.append(max(sizes) if sizes else 1)
    return tuple(out)


def _vector(dtype: str) -> str:
    return vector_path(dtype if dtype in FLOAT_DTYPES else "fp32")


def _from(cost: Cost, model: str, shape: Mapping[str, int]) -> OpCost:
    return OpCost(cost.flops, cost.bytes, cost.path, model, cost.counting, dict(shape))


def _gemm_cost(dtype: str, m: int, n: int, k: int, batch: int = 1) -> OpCost:
    shape = {"m": m, "n": n, "k": k, **({"batch": batch} if batch != 1 else {})}
    return _from(Gemm(dtype=dtype, m=m, n=n, k=k, batch=batch).cost(), "gemm", shape)


def _gemm(name: str, ts: list[Tensor], dtype: str) -> OpCost | None:
    if dtype not in FLOAT_DTYPES:
        return None
    d = [t.dims for t in ts]
    if name in ("aten::addmm", "aten::_addmm_activation", "aten::baddbmm") and len(d) >= 3:
        d = d[1:3]  # the bias (or C) is the first input
    if len(d) < 2:
        return None
    a, b = d[0], d[1]
    if name == "aten::linear":  # x[..., K] · W[N, K]ᵀ
        if len(b) != 2 or not a or a[-1] != b[1]:
            return None
        return _gemm_cost(dtype, math.prod(a[:-1]) or 1, b[0], b[1])
    if len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        return _gemm_cost(dtype, a[0], b[1], a[1])
    if len(a) >= 3 and len(b) >= 2 and a[-1] == b[-2]:  # batched, or matmul broadcasting a matrix
        return _gemm_cost(dtype, a[-2], b[-1], a[-1], math.prod(broadcast([a[:-2], b[:-2]])) or 1)
    if len(a) == 2 and len(b) >= 3 and a[1] == b[-2]:
        return _gemm_cost(dtype, a[0], b[-1], a[1], math.prod(b[:-2]))
    return None


def _attention(name: str, ts: list[Tensor], dtype: str) -> OpCost | None:
    if len(ts) < 3 or dtype not in FLOAT_DTYPES or any(len(t.dims) != 4 for t in ts[:3]):
        return None
    q, k = ts[0].dims, ts[1].dims
    if name in BSHD_ATTENTION:
        (b, sq, h, d), (_, t, kv, _) = q, k
    else:
        (b, h, sq, d), (_, kv, t, _) = q, k
    mode = "decode" if sq == 1 else "flash"
    return _from(Attention(dtype=dtype, b=b, h=h, kv=kv, d=d, q=sq, t=t, mode=mode).cost(), "attention",
                 {"b": b, "h": h, "kv": kv, "d": d, "q": sq, "t": t})


def _ints(text: str, n: int) -> list[int] | None:
    """'[2, 2]' or '1' as n ints (a single value repeated); None if it is not that (e.g. padding='same')."""
    try:
        v = json.loads(text)
    except (TypeError, ValueError):
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return [v] * n
    if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
        return v * n if len(v) == 1 else v if len(v) == n else None
    return None


def _conv(name: str, ts: list[Tensor], dtype: str, concrete: Sequence[str]) -> OpCost | None:
    """A forward convolution: W = 2·N·O·prod(out spatial)·(C/groups)·prod(kernel); Q = input, weight, output once."""
    if len(ts) < 2 or dtype not in FLOAT_DTYPES:
        return None
    x, w = ts[0].dims, ts[1].dims
    nsp = len(x) - 2
    if nsp < 1 or len(w) != len(x):
        return None
    si, pi, di, gi = CONVS[name]
    if len(concrete) <= max(si, pi, di, gi):
        return None
    stride, pad, dil = (_ints(concrete[i], nsp) for i in (si, pi, di))
    groups = _ints(concrete[gi], 1)
    if not (stride and pad and dil and groups):
        return None
    out = [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(nsp)]
    if min(out) < 1:
        return None
    n_out = x[0] * w[0] * math.prod(out)
    flops = 2.0 * n_out * w[1] * math.prod(w[2:])
    size = ts[0].size
    q = ts[0].nbytes + ts[1].nbytes + n_out * size
    shape = {"n": x[0], "c": x[1], "o": w[0], **{f"out{i}": o for i, o in enumerate(out)}, "groups": groups[0]}
    return OpCost(flops, q, matmul_path(dtype), "conv",
                  "W = 2·N·O·(output pixels)·(C/groups)·(kernel size); Q = input, weights, output once", shape)


def cost_op(name: str, dims: Sequence[Any], types: Sequence[str],
            list_element: tuple[str, float] | None = None, concrete: Sequence[str] = ()) -> OpCost:
    """W and Q of one call, from the op's name and its inputs' shapes and types (an estimate)."""
    ts = tensors_of(dims, types, list_element or ("fp32", 4.0))
    dtype = op_dtype(types) or (list_element[0] if list_element and "TensorList" in types else "")
    if name in NO_WORK:
        return OpCost(0.0, 0.0, _vector(dtype), "none", "a view, metadata or allocation: moves no data")
    if name in GEMMS:
        c = _gemm(name, ts, dtype)
        if c:
            return c
    if name in CONVS:
        c = _conv(name, ts, dtype, concrete)
        if c:
            return c
    if name in ATTENTION:
        c = _attention(name, ts, dtype)
        if c:
            return c
    if name in NORMS and ts and dtype in FLOAT_DTYPES:
        x = ts[0].dims
        cols = x[-1] if x else 1
        rows = max(1, ts[0].numel // max(cols, 1))
        return _from(Norm(dtype=dtype, rows=rows, cols=cols, type=NORMS[name]).cost(), "norm",
                     {"rows": rows, "cols": cols})
    if name in SOFTMAXES and ts and dtype in FLOAT_DTYPES:
        x = ts[0].dims
        cols = x[-1] if x else 1
        rows = max(1, ts[0].numel // max(cols, 1))
        return _from(Softmax(dtype=dtype, rows=rows, cols=cols).cost(), "softmax", {"rows": rows, "cols": cols})
    reads = sum(t.nbytes for t in ts)
    n = {"n": max((t.numel for t in ts), default=0)}
    if name in COPIES:
        if name == "aten::copy_" and len(ts) >= 2:  # dst is written, src is read
            q = ts[0].nbytes + ts[1].nbytes
        elif name in ("aten::index_select", "aten::embedding", "aten::index", "aten::gather") and ts:
            # the rows gathered, not the whole table: the output is as big as the index times a row
            idx = ts[-1] if name != "aten::embedding" else ts[1]
            row = ts[0].nbytes / max(ts[0].dims[0], 1) if ts[0].dims else ts[0].size
            q = 2 * idx.numel * row + idx.nbytes
        else:
            q = 2 * reads if reads else 0.0  # read the inputs, write as much
        return OpCost(0.0, q, _vector(dtype), "copy", "Q = bytes read + bytes written; W = 0", n)
    base = name.split("::")[-1].rstrip("_")
    if base in EW_FLOPS and ts:
        out_dims = broadcast([t.dims for t in ts])
        n_out = math.prod(out_dims)
        size = ts[0].size
        if base in REDUCTIONS:
            n_in = max(t.numel for t in ts)
            return OpCost(EW_FLOPS[base] * n_in, reads, _vector(dtype), "elementwise",
                          f"W = {EW_FLOPS[base]} FLOP per input element; Q = inputs read once (the reduced output is small)",
                          n)
        return OpCost(EW_FLOPS[base] * n_out, reads + n_out * size, _vector(dtype), "elementwise",
                      f"W = {EW_FLOPS[base]} FLOP per output element; Q = inputs read once, output written once",
                      {"n": n_out})
    return OpCost(0.0, reads, _vector(dtype), "tensors",
                  "no model for this op: Q = its input tensors' sizes, W not counted", n)
