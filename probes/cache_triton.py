"""The cache-level kernels in Triton: an in-kernel loop, so no launch cost hides the level.

- `l2_chunks` (te42kyfo/gpu-benches' `gpu-l2-cache` method): many programs, each
  reading one of N distinct CHUNK-element chunks once with `.cg` loads (cached
  in L2 only, so the SM's L1 cannot serve them) and storing its sum as one value.
  The working set is the N chunks; each launch reads grid × CHUNK elements.
- `l1_passes`: a few programs per SM, each re-reading its own REGION-element
  region `passes` times with default (L1-cached) loads. Pass r visits the
  region's blocks rotated by r, so no two passes load the same addresses in the
  same order and the compiler cannot keep a pass's loads in registers for the
  next (a figure above SMs × 128 B × clock would say it did). `passes` is a
  runtime argument: the pass loop is not unrolled either.
Importing it without triton works (the kernels are then absent).
"""

from __future__ import annotations

from typing import Any

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU plan and the tests without triton never need it
    triton = None

if triton is not None:
    # The chunk count and the pass count are not specialised on (Triton would compile again for a count
    # divisible by 16): one compile per kernel shape keeps the quick plan's compiles to three.

    # untyped on purpose: Triton reads a kernel argument's annotation (a hint would change the kernel)
    @triton.jit(do_not_specialize=["nchunks"])
    def l2_chunks(x_ptr, out_ptr, nchunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        pid = tl.program_id(0)
        base = (pid % nchunks).to(tl.int64) * CHUNK
        acc = tl.zeros([BLOCK], tl.float32)
        for off in range(0, CHUNK, BLOCK):
            acc += tl.load(x_ptr + base + off + tl.arange(0, BLOCK), cache_modifier=".cg")
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))

    # untyped on purpose: Triton reads a kernel argument's annotation (a hint would change the kernel)
    @triton.jit(do_not_specialize=["passes"])
    def l1_passes(x_ptr, out_ptr, passes, REGION: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        pid = tl.program_id(0)
        base = pid.to(tl.int64) * REGION
        NB: tl.constexpr = REGION // BLOCK
        acc = tl.zeros([BLOCK], tl.float32)
        for r in range(passes):
            for j in range(NB):
                blk = (j + r) % NB  # this pass's order: rotated by the pass number
                acc += tl.load(x_ptr + base + blk * BLOCK + tl.arange(0, BLOCK))
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def _need() -> None:
    if triton is None:
        raise ImportError("triton is not installed")


def run_l2(x: Any, out: Any, nchunks: int, chunk: int, block: int, warps: int) -> None:
    """out[p] = sum of chunk p mod nchunks of x, for every program p < out.numel()."""
    _need()
    l2_chunks[(out.numel(),)](x, out, nchunks, CHUNK=chunk, BLOCK=block, num_warps=warps)


def run_l1(x: Any, out: Any, region: int, passes: int, block: int, warps: int) -> None:
    """out[p] = passes × sum of region p of x, for every program p < out.numel()."""
    _need()
    l1_passes[(out.numel(),)](x, out, passes, REGION=region, BLOCK=block, num_warps=warps)
