"""What to do about an op's place on the roofline, and what to distrust.

Advice follows the regime: below the ridge cut bytes or raise I, above it move
to a higher roof. Warnings name the cases where the model itself stops holding
(launch overhead, small-M kernels, tile padding, L2 residency). Each line says
the fact it rests on, with numbers.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from . import roofline
from .dtypes import DTYPES, SCALE_GROUP, output_size, weight_scale_bytes, weight_size
from .ops import Attention, Elementwise, FmaSweep, Gemm, Norm, Softmax
from .paths import PATHS, matmul_ladder, path_for
from .roofline import ABOVE_ROOF
from .units import fmt_bandwidth, fmt_bytes, fmt_flops_rate, fmt_intensity, fmt_percent, fmt_time

# A CUDA kernel launch costs a few µs (tiny fp16 GEMMs on an H100 all took 4.5 µs in the
# RealZST/llm-infra-notes measurements). Only the warnings use it, and say it is typical:
# a time bound uses a launch overhead only where the device's profile has one.
TYPICAL_LAUNCH_S = 5e-6

if TYPE_CHECKING:
    from .placement import Analysis

PATH_HINTS = {
    "tf32-tc": "TF32: torch.backends.cuda.matmul.allow_tf32 = True (10-bit mantissa)",
    "bf16-tc": "BF16 autocast",
    "fp16-tc": "FP16 autocast",
    "fp8-tc": "FP8 with per-tensor or per-row scales (torch._scaled_mm, Transformer Engine)",
    "int8-tc": "INT8 weights and activations (SmoothQuant-style)",
    "fp4-tc": "FP4 (nvfp4 / mxfp4) with block scales",
}
CUBLAS_TILE_M = 32  # GEMM kernels compute whole tiles: an RTX 4080 FP64 GEMM at M = 2 took the time of M = 32


def advise(a: "Analysis") -> list[str]:
    if a.is_collective:
        return _comm_advice(a)
    out: list[str] = []
    i, ridge = a.intensity, a.ridge
    if a.regime == "memory":
        out.append(
            f"memory-bound: I = {fmt_intensity(i)} < I* = {fmt_intensity(ridge)}; the time is moving "
            f"{fmt_bytes(a.bytes)} at {a.bandwidth / 1e9:.0f} GB/s — cut bytes or raise I"
        )
        out += _memory_advice(a)
    else:
        out.append(
            f"compute-bound: I = {fmt_intensity(i)} ≥ I* = {fmt_intensity(ridge)}; the time is the FLOPs "
            f"at {fmt_flops_rate(a.peak)} on {a.path} — fewer FLOPs or a higher roof"
        )
        out += _compute_advice(a)
    if 0.5 <= i / ridge <= 2:
        out.append(
            f"near the ridge (I/I* = {i / ridge:.2f}): bytes and FLOPs both matter, and measured points "
            "sit under the rounded corner, below both roofs"
        )
    return out


def _comm_advice(a: "Analysis") -> list[str]:
    """A collective on its link: the communication roofline (B is the link's, I_comm = W per byte on the wire)."""
    wire_t = a.bytes / a.bandwidth
    head = (f"on {a.level} at {fmt_bandwidth(a.bandwidth)}: {fmt_bytes(a.bytes)} on the wire per rank take "
            f"{fmt_time(wire_t)}, α {fmt_time(a.alpha_s)}; I_comm = {fmt_intensity(a.intensity)}")
    if a.regime == "latency":
        return [f"latency-bound ({head}): below S* = α·B = {fmt_bytes(a.alpha_s * a.bandwidth)} the size hardly "
                "matters — fuse small collectives into one (bucketing) or use fewer hops"]
    if a.regime == "compute":
        return [f"compute-bound ({head}): the reduction's adds on {a.path} outlast the transfer"]
    return [f"comm-bound ({head}): send fewer bytes (a narrower dtype halves Q), move the collective to a steeper "
            "link (nvlink or xgmi over pcie over net), or overlap it with compute"]


def _memory_advice(a: "Analysis") -> list[str]:
    op = a.op
    out: list[str] = []
    if isinstance(op, Gemm):
        s, so = DTYPES[op.dtype].size, output_size(op.out_dtype)
        w = weight_size(op.weight_dtype) + weight_scale_bytes(op.weight_dtype, 1)  # bytes per weight, scales in
        m_star = roofline.gemm_ridge_m(op.n, op.k, s, a.ridge, so)
        m_star = m_star * w / s if m_star is not None else None  # the weights' bytes per element scale M*
        if m_star is None:
            limit = roofline.gemm_intensity(1e30, op.n, op.k, s, so)
            out.append(
                f"no M reaches the ridge: with N = {op.n}, K = {op.k} even large M gives I → {fmt_intensity(limit)}; "
                "a bigger N or K, or a lower precision, is needed"
            )
        else:
            out.append(
                f"batch more rows: from M ≈ {math.ceil(m_star)} tokens per batch the GEMM reaches the ridge; "
                f"below that the time is reading the {op.k}×{op.n} weights once, so extra rows are nearly free "
                "(a decode step's linear layers have I ≈ batch)"
            )
        out += _weight_only(a, op)
        if not op.wdtype:  # weights already narrower than the activations: a W8A8 path would not cut bytes
            out += _lower_precision(a, "weights and activations")
    elif isinstance(op, Attention):
        if op.mode == "naive":
            flash = replace(op, mode="flash").cost()
            out.append(
                f"the score matrix is written and read back through {a.level}: FlashAttention keeps it on chip, "
                f"I {fmt_intensity(a.intensity)} → {fmt_intensity(flash.intensity)}, Q {fmt_bytes(a.bytes)} → "
                f"{fmt_bytes(flash.bytes)} (FlashAttention, Dao et al. 2022)"
            )
        elif op.mode == "decode" or op.q_len <= 16:
            kv = dict(op.cost().terms).get("K,V read (KV cache)", 0) or dict(op.cost().terms).get("K,V read", 0)
            out.append(
                f"reading the KV cache ({fmt_bytes(kv)}) sets the time: quantise it (kvdtype=fp8 halves it), "
                "share it across heads (GQA/MQA: fewer kv heads), avoid redundant reads (paged attention); "
                "batching does not raise I here — each request reads its own KV"
            )
        else:
            out.append(
                "K and V are read once already: raise I with more query rows per KV read "
                "(longer q, more query heads per kv head) or a lower dtype"
            )
    elif isinstance(op, (Elementwise, Norm, Softmax)):
        out.append(
            "I is fixed by the op, not its size: fuse it with its neighbours (one read and one write for the "
            "whole chain); a lower storage dtype halves the bytes"
        )
    elif isinstance(op, FmaSweep):
        r_star = a.ridge * DTYPES[op.dtype].size
        out.append(f"more FMAs per element reach the ridge: R ≥ {math.ceil(r_star)} (I = R/sizeof)")
    return out


WEIGHT_ONLY_DTYPES = ("int4", "fp4")  # what weight-only quantisation stores: AWQ/GPTQ int4, NVFP4/MXFP4


def _weight_only(a: "Analysis", op: Gemm) -> list[str]:
    """Weights dominate Q (a skinny GEMM, a decode step's linear layer): store them in 4 bits and keep
    the activations (and the tensor-core path) as they are — the standard fix, with its numbers."""
    out: list[str] = []
    terms = dict(a.cost.terms)
    weights = sum(v for k, v in terms.items() if k.startswith(("A (", "weight scales")))
    if weights < 0.5 * a.bytes or op.dtype not in ("bf16", "fp16"):
        return out
    for wd in WEIGHT_ONLY_DTYPES:
        if weight_size(op.weight_dtype) <= weight_size(wd):
            continue
        q = replace(op, wdtype=wd).cost()
        t = max(q.flops / a.peak, q.bytes / a.bandwidth)
        if wd == "int4":
            out.append(
                f"weight-only quantisation: int4 weights (one fp16 scale per {SCALE_GROUP}), {op.dtype} activations "
                f"on the same {a.path} path: Q {fmt_bytes(a.bytes)} → {fmt_bytes(q.bytes)} (×{a.bytes / q.bytes:.1f} "
                f"fewer bytes), T ≥ {fmt_time(a.time_lower_bound)} → {fmt_time(t)} (AWQ / GPTQ kernels, e.g. Marlin)"
            )
        elif "fp4-tc" in a.device.peak:
            f4 = a.device.F("fp4-tc")
            out.append(
                f"fp4 on {a.device.id}: NVFP4 weights read {fmt_bytes(q.bytes)} as int4 ones do (T ≥ {fmt_time(t)}); "
                f"with fp4 activations as well the GEMM moves to the fp4-tc roof, {fmt_flops_rate(f4)} "
                f"(×{f4 / a.peak:.1f} {a.path}), for when batching makes it compute-bound"
            )
    return out


def _lower_precision(a: "Analysis", what: str) -> list[str]:
    """The next narrower matmul path the device has (weights and activations both narrower)."""
    size = DTYPES[a.op.dtype].size
    out: list[str] = []
    for key in matmul_ladder(a.device.kind):
        p = PATHS[key]
        if key in a.device.peak and DTYPES[p.dtype].size < size:
            ratio = size / DTYPES[p.dtype].size
            out.append(f"lower precision: {p.dtype} {what} cut the bytes ×{ratio:g} and raise I ×{ratio:g} "
                       f"({key} on {a.device.id})")
            break
    return out


def _compute_advice(a: "Analysis") -> list[str]:
    dev, path = a.device, a.path
    unit = PATHS[path].unit if path in PATHS else ""
    ladder = matmul_ladder(dev.kind)
    cpu = dev.kind == "cpu"
    if unit == "fma":
        tc = [k for k in ladder if k in dev.peak and dev.F(k) > a.peak]
        best = max(tc, key=dev.F) if tc else None
        msg = f"on {'the vector units' if cpu else 'CUDA cores'}: fewer FLOPs per element (cheaper math) help; "
        if best:
            msg += (f"the {'matmul' if cpu else 'tensor-core'} roofs are higher ({best} ×{dev.F(best) / a.peak:.0f}) "
                    "but only a matmul reaches them")
        else:
            msg += "no higher roof on this device"
        return [msg]
    higher = []
    if path in ladder:
        start = ladder.index(path)
        for key in ladder[start + 1:]:
            if key in dev.peak and dev.F(key) > a.peak * 1.05:
                higher.append(key)
    if not higher:
        return [f"no higher matmul roof on {dev.id}: the op is at the top; only fewer FLOPs or a faster device help"]
    out = []
    for key in higher[:3]:
        hint = PATH_HINTS.get(path_for(key, "gpu"), "")
        out.append(f"higher roof: {key} is ×{dev.F(key) / a.peak:.1f} ({fmt_flops_rate(dev.F(key))})" + (f" — {hint}" if hint else ""))
    return out


def warn(a: "Analysis") -> list[str]:
    out: list[str] = []
    op = a.op
    launch = a.launch_overhead or TYPICAL_LAUNCH_S
    if a.time_lower_bound < launch:
        said = f"{fmt_time(launch)} on {a.device.id}" if a.launch_overhead else f"typically ~{fmt_time(launch)}"
        out.append(
            f"tiny kernel: the bound {fmt_time(a.time_lower_bound)} is below one launch ({said}): "
            "launch overhead, not the roofline, will set the time — batch into fewer, larger kernels or use a "
            "CUDA graph"
        )
    if isinstance(op, Gemm):
        out += _gemm_warnings(a, op)
    if a.measured:
        out += _measured_warnings(a)
    return out


def _gemm_warnings(a: "Analysis", op: Gemm) -> list[str]:
    out: list[str] = []
    if op.m in (2, 4):
        out.append(
            f"small M: at M = {op.m} cuBLAS picks a less efficient general kernel for M = 2 and 4 (M = 1 has its own GEMV); "
            "on H100 and B300 padding M to 8 was faster (B300: 0.064 → 0.028 ms in the RealZST/llm-infra-notes "
            "measurements)"
        )
    if 1 < op.m < CUBLAS_TILE_M:
        padded = replace(op, m=CUBLAS_TILE_M).cost().flops
        t_pad = max(padded / a.peak, a.bytes / a.bandwidth)
        if t_pad > a.time_lower_bound * 1.05:
            out.append(
                f"padding: GEMM kernels compute whole tiles of {CUBLAS_TILE_M} rows; padded, I = "
                f"{fmt_intensity(padded / a.bytes)} passes the {a.path} ridge ({fmt_intensity(a.ridge)}), so the "
                f"padded FLOPs set the time: expect up to {fmt_time(t_pad)}, ×{t_pad / a.time_lower_bound:.1f} the "
                "bound"
            )
    if PATHS[a.path].unit == "tensor" and (op.n % 16 or op.k % 16):
        out.append(
            f"alignment: N = {op.n}, K = {op.k} — tensor-core GEMMs drop sharply when N or K is not a multiple "
            "of 16; pad to a multiple of 16 (better 64)"
        )
    return out


def _measured_warnings(a: "Analysis") -> list[str]:
    m = a.measured
    assert m is not None
    out: list[str] = []
    l2 = a.device.l2_bytes
    if m.fraction_of_roof > ABOVE_ROOF:
        if l2 and a.bytes <= l2 * 1.5 and a.level == "dram":
            out.append(
                f"above the roof: by {fmt_percent(m.fraction_of_roof - 1, 0)}, the working set ({fmt_bytes(a.bytes)}) "
                f"fits in L2 ({fmt_bytes(l2)}), so repeated calls read it from L2, not DRAM — the formula's Q "
                "overstates DRAM traffic; flush L2 between calls or recount bytes with a profiler"
            )
        else:
            out.append(
                f"above the roof: by {fmt_percent(m.fraction_of_roof - 1, 0)} — bytes under-counted, work removed by the "
                "compiler, or a peak below the true one (dense vs sparse datasheet figures) — check the counting"
            )
    launch = a.launch_overhead or TYPICAL_LAUNCH_S
    if a.launch_binds and m.time_s * ABOVE_ROOF < a.time_bound:
        src = a.device.launch_overhead.source if a.device.launch_overhead else ""
        out.append(
            f"faster than T ≥ {fmt_time(a.time_bound)}: t = {fmt_time(m.time_s)} is below one kernel launch "
            f"({fmt_time(launch)}, {src}) — the timing leaves the launch out (back-to-back calls or a CUDA graph "
            "overlap it with the kernels before) or this device launches faster than its profile says"
        )
    elif m.time_s < 2 * launch:
        out.append(
            f"launch-bound: t = {fmt_time(m.time_s)} is within two launches (~{fmt_time(launch)} each): the time is "
            "mostly launch overhead, not the kernel"
        )
    elif m.fraction_of_roof < 0.5:
        where = "compute" if a.regime == "compute" else "bandwidth"  # memory, comm, latency: the slope
        out.append(
            f"far below the roof: at {fmt_percent(m.fraction_of_roof, 0)}, the kernel is far from the {where} ceiling — "
            "look outside the model: kernel choice for small M, alignment, padding, throttled clocks, gaps between "
            "kernels"
        )
    return out
