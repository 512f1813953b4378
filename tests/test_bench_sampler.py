"""Benchmark (run on demand: `python3 -m pytest -m bench -s tests/test_bench_sampler.py`).

Targets: the sampler at 10 Hz costs under 1% of one core; at 4 Hz (the app's rate), with GPM, the
processes on each GPU and a worker thread per GPU, under 1% as well. Prints the figures; asserts only
that it sampled, never a time.
"""

from __future__ import annotations

import time

import psutil
import pytest

import os
from types import SimpleNamespace

from fake_nvml import COPY_GPM, FakeNVML
from rooftop.probes.telemetry import Sampler


def _cpu_share(sampler: Sampler, seconds: float) -> tuple[float, int]:
    proc = psutil.Process()
    t0, c0 = time.monotonic(), proc.cpu_times()
    with sampler:
        time.sleep(seconds)
    t1, c1 = time.monotonic(), proc.cpu_times()
    used = (c1.user - c0.user) + (c1.system - c0.system)
    return 100 * used / (t1 - t0), len(sampler.history())


@pytest.mark.bench
@pytest.mark.parametrize("source", ["cpu (psutil)", "fake nvml + cpu"])
def test_sampler_cost_at_10_hz(source: str) -> None:
    nvml = FakeNVML(names=["NVIDIA H200"] * 8) if "nvml" in source else None
    sampler = Sampler(interval=0.1, nvml=nvml, capacity=1000)
    share, n = _cpu_share(sampler, 10.0)
    print(f"\nsampler at 10 Hz, {source}: {share:.2f}% of one core over 10 s ({n} snapshots; target < 1%)")
    assert n >= 90


@pytest.mark.bench
@pytest.mark.parametrize("gpus", [1, 8])
def test_sampler_cost_at_4_hz_with_gpm(gpus: int) -> None:
    """The app's rate: every NVML field, GPM's pair of samples and the processes, each GPU on its worker."""
    nvml = FakeNVML(names=["NVIDIA H200"] * gpus, gpm=COPY_GPM)
    for i in range(gpus):
        nvml.processes[i] = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=2**30)]
    sampler = Sampler(interval=0.25, nvml=nvml, capacity=1000)
    share, n = _cpu_share(sampler, 10.0)
    last = sampler.latest()
    print(f"\nsampler at 4 Hz, {gpus} fake GPU(s) with GPM + processes + cpu: {share:.2f}% of one core over 10 s "
          f"({n} snapshots; target < 1%)")
    assert n >= 36 and last is not None and last.gpus[0].dram_bandwidth is not None
