"""SIGHUP and SIGTERM end a measurement as Ctrl-C does, in the CLI and in the app.

SIGHUP is what a process gets when its SSH session closes; SIGTERM is `kill`'s, a job
scheduler's, systemd's and `timeout`'s. Killed by their default action, a run kept no
ceilings and printed nothing. Here they cancel the run instead: it stops at the probes'
next check, is kept `cancelled` with its ceilings, and what was asked for is printed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Callable, Iterator

STOP_SIGNALS = ("SIGHUP", "SIGTERM")


def stop_signals() -> list[signal.Signals]:
    """The stop signals this platform has (no SIGHUP on Windows)."""
    return [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]


@contextlib.contextmanager
def stop_on_signals(cancel: threading.Event, interrupt: bool = False) -> Iterator[list[int]]:
    """While inside, SIGHUP and SIGTERM set `cancel`; yields the signals received (exit 128 + the first).

    The handler raises nothing: an exception could land in the store's final writes. `interrupt` takes
    SIGINT the same way, for work that must hand in what it has rather than unwind (a fleet's rank: torchrun
    passes Ctrl-C on to its ranks and kills them 30 s later).
    """
    got: list[int] = []

    def handle(signum: int, _frame: Any) -> None:
        if not got and signum == getattr(signal, "SIGHUP", None):
            leave_terminal()
        got.append(signum)
        cancel.set()

    sigs = stop_signals() + ([signal.SIGINT] if interrupt else [])
    old = {sig: signal.signal(sig, handle) for sig in sigs}
    try:
        yield got
    finally:
        for sig, before in old.items():
            signal.signal(sig, before)


def on_stop_signals(loop: Any, stop: Callable[[int], None]) -> Callable[[], None]:
    """Call `stop(signum)` in the asyncio `loop` on SIGHUP / SIGTERM (the app); returns the undo.

    Where the loop cannot take signal handlers (not the main thread), nothing is installed.
    """
    installed = []
    for sig in stop_signals():
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop, int(sig))
            installed.append(sig)

    def undo() -> None:
        for sig in installed:
            with contextlib.suppress(RuntimeError, ValueError):  # the loop is already closed
                loop.remove_signal_handler(sig)

    return undo


def leave_terminal() -> None:
    """After SIGHUP the terminal is gone and each write to it fails (EIO): point stdin, stdout and
    stderr that are a terminal at /dev/null, so the run still ends in order. A file or a pipe on
    stdout is left alone and still gets the output."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if os.isatty(stream.fileno()):
                os.dup2(devnull, stream.fileno())
    os.close(devnull)
