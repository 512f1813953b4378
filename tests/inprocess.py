"""`rooftop ARGS…` run in the test's own process: the command line's main(argv), its output captured.

For tests of what a command prints and returns, not of the process around it: a subprocess would add an
interpreter start and the imports (torch's among them: seconds each on a busy CI box) and nothing asserted.
Tests of signals, of the real entry point's process, or of torch's launcher keep their subprocesses.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess

from rooftop.tui.cli import main

PIPE_ENV = {"COLUMNS": "100", "NO_COLOR": "1"}  # what the subprocess tests give theirs: a 100-column pipe


def run_main(*args: str, **env: str) -> subprocess.CompletedProcess:
    """main(args) with stdout and stderr captured and PIPE_ENV (and `env`) set while it runs: a
    CompletedProcess as `rooftop ARGS…` in a 100-column pipe gives one. Usable from module-scoped fixtures."""
    out, err = io.StringIO(), io.StringIO()
    with _environ({**PIPE_ENV, **env}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as exc:  # argparse's own usage errors
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return subprocess.CompletedProcess(["rooftop", *args], rc, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _environ(values: dict[str, str]):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

