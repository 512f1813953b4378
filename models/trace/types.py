"""The element types as the profiler writes them in a trace's `Input type` (`c10::BFloat16`, `long int`…): each
one's dtype name and size in bytes. Reading a trace needs them (a collective's message size, a TensorList's
element); the op-cost models read them from here.
"""

from __future__ import annotations

__all__ = ["TORCH_TYPES"]

TORCH_TYPES: dict[str, tuple[str, float]] = {
    "double": ("fp64", 8), "float": ("fp32", 4), "c10::Half": ("fp16", 2), "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1), "c10::Float8_e5m2": ("fp8", 1), "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "long int": ("int64", 8), "long": ("int64", 8), "int": ("int32", 4), "short int": ("int16", 2),
    "short": ("int16", 2), "signed char": ("int8", 1), "unsigned char": ("uint8", 1), "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8), "c10::complex<double>": ("complex128", 16),
}
