"""The element types rooftop knows, their sizes and their names.

The canonical names, as specs and reports write them: fp64 fp32 tf32 fp16 bf16 fp8 int8 (plus
fp4, which B-series cards publish). tf32 is stored as fp32 (4 bytes): it is a
tensor-core mode of FP32 matmul, not a storage format.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import BadValue


@dataclass(frozen=True)
class Dtype:
    name: str
    size: float  # bytes per element (sizeof)
    label: str


DTYPES: dict[str, Dtype] = {
    d.name: d
    for d in (
        Dtype("fp64", 8, "FP64 (double)"),
        Dtype("fp32", 4, "FP32 (float)"),
        Dtype("tf32", 4, "TF32 (FP32 storage, 10-bit mantissa in the tensor core)"),
        Dtype("fp16", 2, "FP16 (half)"),
        Dtype("bf16", 2, "BF16 (bfloat16)"),
        Dtype("fp8", 1, "FP8 (e4m3)"),
        Dtype("int8", 1, "INT8"),
        Dtype("fp4", 0.5, "FP4 (nvfp4 / mxfp4)"),
    )
}

# Output-only formats: what a GEMM may write (`out=`) but never computes in. An int8 GEMM accumulates and
# writes int32, as torch._int_mm does.
OUTPUT_ONLY: dict[str, Dtype] = {d.name: d for d in (Dtype("int32", 4, "INT32 (an int8 GEMM's accumulator)"),)}

# Weight-only formats: stored packed, unpacked to the activation dtype inside the GEMM, so they
# name a GEMM's weights (`wdtype=`) but never the dtype it computes in.
WEIGHT_ONLY: dict[str, Dtype] = {
    d.name: d for d in (Dtype("int4", 0.5, "INT4 weights (weight-only, e.g. AWQ / GPTQ; unpacked in the kernel)"),)
}
# Formats stored with one fp16 scale per group of this many weights (AWQ, GPTQ and MXFP4/NVFP4-style).
SCALE_GROUP = 128
SCALE_BYTES = 2.0  # one fp16 scale

ALIASES: dict[str, str] = {
    "float64": "fp64", "double": "fp64", "f64": "fp64",
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "fp8_e4m3": "fp8", "e4m3": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8",
    "i8": "int8",
    "nvfp4": "fp4", "mxfp4": "fp4",
}


def lookup_dtype(token: str) -> Dtype | None:
    """The dtype a token names (canonical name or alias), or None."""
    key = token.strip().lower()
    key = ALIASES.get(key, key)
    return DTYPES.get(key)


def output_dtype(token: str) -> Dtype | None:
    """The dtype a GEMM may write (any dtype, or int32), or None."""
    key = token.strip().lower()
    return OUTPUT_ONLY.get(key) or lookup_dtype(key)


def output_size(name: str) -> float:
    """Bytes per output element, output-only formats included."""
    return (OUTPUT_ONLY.get(name) or DTYPES[name]).size


def weight_dtype(token: str) -> Dtype | None:
    """The dtype a GEMM's weights may be stored in (any dtype, or a weight-only format), or None."""
    key = token.strip().lower()
    return WEIGHT_ONLY.get(key) or lookup_dtype(key)


def weight_size(name: str) -> float:
    """Bytes per weight element, weight-only formats included."""
    return (WEIGHT_ONLY.get(name) or DTYPES[name]).size


def weight_scale_bytes(name: str, elements: float) -> float:
    """The scales a quantised weight carries: sub-byte formats one fp16 per SCALE_GROUP weights;
    others none counted (an 8-bit weight's per-channel scales are a rounding error of its bytes)."""
    return elements / SCALE_GROUP * SCALE_BYTES if weight_size(name) < 1 else 0.0


def parse_dtype(token: str) -> Dtype:
    """The dtype a token names; BadValue (a ValueError) naming the valid choices otherwise."""
    found = lookup_dtype(token)
    if found is None:
        raise BadValue(f"unknown dtype {token!r}; choose one of: {', '.join(DTYPES)}")
    return found
