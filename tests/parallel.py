"""The default suite on two pytest-xdist workers: most of its time is spent waiting on other processes
(torch's launcher and its ranks, measurements stopped by signals, the app under a pseudo-terminal), so a
second worker fills the idle core. Only the whole default suite, as the README's `python3 -m pytest` runs it:

- a run of named files or tests stays in one process (a worker's start would cost more than it saves);
- `-m bench` / `-m gpu` stay serial: benchmarks print figures and must not share the machine with tests;
- `-s` (their figures printed), `--pdb`, or an explicit `-n` / `-p no:xdist` are the user's choice.

Each test file runs whole on one worker (`--dist loadfile`): a module's shared fixture (one torchrun job, one
`rooftop comm` run) starts once, as in a serial run.
"""

from __future__ import annotations

import os

import pytest

WORKERS = 2  # measured: 2 workers on 2 cores (more only add contention to the timed tests)
DEFAULT_MARKERS = "not bench and not gpu and not slow"  # pyproject.toml's addopts


def parallel_workers(config: pytest.Config) -> int:
    """How many workers this run gets: WORKERS for the whole default suite, else 0 (serial)."""
    if not config.pluginmanager.hasplugin("xdist") or config.getoption("numprocesses", None) is not None:
        return 0
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    serial_asked = (config.getoption("capture") == "no" or config.getoption("usepdb")
                    or config.getoption("markexpr") != DEFAULT_MARKERS)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if not whole_suite or serial_asked or cpus < 2:
        return 0
    return WORKERS


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns the option into workers
def pytest_cmdline_main(config: pytest.Config) -> None:
    workers = parallel_workers(config)
    if workers and not hasattr(config, "workerinput"):
        config.option.numprocesses = workers
        config.option.dist = "loadfile"
