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
