"""The FMA-sweep kernel in Triton (docs/measure.md, "Probes").

Each element is loaded once, gets R multiply-adds `x = x*a + b` in registers
and is stored once. R is a constexpr, so the loop is unrolled; a and b are
runtime arguments and the result is stored, so the compiler cannot fold or
drop the chain. With BLOCK = 1024 and 4 warps each thread holds 8 independent
chains. a = 1 − 2⁻¹⁰ and b = 2⁻¹⁰ (exact in fp16/fp32/fp64) converge to 1: no
overflow, no denormals.
Importing it without triton works (the kernel is then absent); importing
triton does not load torch.
"""

from __future__ import annotations

from typing import Any

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU path and the tests without triton never need it
    triton = None

BLOCK = 1024
NUM_WARPS = 4

if triton is not None:

    # untyped on purpose: Triton reads a kernel argument's annotation (a hint would change the kernel)
    @triton.jit
    def fma_kernel(x_ptr, y_ptr, n, a, b, R: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        ca = tl.cast(a, x.dtype)
        cb = tl.cast(b, x.dtype)
        for _ in range(R):
            x = x * ca + cb
        tl.store(y_ptr + offs, x, mask=mask)


def run(x: Any, y: Any, reps: int, a: float, b: float) -> None:
    """y = the R-fold FMA chain applied to x, elementwise."""
    if triton is None:
        raise ImportError("triton is not installed")
    n = x.numel()
    fma_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, a, b, R=reps, BLOCK=BLOCK, num_warps=NUM_WARPS)
