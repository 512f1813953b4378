"""Cache-level probes on a GPU: the L2 and L1 plateaus, read by in-kernel loops (probes.cache_triton).

A torch op per working set cannot show them: on an H200 a 16 MiB `sum` at
10 TB/s takes 1.6 µs, under the ~10 µs a plain launch costs. Here each launch
reads ≥ 4 GiB inside one kernel (grid × chunk for L2, programs × region ×
passes for L1), so the launch cost is well under 1% of the call and no CUDA
graph is needed to remove it.

- l2_read: gpu-benches' `gpu-l2-cache` method. Many programs, each reading one
  of N distinct 256 KiB chunks once with `.cg` loads (L2 only); working sets
  from 1 MiB to 2 × L2, so the curve shows the L2 plateau and the fall to HBM.
- l1_read: a few programs per SM, each re-reading its own small region many
  passes, each pass in a rotated order (so its loads cannot be hoisted).
  The per-SM footprint (programs per SM × region) stays inside the L1.
Q counts the bytes the kernel reads (re-reads included; the one fp32 sum each
program stores is left out: < 0.01%); W counts one add per element read.
The CPU plan has no Triton: its levels come from the torch bandwidth sweep.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
from dataclasses import dataclass
from functools import partial
from typing import Any

from rooftop.models.sample import Sample
from rooftop.models.units import GiB, KiB, MiB

from .backend import Backend, Unsupported
from .steps import Step

ELEMENT = 4  # fp32
L2_METHOD = "triton: programs read distinct chunks once, .cg loads (L2 only)"
L1_METHOD = "triton: programs re-read their own region, each pass in a rotated order"
NOTE = (
    "cache probes (l2_read, l1_read): Triton kernels with in-kernel loops, ≥ 4 GiB read per launch; "
    "Q = bytes read (re-reads counted), W = one add per element; l2_read uses .cg loads (L2 only)"
)
TOLERANCE = 1e-4  # relative error of a program's fp32 sum against torch's


@dataclass(frozen=True)
class CacheSweep:
    """What the cache probes sweep, and how their kernels are shaped."""

    l2_sets: tuple[int, ...]  # working sets of the L2 probe, bytes
    l1_regions: tuple[int, ...]  # region per program of the L1 probe, bytes
    chunk: int = 256 * KiB  # bytes each L2 program reads
    block: int = 1024  # elements per load
    warps: int = 4
    l1_block: int = 2048
    l1_warps: int = 8
    programs_per_sm: int = 2  # L1 probe: per-SM footprint = programs_per_sm × region
    min_read: int = 4 * GiB  # bytes read per launch, at least


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def default_sweep(backend: Backend, plan: str) -> CacheSweep:
    """Quick: 4 L2 points and 2 L1 points; full: L2 doubling from 1 MiB to 2 × L2, 4 L1 regions."""
    l2 = backend.info.l2_bytes or 32 * MiB
    if plan == "quick":
        sets = {1 * MiB, 8 * MiB, int(l2 // 2), int(2 * l2)}
        regions: tuple[int, ...] = (16 * KiB, 64 * KiB)
    else:
        sets = {int(l2 // 2), int(3 * l2 // 4), int(2 * l2)}
        ws = 1 * MiB
        while ws <= 2 * l2:
            sets.add(ws)
            ws *= 2
        regions = (16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB)
    return CacheSweep(l2_sets=tuple(sorted(sets)), l1_regions=regions)


def l2_template(sweep: CacheSweep, working_set: int) -> Sample:
    chunk = sweep.chunk // ELEMENT
    nchunks = max(1, working_set // sweep.chunk)
    programs = max(nchunks, math.ceil(sweep.min_read / sweep.chunk))
    read = float(programs * chunk * ELEMENT)
    return Sample(
        family="l2_read",
        dtype="fp32",
        shape={"n": nchunks * chunk, "chunks": nchunks, "programs": programs},
        flops=float(programs * chunk),
        bytes=read,
        footprint_bytes=float(nchunks * chunk * ELEMENT),
        cache="warm",
        path=None,
        conditions={"working_set": int(working_set), "method": L2_METHOD, "chunk_bytes": sweep.chunk,
                    "block": sweep.block, "warps": sweep.warps},
    )


def l1_template(sweep: CacheSweep, sms: int, region: int) -> Sample:
    elems = region // ELEMENT
    if elems % sweep.l1_block or elems < 2 * sweep.l1_block:
        # one block per region would read the same addresses every pass: nothing left to rotate
        raise ValueError(f"an L1 region of {elems} elements must be a multiple of {sweep.l1_block}, at least two")
    programs = sweep.programs_per_sm * sms
    passes = max(2, math.ceil(sweep.min_read / (programs * region)))
    return Sample(
        family="l1_read",
        dtype="fp32",
        shape={"n": programs * elems, "region": elems, "programs": programs, "passes": passes},
        flops=float(programs * elems * passes),
        bytes=float(programs * elems * ELEMENT * passes),
        footprint_bytes=float(programs * elems * ELEMENT),
        cache="warm",
        path=None,
        conditions={"working_set": programs * elems * ELEMENT, "method": L1_METHOD,
                    "per_sm_bytes": sweep.programs_per_sm * region, "block": sweep.l1_block,
                    "warps": sweep.l1_warps},
    )


def _ready(backend: Backend) -> None:
    """The kernels run on a GPU, or on CPU tensors in Triton's interpreter (the tests)."""
    if not triton_available():
        raise Unsupported("triton is not installed: the cache probes need its compiled kernels")
    if not backend.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise Unsupported("the cache probes run on a GPU (the CPU's levels come from the bandwidth sweep)")


def _relative_error(got: Any, want: Any) -> float:
    return float(((got.double() - want.double()).abs() / want.double().abs().clamp_min(1e-30)).max())


def _run_l2(backend: Backend, sweep: CacheSweep, tmpl: Sample) -> Sample:
    # deferred: torch, only when a probe runs
    import torch

    # deferred: triton (heavy; absent off Linux x86-64), only when the GPU sweep runs
    from . import cache_triton

    _ready(backend)
    backend.check_fits(tmpl.footprint_bytes)
    sh = tmpl.shape
    chunk = sweep.chunk // ELEMENT
    x = torch.rand(sh["n"], device=backend.torch_device)
    out = torch.empty(sh["programs"], device=backend.torch_device)
    kernel = lambda: cache_triton.run_l2(x, out, sh["chunks"], chunk, sweep.block, sweep.warps)  # noqa: E731
    kernel()  # compile before the clock starts
    backend.sync()
    stats = backend.measure(kernel)
    err = _relative_error(out[: sh["chunks"]], x.view(sh["chunks"], chunk).sum(dim=1))
    if not err <= TOLERANCE:
        raise Unsupported(f"result check failed: max_error {err:.3g} > {TOLERANCE:g}")
    return dataclasses.replace(tmpl, stats=stats, max_error=err)


def _run_l1(backend: Backend, sweep: CacheSweep, tmpl: Sample) -> Sample:
    # deferred: torch, only when a probe runs
    import torch

    # deferred: triton (heavy; absent off Linux x86-64), only when the GPU sweep runs
    from . import cache_triton

    _ready(backend)
    backend.check_fits(tmpl.footprint_bytes)
    sh = tmpl.shape
    x = torch.rand(sh["n"], device=backend.torch_device)
    out = torch.empty(sh["programs"], device=backend.torch_device)
    kernel = lambda: cache_triton.run_l1(x, out, sh["region"], sh["passes"], sweep.l1_block, sweep.l1_warps)  # noqa: E731
    kernel()
    backend.sync()
    stats = backend.measure(kernel)
    err = _relative_error(out, sh["passes"] * x.view(sh["programs"], sh["region"]).sum(dim=1))
    if not err <= TOLERANCE:
        raise Unsupported(f"result check failed: max_error {err:.3g} > {TOLERANCE:g}")
    return dataclasses.replace(tmpl, stats=stats, max_error=err)


def _size(nbytes: float) -> str:
    return f"{nbytes / MiB:.3g} MiB" if nbytes >= MiB else f"{nbytes / KiB:.3g} KiB"


def steps(backend: Backend, sweep: CacheSweep) -> list[Step]:
    """L2 working sets from small to large, then the L1 regions."""
    out = []
    for ws in sweep.l2_sets:
        t = l2_template(sweep, ws)
        out.append(Step(f"l2_read {_size(ws)}", t, partial(_run_l2, backend, sweep, t)))
    sms = backend.info.units or 1
    for region in sweep.l1_regions:
        t = l1_template(sweep, sms, region)
        out.append(Step(f"l1_read {_size(region)} × {t.shape['programs']}", t, partial(_run_l1, backend, sweep, t)))
    return out
