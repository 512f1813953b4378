"""Compute paths and memory levels: the roofs and slopes of a device.

A device has one flat roof per compute path (the unit and precision an op
really runs on) and one slope per memory level. Analyse an op against the path
it uses: an fp32 LayerNorm runs on CUDA cores (fp32-fma), not on the bf16
tensor cores (seed 000 §3, "按 kernel 实际用的路径判断").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

# The kinds of unit a compute path runs on (closed): matrix units, GEMM on vector units, vector FMA.
Unit = Literal["tensor", "matmul", "fma"]
# The memory levels and links rooftop knows (closed; a profile from a file may name others, shown last).
Level = Literal["dram", "llc", "l2", "l1", "nvlink", "xgmi", "pcie", "net"]


@dataclass(frozen=True)
class ComputePath:
    key: str
    label: str
    unit: Unit  # "tensor" (matrix units), "matmul" (GEMM on vector units), "fma" (vector FMA)
    dtype: str  # the element type the path computes in


PATHS: dict[str, ComputePath] = {
    p.key: p
    for p in (
        ComputePath("fp64-fma", "FP64 FMA (vector units: CUDA cores on a GPU)", "fma", "fp64"),
        ComputePath("fp64-tc", "FP64 matmul (tensor cores where the card has them)", "tensor", "fp64"),
        ComputePath("fp64-matmul", "FP64 matmul (CPU vector units)", "matmul", "fp64"),
        ComputePath("fp32-fma", "FP32 FMA (vector units: CUDA cores on a GPU)", "fma", "fp32"),
        ComputePath("fp32-matmul", "FP32 matmul, TF32 off (CUDA cores; on a CPU its vector units)", "matmul", "fp32"),
        ComputePath("tf32-tc", "TF32 matmul (tensor cores)", "tensor", "tf32"),
        ComputePath("fp16-fma", "FP16 FMA (packed half2: vector units, CUDA cores on a GPU)", "fma", "fp16"),
        ComputePath("bf16-fma", "BF16 FMA (packed: vector units, CUDA cores on a GPU)", "fma", "bf16"),
        ComputePath("fp16-tc", "FP16 matmul (tensor cores)", "tensor", "fp16"),
        ComputePath("bf16-tc", "BF16 matmul (tensor cores)", "tensor", "bf16"),
        ComputePath("fp16-matmul", "FP16 matmul (CPU vector or matrix units, AMX where there)", "matmul", "fp16"),
        ComputePath("bf16-matmul", "BF16 matmul (CPU vector or matrix units, AMX where there)", "matmul", "bf16"),
        ComputePath("fp8-tc", "FP8 matmul (tensor cores)", "tensor", "fp8"),
        ComputePath("fp8-matmul", "FP8 matmul (CPU matrix units)", "matmul", "fp8"),
        ComputePath("int8-tc", "INT8 matmul (tensor cores; OP/s)", "tensor", "int8"),
        ComputePath("int8-matmul", "INT8 matmul (CPU vector or matrix units: VNNI, AMX; OP/s)", "matmul", "int8"),
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
    "nvlink": "GPU-to-GPU link on NVIDIA (NVLink), one direction",
    "xgmi": "GPU-to-GPU link on AMD (xGMI, Infinity Fabric), one direction",
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
    "mxfp4": "fp4-tc",  # Blackwell's and CDNA4's FP4 tensor cores take either block-scaled format at one rate
    "nvfp4": "fp4-tc",
}

# Matmul paths from most to least precise: moving right trades precision for a
# higher roof (seed 000 §3, §8; seed 003 §3 "抬 π：降精度").
MATMUL_LADDER: tuple[str, ...] = (
    "fp64-tc", "fp32-matmul", "tf32-tc", "bf16-tc", "fp16-tc", "fp8-tc", "int8-tc", "fp4-tc",
)


# A CPU has no tensor cores: its matmul paths are named for what they are. The GPU name of each stays
# its alias (and the other way round): a CPU run stored or exported under `bf16-tc`, and an op whose
# bf16 GEMM asks for `bf16-tc`, find a CPU's `bf16-matmul` roof. fp32-matmul is one name on both.
CPU_NAMES: dict[str, str] = {
    "fp64-tc": "fp64-matmul", "fp16-tc": "fp16-matmul", "bf16-tc": "bf16-matmul", "fp8-tc": "fp8-matmul",
    "int8-tc": "int8-matmul",
}
GPU_NAMES: dict[str, str] = {cpu: gpu for gpu, cpu in CPU_NAMES.items()}


def path_for(key: str, kind: str) -> str:
    """The name a device of `kind` ("cpu", "gpu"; a backend's "cuda" is a GPU) gives the path `key`."""
    return CPU_NAMES.get(key, key) if kind == "cpu" else GPU_NAMES.get(key, key)


def alias_of(key: str) -> str | None:
    """The path's other name (`bf16-tc` ↔ `bf16-matmul`), or None where it has one name."""
    return CPU_NAMES.get(key) or GPU_NAMES.get(key)


def same_path(a: str, b: str) -> bool:
    """Whether two names name one path (a CPU's and a GPU's name of the bf16 matmul)."""
    return path_for(a, "gpu") == path_for(b, "gpu")


def distinct_paths(names: Iterable[str]) -> list[str]:
    """Each path once, under the first name it came by (devices side by side: a CPU's bf16-matmul and a
    GPU's bf16-tc are one row)."""
    first: dict[str, str] = {}
    for n in names:
        first.setdefault(path_for(n, "gpu"), n)
    return list(first.values())


def matmul_path(dtype: str, kind: str = "gpu") -> str:
    """The path a GEMM in `dtype` runs on (fp32 means TF32 off; ask for tf32 to get it), by the
    device kind's name (`bf16-tc` on a GPU, `bf16-matmul` on a CPU)."""
    return path_for(_MATMUL[dtype], kind)


def matmul_ladder(kind: str) -> tuple[str, ...]:
    """MATMUL_LADDER by the names a device of `kind` gives its paths."""
    return tuple(path_for(k, kind) for k in MATMUL_LADDER)


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
