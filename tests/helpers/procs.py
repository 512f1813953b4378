"""Processes a test started and must leave nothing of: end one in order, and see that nothing of a job is left.

`finish` collects a process's output (killing it only if it outlived the wait, so a failing test leaves no
orphan); `none_left` says which of a job's processes, as walked in /proc while it ran, are still alive.
"""

from __future__ import annotations

import subprocess
import time

import psutil


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    """Its stdout and stderr once it has ended; killed if it is still running after `timeout` s."""
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def family(top: psutil.Process) -> list[psutil.Process]:
    """`top` and every process below it, now."""
    return [top, *top.children(recursive=True)]


def none_left(procs: list[psutil.Process], wait_s: float = 10) -> list[int]:
    """The pids of `procs` still alive (zombies aside) after up to `wait_s` s."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p.pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)
