"""`rooftop comm`: collectives over local ranks, their algbw / busbw and α-β fit, kept as a run.

Kept out of cli.py so the command line's module stays light: torch is imported
only when the sweep starts (probes.comm).
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from rooftop.models.comm import COLLECTIVES, comm_points, fit_points
from rooftop.models.safetext import safe_text
from rooftop.models.units import fmt_bytes, fmt_count, fmt_time
from rooftop.store.comms import COMM_PLAN, comm_device_info
from rooftop.tui.commands.common import add_db_option
from rooftop.tui.render.comm import comm_json, comm_report
from rooftop.tui.render.jsonout import print_json
from rooftop.tui.render.report import make_console
from rooftop.tui.services.keeper import RunKeeper
from rooftop.tui.services.stopsignals import stop_on_signals


def add_comm_command(sub: Any) -> None:
    """Add the `comm` subcommand to the CLI's subparsers."""
    cm = sub.add_parser(
        "comm", help="measure collectives across local ranks (all-reduce, all-gather, …): busbw and α-β",
        description="Start ranks as torchrun does (env:// rendezvous on 127.0.0.1), time all-reduce, all-gather, "
                    "reduce-scatter, broadcast and send/recv from 8 B to 256 MiB by the probes' protocol, and print "
                    "per collective: size, time, algbw, busbw (nccl-tests' definitions), then the α-β fit "
                    "t = α + S/β and S* = α·β where the latency roof meets the bandwidth roof. Progress goes to stderr.",
    )
    cm.add_argument("--backend", choices=("gloo", "nccl"), default="gloo",
                    help="gloo: ranks on the CPUs (default); nccl: one rank per local GPU")
    cm.add_argument("--world", type=int, metavar="N",
                    help="ranks (default: 2 for gloo, every GPU for nccl; gloo allows up to 2 per CPU, 64 at most)")
    cm.add_argument("--plan", choices=("quick", "full"), default="quick",
                    help="quick: 6 sizes, 8 B … 256 MiB (default); full: ×4 steps, 14 sizes")
    cm.add_argument("--max-size", metavar="BYTES",
                    help="leave out messages larger than this (e.g. 1M, 64K; sizes in bytes, K/M/G binary)")
    cm.add_argument("--port", type=int, default=0, metavar="PORT",
                    help="the rendezvous port on 127.0.0.1 (default: a free one)")
    cm.add_argument("--json", action="store_true", help="print {points, fits, …} as JSON (SI units)")
    cm.add_argument("--no-save", action="store_true", help="do not keep this run in the store")
    add_db_option(cm)
    cm.set_defaults(func=cmd_comm)


def cmd_comm(args: argparse.Namespace) -> int:
    cancel = threading.Event()
    with stop_on_signals(cancel) as stopped:
        try:
            status = _comm(args, cancel)
        except KeyboardInterrupt:  # Ctrl-C: run_comm stopped the ranks; _comm kept the run as cancelled
            sys.stderr.write("\nrooftop comm: interrupted; the ranks are stopped\n")
            return 130
        return 128 + stopped[0] if stopped else status


def _comm(args: argparse.Namespace, cancel: threading.Event) -> int:
    # deferred: the rank launcher (subprocess, ctypes: ~25 ms of imports), only when comm runs
    from rooftop.probes.comm import CommError, build_comm_plan, run_comm

    plan = build_comm_plan(args.backend, args.world, args.plan, args.port, max_size=args.max_size)  # or CommError
    err = make_console(stderr=True)
    err.print(f"rooftop comm: {plan.name} plan, {plan.backend} × {plan.world} ranks, "
              f"{fmt_count(plan.points, 'point')} ({', '.join(COLLECTIVES[c].split(' (')[0] for c in plan.collectives)})")
    for note in plan.notes:
        err.print(f"rooftop comm: note: {note}", style="yellow")
    keeper = RunKeeper(getattr(args, "db", None), save=not args.no_save,
                       on_error=lambda exc, _begun: err.print(safe_text(f"rooftop comm: warning: the run is not kept in the store: {exc}"),
                                                              style="yellow"),
                       on_beside=lambda msg: err.print(safe_text(f"rooftop comm: warning: {msg}"), style="yellow"))
    if keeper.save:
        # deferred: torch (seconds to load), only for the kept run's versions
        import torch

        keeper.begin(comm_device_info(plan.backend, plan.world, _device_name(plan.backend), plan.name),
                     plan=COMM_PLAN, backend=plan.backend, versions={"torch": torch.__version__})

    def progress(sample: Any, done: int) -> None:
        keeper.add([sample])
        t = fmt_time(sample.time_s) if sample.time_s else f"skipped: {sample.skipped}"
        err.print(f"  [{done}/{plan.points}] {sample.family} {fmt_bytes(sample.bytes)}: {t}")

    try:
        result = run_comm(plan, on_point=progress, cancel=cancel)
    except CommError:  # the ranks could not meet: said by the exit map
        keeper.finish("failed")
        raise
    except BaseException:
        keeper.finish("cancelled")
        raise
    keeper.finish(result.status)
    return _report(args, plan, result, err, keeper.run_id)


def _device_name(backend: str) -> str:
    if backend == "nccl":
        # deferred: torch (seconds to load), only to name an nccl run's GPU
        import torch

        return str(torch.cuda.get_device_name(0))
    # deferred: the CPU's facts reader (~8 ms of imports), only to name a gloo run's CPU
    from rooftop.probes.devinfo import cpu_name

    return cpu_name()


def _report(args: argparse.Namespace, plan: Any, result: Any, err: Any, run_id: str | None) -> int:
    points = comm_points(result.samples)
    fits = fit_points(points)
    err.print(f"rooftop comm: {len(points)} points in {result.wall_s:.1f} s"
              + (f" — {result.status}" + (f": {result.error}" if result.error else "")
                 if result.status != "complete" else "")
              + (f"; saved as run {run_id[:8]}" if run_id else ""))
    code = 0 if result.status == "complete" else (130 if result.status == "cancelled" else 1)
    if args.json:
        print_json({
            "backend": plan.backend, "world": plan.world, "plan": plan.name, "dtype": "fp32",
            **comm_json(points, fits), "notes": list(plan.notes),
            "wall_s": result.wall_s, "status": result.status, "error": result.error or None, "run_id": run_id,
            "time": "the slowest rank's, median of the protocol's samples",
        })
        return code
    make_console().print(comm_report(points, fits, plan.backend))
    return code


