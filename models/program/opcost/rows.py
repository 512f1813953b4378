"""Row-shaped families: norms, softmax / log_softmax, losses and pooling, forward and backward.

FlopCounterMode counts none of these, so W is rooftop's own per-element count
of a fused kernel (written in each model's counting). Q is the compulsory
traffic: every tensor input read once, every output written once (a norm's
saved statistics included). Each model costs the whole call: where an op
zeroes its output through another recorded op (nll_loss_backward's zero_), the
workload keeps the zeroing with that op and leaves this one the rest.
"""

from __future__ import annotations

import math

from ...paths import vector_path
from .base import FLOAT_DTYPES, BadShape, Call, OpCost, Tensor

# norm → (FLOP per element forward, backward): x̂ = (x−μ)·rstd, y = x̂·w + b; backward
# dx = rstd·(g·w − mean(g·w) − x̂·mean(g·w·x̂)), dw = Σ g·x̂, db = Σ g.
NORM_FLOPS = {"layer": (8.0, 13.0), "rms": (4.0, 9.0), "group": (8.0, 13.0), "batch": (8.0, 13.0)}
# name → (kind, index of x, index of the output_mask or None, backward)
NORMS: dict[str, tuple[str, int, int | None, bool]] = {
    "aten::layer_norm": ("layer", 0, None, False), "aten::native_layer_norm": ("layer", 0, None, False),
    "aten::rms_norm": ("rms", 0, None, False), "aten::_fused_rms_norm": ("rms", 0, None, False),
    "aten::group_norm": ("group", 0, None, False), "aten::native_group_norm": ("group", 0, None, False),
    "aten::batch_norm": ("batch", 0, None, False), "aten::_batch_norm_impl_index": ("batch", 0, None, False),
    "aten::native_batch_norm": ("batch", 0, None, False), "aten::cudnn_batch_norm": ("batch", 0, None, False),
    "aten::miopen_batch_norm": ("batch", 0, None, False), "aten::_native_batch_norm_legit": ("batch", 0, None, False),
    "aten::_batch_norm_with_update": ("batch", 0, None, False),
    "aten::_native_batch_norm_legit_no_training": ("batch", 0, None, False),
    "aten::native_layer_norm_backward": ("layer", 1, 7, True), "aten::_fused_rms_norm_backward": ("rms", 1, 5, True),
    "aten::native_group_norm_backward": ("group", 1, 9, True),
    "aten::native_batch_norm_backward": ("batch", 1, 9, True), "aten::batch_norm_backward": ("batch", 1, 9, True),
    "aten::cudnn_batch_norm_backward": ("batch", 0, None, True),
    "aten::miopen_batch_norm_backward": ("batch", 0, None, True),
}


def _vec(dtype: str) -> str:
    return vector_path(dtype if dtype in FLOAT_DTYPES else "fp32")


def _stats(c: Call, kind: str, x: Tensor) -> int:
    """How many rows a norm keeps statistics for (its mean / rstd outputs)."""
    if kind == "batch":
        return x.dims[1] if len(x.dims) > 1 else 1
    if kind == "group":
        groups = c.ints(1 if c.name == "aten::group_norm" else 6, 1)
        return x.dims[0] * (groups[0] if groups and groups[0] > 0 else 1) if x.dims else 1
    shape = c.ints(1)
    cols = math.prod(shape) if shape else (x.dims[-1] if x.dims else 1)
    return x.numel // cols if cols else 0


def norm(c: Call) -> OpCost | None:
    kind, xi, mi, backward = NORMS[c.name]
    x = c.tensor(xi)
    if x is None or c.dtype not in FLOAT_DTYPES or not x.dims:
        return None
    reads = sum(t.nbytes for t in c.tensors)
    rows = _stats(c, kind, x)
    if backward:
        if c.name in ("aten::cudnn_batch_norm_backward", "aten::miopen_batch_norm_backward"):
            mask = [True] * 3
        else:
            mask = c.mask(mi) if mi is not None else [True] * 3
        # dweight and dbias are one per channel: C for batch / group norm, the normalized size for layer / rms
        channels = (x.dims[1] if len(x.dims) > 1 else 1) if kind in ("batch", "group") else x.numel // max(rows, 1)
        weight = channels * x.size
        writes = mask[0] * x.nbytes + (mask[1] + (mask[2] and kind != "rms")) * weight
        how = "Q = grad_out, x, the saved statistics, weights read once; dx, dweight, dbias written once"
    else:
        stats = 0 if c.name in ("aten::layer_norm", "aten::rms_norm", "aten::group_norm", "aten::batch_norm") else 1
        evaluating = kind == "batch" and (c.name == "aten::_native_batch_norm_legit_no_training"
                                          or (c.name != "aten::_batch_norm_with_update" and c.text(5) == "False"))
        n_stats = 0 if evaluating else (1 if kind == "rms" else 2) * stats
        # training updates the running mean and var (read with the inputs above, written here)
        running = 2 * rows * x.size if kind == "batch" and len(c.tensors) >= 5 and not evaluating else 0.0
        writes = x.nbytes + n_stats * rows * 4.0 + running
        how = "Q = x, weights (and running statistics) read once, y and the saved statistics written once"
    f = NORM_FLOPS[kind][backward]
    return OpCost(f * x.numel, reads + writes, _vec(c.dtype), "norm",
                  f"W = {f:g} FLOP per element ({kind} norm {'backward' if backward else 'forward'}); {how}",
                  {"rows": rows, "cols": x.numel // rows if rows else 0})


SOFTMAXES = frozenset(("aten::softmax", "aten::_softmax", "aten::_safe_softmax", "aten::log_softmax",
                       "aten::_log_softmax", "aten::special_softmax", "aten::special_log_softmax"))
SOFTMAX_BACKWARD = frozenset(("aten::_softmax_backward_data", "aten::_log_softmax_backward_data"))


def softmax(c: Call) -> OpCost | None:
    """Forward: max, −max, exp, sum, ÷ (log: −log) = 5 FLOP per element; backward: g·y, Σ, −, · = 4."""
    x = c.tensor(0)
    if x is None or c.dtype not in FLOAT_DTYPES:
        return None
    backward = c.name in SOFTMAX_BACKWARD
    f = 4.0 if backward else 5.0
    dim = c.ints(1, 1)
    cols = x.dims[dim[0]] if dim and x.dims and -len(x.dims) <= dim[0] < len(x.dims) else (x.dims[-1] if x.dims else 1)
    reads = sum(t.nbytes for t in c.tensors[:2 if backward else 1])
    return OpCost(f * x.numel, reads + x.nbytes, _vec(c.dtype), "softmax",
                  f"W = {f:g} FLOP per element; Q = " + ("grad and output read once, grad_input written once"
                                                          if backward else "x read once, y written once"),
                  {"rows": x.numel // cols if cols else 0, "cols": cols})


NLL = frozenset(("aten::nll_loss", "aten::nll_loss_nd", "aten::nll_loss_forward", "aten::nll_loss2d",
                 "aten::nll_loss2d_forward"))
NLL_BACKWARD = frozenset(("aten::nll_loss_backward", "aten::nll_loss2d_backward"))


def nll_loss(c: Call) -> OpCost | None:
    """Forward reads the target and the one log-probability each target picks (not the whole N×C input);
    backward clears grad_input (N×C, through the zero_ it calls) and writes the N picked values."""
    backward = c.name in NLL_BACKWARD
    off = 1 if backward else 0
    x, target, weight = c.tensor(off), c.tensor(off + 1), c.tensor(off + 2)
    if x is None or target is None:
        return None
    n = target.numel
    picked = n * x.size * (2 if weight is not None else 1)  # the picked values (and their class weights)
    if backward:
        small = sum(t.nbytes for t in (c.tensor(0), c.tensor(6)) if t is not None)  # grad_output, total_weight
        q = target.nbytes + small + picked + x.nbytes  # the class weights read, the N values written, x cleared
        how = ("Q = target, grad_output, total_weight (and class weights) read once, grad_input cleared and its N "
               "picked values written once")
    else:
        red = c.text(off + 3)
        out = n if red == "0" else 1
        q = target.nbytes + picked + (out + 1) * x.size
        how = "Q = target and the N log-probabilities it picks read once, the loss and total weight written once"
    return OpCost(float(n * (2 if weight is not None else 1)), q, _vec(c.dtype), "loss",
                  f"W = {'2' if weight is not None else '1'} FLOP per target; {how}", {"n": n, "classes": x.dims[1]
                                                                                       if len(x.dims) > 1 else 1})


def cross_entropy(c: Call) -> OpCost | None:
    """The composite: log_softmax over N×C and nll_loss on it (its recorded children carry it on a CPU trace)."""
    x, target = c.tensor(0), c.tensor(1)
    if x is None or target is None or c.dtype not in FLOAT_DTYPES:
        return None
    n = target.numel
    return OpCost(5.0 * x.numel + n, 2 * x.nbytes + target.nbytes + n * x.size + 2 * x.size, _vec(c.dtype), "loss",
                  "log_softmax (5 FLOP per element; x read, log-probabilities written) and nll_loss (the N picked "
                  "values and the target read, the loss written)", {"n": n, "classes": x.dims[-1] if x.dims else 1})


# elementwise losses: name → (FLOP per element, index of the reduction argument, backward)
ELEMENTWISE_LOSSES = {
    "aten::mse_loss": (3.0, 2, False), "aten::l1_loss": (2.0, 2, False), "aten::smooth_l1_loss": (4.0, 2, False),
    "aten::huber_loss": (4.0, 2, False), "aten::binary_cross_entropy": (6.0, 3, False),
    "aten::binary_cross_entropy_with_logits": (8.0, 4, False),
    "aten::mse_loss_backward": (3.0, 3, True), "aten::smooth_l1_loss_backward": (4.0, 3, True),
    "aten::huber_loss_backward": (4.0, 3, True), "aten::binary_cross_entropy_backward": (5.0, 4, True),
}


def elementwise_loss(c: Call) -> OpCost | None:
    f, ri, backward = ELEMENTWISE_LOSSES[c.name]
    ts = c.tensors
    x = c.tensor(1 if backward else 0)
    if x is None:
        return None
    reads = sum(t.nbytes for t in ts)
    out = x.numel if backward or c.text(ri) == "0" else 1
    return OpCost(f * x.numel, reads + out * x.size, _vec(c.dtype), "loss",
                  f"W = {f:g} FLOP per element; Q = inputs read once, "
                  + ("grad_input" if backward else "the loss") + " written once", {"n": x.numel})


POOLS = {  # name → (kernel, stride, padding, dilation, ceil_mode) argument indices; None: not an argument
    "aten::max_pool1d": (1, 2, 3, 4, 5), "aten::max_pool2d": (1, 2, 3, 4, 5), "aten::max_pool3d": (1, 2, 3, 4, 5),
    "aten::max_pool2d_with_indices": (1, 2, 3, 4, 5), "aten::max_pool3d_with_indices": (1, 2, 3, 4, 5),
    "aten::avg_pool1d": (1, 2, 3, None, 4), "aten::avg_pool2d": (1, 2, 3, None, 4), "aten::avg_pool3d": (1, 2, 3, None, 4),
}
POOL_BACKWARD = frozenset(("aten::max_pool2d_with_indices_backward", "aten::max_pool3d_with_indices_backward",
                           "aten::avg_pool2d_backward", "aten::avg_pool3d_backward", "aten::_adaptive_avg_pool2d_backward",
                           "aten::_adaptive_avg_pool3d_backward", "aten::adaptive_max_pool2d_backward"))
ADAPTIVE = frozenset(("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d",
                      "aten::adaptive_avg_pool3d", "aten::_adaptive_avg_pool3d", "aten::adaptive_max_pool2d"))


def pool(c: Call) -> OpCost | None:
    """Forward: one compare / add per window element of each output, output (and max's indices) written once;
    backward: one add per grad_output element, grad_input written once (its indices read)."""
    x = c.tensor(0)
    if x is None or len(x.dims) < 2:
        return None
    if c.name in POOL_BACKWARD:
        inp = c.tensor(1)
        if inp is None:
            return None
        reads = sum(t.nbytes for t in c.tensors if t is not inp)  # the input's values are not read, only its shape
        return OpCost(float(x.numel), reads + inp.nbytes, _vec(c.dtype), "pool",
                      "W = 1 FLOP per grad_output element; Q = grad_output (and indices) read once, grad_input "
                      "written once", {"n": inp.numel})
    if c.name in ADAPTIVE:
        size = c.ints(1)
        if not size or min(size) < 1:
            return None
        out = [*x.dims[: len(x.dims) - len(size)], *size]
        window = x.numel / max(math.prod(out), 1)
    else:
        ki, si, pi, di, ci = POOLS[c.name]
        nsp = 3 if "3d" in c.name else 1 if "1d" in c.name else 2
        if len(x.dims) < nsp + 1:
            return None
        k, pad = c.ints(ki, nsp), c.ints(pi, nsp) or [0] * nsp
        stride = c.ints(si, nsp) if c.text(si) not in ("", "[]") else k
        dil = c.ints(di, nsp) if di is not None else [1] * nsp
        if not k or not stride or not dil:
            return None
        if min(k) < 1 or min(stride) < 1 or min(dil) < 1 or min(pad) < 0:
            raise BadShape(f"pooling kernel {k}, stride {stride}, dilation {dil}, padding {pad}: out of range")
        sp = x.dims[-nsp:]
        ceil = c.flag(ci)
        outs = []
        for i in range(nsp):
            span = sp[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1
            outs.append((-(-span // stride[i]) if ceil else span // stride[i]) + 1)
        if min(outs) < 1:
            return None
        out = [*x.dims[:-nsp], *outs]
        window = math.prod(k)
    n_out = math.prod(out)
    indices = "max" in c.name and ("indices" in c.name or c.name == "aten::adaptive_max_pool2d")
    q = x.nbytes + n_out * x.size + (n_out * 8 if indices else 0)
    return OpCost(float(n_out * window), q, _vec(c.dtype), "pool",
                  "W = 1 FLOP per window element of each output; Q = input read once, output "
                  + ("and indices " if indices else "") + "written once", {"n": n_out})
