"""The matmul-shaped families: GEMM, convolution and attention, forward and backward.

FLOPs are counted as torch's FlopCounterMode counts them (2 per multiply-add,
bias and softmax left out), with two exceptions, both said in the counting:
causal attention scores half the score matrix (Megatron's convention;
FlopCounterMode counts it dense), and a grouped convolution's weight gradient
is 2·N·O·(C/groups)·… like its forward (FlopCounterMode counts it `groups`
times over). Attention backward recomputes the scores and forms dP, dV, dQ and
dK: five matmuls where the forward has two, so 2.5× the forward's FLOPs. A
GEMM's backward is recorded as plain `mm` calls and costed as GEMMs.
Q is the compulsory traffic: every tensor input read once, every output written once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...paths import matmul_path
from .base import FLOAT_DTYPES, SCALAR_TYPES, BadShape, Call, OpCost, Tensor, broadcast

GEMMS = frozenset(("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
                   "aten::_addmm_activation", "aten::_scaled_mm"))
BIAS_FIRST = ("aten::addmm", "aten::_addmm_activation", "aten::baddbmm")  # C (or the bias) is input 0


def _gemm_cost(c: Call, a: Tensor, b: Tensor, m: int, n: int, k: int, batch: int, extra: list[Tensor]) -> OpCost:
    """W = 2·batch·M·N·K; Q = A, B (a broadcast one once), the bias / C read once, the output written once."""
    out, out_size = c.dtype, a.size
    if c.name == "aten::_scaled_mm":  # fp8 in, out_dtype out (bf16 unless recorded)
        out, out_size = SCALAR_TYPES.get(c.text(6), ("bf16", 2.0))
        if out not in FLOAT_DTYPES:
            out, out_size = "bf16", 2.0
    q = a.nbytes + b.nbytes + sum(t.nbytes for t in extra) + batch * m * n * out_size
    shape = {"m": m, "n": n, "k": k, **({"batch": batch} if batch != 1 else {})}
    return OpCost(2.0 * batch * m * n * k, q, matmul_path(c.dtype), "gemm",
                  "W = 2·M·N·K (as FlopCounterMode); Q = A, B" + (" and the bias / C" if extra else "")
                  + " read once, the output written once", shape)


def gemm(c: Call) -> OpCost | None:
    if c.dtype not in FLOAT_DTYPES:
        return None
    ts = [c.tensor(i) for i in range(len(c.args))]
    if c.name in BIAS_FIRST:
        bias, a, b = (ts + [None] * 3)[:3]
        extra = [bias] if bias is not None else []
    elif c.name == "aten::_scaled_mm":  # a, b, scale_a, scale_b, bias, scale_result
        a, b = (ts + [None, None])[:2]
        extra = [t for t in ts[2:6] if t is not None]
    else:
        a, b = (ts + [None, None])[:2]
        extra = [t for t in ts[2:3] if t is not None] if c.name == "aten::linear" else []
    if a is None or b is None:
        return None
    x, w = a.dims, b.dims
    if c.name == "aten::linear":  # x[..., K] · W[N, K]ᵀ
        if len(w) != 2 or not x or x[-1] != w[1]:
            return None
        return _gemm_cost(c, a, b, math.prod(x[:-1]), w[0], w[1], 1, extra)
    if len(x) == 1:
        x = (1, *x)
    if len(w) == 1:
        w = (*w, 1)
    if len(x) >= 2 and len(w) == 2 and x[-1] == w[0]:  # a matrix, or matmul folding x's batch into M
        return _gemm_cost(c, a, b, math.prod(x[:-1]), w[1], w[0], 1, extra)
    if len(x) >= 3 and len(w) >= 3 and x[-1] == w[-2]:  # batched
        return _gemm_cost(c, a, b, x[-2], w[-1], x[-1], math.prod(broadcast([x[:-2], w[:-2]])), extra)
    if len(x) == 2 and len(w) >= 3 and x[1] == w[-2]:  # matmul broadcasting x over w's batch
        return _gemm_cost(c, a, b, x[0], w[-1], x[1], math.prod(w[:-2]), extra)
    return None


@dataclass(frozen=True)
class ConvArgs:
    """Where a convolution op keeps its arguments (index into the inputs), or a fixed value (as text)."""

    stride: int | str
    padding: int | str
    dilation: int | str = "1"
    groups: int | str | None = None  # None: groups = C / weight's C (a forward convolution's shapes say it)
    transposed: int | str = "False"
    output_padding: int | str = "0"
    bias: int | None = 2


CONVS: dict[str, ConvArgs] = {
    "aten::convolution": ConvArgs(3, 4, 5, 8, 6, 7),
    "aten::_convolution": ConvArgs(3, 4, 5, 8, 6, 7),
    "aten::convolution_overrideable": ConvArgs(3, 4, 5, 8, 6, 7),
    "aten::conv1d": ConvArgs(3, 4, 5, 6), "aten::conv2d": ConvArgs(3, 4, 5, 6), "aten::conv3d": ConvArgs(3, 4, 5, 6),
    "aten::conv_transpose1d": ConvArgs(3, 4, 7, 6, "True", 5), "aten::conv_transpose2d": ConvArgs(3, 4, 7, 6, "True", 5),
    "aten::conv_transpose3d": ConvArgs(3, 4, 7, 6, "True", 5),
    "aten::cudnn_convolution": ConvArgs(3, 2, 4, 5, bias=None),
    "aten::cudnn_convolution_transpose": ConvArgs(4, 2, 5, 6, "True", 3, bias=None),
    "aten::mkldnn_convolution": ConvArgs(4, 3, 5, 6), "aten::miopen_convolution": ConvArgs(4, 3, 5, 6),
    "aten::_slow_conv2d_forward": ConvArgs(4, 5, bias=3), "aten::_conv_depthwise2d": ConvArgs(4, 5, 6, bias=3),
    "aten::slow_conv3d_forward": ConvArgs(4, 5, bias=3),
}
# backward: name → (grad_output, input, weight, transposed (an index or fixed text), output_mask, its length)
CONV_BACKWARDS: dict[str, tuple[int, int, int, int | str, int, int]] = {
    # grad_out, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, output_mask
    "aten::convolution_backward": (0, 1, 2, 7, 10, 3),
    "aten::convolution_backward_overrideable": (0, 1, 2, 7, 10, 3),
    # PyTorch ≤ 1.9: self, grad_output, weight, padding, stride, dilation, groups, benchmark, deterministic,
    # allow_tf32, output_mask (its two halves are the _input and _weight ops it calls)
    "aten::cudnn_convolution_backward": (1, 0, 2, "False", 10, 2),
    "aten::miopen_convolution_backward": (1, 0, 2, "False", 9, 3),
    # self, grad_output, weight, padding, output_padding, stride, dilation, groups, benchmark, deterministic,
    # allow_tf32, output_mask
    "aten::cudnn_convolution_transpose_backward": (1, 0, 2, "True", 11, 2),
}


def _arg(c: Call, where: int | str, n: int) -> list[int] | None:
    if isinstance(where, str):
        return [int(where)] * n if where.lstrip("-").isdigit() else None
    return c.ints(where, n)


def _transposed(c: Call, where: int | str) -> bool:
    return (where == "True") if isinstance(where, str) else c.flag(where)


def _geometry(c: Call, a: ConvArgs, x: tuple[int, ...], w: tuple[int, ...]) -> tuple[list[int], int, bool] | None:
    """(output spatial sizes, groups, transposed) of a convolution; BadShape where the arguments are impossible."""
    nsp = len(x) - 2
    if nsp < 1 or len(w) != len(x):
        return None
    transposed = _transposed(c, a.transposed)
    stride, pad, dil = (_arg(c, v, nsp) for v in (a.stride, a.padding, a.dilation))
    if c.name in ("aten::_slow_conv2d_forward", "aten::slow_conv3d_forward") and stride is None:
        return None
    outpad = _arg(c, a.output_padding, nsp) or [0] * nsp
    if stride is None or pad is None or dil is None:
        return None
    if min(stride) < 1 or min(dil) < 1 or min(pad) < 0 or min(outpad) < 0:
        raise BadShape(f"convolution stride {stride}, padding {pad}, dilation {dil}: strides and dilations "
                       "must be ≥ 1 and paddings ≥ 0")
    if transposed:
        groups = _groups(c, a)
        out = [(x[2 + i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (w[2 + i] - 1) + outpad[i] + 1 for i in range(nsp)]
        if x[1] != w[0]:
            return None
    else:
        if w[1] < 1 or x[1] % w[1]:
            return None
        groups = x[1] // w[1]
        out = [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(nsp)]
    if groups < 1:
        raise BadShape(f"convolution groups {groups}: must be ≥ 1")
    if min(out) < 1:
        raise BadShape(f"convolution output size {out}: the kernel does not fit the padded input")
    return out, groups, transposed


def _groups(c: Call, a: ConvArgs) -> int:
    g = _arg(c, a.groups, 1) if a.groups is not None else [1]
    return g[0] if g else 1


def _given(c: Call, a: ConvArgs, x: tuple[int, ...], w: tuple[int, ...],
           out: Sequence[int]) -> tuple[list[int], int, bool] | None:
    """(out, groups, transposed) of a convolution whose output size is known from elsewhere (its stride and
    padding were not recorded): None where the shapes do not fit a convolution with that output."""
    nsp = len(x) - 2
    if nsp < 1 or len(w) != len(x) or len(out) != nsp or min(out) < 1:
        return None
    transposed = _transposed(c, a.transposed)
    if transposed:
        return (list(out), _groups(c, a), True) if x[1] == w[0] else None
    if w[1] < 1 or x[1] % w[1]:
        return None
    return list(out), x[1] // w[1], False


def _conv_flops(x: tuple[int, ...], w: tuple[int, ...], out: Sequence[int], transposed: bool) -> float:
    """2·N·w[0]·w[1]·prod(kernel)·prod(output pixels) (input pixels for a transposed one), as FlopCounterMode."""
    return 2.0 * x[0] * w[0] * w[1] * math.prod(w[2:]) * math.prod(x[2:] if transposed else out)


def conv(c: Call, out_size: Sequence[int] | None = None) -> OpCost | None:
    """A forward convolution: W as FlopCounterMode; Q = input, weight, bias read once, output written once.
    `out_size`: the output's spatial size where the call's stride and padding were not recorded (PyTorch ≤ 1.9),
    as the op that reads the output (or the convolution's backward) recorded it."""
    a = CONVS[c.name]
    x, w = c.tensor(0), c.tensor(1)
    if x is None or w is None or c.dtype not in FLOAT_DTYPES:
        return None
    geo = _geometry(c, a, x.dims, w.dims)
    given = geo is None
    if given:
        geo = _given(c, a, x.dims, w.dims, out_size) if out_size is not None else None
        if geo is None:
            return None
    out, groups, transposed = geo  # type: ignore[misc]  # None returned above either way
    o_ch = w.dims[1] * groups if transposed else w.dims[0]
    n_out = x.dims[0] * o_ch * math.prod(out)
    bias = c.tensor(a.bias) if a.bias is not None else None
    q = x.nbytes + w.nbytes + (bias.nbytes if bias else 0.0) + n_out * x.size
    shape = {"n": x.dims[0], "c": x.dims[1], "o": o_ch, **{f"out{i}": o for i, o in enumerate(out)}, "groups": groups}
    return OpCost(_conv_flops(x.dims, w.dims, out, transposed), q, matmul_path(c.dtype), "conv",
                  "W = 2·N·O·(C/groups)·(kernel size)·(output pixels), as FlopCounterMode; Q = input, weights, "
                  "bias read once, output written once"
                  + ("; the output size is the next op's input (stride and padding were not recorded)" if given
                     else ""), shape)


def conv_backward(c: Call, mask: Sequence[bool] | None = None) -> OpCost | None:
    """grad_input and grad_weight, each the forward's FLOPs (the bias gradient's sums left out, as FlopCounterMode),
    from the shapes alone: grad_output holds the output size, so stride and padding are not needed (a trace
    before PyTorch 2 records none). Q = grad_output, input, weight read once, each requested gradient written
    once. `mask`: the gradients asked for, where the call's output_mask was not recorded but is known."""
    gi, xi, wi, ti, mi, nm = CONV_BACKWARDS[c.name]
    go, x, w = c.tensor(gi), c.tensor(xi), c.tensor(wi)
    if go is None or x is None or w is None or c.dtype not in FLOAT_DTYPES:
        return None
    nd = len(x.dims)
    if nd < 3 or len(w.dims) != nd or len(go.dims) != nd or go.dims[0] != x.dims[0]:
        return None
    flag = ti if isinstance(ti, str) else c.text(ti)
    if flag in ("True", "False", "1", "0"):
        transposed = flag in ("True", "1")
    else:  # not recorded: the shapes say which (a plain one's weight is O × C/groups × …, a transposed one's C × …)
        transposed = w.dims[0] != go.dims[1] and w.dims[0] == x.dims[1]
    if transposed:
        if w.dims[0] != x.dims[1] or w.dims[1] < 1 or go.dims[1] % w.dims[1]:
            return None
    elif w.dims[0] != go.dims[1] or w.dims[1] < 1 or x.dims[1] % w.dims[1]:
        return None
    groups = go.dims[1] // w.dims[1] if transposed else x.dims[1] // w.dims[1]
    mask = list(mask) if mask is not None else c.mask(mi, nm)
    mask += [False] * (3 - len(mask))
    out = list(go.dims[2:])
    fwd = _conv_flops(x.dims, w.dims, out, transposed)
    flops = fwd * (mask[0] + mask[1])
    o_ch = go.dims[1]
    q = go.nbytes + x.nbytes + w.nbytes + mask[0] * x.nbytes + mask[1] * w.nbytes + mask[2] * o_ch * go.size
    halves = [h for h, m in zip(("input", "weight"), mask) if m]
    shape = {"n": x.dims[0], "c": x.dims[1], "o": o_ch, **{f"out{i}": o for i, o in enumerate(out)}, "groups": groups}
    return OpCost(flops, q, matmul_path(c.dtype), "conv",
                  "W = the forward's 2·N·O·(C/groups)·(kernel)·(pixels) per gradient asked for ("
                  + (", ".join(halves) or "none") + "; FlopCounterMode counts a grouped conv's weight gradient "
                  "`groups` times over); Q = grad_output, input, weights read once, each gradient written once", shape)


@dataclass(frozen=True)
class AttnArgs:
    """Where an attention op keeps q (k, v follow), its causal flag, its bias; its layout and direction."""

    q: int
    causal: int | None
    bshd: bool = False  # (batch, seq, heads, dim) rather than (batch, heads, seq, dim)
    backward: bool = False
    mask_type: bool = False  # `causal` is a custom_mask_type (0 none, 1 and 2 causal)


ATTENTION: dict[str, AttnArgs] = {
    "aten::scaled_dot_product_attention": AttnArgs(0, 5),
    "aten::_scaled_dot_product_attention_math": AttnArgs(0, 5),
    "aten::_scaled_dot_product_flash_attention": AttnArgs(0, 4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": AttnArgs(0, 4),
    "aten::_scaled_dot_product_efficient_attention": AttnArgs(0, 6),
    "aten::_scaled_dot_product_cudnn_attention": AttnArgs(0, 6),
    "aten::_scaled_dot_product_fused_attention_overrideable": AttnArgs(0, 5),
    "aten::_flash_attention_forward": AttnArgs(0, 8, bshd=True),
    "aten::_efficient_attention_forward": AttnArgs(0, 9, bshd=True, mask_type=True),
    "aten::_cudnn_attention_forward": AttnArgs(0, 10),
    "aten::_scaled_dot_product_flash_attention_backward": AttnArgs(1, 11, backward=True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": AttnArgs(1, 7, backward=True),
    "aten::_scaled_dot_product_efficient_attention_backward": AttnArgs(1, 11, backward=True),
    "aten::_scaled_dot_product_cudnn_attention_backward": AttnArgs(1, 14, backward=True),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": AttnArgs(1, 13, backward=True),
    "aten::_flash_attention_backward": AttnArgs(1, 11, bshd=True, backward=True),
    "aten::_efficient_attention_backward": AttnArgs(1, 14, bshd=True, backward=True, mask_type=True),
    "aten::_cudnn_attention_backward": AttnArgs(1, 14, backward=True),
}


def attention(c: Call) -> OpCost | None:
    """Forward W = 2·b·h·pairs·(d_qk + d_v) (QKᵀ, PV); backward 2·b·h·pairs·(3·d_qk + 2·d_v) (S recomputed,
    dP, dV, dQ, dK: 2.5× the forward). pairs = q·t, half that under a causal mask (Megatron's convention)."""
    a = ATTENTION[c.name]
    q, k, v = c.tensor(a.q), c.tensor(a.q + 1), c.tensor(a.q + 2)
    if q is None or k is None or v is None or c.dtype not in FLOAT_DTYPES:
        return None
    if any(len(t.dims) != 4 for t in (q, k, v)):
        return None  # variable-length (packed) sequences: their lengths are not recorded
    if a.bshd:
        (b, sq, h, dq), (_, t, kv, _), dv = q.dims, k.dims, v.dims[3]
    else:
        (b, h, sq, dq), (_, kv, t, _), dv = q.dims, k.dims, v.dims[3]
    if a.causal is None:
        causal = False
    elif a.mask_type:
        causal = c.text(a.causal) in ("1", "2")
    else:
        causal = c.flag(a.causal)
    pairs = sq * t / 2 if causal else float(sq * t)
    per = (3 * dq + 2 * dv) if a.backward else (dq + dv)
    flops = 2.0 * b * h * pairs * per
    reads = sum(x.nbytes for x in c.tensors)
    out = b * h * sq * dv * q.size
    q_bytes = reads + (q.nbytes + k.nbytes + v.nbytes if a.backward else out)
    how = ("W = 2·b·h·pairs·(3·d + 2·d) (scores recomputed, dP, dV, dQ, dK: 2.5× the forward, as FlopCounterMode)"
           if a.backward else "W = 2·b·h·pairs·(d + d) (QKᵀ and PV, as FlopCounterMode)")
    how += (", pairs = q·t/2: causal, half the score matrix (Megatron's convention; FlopCounterMode counts "
            "it dense)" if causal else ", pairs = q·t")
    how += ("; Q = grad_out, Q, K, V, out, logsumexp read once, dQ, dK, dV written once" if a.backward
            else "; Q = Q, K, V (and a mask) read once, O written once (the score matrix stays on chip)")
    shape = {"b": b, "h": h, "kv": kv, "d": dq, "q": sq, "t": t, **({"causal": 1} if causal else {})}
    return OpCost(flops, q_bytes, matmul_path(c.dtype), "attention", how, shape)
