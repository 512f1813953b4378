"""`rooftop profile -- torchrun … train.py`: torch's own launcher starts the ranks, each under the profiler.

No process management of rooftop's own: the command's torchrun options are
parsed by torchrun's parser (`torch.distributed.run.get_args_parser`) and the
launch is `torch.distributed.run.run`, with one change: each rank runs
`python -m rooftop.probes.rankrun DIR STEPS script.py ARGS…`, which runs the
script as `rooftop profile -- python script.py` does and writes that rank's
trace to DIR/rank-N.trace.json. torch is imported only when a launch starts.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RANK_MODULE = "rooftop.probes.rankrun"
TRACE_NAME = "rank-{rank}.trace.json"
_TRACE = re.compile(r"rank-(\d+)\.trace\.json$")


def is_torchrun(argv: Sequence[str]) -> bool:
    """`torchrun …`, or `python -m torch.distributed.run …`."""
    args = list(argv)
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        return False
    if Path(args[0]).name == "torchrun":
        return True
    return Path(args[0]).name.startswith("python") and args[1:3] == ["-m", "torch.distributed.run"]


def torchrun_args(argv: Sequence[str]) -> list[str]:
    """The arguments after `torchrun` (or after `python -m torch.distributed.run`)."""
    args = list(argv)
    if args and args[0] == "--":
        args = args[1:]
    return args[1:] if Path(args[0]).name == "torchrun" else args[3:]


@dataclass(frozen=True)
class Launched:
    """What a launch left: one trace per rank that wrote one, and the ranks per node torchrun was given."""

    traces: tuple[Path, ...]
    nproc_per_node: int | None


def run_torchrun(argv: Sequence[str], out_dir: str | Path, steps: int = 3) -> Launched:
    """Launch the job with torch's launcher, each rank profiled; NotPython / ProgramFailed as run_script's."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    from .profiler import NotPython, ProgramFailed

    try:
        parser = get_args_parser()
        parser.prog = "torchrun"
        opts = parser.parse_args(torchrun_args(argv))
    except SystemExit:
        raise NotPython("torchrun's options are not valid (see `torchrun --help`)") from None
    if opts.no_python:
        raise NotPython("torchrun --no-python runs a program that is not Python; rooftop profiles Python programs")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    script = ["-m", opts.training_script] if opts.module else [opts.training_script]
    opts.training_script_args = [str(out), str(steps), *script, *opts.training_script_args]
    opts.training_script, opts.module = RANK_MODULE, True
    try:
        run(opts)
    except ChildFailedError as exc:
        # the rank that failed on its own (exit status > 0) before those the launcher then stopped (a signal)
        rank, first = min(exc.failures.items(), key=lambda kv: (not (kv[1].exitcode or 0) > 0, kv[0])) \
            if exc.failures else ("?", None)
        code = first.exitcode if first is not None else 1
        raise ProgramFailed(f"{' '.join(script)} failed on rank {rank} (exit status {code}); nothing to show",
                            code or 1) from None
    finally:
        sys.stdout.flush()
    traces = sorted((p for p in out.iterdir() if _TRACE.search(p.name)), key=lambda p: int(_TRACE.search(p.name)[1]))
    n = str(opts.nproc_per_node)
    return Launched(tuple(traces), int(n) if n.isdigit() else None)
