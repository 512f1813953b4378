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
from .ops import Attention, Cost, Gemm, Norm, Softmax
from .paths import MATMUL_LADDER, matmul_path, vector_path
from .profile import DeviceProfile, NoRoof
from .trace import CpuOp, Trace

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
UNATTRIBUTED = "(unattributed kernels)"
GRAPH_REPLAY = "(CUDA graph replay)"


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
        return {"ops": [g.to_dict() for g in self.groups], "summary": self.summary(), "notes": list(self.notes)}


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
