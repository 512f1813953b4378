"""Start a program as a terminal would, so that Ctrl-C (SIGINT) reaches it whatever the test runner's state.

A process inherits its parent's ignored signals and its blocked-signal mask. A test runner's worker can be
started with SIGINT ignored (a background job of a non-interactive shell) or call Popen while a thread has it
blocked; the program would then never see the Ctrl-C its test sends, and the test would time out for a reason
that is not the program's. `popen_kwargs()` gives Popen a preexec_fn that puts SIGINT back to its default and
unblocks it in the child before the program starts.
"""

from __future__ import annotations

import signal
from typing import Any


def _terminal_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def popen_kwargs() -> dict[str, Any]:
    return {"preexec_fn": _terminal_sigint}
