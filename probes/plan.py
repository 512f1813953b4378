"""Probe plans: which kernels at which sizes, run as an iterator of (progress, sample).

`quick` and `full` per backend; `only` narrows to some of bandwidth, cache,
gemm, fma, launch (cache: the GPU's L2 and L1 probes; none on a CPU). The
run checks a threading.Event between steps so the TUI's worker thread (or
Ctrl-C in the CLI) stops it promptly, keeping every sample taken;
a step that fails is yielded as a skipped sample and the run goes on.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Iterator

from rooftop.models.errors import BadInput
from rooftop.models.sample import Sample
from rooftop.models.units import fmt_bytes

from . import bandwidth, cache, launch
from .backend import Backend, busy_note
from .fma import FmaProbe, FmaSweep
from .gemm import GemmProbe, GemmSweeps
from .steps import Step, run_step
from .timing import Cancelled, Protocol

PLANS = ("quick", "full")
PARTS = ("bandwidth", "cache", "gemm", "fma", "launch")
QUICK_DRAM_KERNELS = ("read_reduce", "triad")  # a CPU quick plan's kernels at the sets B dram comes from


class PlanError(BadInput, ValueError):
    """An unknown plan or probe name; a one-line message for the user."""


@dataclass(frozen=True)
class Sizes:
    """Everything a plan sweeps, and the protocol it times with."""

    protocol: Protocol
    working_sets: tuple[int, ...]
    gemm: GemmSweeps
    fma: FmaSweep
    fma_elements: int | None = None  # None: the probe's default (512 MiB traffic on a GPU)
    cache_sweep: cache.CacheSweep | None = None  # the GPU's cache probes; None: none (a CPU)
    memory_cap: int | None = None  # bytes the bandwidth sweep may take (a CPU: a share of free RAM); None: no cap
    dram_kernels: tuple[str, ...] | None = None  # the only kernels run at the DRAM plateau's sets; None: all


def _doubling(lo: int, hi: int) -> tuple[int, ...]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return tuple(out)


def default_sizes(backend: Backend, plan: str) -> Sizes:
    """The reference's shapes on a GPU; scaled down on a CPU so `quick` stays under ~20 s on 2 cores."""
    cap = bandwidth.memory_cap(backend)
    top = bandwidth.sweep_top(backend, cap)
    quick = plan == "quick"
    sets = tuple(bandwidth.working_sets(top, factor=4.0 if quick else 2.0))
    if backend.is_cuda:
        proto = dataclasses.replace(backend.protocol, max_call_s=1.0 if quick else 5.0)
        if quick:
            # M = 8192 at N = K = 8192 is the 8192 square: not timed twice.
            gemm = GemmSweeps(squares=(256, 1024, 4096, 8192), nk=8192, ms=(1, 16, 256, 2048))
            # Each R is a Triton compile: few of them, past the ridge (R ≈ 60 on an H100/H200).
            fma = FmaSweep(reps=(1, 8, 64, 512))
        else:
            gemm = GemmSweeps(squares=_doubling(256, 8192), nk=8192, ms=_doubling(1, 2048),
                              cold_squares=(1024, 4096, 8192))
            fma = FmaSweep(reps=_doubling(1, 2048), dtypes=("fp32", "fp64", "fp16"))
        # quick: 4 L2 + 2 L1 points, ~0.2 s each plus 3 compiles: ~3 s on an H200
        return Sizes(proto, sets, gemm, fma, cache_sweep=cache.default_sweep(backend, plan))
    else:
        proto = dataclasses.replace(backend.protocol, max_call_s=0.5 if quick else 3.0)
        if quick:
            gemm = GemmSweeps(squares=(128, 256, 512, 1024), nk=1024, ms=(1, 8, 64, 512))
            fma = FmaSweep(reps=(1, 4, 16, 64))
        else:
            gemm = GemmSweeps(squares=_doubling(128, 2048), nk=2048, ms=_doubling(1, 1024), cold_squares=(256, 1024))
            fma = FmaSweep(reps=_doubling(1, 256))
    # quick: each pass over the two largest sets (4 and 1 GiB) costs what the whole cache region does, so
    # they run only the two kernels B dram has come from; copy and write stop below them
    return Sizes(proto, sets, gemm, fma, memory_cap=cap, dram_kernels=QUICK_DRAM_KERNELS if quick else None)


@dataclass(frozen=True)
class Plan:
    name: str
    backend: Backend
    steps: tuple[Step, ...]
    notes: tuple[str, ...]  # conventions and methods, printed with the results


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    label: str  # the step just finished
    elapsed_s: float


def parse_only(text: str | Iterable[str] | None) -> tuple[str, ...]:
    """'bandwidth,gemm' → ('bandwidth', 'gemm'); PlanError naming the choices for anything else."""
    if text is None:
        return PARTS
    words = text.split(",") if isinstance(text, str) else list(text)
    parts = tuple(dict.fromkeys(w.strip().lower() for w in words if w.strip()))
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        raise PlanError(f"--only {','.join(bad) or '(empty)'}: choose from {', '.join(PARTS)}")
    return parts


def build_plan(backend: Backend, name: str = "quick", only: str | Iterable[str] | None = None,
               sizes: Sizes | None = None) -> Plan:
    """The steps of plan `name` (quick | full) on `backend`, restricted to `only`."""
    if name not in PLANS:
        raise PlanError(f"--plan {name!r}: choose from {', '.join(PLANS)}")
    parts = parse_only(only)
    sizes = sizes or default_sizes(backend, name)
    backend = dataclasses.replace(backend, protocol=sizes.protocol)
    steps: list[Step] = []
    notes = [
        f"timing: {sizes.protocol.warmups} warm-ups, back-to-back calls filling "
        f"{sizes.protocol.window_s * 1e3:g} ms (≤ {sizes.protocol.max_calls}), {sizes.protocol.repeats} samples, "
        f"median; iqr/median > 0.10 is unstable and left out of the ceilings; "
        f"points whose call would take over {sizes.protocol.max_call_s:g} s are skipped"
    ]
    busy = busy_note(backend.info)
    if busy:
        notes.append(busy)
    if "launch" in parts:
        steps += launch.steps(backend)
    if "bandwidth" in parts:
        steps += bandwidth.steps(backend, list(sizes.working_sets), top_families=sizes.dram_kernels,
                                 top_sets=bandwidth.DRAM_SETS, memory_cap=sizes.memory_cap)
        notes.append(bandwidth.CONVENTION)
        if sizes.memory_cap is not None and sizes.working_sets:
            notes.append(bandwidth.cap_note(backend, max(sizes.working_sets), sizes.memory_cap))
        if sizes.dram_kernels is not None and sizes.working_sets:
            top = sorted(sizes.working_sets)[-bandwidth.DRAM_SETS:]
            notes.append(f"bandwidth: the {' and '.join(fmt_bytes(w) for w in top)} sets, where B dram is "
                         f"taken, run {' and '.join(sizes.dram_kernels)} only, so no write figure is shown "
                         "beside B (the full plan runs every kernel there)")
    if "cache" in parts and sizes.cache_sweep is not None:
        steps += cache.steps(backend, sizes.cache_sweep)
        notes.append(cache.NOTE)
    if "gemm" in parts:
        steps += GemmProbe(backend, sizes.gemm).steps()
        notes.append("gemm: W = 2·M·N·K, Q = sizeof·(MK + KN) + sizeof(out)·MN; random inputs; fp32 = TF32 off")
        if not backend.is_cuda and backend.info.native_bf16 is False:
            notes.append(
                "gemm: this CPU has no native bf16 (avx512_bf16 / AMX): bf16 and fp16 GEMMs are converted, and slow"
            )
    if "fma" in parts:
        probe = FmaProbe(backend, sizes.fma, sizes.fma_elements)
        steps += probe.steps()
        notes.append(probe.note())
    return Plan(name, backend, tuple(steps), tuple(notes))


def run_plan(plan: Plan, cancel: threading.Event | None = None) -> Iterator[tuple[Progress, Sample]]:
    """Yield each step's sample as it is taken; stop once `cancel` is set (between steps, or between
    the samples of the step in progress, which is then dropped)."""
    start = time.perf_counter()
    total = len(plan.steps)
    plan.backend.cancel = cancel  # the probes also look between the samples of a slow point
    try:
        plan.backend.activate()  # this thread may not be the one that chose the device
        for i, step in enumerate(plan.steps):
            if cancel is not None and cancel.is_set():
                return
            try:
                sample = run_step(step, on_oom=plan.backend.release)
            except Cancelled:
                return  # the point in progress is dropped; every sample before it was yielded
            yield Progress(i + 1, total, step.label, time.perf_counter() - start), sample
    finally:
        plan.backend.cancel = None
        plan.backend.release()
