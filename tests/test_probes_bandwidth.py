"""Bandwidth probes: the sweep, the byte convention, real kernels on the CPU."""

from __future__ import annotations

import pytest

from rooftop.models.units import KiB, MiB
from rooftop.probes import bandwidth
from rooftop.probes.steps import run_step
from rooftop.probes.timing import Protocol

from probe_fixtures import cpu_backend  # noqa: F401 - a fixture


def test_working_sets_reach_the_top_from_a_few_kib():
    sets = bandwidth.working_sets(256 * MiB, factor=4)
    assert sets[0] == 4 * KiB and sets[-1] == 256 * MiB
    assert all(b == 4 * a for a, b in zip(sets, sets[1:]))
    assert bandwidth.working_sets(1 * MiB, factor=2)[-1] == MiB


def test_sweep_goes_far_past_the_last_cache(cpu_backend):
    top = bandwidth.sweep_top(cpu_backend)
    assert top >= min(4096 * MiB, cpu_backend.free_bytes() // 4)  # past any host cache, memory allowing
    if cpu_backend.info.l2_bytes:
        assert top >= min(8 * cpu_backend.info.l2_bytes, cpu_backend.free_bytes() // 4)


def test_cpu_sweep_top_is_capped_by_free_memory(cpu_backend, monkeypatch):
    import dataclasses

    monkeypatch.setattr(type(cpu_backend), "free_bytes", lambda self: 800 * MiB)
    assert bandwidth.sweep_top(cpu_backend) == 200 * MiB
    monkeypatch.setattr(type(cpu_backend), "free_bytes", lambda self: 64 * 1024 * MiB)
    assert bandwidth.sweep_top(cpu_backend) == max(4096 * MiB, 8 * (cpu_backend.info.l2_bytes or 0))
    big = dataclasses.replace(cpu_backend, info=dataclasses.replace(cpu_backend.info, l2_bytes=1024 * MiB))
    assert bandwidth.sweep_top(big) == 8192 * MiB


@pytest.mark.parametrize(("family", "arrays"), [("read_reduce", 1), ("copy", 2), ("triad", 3), ("write", 1)])
def test_each_array_counted_once(family, arrays):
    s = bandwidth.template(family, 12 * KiB)
    n = s.shape["n"]
    assert s.shape["arrays"] == arrays
    assert s.bytes == arrays * n * 4 == s.footprint_bytes
    assert s.conditions["working_set"] == 12 * KiB
    assert s.flops == (2 * n if family == "triad" else 0)


def test_kernels_run_and_yield_samples(cpu_backend):
    import dataclasses

    backend = dataclasses.replace(cpu_backend, protocol=Protocol(window_s=1e-4, repeats=3, max_calls=5))
    steps = bandwidth.steps(backend, [64 * KiB])
    assert [s.template.family for s in steps] == list(bandwidth.KERNELS)
    for step in steps:
        s = run_step(step)
        assert not s.skipped, s.skipped
        assert s.stats.repeats == 3 and s.bandwidth > 0


def test_triad_writes_in_place():
    import torch

    a, b, c = torch.zeros(8), torch.ones(8), torch.full((8,), 2.0)
    bandwidth.KERNELS["triad"][1]([a, b, c])
    assert torch.equal(a, torch.full((8,), 2.0))  # 1 + 0.5·2
