"""Which runs get two workers: the whole default suite only; benchmarks, GPU tests, named files, -s and an
explicit -n stay as asked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from parallel import DEFAULT_MARKERS, WORKERS, parallel_workers

WHOLE = pytest.Config.ArgsSource.TESTPATHS


def config(args_source=WHOLE, xdist=True, **options):
    opts = {"numprocesses": None, "capture": "fd", "usepdb": False, "markexpr": DEFAULT_MARKERS, **options}
    return SimpleNamespace(args_source=args_source, getoption=lambda name, default=None: opts.get(name, default),
                           pluginmanager=SimpleNamespace(hasplugin=lambda name: xdist and name == "xdist"))


def test_the_whole_default_suite_gets_the_workers(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert parallel_workers(config()) == WORKERS == 2


@pytest.mark.parametrize("cfg", [
    config(args_source=pytest.Config.ArgsSource.ARGS),  # pytest tests/test_units.py
    config(markexpr="bench"), config(markexpr="gpu"),  # figures, and the GPU's own run
    config(capture="no"), config(usepdb=True), config(numprocesses=0), config(numprocesses=4),
    config(xdist=False),  # -p no:xdist, or not installed
], ids=["named-files", "bench", "gpu", "-s", "--pdb", "-n0", "-n4", "no-xdist"])
def test_every_other_run_stays_as_asked(cfg, monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert parallel_workers(cfg) == 0


def test_one_core_runs_in_one_process(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0}, raising=False)
    assert parallel_workers(config()) == 0
