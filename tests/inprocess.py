"""`rooftop ARGS…` run in the test's own process: the command line's main(argv), its output captured.

For tests of what a command prints and returns, not of the process around it: a subprocess would add an
interpreter start and the imports (torch's among them: seconds each on a busy CI box) and nothing asserted.
Tests of signals, of the real entry point's process, or of torch's launcher keep their subprocesses.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from rooftop.tui.cli import main

Rooftop = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def rooftop_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Rooftop:
    """rooftop_cli(*args) → a CompletedProcess as `rooftop ARGS…` in a 100-column pipe would give one
    (returncode, stdout, stderr), from main(argv) in this process."""
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")

    def run(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()  # what came before is not this command's
        try:
            rc = main(list(args))
        except SystemExit as exc:  # argparse's own usage errors
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["rooftop", *args], rc, out, err)

    return run
