"""Shared fixtures of the probe tests (imported by name: `from probe_fixtures import cpu_backend`)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def cpu_backend():
    """The real CPU backend (torch on this machine)."""
    from rooftop.probes.backend import select_backend

    return select_backend("cpu")


def tiny_sizes():  # a probes.plan.Sizes
    """A plan's sizes small enough to run every probe on the CPU in a second or two."""
    from rooftop.models.units import KiB
    from rooftop.probes.fma import FmaSweep
    from rooftop.probes.gemm import GemmSweeps
    from rooftop.probes.plan import Sizes
    from rooftop.probes.timing import Protocol

    return Sizes(
        protocol=Protocol(window_s=1e-4, repeats=3, max_calls=3, warmups=1),
        working_sets=(16 * KiB, 64 * KiB),
        gemm=GemmSweeps(squares=(32,), nk=32, ms=(16,), dtypes=("fp32", "fp8")),
        fma=FmaSweep(reps=(1, 4), dtypes=("fp32",)),
        fma_elements=1 << 14,
    )
