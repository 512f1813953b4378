"""A kernel's family from its name alone: what the kernel does when no op of the trace says.

A kernel whose launching op is unknown (a CUDA/HIP-graph replay without its capture trace, a kernel
launched before the trace window) still names itself: cuBLAS, cuDNN, hipBLASLt, CUTLASS, Triton,
ATen, NCCL and the inference libraries (vLLM, SGLang, aiter, FlashInfer, DeepEP) follow naming
habits that tell a GEMM from an attention, a norm, a copy or a collective. The family says what kind
of roof the kernel meets (a link for comm; tensor cores for gemm, conv and attention; DRAM for the
rest), never its W or Q: the shapes are not in a kernel's name.

Pure: a name in, a family out. The rules are tried in order (a conv's implicit GEMM is a conv, an
attention's softmax is attention); each is a set of lower-case substrings.
"""

from __future__ import annotations

import functools

# what each family is, in the order reports list them
ABOUT: dict[str, str] = {
    "comm": "collective communication (NCCL, RCCL, custom all-reduce, symmetric memory, DeepEP)",
    "attention": "attention (flash, fused MHA, paged and unified attention, SDPA)",
    "moe": "mixture-of-experts routing and expert GEMMs",
    "conv": "convolution (cuDNN, implicit GEMM, Winograd)",
    "gemm": "matrix multiply (cuBLAS, cuBLASLt, hipBLASLt, CUTLASS, Triton templates)",
    "norm": "normalisation (RMSNorm, LayerNorm, BatchNorm, GroupNorm)",
    "softmax": "softmax",
    "embedding": "embedding lookups and their backward",
    "reduce": "reductions, scans, sorts, pooling and losses",
    "copy": "copies and layout changes (cat, transpose, gather, index, KV-cache writes)",
    "elementwise": "elementwise and fused pointwise ops (activations, RoPE, fills, optimizer updates)",
    "other": "a kernel whose name says nothing rooftop reads",
}
OTHER = "other"
FAMILIES: tuple[str, ...] = tuple(ABOUT)
# (family, the lower-case substrings that mark it), tried in this order: a KV-cache write named for flash
# attention is a copy, a conv's implicit GEMM is a conv, a custom all-reduce is comm before it is a reduce
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("comm", ("nccl", "rccl", "deep_ep", "deepep", "cross_device_reduce", "all_reduce", "allreduce", "all_gather",
              "allgather", "reduce_scatter", "reducescatter", "alltoall", "all_to_all", "multimem", "symm_mem",
              "mscclpp", "quickreduce", "quick_all_reduce")),
    ("copy", ("reshape_and_cache", "store_kvcache", "kv_cache", "kvcache", "kv_indices")),
    ("attention", ("flash", "fmha", "attention", "attn", "sdpa", "mha_", "_mha", "paged_attention", "mla_",
                   "decode_attention", "prefill_attention")),
    ("moe", ("moe", "matmul_ogs", "routing", "expert", "bitmatrix", "finalize_matmul_scatter")),
    ("conv", ("convolution", "convolve", "conv1d", "conv2d", "conv3d", "_conv_", "scudnn", "cudnn::cnn", "winograd",
              "dgrad", "wgrad", "fprop", "im2col", "col2im")),
    ("gemm", ("gemm", "gemv", "nvjet", "cijk_", "cublas", "splitkreduce", "matmul", "triton_tem", "_mm_",
              "dot_kernel", "epilogue::impl", "wmma", "mfma")),
    ("norm", ("rmsnorm", "rms_norm", "layernorm", "layer_norm", "batchnorm", "batch_norm", "groupnorm",
              "group_norm", "bn_fw", "bn_bw", "gammabeta", "rowwisemoments", "_norm_")),
    ("softmax", ("softmax",)),
    ("elementwise", ("rotary", "rope_")),  # a rotary embedding is no lookup
    ("embedding", ("embedding", "embbag")),
    ("reduce", ("reduce", "triton_red", "triton_per", "radixsort", "radix_sort", "devicescan", "scan_kernel",
                "argmax", "cumsum", "sort", "topk", "top_k", "pool", "criterion", "loss")),
    ("copy", ("copy", "catarray", "transpose", "permute", "nchwtonhwc", "nhwctonchw", "gather", "scatter", "index",
              "memcpy", "concat", "pad")),
    ("elementwise", ("elementwise", "triton_poi", "pointwise", "multi_tensor", "act_and_mul", "silu", "gelu", "relu",
                     "fill", "functor", "unary", "binary", "sigmoid", "tanh", "clamp", "quant", "convert", "cast")),
)
COMPUTE_FAMILIES = frozenset(("gemm", "conv", "attention", "moe"))  # their roof is a compute path's, by the shapes


@functools.lru_cache(maxsize=4096)
def kernel_family(name: str) -> str:
    """The family of a kernel by its (possibly mangled) name; `other` when no rule matches."""
    low = name.lower()
    for family, marks in RULES:
        if any(m in low for m in marks):
            return family
    return OTHER


# What a GEMM / conv kernel's name says of fp32 math: TF32 tensor cores on NVIDIA (cuBLAS / CUTLASS
# `tensorop_s1688` / `s1684` / `s16816` over fp32, cuBLASLt and cuDNN `*tf32*`, `sm80_xmma_*_tf32f32_*`, nvjet
# where the name says tf32, a mangled CUTLASS template over `tfloat32_t`), XF32 on AMD (Tensile / hipBLASLt
# `Cijk_*` with `xf32`). CUTLASS's `s` in `tensorop_s16816` is the accumulator's type, so a name that also names a
# half or fp8 type is that GEMM, not TF32. The FP32 path's kernels say so too: cuBLAS `*sgemm*` and `gemv*`,
# CUTLASS `simt`, cuDNN's `scudnn` and its FMA engines, Tensile's `Cijk_*` without xf32. A helper (cuBLASLt's
# split-K reduce, an epilogue, im2col) says neither: it does no matrix math.
TF32_MARKS = ("tf32", "xf32", "tfloat32", "tensorop_s1688", "tensorop_s1684", "tensorop_s16816")
HALF_MARKS = ("f16", "half_t", "bfloat16", "fp8", "e4m3", "e5m2")
FP32_MARKS = ("sgemm", "gemv", "gemmk1", "simt", "scudnn", "dgrad_engine", "wgrad_alg", "winograd", "cijk_")
TF32, FP32 = "tf32", "fp32"


@functools.lru_cache(maxsize=4096)
def fp32_math(name: str) -> str:
    """The unit a kernel's name says it did fp32 matrix math on: `tf32` (TF32 / XF32 tensor cores), `fp32` (the
    FP32 path: FMA, or fp32 MFMA on AMD), or "" where the name says neither (a helper, another dtype's kernel)."""
    low = name.lower()
    if any(m in low for m in TF32_MARKS) and not any(h in low.replace("tf32", "") for h in HALF_MARKS):
        return TF32
    return FP32 if any(m in low for m in FP32_MARKS) else ""
