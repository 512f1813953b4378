"""The FMA sweep (seed 000 §4): R multiply-adds per element over an array far above L2.

FLOP = 2·R·n, bytes = 2·n·sizeof (one load, one store). As R doubles the
points climb the bandwidth slope, then flatten at the compute plateau.

- GPU: the Triton kernel of probes.fma_triton, 512 MiB read + written; its
  plateau is the CUDA-core FMA peak (fp32-fma, fp64-fma).
- CPU (method "torch-chain"): no compiler is at hand (torch.compile takes
  minutes for large R), and numpy or a plain torch chain re-streams memory for
  every operation. So the array is processed in LLC-resident chunks: y = b + a·x
  (`torch.add(b, x, alpha=a, out=y)`: one DRAM read, one write, one
  multiply-add per element), then R−1 more in place on the chunk while it is in
  cache. Its R = 1 point retraces the DRAM slope; its plateau
  is the rate of unfused torch elementwise kernels from cache — what torch
  elementwise code gets on this CPU, not the cores' FMA peak (that is what
  the fp32/fp64 GEMMs run on). The output says so.
Every point's result is checked against the closed form of the recurrence.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from rooftop.models.paths import fma_path
from rooftop.models.sample import Sample
from rooftop.models.units import KiB, MiB

from .backend import Backend, Unsupported
from .steps import Budget, Step

# x → a·x + b converges to b/(1 − a) = 1: no overflow, no denormals. The method's 0.999 and 0.001,
# moved to the nearest binary fractions so that fp16, fp32 and fp64 (and Triton's fp32 scalar
# arguments) all hold them exactly, and the closed-form check sees the kernel's own constants.
A, B = 1.0 - 2.0**-10, 2.0**-10
SIZE = {"fp32": 4, "fp64": 8, "fp16": 2}
TOLERANCE = {"fp32": 1e-3, "fp64": 1e-9, "fp16": 5e-2}
GPU_TRAFFIC = 512 * MiB  # bytes read + written, as in the reference
CHECK_ELEMENTS = 4096

CPU_NOTE = (
    "CPU FMA sweep (torch-chain): y = b + a·x, then R−1 more in place on LLC-resident chunks (torch.add); "
    "its plateau is torch's unfused elementwise rate from cache, not the cores' FMA peak"
)
GPU_NOTE = "GPU FMA sweep: Triton kernel, R unrolled FMAs per element in registers, 512 MiB read + written"


@dataclass(frozen=True)
class FmaSweep:
    reps: tuple[int, ...]
    dtypes: tuple[str, ...] = ("fp32", "fp64")


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def expected(x0: Any, reps: int, a: float, b: float) -> Any:
    """x after R steps of x = a·x + b, in float64: aᴿ·x0 + b·(1 − aᴿ)/(1 − a)."""
    ar = a**reps
    return x0.double() * ar + b * (1 - ar) / (1 - a)


def constants(torch: Any, dtype: Any) -> tuple[float, float]:
    """a and b as the kernel sees them after the cast to its dtype."""
    return float(torch.tensor(A, dtype=dtype)), float(torch.tensor(B, dtype=dtype))


def max_error(x: Any, y: Any, reps: int) -> float:
    # deferred: torch, only when a probe runs
    import torch

    a, b = constants(torch, x.dtype)
    want = expected(x[:CHECK_ELEMENTS].cpu(), reps, a, b)
    got = y[:CHECK_ELEMENTS].cpu().double()
    return float(((got - want).abs() / want.abs()).max())


def chain_kernel(x: Any, y: Any, reps: int, chunk_elems: int) -> Callable[[], None]:
    """The CPU torch chain: per chunk, y = b + a·x, then R−1 × y = b + a·y in place (one kernel each)."""
    # deferred: torch, only when a probe runs
    import torch

    pairs = list(zip(x.split(chunk_elems), y.split(chunk_elems)))
    b = torch.tensor(B, dtype=x.dtype)  # a 0-dim tensor: `torch.add(b, y, alpha=a)` is one multiply-add pass

    def kernel() -> None:
        for xc, yc in pairs:
            torch.add(b, xc, alpha=A, out=yc)
            for _ in range(reps - 1):
                torch.add(b, yc, alpha=A, out=yc)

    return kernel


def chunk_bytes(backend: Backend) -> int:
    """An LLC-resident chunk: LLC/8, between 256 KiB and 8 MiB."""
    llc = backend.info.l2_bytes or 4 * MiB
    return int(min(8 * MiB, max(256 * KiB, llc // 8)))


def elements(backend: Backend, dtype: str) -> int:
    """n such that reads + writes (2·n·sizeof) are 512 MiB on a GPU, 4×LLC (≥ 64 MiB) on a CPU."""
    if backend.is_cuda:
        traffic = GPU_TRAFFIC
    else:
        traffic = max(4 * (backend.info.l2_bytes or 0), 64 * MiB)
    return int(traffic // (2 * SIZE[dtype]))


def template(backend: Backend, dtype: str, reps: int, n: int | None = None) -> Sample:
    n = n or elements(backend, dtype)
    nbytes = 2.0 * n * SIZE[dtype]
    method = "triton" if backend.is_cuda else "torch-chain"
    cond: dict[str, Any] = {"method": method}
    if method == "torch-chain":
        cond["chunk_bytes"] = chunk_bytes(backend)
    return Sample(
        family="fma",
        dtype=dtype,
        shape={"n": n, "reps": reps},
        flops=2.0 * reps * n,
        bytes=nbytes,
        footprint_bytes=nbytes,
        cache="streaming",
        path=fma_path(dtype),
        conditions=cond,
    )


class FmaProbe:
    def __init__(self, backend: Backend, sweep: FmaSweep, n: int | None = None) -> None:
        self.backend = backend
        self.sweep = sweep
        self.n = n  # override the array length (tests)
        self.budget = Budget(backend.protocol.max_call_s)

    def _kernel(self, x: Any, y: Any, reps: int) -> Callable[[], None]:
        if self.backend.is_cuda:
            if not triton_available():
                raise Unsupported("triton is not installed: the GPU FMA sweep needs its compiled kernel")
            # deferred: triton (heavy; absent off Linux x86-64), only when the GPU sweep runs
            from . import fma_triton

            return lambda: fma_triton.run(x, y, reps, A, B)
        elems = chunk_bytes(self.backend) // x.element_size()
        return chain_kernel(x, y, reps, elems)

    def _run(self, tmpl: Sample) -> Sample:
        # deferred: torch, only when a probe runs
        import torch

        dtype, n, reps = tmpl.dtype, tmpl.shape["n"], tmpl.shape["reps"]
        tdt = {"fp32": torch.float32, "fp64": torch.float64, "fp16": torch.float16}[dtype]

        def timed() -> Sample:
            self.backend.check_fits(tmpl.footprint_bytes)
            dev = self.backend.torch_device
            x = torch.rand(n, dtype=tdt, device=dev) + 0.5
            y = torch.empty_like(x)
            kernel = self._kernel(x, y, reps)
            if self.backend.is_cuda:
                kernel()  # compile the Triton kernel before the clock (and the budget) starts
            self.backend.sync()
            stats = self.backend.measure(kernel)
            err = max_error(x, y, reps)
            if not err <= TOLERANCE[dtype]:
                raise Unsupported(f"result check failed: max_error {err:.3g} > {TOLERANCE[dtype]:g}")
            return dataclasses.replace(tmpl, stats=stats, max_error=err)

        return self.budget.guard(dtype, tmpl.flops, f"{dtype} R={reps}", timed)

    def steps(self) -> list[Step]:
        out = []
        for dtype in self.sweep.dtypes:
            for r in self.sweep.reps:
                tmpl = template(self.backend, dtype, r, self.n)
                out.append(Step(f"fma {dtype} R={r}", tmpl, partial(self._run, tmpl)))
        return out

    def note(self) -> str:
        return GPU_NOTE if self.backend.is_cuda else CPU_NOTE
