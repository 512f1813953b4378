"""Shared fixtures of the probe tests (imported by name: `from probe_fixtures import cpu_backend`)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def cpu_backend():
    """The real CPU backend (torch on this machine)."""
    from rooftop.probes.backend import select_backend

    return select_backend("cpu")
