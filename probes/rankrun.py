"""One rank of a job launched by `rooftop profile -- torchrun …`: its script under the profiler, its own trace.

Run by torch's launcher as `python -m rooftop.probes.rankrun DIR STEPS script.py ARGS…` (or `… -m module
ARGS…`); the trace goes to DIR/rank-N.trace.json, N being the launcher's RANK.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .lifeline import die_with_parent
from .profiler import NotPython, ProgramFailed, run_script
from .torchrun import TRACE_NAME


def main(argv: list[str]) -> int:
    die_with_parent(os.getppid())  # a killed launcher must not leave this rank waiting on its peers forever
    if len(argv) < 3 or not argv[1].isdigit():
        sys.stderr.write("usage: python -m rooftop.probes.rankrun DIR STEPS script.py ARGS…\n")
        return 2
    out, steps, program = Path(argv[0]), int(argv[1]), argv[2:]
    path = out / TRACE_NAME.format(rank=int(os.environ.get("RANK", "0")))
    try:
        run_script(program, path, steps=steps)
    except NotPython as exc:
        sys.stderr.write(f"rooftop profile: {exc}\n")
        return 2
    except ProgramFailed as exc:
        return exc.status
    return 0


def leave(code: int) -> None:
    """End the rank once its script is done and its trace written: the script's exit handlers run, the output
    is flushed, and the interpreter's teardown is skipped. That teardown is where torch can deadlock: a DDP
    model freed after its gloo group was destroyed frees the group's last reference in the reducer, which
    joins the group's worker thread while holding the GIL the thread waits for (seen in 3 of 9 loaded runs);
    the rank then never exits and the whole job waits on it."""
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed or broken pipe: nothing more to say
                pass
        os._exit(code)


if __name__ == "__main__":
    leave(main(sys.argv[1:]))
