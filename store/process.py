"""Is the process that owns a `running` run still alive?

A run records its host, pid and a start token (the process's start time).
When the store opens, a `running` run on this host whose process is gone
was killed mid-run: it is marked `interrupted` and its samples are kept.
The token guards against pid reuse: a new process with the same pid has
another start time. Runs of other hosts are left alone (we cannot see them).
"""

from __future__ import annotations

import os
import socket


def host_name() -> str:
    return socket.gethostname()


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name; None where /proc is unavailable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def process_token(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux); '' where unknown."""
    fields = _proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else ""


def is_alive(pid: int, token: str = "") -> bool:
    """True when `pid` runs and, if a token is given and can be checked, is the same process."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except OSError:
        return False
    fields = _proc_stat(pid)
    if fields is None:
        return True  # no /proc: the signal check is all we have
    if fields[0] in ("Z", "X"):  # a zombie is a dead process not yet reaped
        return False
    return not token or len(fields) <= 19 or fields[19] == token
