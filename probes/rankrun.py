"""One rank of a job launched by `rooftop profile -- torchrun …`: its script under the profiler, its own trace.

Run by torch's launcher as `python -m rooftop.probes.rankrun DIR STEPS script.py ARGS…` (or `… -m module
ARGS…`); the trace goes to DIR/rank-N.trace.json, N being the launcher's RANK.

Nothing the script made is freed before the rank ends, and no process group is. A gloo group's destructor
joins its worker threads with the GIL held; a worker that ran a collective the profiler recorded holds the
Python state it was given (the backward pass's context) and waits for the GIL to free it: the rank then never
exits, and the whole job waits on it (a third of the runs under load). So each group the script destroys is
also held in KEPT (`keep_process_groups`): a DDP model freed after `destroy_process_group()`, by the script's
own `main()` returning or as the script ends, holds no group's last reference. What the script left (its
globals, or the exception that ended it, frames and all) is held there too, and the rank leaves by os._exit,
skipping the interpreter's teardown.
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

from .lifeline import die_with_parent
from .profiler import NotPython, ProgramFailed, run_script
from .torchrun import TRACE_NAME

KEPT: list[object] = []  # what the script left, held until the rank leaves (see the module's docstring)


def main(argv: list[str]) -> int:
    die_with_parent(os.getppid())  # a killed launcher must not leave this rank waiting on its peers forever
    # A stop (Ctrl-C, SIGTERM, SIGHUP: torch's launcher passes each on) ends the rank at once, as SIGTERM's and
    # SIGHUP's default action does: no traceback per rank, no teardown to wait for; a trace is whole or absent.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if len(argv) < 3 or not argv[1].isdigit():
        sys.stderr.write("usage: python -m rooftop.probes.rankrun DIR STEPS script.py ARGS…\n")
        return 2
    out, steps, program = Path(argv[0]), int(argv[1]), argv[2:]
    path = out / TRACE_NAME.format(rank=int(os.environ.get("RANK", "0")))
    keep_process_groups()
    try:
        run_script(program, path, steps=steps, keep=KEPT)
    except NotPython as exc:
        sys.stderr.write(f"rooftop profile: {exc}\n")
        return 2
    except ProgramFailed as exc:
        return exc.status
    return 0


def keep_process_groups() -> None:
    """From now on, each process group `torch.distributed.destroy_process_group` destroys is also held in KEPT:
    destroyed (shut down, out of torch's registry) but not freed until the rank leaves (see the module's
    docstring). Called before the script runs, so that its own `from torch.distributed import …` gets this."""
    try:
        # deferred: torch, only in a profiled rank
        import torch.distributed as dist
    except ImportError:  # no torch: run_script says so
        return
    if not dist.is_available():
        return
    # deferred: torch, only in a profiled rank
    from torch.distributed import distributed_c10d as c10d

    real = c10d.destroy_process_group

    @functools.wraps(real)
    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        group = args[0] if args else kwargs.get("group")
        registry = getattr(getattr(c10d, "_world", None), "pg_map", None)  # every group: what None destroys
        KEPT.extend([group] if group is not None else list(registry or ()) or [c10d.GroupMember.WORLD])
        return real(*args, **kwargs)

    c10d.destroy_process_group = dist.destroy_process_group = destroy_process_group


def run_rank(argv: list[str]) -> NoReturn:
    """The rank from start to end: `main`, then `leave`, whatever happens (an error of rooftop's own is printed
    and ends the rank with status 1, still by `leave`)."""
    try:
        code = main(argv)
    except BaseException as exc:  # KEPT holds it (and its frames): printed here, then the rank leaves
        KEPT.append(exc)
        traceback.print_exc()
        code = 1
    leave(code)


def leave(code: int) -> NoReturn:
    """End the rank once its script is done and its trace written: the script's exit handlers run, the output
    is flushed, and the interpreter's teardown (which would free KEPT) is skipped."""
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
    run_rank(sys.argv[1:])
