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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
