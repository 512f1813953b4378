"""`rooftop profile -- torchrun … train.py`: torch's own launcher starts the ranks, each under the profiler.

No process management of rooftop's own: the command's torchrun options are
parsed by torchrun's parser (`torch.distributed.run.get_args_parser`) and the
launch is `torch.distributed.run.run`, with one change: each rank runs
`python -m rooftop.probes.rankrun DIR STEPS script.py ARGS…`, which runs the
script as `rooftop profile -- python script.py` does and writes that rank's
trace to DIR/rank-N.trace.json. torch is imported only when a launch starts.

A stop signal (SIGTERM, SIGINT, SIGHUP) ends the launch as torch's agent ends
a job it is told to stop: it passes the signal on to the ranks, which die of
it at once (rankrun), and waits for them. The launch then raises Stopped,
naming the signal and the traces the ranks had written; torch's own log
folder goes where the caller says, not into the system's temporary folder.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .profiler import NotPython, ProgramFailed, partial_path

RANK_MODULE = "rooftop.probes.rankrun"
TRACE_NAME = "rank-{rank}.trace.json"
_TRACE = re.compile(r"rank-(\d+)\.trace\.json$")
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")


class Stopped(Exception):
    """A stop signal ended the launch, the ranks stopped: `traces`, those they had written (whole, each one);
    `launched` False when it came before the launch began (no rank was started)."""

    def __init__(self, signum: int, traces: tuple[Path, ...] = (), launched: bool = True) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum, self.traces, self.launched = signum, traces, launched


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


def run_torchrun(argv: Sequence[str], out_dir: str | Path, steps: int = 3, log_dir: str | Path | None = None,
                 stopped: Sequence[int] = ()) -> Launched:
    """Launch the job with torch's launcher, each rank profiled; NotPython / ProgramFailed as run_script's, and
    Stopped for a stop signal. `log_dir`: torch's log folder, where torchrun is given no --log-dir and no
    --redirects or --tee (whose logs are the user's to read); `stopped`: stop signals a caller took before
    this call (then no rank is started)."""
    # deferred: torch, only when a launch starts (`rooftop --help` loads this module)
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

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
    if opts.log_dir is None and log_dir is not None and opts.redirects == "0" and opts.tee == "0":
        opts.log_dir = str(log_dir)  # torch's default: a torchelastic_* folder it never removes (kept for logs asked for)
    theirs = _take_stop_signals(opts)
    before = {t.name: t.stat().st_mtime_ns for t in _traces(out)}  # a reused --save-trace folder's old ones
    got = list(stopped)
    quiet = logging.root.manager.disable

    def stop(signum: int, _frame: Any) -> None:
        got.append(signum)
        if len(got) == 1:  # the first stops the job; the caller says so in one line, torch's agent in many: not
            logging.disable(logging.WARNING)
            raise SignalException(f"Process {os.getpid()} got signal: {signum}", sigval=signal.Signals(signum))

    main = threading.current_thread() is threading.main_thread()  # signals can be handled there only
    saved = {sig: signal.getsignal(sig) for sig in {*_signals(STOP_SIGNALS), *theirs}} if main else {}
    failed = None
    try:
        try:
            for sig in _signals(STOP_SIGNALS) if main else ():
                signal.signal(sig, stop)
            if not got:
                run(opts)
        except ChildFailedError as exc:
            failed = exc
    except SignalException as exc:  # ours, or torch's for a signal of its own (--signals-to-handle)
        if not got:
            got.append(int(exc.sigval))
    finally:
        for sig, handler in saved.items():  # torch leaves its handlers in place
            signal.signal(sig, handler)
        logging.disable(quiet)
        sys.stdout.flush()
    if got:
        for part in out.glob(partial_path(out / TRACE_NAME.format(rank="*")).name):  # one a rank was writing
            part.unlink(missing_ok=True)
        raise Stopped(got[0], _traces(out, before), launched=not stopped)
    if failed is not None:
        # the rank that failed on its own (exit status > 0) before those the launcher then stopped (a signal)
        rank, first = min(failed.failures.items(), key=lambda kv: (not (kv[1].exitcode or 0) > 0, kv[0])) \
            if failed.failures else ("?", None)
        code = first.exitcode if first is not None else 1
        raise ProgramFailed(f"{' '.join(script)} failed on rank {rank} (exit status {code}); nothing to show",
                            code or 1)
    n = str(opts.nproc_per_node)
    return Launched(_traces(out, before), int(n) if n.isdigit() else None)


def _traces(out: Path, before: dict[str, int] | None = None) -> tuple[Path, ...]:
    """The rank traces in `out`, by rank; with `before` (name → mtime), only those written since."""
    found = ((int(m[1]), p) for p in out.iterdir() if (m := _TRACE.search(p.name))
             and (before is None or before.get(p.name) != p.stat().st_mtime_ns))
    return tuple(p for _, p in sorted(found, key=lambda rank_path: rank_path[0]))


def _signals(names: Sequence[str]) -> list[signal.Signals]:
    return [getattr(signal, n) for n in names if isinstance(getattr(signal, n, None), signal.Signals)]


def _take_stop_signals(opts: Any) -> list[signal.Signals]:
    """The stop signals are handled here, the others of --signals-to-handle by torch as it would (SIGQUIT
    where none is left: torch must be given one); the signals torch will handle."""
    names = [n.strip() for n in str(opts.signals_to_handle).split(",") if n.strip()]
    opts.signals_to_handle = ",".join(n for n in names if n not in STOP_SIGNALS) or "SIGQUIT"
    return _signals(opts.signals_to_handle.split(","))
