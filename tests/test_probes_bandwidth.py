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


def test_a_sweep_takes_its_memory_once_and_gives_it_back(cpu_backend):
    """Each point used to allocate its own arrays: a 4 GiB set's fresh pages took 2–9 s to touch on a 2-core
    VM, four times over (once per kernel). The sweep's arrays now come from one buffer, taken at its first
    point for the largest set and released after its last; each point's arrays are disjoint and page-aligned."""
    import dataclasses

    backend = dataclasses.replace(cpu_backend, protocol=Protocol(window_s=1e-4, repeats=3, max_calls=5))
    sets = [16 * KiB, 256 * KiB, 1 * MiB]
    steps = bandwidth.steps(backend, sets)
    reserve = max(bandwidth.buffer_bytes(f, ws) for ws in sets for f in bandwidth.KERNELS)
    held = []
    for step in steps:
        s = run_step(step)
        assert not s.skipped and s.bandwidth > 0, s.skipped
        held.append(backend._scratch)
    first = held[0]
    assert first is not None and first.numel() * 4 >= reserve
    assert all(h is first for h in held[:-1])  # one buffer for every point
    assert held[-1] is None  # given back after the sweep's last point


def test_a_points_arrays_are_disjoint_and_page_aligned():
    import torch

    buf = torch.empty(bandwidth.buffer_bytes("triad", 1 * MiB + 4) // 4)
    n = bandwidth.elements(1 * MiB + 4, 3)
    a, b, c = bandwidth.arrays_of(buf, 3, n)
    assert a.numel() == b.numel() == c.numel() == n
    ptrs = [x.data_ptr() - buf.data_ptr() for x in (a, b, c)]
    assert all(p % 4096 == 0 for p in ptrs)
    assert ptrs[0] + 4 * n <= ptrs[1] and ptrs[1] + 4 * n <= ptrs[2] and ptrs[2] + 4 * n <= 4 * buf.numel()
