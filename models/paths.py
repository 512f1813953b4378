"""Compute paths and memory levels: the roofs and slopes of a device.

A device has one flat roof per compute path (the unit and precision an op
really runs on) and one slope per memory level. Analyse an op against the path
it uses: an fp32 LayerNorm runs on CUDA cores (fp32-fma), not on the bf16
tensor cores (seed 000 §3, "按 kernel 实际用的路径判断").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The kinds of unit a compute path runs on (closed): matrix units, GEMM on vector units, vector FMA.
Unit = Literal["tensor", "matmul", "fma"]
# The memory levels and links rooftop knows (closed; a profile from a file may name others, shown last).
Level = Literal["dram", "llc", "l2", "l1", "nvlink", "pcie", "net"]


@dataclass(frozen=True)
class ComputePath:
    key: str
    label: str
    unit: Unit  # "tensor" (matrix units), "matmul" (GEMM on vector units), "fma" (vector FMA)
    dtype: str  # the element type the path computes in


PATHS: dict[str, ComputePath] = {
    p.key: p
    for p in (
        ComputePath("fp64-fma", "FP64 FMA (CUDA cores)", "fma", "fp64"),
        ComputePath("fp64-tc", "FP64 matmul (tensor cores where the card has them)", "tensor", "fp64"),
        ComputePath("fp32-fma", "FP32 FMA (CUDA cores)", "fma", "fp32"),
        ComputePath("fp32-matmul", "FP32 matmul, TF32 off (CUDA cores)", "matmul", "fp32"),
        ComputePath("tf32-tc", "TF32 matmul (tensor cores)", "tensor", "tf32"),
        ComputePath("fp16-fma", "FP16 FMA (packed half2, CUDA cores)", "fma", "fp16"),
        ComputePath("bf16-fma", "BF16 FMA (packed, CUDA cores)", "fma", "bf16"),
        ComputePath("fp16-tc", "FP16 matmul (tensor cores)", "tensor", "fp16"),
        ComputePath("bf16-tc", "BF16 matmul (tensor cores)", "tensor", "bf16"),
        ComputePath("fp8-tc", "FP8 matmul (tensor cores)", "tensor", "fp8"),
        ComputePath("int8-tc", "INT8 matmul (tensor cores; OP/s)", "tensor", "int8"),
        ComputePath("fp4-tc", "FP4 matmul (tensor cores)", "tensor", "fp4"),
    )
}

# The memory levels a slope can belong to, from main memory up (models.hierarchy
# says which samples measure each). `dram` is the device's main memory (HBM on
# datacenter GPUs, DDR on a CPU); links carry the communication roofline.
LEVELS: dict[Level, str] = {
    "dram": "device main memory (HBM / GDDR / DDR)",
    "llc": "CPU last-level cache (L3 on most CPUs), all of it",
    "l2": "L2 cache (GPU: the shared L2; CPU: the private per-core caches below the LLC, all cores)",
    "l1": "GPU L1 / shared memory, all SMs together",
    "nvlink": "GPU-to-GPU link (NVLink / xGMI), one direction",
    "pcie": "host link (PCIe), one direction",
    "net": "scale-out network link to other nodes (RDMA NIC), one direction",
}

_MATMUL = {
    "fp64": "fp64-tc",
    "fp32": "fp32-matmul",
    "tf32": "tf32-tc",
    "fp16": "fp16-tc",
    "bf16": "bf16-tc",
    "fp8": "fp8-tc",
    "int8": "int8-tc",
    "fp4": "fp4-tc",
}

# Matmul paths from most to least precise: moving right trades precision for a
# higher roof (seed 000 §3, §8; seed 003 §3 "抬 π：降精度").
MATMUL_LADDER: tuple[str, ...] = (
    "fp64-tc", "fp32-matmul", "tf32-tc", "bf16-tc", "fp16-tc", "fp8-tc", "int8-tc", "fp4-tc",
)


def matmul_path(dtype: str) -> str:
    """The path a GEMM in `dtype` runs on (fp32 means TF32 off; ask for tf32 to get it)."""
    return _MATMUL[dtype]


def vector_path(dtype: str) -> str:
    """The path an elementwise / norm / softmax op runs on.

    Frameworks compute half-precision elementwise math in fp32 registers
    (PyTorch's opmath), so everything but fp64 lands on the fp32 FMA roof.
    """
    return "fp64-fma" if dtype == "fp64" else "fp32-fma"


def fma_path(dtype: str) -> str:
    """The path of an FMA sweep in `dtype`: the FMA unit of that precision."""
    return f"{dtype}-fma"


def level_sort_key(key: str) -> int:
    """Main memory first, then up the hierarchy (LEVELS' order), then links and unknown levels."""
    order = list(LEVELS)
    return order.index(key) if key in order else len(order)


def path_sort_key(key: str) -> int:
    order = list(PATHS)
    return order.index(key) if key in order else len(order)
