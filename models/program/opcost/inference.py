"""The inference frameworks' own ops (vLLM, SGLang, aiter, fbgemm): GEMM, norm, RoPE, gated activation, KV-cache
write, attention and MoE, from their recorded shapes.

Each reads its arguments where the framework's schema puts them (vLLM's
`csrc/torch_bindings.cpp` and `vllm/model_executor` custom ops, aiter's
`compile_ops` signatures, sgl-kernel's `TORCH_LIBRARY` defs, fbgemm_gpu's
`quantize_ops` / experimental gen_ai ops). Conventions as the aten models:
- GEMM: W = 2·M·N·K (a bias add is not counted, as FlopCounterMode); Q = A, B,
  scales and bias read once, the output written once.
- Norm: RMS 4 FLOP per element (x², Σ, ×rstd, ×w), 5 with the residual add;
  Q = x (and the residual) read, y (and the new residual) written, the weight once.
- RoPE: 3 FLOP per rotated element (x1·cos − x2·sin); Q = the rotated part of q
  and k read and written back, the positions and the cos/sin rows they pick read.
- act_and_mul: silu(x)·y = x/(1 + e^(−x))·y, 5 FLOP per output element (gelu 9);
  Q = the [.., 2d] input read, the [.., d] output written.
- KV-cache write: Q = the new keys and values read, written into the cache at
  its element size, the slot indices read; W = 0. The cache itself is an input
  only as a destination: its size is no part of the traffic.
- Attention (paged, varlen, decode): W = 2·h_q·pairs·(d_qk + d_v), pairs = Σ
  over requests of q·k, less the causal triangle within a prefill chunk; the
  per-request lengths are not in the shapes (they are tensors' contents), so W
  needs the step's lengths (`Lengths`, from the framework's iteration
  annotation); without them the op is not costed. Q = Q read, O written, the
  K and V of every key position read once (the cache's element size).
- MoE: W = 2·M·top-k·(the weight elements of one expert's GEMMs); Q = the
  tokens in and out, and the weights of the experts the tokens touch (the
  expected number under uniform routing, as `models.llm`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from ...llm.step import expected_experts
from ...paths import matmul_path, vector_path
from .base import FLOAT_DTYPES, Call, OpCost, Tensor
from ...trace.read import ITERATION


def _vec(dtype: str) -> str:
    return vector_path(dtype if dtype in FLOAT_DTYPES else "fp32")


# -- GEMM -------------------------------------------------------------------------


@dataclass(frozen=True)
class GemmArgs:
    """Where a framework GEMM keeps x [.., K] and w ([N, K], or [K, N] where `kn`), its bias and its scales."""

    x: int = 0
    w: int = 1
    bias: int | None = 2
    scales: tuple[int, ...] = ()
    kn: bool = False  # the weight is K × N (a transposed view, as aten::mm takes it)
    out: str = ""  # the output dtype where it is not the input's (fp8 GEMMs write bf16)


GEMMS: dict[str, GemmArgs] = {
    "vllm::rocm_unquantized_gemm": GemmArgs(),  # (x, weight, bias=None): F.linear
    "vllm::rocm_unquantized_gemm_impl": GemmArgs(),
    "aiter::gemm_a16w16": GemmArgs(),  # (A [M, K], B [N, K], bias, otype, …)
    "aiter::gemm_a16w16_asm": GemmArgs(bias=3),  # (A, B, out, bias, splitK, …)
    "aiter::hipb_mm": GemmArgs(bias=3, scales=(5, 6), kn=True),  # (mat1, mat2, solution, bias, out_dtype, scaleA, scaleB)
    "_C::cutlass_scaled_mm": GemmArgs(x=1, w=2, bias=5, scales=(3, 4), kn=True, out="out0"),  # (out, a, b, sa, sb, bias)
    "fbgemm::f8f8bf16_rowwise": GemmArgs(bias=4, scales=(2, 3), out="bf16"),  # (XQ, WQ, x_scale, w_scale, bias, …)
    "fbgemm::f8f8bf16_blockwise": GemmArgs(bias=None, scales=(2, 3), out="bf16"),
    "fbgemm::f8f8bf16_tensorwise": GemmArgs(bias=None, out="bf16"),  # (XQ, WQ, scale, use_fast_accum)
    "fbgemm::f8f8bf16": GemmArgs(bias=None, scales=(2,), out="bf16"),
    "fbgemm::bf16bf16bf16": GemmArgs(bias=None),
}


def gemm(c: Call) -> OpCost | None:
    a = GEMMS[c.name]
    x, w = c.tensor(a.x), c.tensor(a.w)
    if x is None or w is None or len(w.dims) != 2 or not x.dims:
        return None
    k, n = (w.dims[0], w.dims[1]) if a.kn else (w.dims[1], w.dims[0])
    if x.dims[-1] != k:
        return None
    m = math.prod(x.dims[:-1])
    if a.out == "out0":  # the output is an argument: its own element size
        out = c.tensor(0)
        out_size, out_dtype = (out.size, out.dtype) if out is not None else (2.0, "bf16")
    elif a.out:
        out_size, out_dtype = 2.0, a.out
    else:
        out_size, out_dtype = x.size, x.dtype
    extra = [t for i in ((a.bias,) if a.bias is not None else ()) + a.scales if (t := c.tensor(i)) is not None]
    q = x.nbytes + w.nbytes + sum(t.nbytes for t in extra) + m * n * out_size
    path = matmul_path(x.dtype if x.dtype in FLOAT_DTYPES else out_dtype)
    return OpCost(2.0 * m * n * k, q, path, "gemm",
                  "W = 2·M·N·K (as FlopCounterMode; a bias add not counted); Q = A, B"
                  + (", the bias and scales" if extra else "") + " read once, the output written once",
                  {"m": m, "n": n, "k": k})


# -- norms ------------------------------------------------------------------------


@dataclass(frozen=True)
class NormArgs:
    x: int
    weight: int
    residual: bool = False  # a residual add fused in: x + r read, y and the new residual written


NORMS: dict[str, NormArgs] = {
    "_C::rms_norm": NormArgs(1, 2),  # (out, input, weight, epsilon)
    "_C::fused_add_rms_norm": NormArgs(0, 2, True),  # (input!, residual!, weight, epsilon): in place
    "aiter::rms_norm": NormArgs(0, 1),  # (input, weight, epsilon, use_model_sensitive_rmsnorm) → out
    "aiter::rmsnorm2d_fwd": NormArgs(0, 1),
    "aiter::rmsnorm": NormArgs(1, 2),  # (out, input, weight, epsilon)
    "aiter::add_rmsnorm": NormArgs(1, 4, True),  # (out, input, residual_in, residual_out, weight, epsilon)
    "aiter::rmsnorm2d_fwd_with_add": NormArgs(1, 4, True),
    "aiter::rmsnorm2d_fwd_with_add_ck": NormArgs(1, 4, True),
    "vllm::rocm_aiter_rms_norm": NormArgs(0, 1),  # (x, weight, eps) → out
    "vllm::rocm_aiter_rmsnorm2d_fwd_with_add": NormArgs(0, 2, True),  # (x, residual, weight, eps) → (out, residual)
    "sgl_kernel::rmsnorm": NormArgs(1, 2),  # (output, input, weight, eps, enable_pdl)
    "sgl_kernel::fused_add_rmsnorm": NormArgs(0, 2, True),  # (input!, residual!, weight, eps, enable_pdl)
    "sgl_kernel::gemma_rmsnorm": NormArgs(1, 2),
    "sgl_kernel::gemma_fused_add_rmsnorm": NormArgs(0, 2, True),
}


def norm(c: Call) -> OpCost | None:
    a = NORMS[c.name]
    x, w = c.tensor(a.x), c.tensor(a.weight)
    if x is None or not x.dims or c.dtype not in FLOAT_DTYPES:
        return None
    cols = x.dims[-1]
    rows = x.numel // cols if cols else 0
    f = 5.0 if a.residual else 4.0
    arrays = 4 if a.residual else 2  # x (and r) read, y (and the new r) written
    q = arrays * x.nbytes + (w.nbytes if w is not None else 0.0)
    return OpCost(f * x.numel, q, _vec(c.dtype), "norm",
                  f"W = {f:g} FLOP per element (RMS norm{' with the residual add' if a.residual else ''}); Q = x"
                  + (" and the residual read, y and the new residual written" if a.residual else " read, y written")
                  + ", the weight once", {"rows": rows, "cols": cols})


# -- RoPE, gated activations, KV-cache writes ----------------------------------------

# (positions, query, key, head_size, cos_sin_cache, is_neox)
ROPE = frozenset(("_C::rotary_embedding", "sgl_kernel::rotary_embedding", "_C::batched_rotary_embedding"))


def rope(c: Call) -> OpCost | None:
    pos, q, k, cache = c.tensor(0), c.tensor(1), c.tensor(2), c.tensor(4)
    if pos is None or q is None or cache is None or len(cache.dims) != 2 or c.dtype not in FLOAT_DTYPES:
        return None
    rot = cache.dims[1]  # cos and sin of rot/2 frequencies each
    head = (c.ints(3, 1) or [rot])[0]
    if head < 1 or rot < 1 or rot > head:
        return None
    rotated = (q.numel + (k.numel if k is not None else 0)) * rot / head
    tokens = pos.numel
    b = 2 * rotated * q.size + pos.nbytes + tokens * rot * cache.size
    return OpCost(3.0 * rotated, b, _vec(c.dtype), "elementwise",
                  "W = 3 FLOP per rotated element (x1·cos − x2·sin); Q = the rotated part of q and k read and "
                  "written back (in place), the positions and the cos/sin rows they pick read",
                  {"n": int(rotated), "tokens": tokens})


# name → FLOP per output element: act(x)·y, act on the first half of the input's last dim
ACT_AND_MUL = {
    "_C::silu_and_mul": 5.0, "_C::mul_and_silu": 5.0, "_C::gelu_and_mul": 9.0, "_C::gelu_tanh_and_mul": 9.0,
    "_C::gelu_new": 8.0, "_C::fatrelu_and_mul": 2.0, "_C::swigluoai_and_mul": 7.0,
    "sgl_kernel::silu_and_mul": 5.0, "sgl_kernel::gelu_and_mul": 9.0, "sgl_kernel::gelu_tanh_and_mul": 9.0,
    "aiter::silu_and_mul": 5.0, "aiter::gelu_and_mul": 9.0, "aiter::gelu_tanh_and_mul": 9.0,
}


def act_and_mul(c: Call) -> OpCost | None:
    out, x = c.tensor(0), c.tensor(1)  # (out, input)
    if out is None or x is None or not x.dims or c.dtype not in FLOAT_DTYPES:
        return None
    f = ACT_AND_MUL[c.name]
    n = out.numel
    return OpCost(f * n, x.nbytes + out.nbytes, _vec(c.dtype), "elementwise",
                  f"W = {f:g} FLOP per output element (act(x)·y, e.g. silu = x/(1+e^−x)); Q = the input read, "
                  "the output written", {"n": n})


# name → (key, value, key cache, value cache (None: one cache for both), slot indices)
CACHE_WRITES: dict[str, tuple[int, int | None, int, int | None, int]] = {
    "_C_cache_ops::reshape_and_cache": (0, 1, 2, 3, 4),
    "_C_cache_ops::reshape_and_cache_flash": (0, 1, 2, 3, 4),
    "_C_cache_ops::concat_and_cache_mla": (0, 1, 2, None, 3),  # (kv_c, k_pe, kv_cache, slot_mapping, …)
    "sglang::store_cache": (0, 1, 2, 3, 4),  # (k, v, k_cache, v_cache, indices, …)
}


def cache_write(c: Call) -> OpCost | None:
    ki, vi, kci, vci, si = CACHE_WRITES[c.name]
    k, v, kc, slots = c.tensor(ki), c.tensor(vi) if vi is not None else None, c.tensor(kci), c.tensor(si)
    if k is None or kc is None:
        return None
    vc = c.tensor(vci) if vci is not None else kc
    new = [t for t in (k, v) if t is not None]
    cache = [kc, vc if vc is not None else kc]
    written = sum(t.numel * cache[i].size for i, t in enumerate(new))
    q = sum(t.nbytes for t in new) + written + (slots.nbytes if slots is not None else 0.0)
    return OpCost(0.0, q, _vec(c.dtype), "copy",
                  "Q = the new keys and values read, written into the cache (at its element size), the slot "
                  "indices read; W = 0 (the cache is the destination: its size is not traffic)",
                  {"n": sum(t.numel for t in new)})


# -- attention --------------------------------------------------------------------


@dataclass(frozen=True)
class Lengths:
    """A step's query and key lengths summed over its requests, prefill (context) and decode (generation) apart,
    as vLLM's and SGLang's iteration annotation write them:
    `execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)`."""

    c_sq: int = 0
    c_sk: int = 0
    c_sqsq: int = 0
    c_sqsk: int = 0
    g_sq: int = 0
    g_sk: int = 0
    g_sqsq: int = 0
    g_sqsk: int = 0

    def pairs(self, causal: bool = True) -> float:
        """Query-key pairs scored per head: Σ q·k, less the causal triangle within each prefill chunk
        (query j of a chunk of q sees k − q + j + 1 keys: q·k − q(q−1)/2); a decode query sees its whole context."""
        tri = (self.c_sqsq - self.c_sq) / 2 if causal else 0.0
        return float(self.c_sqsk + self.g_sqsk) - tri

    @property
    def queries(self) -> int:
        return self.c_sq + self.g_sq

    @property
    def keys(self) -> int:
        return self.c_sk + self.g_sk


PHASE = r"_(context|generation)_\d+\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)"


def lengths_of(name: str) -> Lengths | None:
    """The step's lengths from an iteration annotation's name; None where it is not one."""
    if not name.startswith(ITERATION):
        return None
    found = re.findall(PHASE, name)
    if not found:
        return None
    v: dict[str, int] = {}
    for phase, sq, sk, sqsq, sqsk in found:
        p = "c" if phase == "context" else "g"
        v.update({f"{p}_sq": int(sq), f"{p}_sk": int(sk), f"{p}_sqsq": int(sqsq), f"{p}_sqsk": int(sqsk)})
    return Lengths(**v)


@dataclass(frozen=True)
class AttnArgs:
    """Where a framework attention op keeps its query [tokens, h, d], its keys (the new tokens' or the paged
    cache) and its causal flag (None: not an argument, a prefill chunk is causal)."""

    q: int
    k: int
    causal: int | None = None


ATTENTION: dict[str, AttnArgs] = {
    # (query, key, value, output, layer_name, output_scale, output_block_scale, …)
    "vllm::unified_attention_with_output": AttnArgs(0, 1),
    "vllm::unified_attention": AttnArgs(0, 1),  # (query, key, value, layer_name)
    # (q, k, v, cu_seqlens_q, kv_indptr, kv_page_indices, max_seqlen_q, max_seqlen_k, p_dropout, softmax_scale,
    #  logits_soft_cap, zero_tensors, is_causal, …)
    "aiter::mha_batch_prefill": AttnArgs(0, 1, causal=12),
    # (out, workspace_buffer, query, key_cache, value_cache, …)
    "aiter::paged_attention_ragged": AttnArgs(2, 3),
    "aiter::paged_attention_v1": AttnArgs(2, 3),
    "sglang_profiler::attention_paged_attention_ragged": AttnArgs(2, 3),
    # (out, exp_sums, max_logits, tmp_out, query, key_cache, value_cache, num_kv_heads, …)
    "aiter::paged_attention_rocm": AttnArgs(4, 5),
    "_C::paged_attention_v2": AttnArgs(4, 5),
    "_C::paged_attention_v1": AttnArgs(1, 2),  # (out, query, key_cache, value_cache, num_kv_heads, …)
}


def _heads(q: Tensor, k: Tensor) -> tuple[int, int, int] | None:
    """(h_q, h_kv, d) from the query [tokens, h_q, d] and the keys: the new tokens' [tokens, h_kv, d], a paged
    cache [blocks, h_kv, d/x, block, x] (vLLM's and aiter's 5-D layout) or [blocks, block, h_kv, d] (NHD)."""
    if len(q.dims) != 3 or len(k.dims) not in (3, 4, 5):
        return None
    hq, d = q.dims[1], q.dims[2]
    hkv = k.dims[1]
    if len(k.dims) == 4 and k.dims[2] >= 1 and hq % k.dims[2] == 0:
        hkv = k.dims[2]
    if hkv < 1 or hq % hkv:
        return None
    return hq, hkv, d


def attention(c: Call, lengths: Lengths | None) -> OpCost | None:
    """Paged / varlen attention over a step's requests: None without the step's lengths (not in the shapes)."""
    a = ATTENTION[_base(c.name)]
    q, k = c.tensor(a.q), c.tensor(a.k)
    if lengths is None or q is None or k is None or c.dtype not in FLOAT_DTYPES:
        return None
    got = _heads(q, k)
    if got is None:
        return None
    hq, hkv, d = got
    causal = c.flag(a.causal, True) if a.causal is not None else True
    pairs = lengths.pairs(causal)
    tokens = lengths.queries or q.dims[0]
    kv_size = k.size
    q_bytes = 2 * tokens * hq * d * q.size + 2 * lengths.keys * hkv * d * kv_size
    return OpCost(2.0 * hq * pairs * (d + d), q_bytes, matmul_path(c.dtype), "attention",
                  "W = 2·h·pairs·(d + d) (QKᵀ and PV), pairs = Σ q·k over the step's requests (from its "
                  "iteration annotation), less the causal triangle within prefill chunks; Q = Q read, O written, "
                  "the K and V of every key position read once",
                  {"h": hq, "kv": hkv, "d": d, "q": tokens, "t": lengths.keys})


# -- MoE --------------------------------------------------------------------------

MOE = frozenset(("vllm::moe_forward", "vllm::moe_forward_shared"))


@dataclass(frozen=True)
class Experts:
    """What the ops inside a MoE layer say: top-k and each expert's weights (elements, bytes per GEMM)."""

    top_k: int
    weights: tuple[tuple[float, float], ...]  # per GEMM: (logical elements of one expert, its bytes)


def moe(c: Call, experts: Experts | None) -> OpCost | None:
    """(hidden_states [M, H], router_logits [M, E], layer_name): the experts' shapes are not its inputs."""
    x, logits = c.tensor(0), c.tensor(1)
    if experts is None or x is None or logits is None or len(x.dims) != 2 or len(logits.dims) != 2:
        return None
    m, e = x.dims[0], logits.dims[1]
    if not experts.weights or not 1 <= experts.top_k <= e:
        return None
    per_token = sum(n for n, _ in experts.weights)
    used = expected_experts(e, experts.top_k, m)
    q = 2 * x.nbytes + logits.nbytes + used * sum(b for _, b in experts.weights)
    return OpCost(2.0 * m * experts.top_k * per_token, q, matmul_path(c.dtype), "gemm",
                  "W = 2·M·top-k·(one expert's weight elements, every GEMM of it: from the weights the ops inside "
                  "read); Q = the tokens in and out, the router logits, and the weights of the experts they touch "
                  f"({used:.3g} of {e} expected, uniform routing)",
                  {"m": m, "experts": e, "top_k": experts.top_k, "experts_used": round(used)})


# sglang_profiler wraps a Python function as an op named for its module, function and line: `…_100`
_NUMBERED = re.compile(r"^(sglang_profiler::.+?)_\d+$")


def _base(name: str) -> str:
    m = _NUMBERED.match(name)
    return m.group(1) if m else name


def base_name(name: str) -> str:
    """The op's name without the line number sglang's profiler wrapper adds."""
    return _base(name)


# -- fbgemm: quantize, dequantize, permute, cumsum, bounds checks (the TBE lookups and their backward:
# `models.opcost.embedding`) ------------------------------------------------------------------------------


def _ceil4(n: int) -> int:
    return (n + 3) // 4 * 4


def fbgemm_data(c: Call) -> OpCost | None:
    """Data movement of fbgemm_gpu's sparse and quantize ops: Q = what they read and write, W their per-element
    arithmetic (quantize 2: the row's max and the scaling; dequantize 1; cumsum 1; a bounds check 1)."""
    ts = c.tensors
    x = c.tensor(0)
    if not ts or x is None:
        return None
    name = c.name.removeprefix("fbgemm::")
    if name == "FloatToFP8RowwiseQuantized":  # [R, C] float → [R, ceil4(C) + 2 floats] bytes
        if len(x.dims) != 2:
            return None
        r, col = x.dims
        return _data(x.numel * 2.0, x.nbytes + r * (_ceil4(col) + 8), c, "the float rows read, the fp8 rows and "
                     "their scale written", x.numel)
    if name == "FP8RowwiseQuantizedToFloat":  # [R, C + 8] bytes → [R, C] float
        if len(x.dims) != 2 or x.dims[1] <= 8:
            return None
        n = x.dims[0] * (x.dims[1] - 8)
        return _data(float(n), x.nbytes + 4.0 * n, c, "the fp8 rows read, the float rows written", n)
    if name in ("FloatToHFP8Quantized", "FloatToFP8Quantized"):
        return _data(2.0 * x.numel, x.nbytes + x.numel, c, "the floats read, one byte each written", x.numel)
    if name in ("HFP8QuantizedToFloat", "FP8QuantizedToFloat"):
        return _data(float(x.numel), x.nbytes + 4.0 * x.numel, c, "the bytes read, a float each written", x.numel)
    if name in ("permute_pooled_embs", "permute_pooled_embs_auto_grad", "permute_pooled_embs_split"):
        return _data(0.0, 2 * x.nbytes + sum(t.nbytes for t in ts[1:]), c, "the pooled embeddings read and "
                     "written in the new order, the offset and permute lists read", x.numel)
    if name in ("permute_2D_sparse_data", "permute_sparse_data", "permute_sparse_features", "permute_1D_sparse_data"):
        moved = sum(t.nbytes for t in ts[1:4] if t is not None)  # lengths, indices, weights
        return _data(0.0, x.nbytes + 2 * moved, c, "the lengths, indices (and weights) read and written in the "
                     "new order, the permutation read", sum(t.numel for t in ts[1:3]))
    if name in ("asynchronous_complete_cumsum", "asynchronous_exclusive_cumsum", "asynchronous_inclusive_cumsum"):
        extra = x.size if name == "asynchronous_complete_cumsum" else 0.0
        return _data(float(x.numel), 2 * x.nbytes + extra, c, "the input read, the sums written", x.numel)
    if name == "bounds_check_indices":  # (rows_per_table, indices, offsets, …)
        return _data(float(ts[1].numel if len(ts) > 1 else 0), sum(t.nbytes for t in ts), c,
                     "the indices, offsets and table sizes read", ts[1].numel if len(ts) > 1 else 0)
    return None


FBGEMM_DATA = frozenset("fbgemm::" + n for n in (
    "FloatToFP8RowwiseQuantized", "FP8RowwiseQuantizedToFloat", "FloatToHFP8Quantized", "FloatToFP8Quantized",
    "HFP8QuantizedToFloat", "FP8QuantizedToFloat", "permute_pooled_embs", "permute_pooled_embs_auto_grad",
    "permute_pooled_embs_split", "permute_2D_sparse_data", "permute_sparse_data", "permute_sparse_features",
    "permute_1D_sparse_data", "asynchronous_complete_cumsum", "asynchronous_exclusive_cumsum",
    "asynchronous_inclusive_cumsum", "bounds_check_indices"))


def _data(flops: float, nbytes: float, c: Call, what: str, n: int) -> OpCost:
    return OpCost(flops, nbytes, _vec(c.dtype), "copy", f"Q = {what}, each once; W = {flops / max(n, 1):.3g} "
                  "per element", {"n": n})


CONTEXT = frozenset((*ATTENTION, *MOE))  # costed only with what the ops around them say (models.opcontext)


def model_for(name: str) -> Callable[[Call], OpCost | None] | None:
    """The model of a framework op that its own record can cost, or None."""
    if name in GEMMS:
        return gemm
    if name in NORMS:
        return norm
    if name in ROPE:
        return rope
    if name in ACT_AND_MUL:
        return act_and_mul
    if name in CACHE_WRITES:
        return cache_write
    if name in FBGEMM_DATA:
        return fbgemm_data
    return None
