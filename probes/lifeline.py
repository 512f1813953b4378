"""A spawned rank ends with the process that started it, even when that one is SIGKILLed.

A parent killed with SIGKILL runs no cleanup, so its ranks would go on until their own collectives time
out (seconds, or never for a rank waiting at a rendezvous). Linux's parent-death signal ends a rank at
once; where there is none, a daemon thread sees the parent change (the rank is re-parented) and exits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
POLL_S = 0.2


def _death_signal() -> bool:
    """Ask the kernel for SIGKILL when the parent goes (Linux); False where that cannot be had."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(POLL_S)
    os._exit(1)  # the parent is gone: nobody reads this rank's results any more


def die_with_parent(parent_pid: int) -> None:
    """Call first thing in a spawned rank, with the pid of the process that started it.

    The kernel's signal covers the common case; the watcher covers the rest, and a parent that died
    before this call (the rank was importing torch) is seen at once.
    """
    if os.getppid() != parent_pid:
        os._exit(1)
    _death_signal()
    threading.Thread(target=_watch, args=(parent_pid,), name="rooftop-lifeline", daemon=True).start()
