"""The element types rooftop knows, their sizes and their names.

The canonical names, as specs and reports write them: fp64 fp32 tf32 fp16 bf16 fp8 int8 (plus
fp4, which B-series cards publish, and its two block-scaled formats mxfp4 and nvfp4). tf32 is stored
as fp32 (4 bytes): it is a tensor-core mode of FP32 matmul, not a storage format.

A block-scaled format's size counts its scales: MXFP4 is 4-bit values plus one 8-bit (e8m0) scale per
32, 4 + 8/32 = 4.25 bits; NVFP4 4-bit values plus one fp8 (e4m3) scale per 16, 4 + 8/16 = 4.5 bits
(its one fp32 scale per tensor is left out: 4 bytes a matrix). Checkpoints' grouped weight formats
are named by their group (weight_dtype): int4-g128 (AWQ / GPTQ), fp8-b128x128 (DeepSeek's blocks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import BadValue


@dataclass(frozen=True)
class Dtype:
    name: str
    size: float  # bytes per element (sizeof)
    label: str


MXFP4_BITS = 4 + 8 / 32  # OCP microscaling: 32 e2m1 values share one 8-bit power-of-two scale
NVFP4_BITS = 4 + 8 / 16  # NVIDIA: 16 e2m1 values share one e4m3 scale (and each tensor one fp32)

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
        Dtype("fp4", 0.5, "FP4 (e2m1, scales not counted)"),
        Dtype("mxfp4", MXFP4_BITS / 8, "MXFP4 (e2m1 + one e8m0 scale per 32: 4.25 bits)"),
        Dtype("nvfp4", NVFP4_BITS / 8, "NVFP4 (e2m1 + one fp8 scale per 16, + an fp32 per tensor: 4.5 bits)"),
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


# A checkpoint's grouped formats: int4-g128 is AWQ / GPTQ's 4-bit weights with one fp16 scale and one
# 4-bit zero per 128 (int8-g128 likewise at 8 bits; -ch: per output channel, its scales a rounding
# error); fp8-b128x128 is fp8 with one fp32 scale per 128×128 block (DeepSeek-V3's weight_scale_inv).
_GROUPED = re.compile(r"^(?:int(?P<bits>4|8)-(?:g(?P<group>[1-9]\d{0,5})|ch)|fp8-b(?P<rows>[1-9]\d{0,5})x(?P<cols>[1-9]\d{0,5}))$")


def grouped_dtype(token: str) -> Dtype | None:
    """A grouped weight format by its name (int4-g128, int8-ch, fp8-b128x128), its size counting its
    scales and zeros; None when the name is not one."""
    key = token.strip().lower()
    m = _GROUPED.match(key)
    if m is None:
        return None
    if m["rows"]:
        block = int(m["rows"]) * int(m["cols"])
        return Dtype(key, 1 + 4 / block, f"FP8 weights, one fp32 scale per {m['rows']}×{m['cols']} block")
    bits = int(m["bits"])
    if not m["group"]:
        return Dtype(key, bits / 8, f"INT{bits} weights, per-channel scales (not counted: under 0.1%)")
    group = int(m["group"])
    return Dtype(key, (bits + (8 * SCALE_BYTES + bits) / group) / 8,
                 f"INT{bits} weights, one fp16 scale and one {bits}-bit zero per {group} (AWQ / GPTQ)")


def weight_dtype(token: str) -> Dtype | None:
    """The dtype a GEMM's weights may be stored in (any dtype, a weight-only or a grouped format), or None."""
    key = token.strip().lower()
    return WEIGHT_ONLY.get(key) or lookup_dtype(key) or grouped_dtype(key)


def weight_size(name: str) -> float:
    """Bytes per weight element, weight-only formats included (grouped ones with their scales)."""
    found = weight_dtype(name)
    if found is None:
        raise KeyError(name)
    return found.size


SCALED_APART = ("int4", "fp4")  # 4-bit formats whose size leaves their scales out: counted by weight_scale_bytes


def weight_scale_bytes(name: str, elements: float) -> float:
    """The scales a plain 4-bit weight (int4, fp4) carries: one fp16 per SCALE_GROUP weights. The
    block-scaled and grouped formats count theirs in their size; an 8-bit weight's per-channel scales
    are a rounding error of its bytes."""
    return elements / SCALE_GROUP * SCALE_BYTES if name in SCALED_APART else 0.0


def parse_dtype(token: str) -> Dtype:
    """The dtype a token names; BadValue (a ValueError) naming the valid choices otherwise."""
    found = lookup_dtype(token)
    if found is None:
        raise BadValue(f"unknown dtype {token!r}; choose one of: {', '.join(DTYPES)}")
    return found
