"""`rooftop measure`: run a probe plan with a progress bar, then the ceilings and the measured roofline.

Kept out of cli.py so the command line's module stays light: torch is imported
only inside cmd_measure, when a measurement really starts.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any

from rooftop.models.calibrate import label_of
from rooftop.models.plotdata import intensity_span, roof_series
from rooftop.models.safetext import safe_text
from rooftop.models.units import fmt_count
from rooftop.tui.commands.common import UsageError, add_db_option, add_out_option, command_text, plot_size
from rooftop.tui.commands.fleet import cmd_all_gpus, cmd_fleet
from rooftop.tui.render.chart import roofline_text
from rooftop.tui.render.jsonout import print_json
from rooftop.tui.render.measure_report import kept_words, measure_report, point_series
from rooftop.tui.render.report import make_console, trimmed
from rooftop.tui.services.stopsignals import stop_on_signals


def add_measure_command(sub: Any) -> None:
    """Add the `measure` subcommand to the CLI's subparsers."""
    ms = sub.add_parser(
        "measure", help="measure this machine's roofline (bandwidth, GEMM, FMA sweep, launch)",
        description="Measure the local GPU's (or CPU's) ceilings by the reference protocol, then print the "
                    "ceilings (value, case, stability) and the measured roofline. Progress goes to stderr. "
                    "Exit status 1 when the measurement failed or the run could not be kept in the store "
                    "(the report is printed all the same), 130 when interrupted.",
    )
    ms.add_argument("--plan", choices=("quick", "full"), default="quick", help="quick (default) or full sweeps")
    ms.add_argument("--device", metavar="DEV", help="cuda:N or cpu (default: the first GPU, else the CPU)")
    ms.add_argument("--only", metavar="LIST", help="comma-separated subset of: bandwidth,cache,gemm,fma,launch")
    ms.add_argument("--threads", type=int, metavar="N", help="CPU only: torch threads (default: torch's, one per core)")
    ms.add_argument("--json", action="store_true", help="print {profile, samples, device_info} as JSON (SI units)")
    ms.add_argument("--no-plot", action="store_true", help="omit the roofline plot")
    ms.add_argument("--width", type=plot_size, metavar="COLS", help="plot width (default: the terminal's)")
    ms.add_argument("--height", type=plot_size, metavar="ROWS", help="plot height (default: the terminal's, ≤ 40)")
    ms.add_argument("--no-save", action="store_true", help="do not keep this run in the store")
    add_out_option(ms, ".html the report (the ceilings with their conditions, the roofline, the curves), "
                       ".svg or .png the measured roofline")
    fleet = ms.add_mutually_exclusive_group()
    fleet.add_argument("--all-gpus", action="store_true",
                       help="every visible GPU at once, one process each; kept as one fleet run")
    fleet.add_argument("--fleet", action="store_true",
                       help="in each rank of a torchrun job: measure the rank's GPU (LOCAL_RANK), or its share of "
                            "the CPUs with --device cpu; rank 0 gathers one fleet run")
    ms.add_argument("--wait", type=float, default=300.0, metavar="S",
                    help="fleet: how long to wait for the other ranks once one is done (default 300)")
    add_db_option(ms)
    ms.set_defaults(func=cmd_measure)


def _measure_plot(cal: Any, samples: list[Any], width: int | None, height: int | None) -> str:
    """The measured roofline with the GEMM / FMA points, as text."""
    prof = cal.profile
    if not prof.peak or not prof.bandwidth:
        return "(no roofline: the run measured no compute roof or no bandwidth)"
    points = point_series(samples)
    span = intensity_span([prof], [x for s in points for x in s.xs], lo=0.01)
    series = roof_series(prof, prof.paths(), prof.levels(), span) + points
    return trimmed(roofline_text(series, f"measured roofline: {prof.name}", width, height, max_height=40))


def cmd_measure(args: argparse.Namespace) -> int:
    cancel = threading.Event()
    fleet = bool(args.fleet or args.all_gpus)  # many processes: Ctrl-C too must let each hand in what it has
    with stop_on_signals(cancel, interrupt=fleet) as stopped:  # from the start: torch alone takes seconds to load
        status = _measure(args, cancel, stopped)
        return 128 + stopped[0] if stopped else status  # as a shell reports a death by that signal


def _measure(args: argparse.Namespace, cancel: threading.Event, stopped: list[int]) -> int:
    """Select the device, build the plan, measure; `cancel` is set, and `stopped` filled, by a stop signal."""
    # deferred: the measuring half (rich.progress, the probes, telemetry: ~100 ms of imports), only to measure
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rooftop.probes.plan import parse_only

    only = parse_only(args.only)  # PlanError (bad input) for a probe rooftop has not
    if args.out:  # before minutes of measuring: a bad --out costs nothing
        # deferred: the share modules (xml.etree, ~20 ms of imports), only with --out
        from rooftop.tui.share.out import out_target

        if args.fleet or args.all_gpus:
            raise UsageError("--out writes one device's measurement; a fleet's is in `rooftop show RUN`")
        out_target(args.out)
    if args.fleet or args.all_gpus:
        return _measure_fleet(args, only, cancel, stopped)
    # deferred: the measuring half (the probes, telemetry: ~100 ms of imports), only to measure
    from rooftop.probes.backend import select_backend
    from rooftop.probes.plan import build_plan

    backend = select_backend(args.device, args.threads)  # BackendError (bad input) for a device not here
    plan = build_plan(backend, args.plan, only)
    err = make_console(stderr=True)
    if stopped:  # while torch loaded: nothing was measured, no run begun
        err.print(f"rooftop measure: stopped by {signal.Signals(stopped[0]).name} before the measurement began")
        return 1
    err.print(f"rooftop measure: {plan.name} plan, {fmt_count(len(plan.steps), 'point')} on {backend.spec} "
              f"({backend.info.name})")
    for note in plan.notes:
        if "busy with other work" in note:
            err.print(f"rooftop measure: note: {note}", style="yellow")
    # deferred: the measuring half (the probes, telemetry: ~100 ms of imports), only to measure
    from rooftop.probes.telemetry import Sampler
    from rooftop.tui.services.measure import measure_run

    columns = (TextColumn("{task.description:<34}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # piped, a progress bar has nothing to redraw: it would leave only a blank line behind
    with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as bar, Sampler() as sampler:
        task = bar.add_task("starting", total=len(plan.steps))
        result = measure_run(
            plan, args.db, store=not args.no_save, sampler=sampler, cancel=cancel,
            on_sample=lambda prog, _s, _c: bar.update(task, completed=prog.done, description=prog.label),
            on_store_error=lambda msg: err.print(safe_text(f"rooftop measure: warning: {msg}"), style="yellow"),
            on_note=lambda msg: err.print(safe_text(f"rooftop measure: warning: {msg}"), style="yellow"),
        )
    return _report(args, plan, backend, result, err, signal.Signals(stopped[0]).name if stopped else None)


def _measure_fleet(args: argparse.Namespace, only: tuple[str, ...], cancel: threading.Event,
                   stopped: list[int]) -> int:
    """--all-gpus or --fleet: many devices at once, kept as one fleet run (rooftop.tui.commands.fleet)."""
    if not 1 <= args.wait <= 86400:
        raise UsageError(f"--wait {args.wait:g}: give seconds from 1 to 86400")
    run = cmd_all_gpus if args.all_gpus else cmd_fleet
    return run(args, only, cancel, stopped)


def _report(args: argparse.Namespace, plan: Any, backend: Any, result: Any, err: Any, stopped_by: str | None) -> int:
    """The run's summary on stderr, then the report or the JSON on stdout; the exit status (130 for Ctrl-C)."""
    samples, cal, wall = result.samples, result.calibration, result.wall_s
    interrupted = result.status == "cancelled"
    if result.store_error and result.run_id is not None:  # a failure after the start (the start's was told)
        err.print(safe_text(f"rooftop measure: warning: {result.store_error}"), style="yellow")  # names --db
    skipped = sum(1 for s in samples if s.skipped)
    err.print(
        f"rooftop measure: {fmt_count(len(samples), 'point')} in {wall:.1f} s "
        f"({skipped} skipped, {len(cal.unstable)} unstable)"
        + ((f" — stopped by {stopped_by}" if stopped_by else " — interrupted") + ", showing what was measured"
           if interrupted else "")
        + (f" — failed: {result.error}" if result.status == "failed" else "")
        + (f"; {kept_words(result.run_id, result.store_error, result.kept, len(samples))}"
           if result.run_id or result.store_error else "")
    )
    if result.throttled:
        n = len(result.throttled)
        err.print(f"rooftop measure: {fmt_count(n, 'point')} {'was' if n == 1 else 'were'} taken while the GPU throttled "
                  f"({', '.join(sorted({r for s in result.throttled for r in s.conditions['throttle']}))}): "
                  + ", ".join(label_of(s) for s in result.throttled[:8]), style="yellow")
    payload = {
        "profile": cal.profile.to_dict(),
        "samples": [s.to_dict() for s in samples],
        "device_info": backend.info.to_dict(),
        "plan": plan.name,
        "threads": cal.profile.threads,  # CPU: the threads torch measured with (null on a GPU)
        "notes": list(plan.notes) + list(cal.notes),
        "above_roof": [label_of(s) for s in cal.above_roof],
        "wall_s": wall,
        "interrupted": interrupted,
        "stopped_by": stopped_by,  # SIGHUP / SIGTERM, else null
        "status": result.status,
        "run_id": result.run_id,
        "throttled": [label_of(s) for s in result.throttled],
        "store_error": result.store_error or None,  # why the run is not (wholly) in the store
        "kept_samples": result.kept,  # the samples the store holds (run_id's), all of them unless store_error
    }
    if args.json:
        print_json(payload)
        _share(args, cal, samples, payload)
        return _exit_status(result)

    console = make_console()
    console.print(measure_report(cal, samples, list(plan.notes)))
    if not args.no_plot:
        sys.stdout.write("\n" + _measure_plot(cal, samples, args.width, args.height) + "\n")
    _share(args, cal, samples, payload)
    return _exit_status(result)


def _share(args: argparse.Namespace, cal: Any, samples: list[Any], payload: dict[str, Any]) -> None:
    """--out: the measured roofline as SVG or PNG, or the report (ceilings, roofline and curves, from what --json
    prints) as HTML; written after the report is printed and the run kept, so a failed write loses nothing."""
    if args.out:
        # deferred: the share modules (xml.etree, ~60 ms of imports), only with --out
        from rooftop.tui.share.charts import measure_charts
        from rooftop.tui.share.figure import chart_svg_inline
        from rooftop.tui.share.html import rooftop_version
        from rooftop.tui.share.out import Shared, share_out
        from rooftop.tui.share import reports

        sys.stdout.flush()
        charts = measure_charts(cal, samples, time.time() - float(payload["wall_s"]))
        share_out(args.out, Shared(charts, lambda: reports.measure_report(
            payload, [chart_svg_inline(c) for c in charts], version=rooftop_version(), command=command_text(args))))


def _exit_status(result: Any) -> int:
    """130 when interrupted; 1 when the measurement failed, or when the run could not be kept in the store
    (a script must know the run is not there); else 0."""
    if result.status == "cancelled":
        return 130
    return 1 if result.status == "failed" or result.store_error else 0
