"""Plans: an end-to-end run on the CPU, cancellation, failures that do not stop the run."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from rooftop.models.sample import Sample
from rooftop.probes.plan import PARTS, Plan, PlanError, build_plan, parse_only, run_plan
from rooftop.probes.steps import Step

from probe_fixtures import cpu_backend, tiny_sizes  # noqa: F401 - a fixture

TINY = tiny_sizes()


def test_parse_only():
    assert parse_only(None) == PARTS
    assert parse_only("gemm, bandwidth,gemm") == ("gemm", "bandwidth")
    with pytest.raises(PlanError, match="choose from bandwidth, cache, gemm, fma, launch"):
        parse_only("gemm,nvlink")
    with pytest.raises(PlanError):
        parse_only(",")


def test_unknown_plan(cpu_backend):
    with pytest.raises(PlanError, match="quick, full"):
        build_plan(cpu_backend, "medium")


def test_default_plans_are_built_lazily(cpu_backend):
    quick = build_plan(cpu_backend, "quick")
    full = build_plan(cpu_backend, "full")
    assert len(full.steps) > len(quick.steps) > 50
    assert {s.template.family for s in quick.steps} == {"launch", "read_reduce", "copy", "triad", "write", "gemm", "fma"}
    assert any("each array counted once" in n for n in quick.notes)
    assert build_plan(cpu_backend, "quick", "launch").steps[0].template.family == "launch"


def test_tiny_plan_end_to_end(cpu_backend):
    plan = build_plan(cpu_backend, "quick", sizes=TINY)
    got = list(run_plan(plan))
    assert [p.done for p, _ in got] == list(range(1, len(plan.steps) + 1))
    assert all(p.total == len(plan.steps) for p, _ in got)
    samples = [s for _, s in got]
    fams = {s.family for s in samples if s.stats is not None}
    assert fams == {"launch", "read_reduce", "copy", "triad", "write", "gemm", "fma"}
    fp8 = [s for s in samples if s.dtype == "fp8"]
    assert fp8 and all("emulation" in s.skipped for s in fp8)  # skipped, and the run went on after them
    assert samples[-1].family == "fma" and samples[-1].stats is not None


def test_cancel_stops_between_steps_and_keeps_samples(cpu_backend):
    plan = build_plan(cpu_backend, "quick", sizes=TINY)
    cancel = threading.Event()
    kept: list[Sample] = []
    for progress, sample in run_plan(plan, cancel):
        kept.append(sample)
        if progress.done == 3:
            cancel.set()
    assert len(kept) == 3 < len(plan.steps)
    assert all(s.stats is not None for s in kept)


def _failing(exc: Exception, template: Sample) -> Step:
    def run() -> Sample:
        raise exc

    return Step("boom", template, run)


def test_failures_become_skipped_samples_and_the_run_goes_on(cpu_backend):
    base = build_plan(cpu_backend, "quick", "bandwidth", sizes=TINY)
    tmpl = base.steps[0].template
    steps = (
        base.steps[0],
        _failing(RuntimeError("CUDA error: an illegal memory access was encountered"), tmpl),
        _failing(MemoryError(), tmpl),
        _failing(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), tmpl),
        base.steps[1],
    )
    plan = dataclasses.replace(base, steps=steps)
    samples = [s for _, s in run_plan(plan)]
    assert samples[0].stats is not None and samples[-1].stats is not None
    assert samples[1].skipped.startswith("kernel error: RuntimeError: CUDA error")
    assert samples[2].skipped.startswith("out of memory")
    assert samples[3].skipped.startswith("out of memory")
    assert all(s.stats is None for s in samples[1:4])
    assert isinstance(plan, Plan)


def test_cancel_during_a_slow_point_drops_it_and_keeps_the_rest(cpu_backend):
    base = build_plan(cpu_backend, "quick", "bandwidth", sizes=TINY)
    cancel = threading.Event()
    calls = []

    def kernel():
        calls.append(1)
        if len(calls) == 4:  # a stop request arrives while this point is being timed
            cancel.set()

    def run() -> Sample:
        return dataclasses.replace(base.steps[0].template, stats=base.backend.measure(kernel))

    plan = dataclasses.replace(base, steps=(base.steps[0], Step("slow", base.steps[0].template, run), base.steps[1]))
    samples = [s for _, s in run_plan(plan, cancel)]
    assert len(samples) == 1 and samples[0].stats is not None
    assert len(calls) < 4 + TINY.protocol.repeats * TINY.protocol.max_calls  # stopped before its last sample
    assert base.backend.cancel is None  # the event is not left behind on the backend


def test_h200_quick_plan_fits_the_device(cpu_backend):
    """The quick plan an H200 gets (built from its facts, nothing runs): 108 points, every working set
    within memory, the FMA array indexable by the kernel's int32 offsets, shape rules known in advance."""
    from rooftop.models.units import GiB, MiB
    from rooftop.probes import fma_triton
    from rooftop.probes.gemm import shape_unsupported

    info = dataclasses.replace(cpu_backend.info, kind="cuda", index=0, name="NVIDIA H200", units=132,
                               l2_bytes=60 * MiB, memory_bytes=int(139.8 * GiB), compute_capability="9.0")
    plan = build_plan(dataclasses.replace(cpu_backend, spec="cuda:0", info=info), "quick")
    fams = [s.template.family for s in plan.steps]
    assert len(plan.steps) == 2 + 9 * 4 + (4 + 2) + 7 * 8 + 2 * 4  # launch, bandwidth, cache (L2, L1), gemm, fma
    assert fams[:2] == ["launch", "launch_graph"] and fams[-8:] == ["fma"] * 8
    assert plan.backend.protocol.max_call_s == 1.0
    assert max(s.template.footprint_bytes for s in plan.steps) <= 0.85 * info.memory_bytes
    ws = sorted({s.template.conditions["working_set"] for s in plan.steps if "working_set" in s.template.conditions})
    assert ws[-1] == 512 * MiB and ws[0] == 8 * 1024  # ≥ 4 × L2 (240 MiB) and ≥ 512 MiB at the top
    gemms = [s.template for s in plan.steps if s.template.family == "gemm"]
    refused = [(g.dtype, g.shape["m"]) for g in gemms if shape_unsupported(g.dtype, **g.shape)]
    assert refused == [("int8", 1), ("int8", 16)]
    for s in plan.steps:
        if s.template.family == "fma":
            n = s.template.shape["n"]
            assert s.template.bytes == 512 * MiB
            assert n + fma_triton.BLOCK < 2**31  # pid * BLOCK + arange stays in int32


def test_cpu_quick_plan_takes_its_largest_sets_at_most_twice_within_a_memory_cap(cpu_backend, monkeypatch):
    """The quick plan took 48 s on a 2-core VM once its DRAM sweep reached 4 GiB: each of the two largest
    sets ran all four kernels. Now they run the two that B dram comes from, and the sweep stays within a
    quarter of the free memory, which the notes and each bandwidth sample's conditions say."""
    from rooftop.models.units import GiB, MiB, fmt_bytes
    from rooftop.probes import bandwidth

    for free, top in ((24 * GiB, 4 * GiB), (8 * GiB, 2 * GiB), (1 * GiB, 256 * MiB)):
        monkeypatch.setattr(type(cpu_backend), "free_bytes", lambda self, f=free: f)
        cap = free // 4
        plan = build_plan(cpu_backend, "quick", "bandwidth")
        by_set: dict[int, list[str]] = {}
        for s in plan.steps:
            by_set.setdefault(s.template.conditions["working_set"], []).append(s.template.family)
        sets = sorted(by_set)
        assert sets[-1] == top
        for ws in sets[-2:]:
            assert sorted(by_set[ws]) == ["read_reduce", "triad"]
        assert all(sorted(by_set[ws]) == sorted(bandwidth.KERNELS) for ws in sets[:-2])  # every kernel below
        for s in plan.steps:
            assert s.template.footprint_bytes <= cap and s.template.conditions["memory_cap"] == cap
        reserve = max(bandwidth.buffer_bytes(f, ws) for ws, fams in by_set.items() for f in fams)
        assert reserve <= cap + 3 * 4096  # the one buffer: the largest set, each array on its own page
        (note,) = [n for n in plan.notes if "memory capped" in n]
        assert f"25% of the {fmt_bytes(free)} free ({fmt_bytes(cap)})" in note
        assert ("short of" in note) == (top < 4 * GiB)
        full = build_plan(cpu_backend, "full", "bandwidth")  # the full plan keeps every kernel at every set
        assert all(len([s for s in full.steps if s.template.conditions["working_set"] == ws]) == 4
                   for ws in {s.template.conditions["working_set"] for s in full.steps})
