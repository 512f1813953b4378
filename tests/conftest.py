"""Markers: `bench` and `gpu` tests stay out of a plain `pytest` run.

Run them on purpose with `-m bench` or `-m gpu` (scripts/gpu-check.sh does the
latter); `gpu` tests also skip themselves where torch sees no CUDA device.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("markexpr"):
        return  # the user chose with -m
    for item in items:
        for name in ("bench", "gpu"):
            if name in item.keywords:
                item.add_marker(pytest.mark.skip(reason=f"{name} test: run with -m {name}"))


@pytest.fixture(scope="session")
def cpu_backend():
    from rooftop.probes.backend import select_backend

    return select_backend("cpu")
