"""The `rooftop` command line.

Imports stay light: `rooftop --help`, `rooftop op`, `rooftop devices` and
`rooftop plot` never load torch (a test checks it); `rooftop measure` loads it
inside cmd_measure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from rooftop.models.analysis import analyze
from rooftop.models.catalog import UnknownDevice, catalog, find_by_name, lookup_device
from rooftop.models.profile import DeviceProfile, NoRoof
from rooftop.models.spec import SpecError, op_kinds, parse_specs

FALLBACK_DEVICE = "h100"

EPILOG_OP = """\
op specs (one or more; a new op starts at each op name):
  gemm M N K [dtype] [batch=B] [out=DTYPE]   gemm m=4096 n=4096 k=4096 dtype=fp8
  gemv N K [dtype]                            a GEMM with M = 1 (batch-1 decode)
  attn b=B h=H [kv=KV] [d=D] [q=Q] t=T [flash|naive|decode] [causal] [kvdtype=fp8]
  ew N [dtype] [flops=F] [reads=R] [writes=W] elementwise (default y = a*x + b)
  fma R [N] [dtype]                            the FMA sweep at R FMAs per element
  norm ROWS COLS [dtype] [rms|layer]           softmax ROWS COLS [dtype]
numbers: 8192, 1e9, 2^20, 8k (= 8192); dtypes: fp64 fp32 tf32 fp16 bf16 fp8 int8 fp4

examples:
  rooftop op gemm 1 8192 8192 bf16 --device h100 --device h200
  rooftop op attn b=8 h=32 d=128 t=8192 decode --device h100 --measured-ms 0.55
  rooftop op gemm 4096 4096 4096 fp32 ew n=1e9 fp32 --json

Bytes and FLOPs are algorithmic: each array read or written once, an FMA is
2 FLOP, so the time shown is a lower bound T = max(W/F, Q/B). JSON is in SI
units (FLOP, bytes, seconds, FLOP/s, bytes/s).
"""


class Parser(argparse.ArgumentParser):
    """argparse that reports bad input in one line and exits with 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


class UsageError(Exception):
    """Bad input found after parsing; reported in one line with exit code 2."""


def _device_list(values: list[str] | None) -> list[str]:
    return [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]


def resolve_devices(ids: list[str], extra: dict[str, DeviceProfile] | None = None) -> list[DeviceProfile]:
    """Profiles for --device ids; with none, the detected GPU's reference profile, else h100."""
    if ids:
        return [lookup_device(i, extra) for i in ids]
    from rooftop.probes.identify import gpu_names

    for name in gpu_names():
        found = find_by_name(name)
        if found:
            sys.stderr.write(f"rooftop: using {found.id}, the reference profile for this machine's {name}\n")
            return [found]
    sys.stderr.write(
        f"rooftop: no --device given and no known GPU found; using {FALLBACK_DEVICE} (reference measurement)\n"
    )
    return [lookup_device(FALLBACK_DEVICE, extra)]


def _measured_times(raw: str | None, n_ops: int) -> list[float | None]:
    if raw is None:
        return [None] * n_ops
    try:
        vals = [float(v) for v in raw.split(",")]
    except ValueError:
        raise UsageError(f"--measured-ms {raw!r}: expected milliseconds, e.g. 0.55 or 0.55,1.2 (one per op)") from None
    if any(not (v > 0 and v < float("inf")) for v in vals):
        raise UsageError(f"--measured-ms {raw!r}: times must be positive milliseconds")
    if len(vals) == 1:
        vals = vals * n_ops
    if len(vals) != n_ops:
        raise UsageError(f"--measured-ms gives {len(vals)} times for {n_ops} ops: give one, or one per op")
    return [v / 1e3 for v in vals]


def cmd_op(args: argparse.Namespace) -> int:
    ops = parse_specs(args.spec)
    times = _measured_times(args.measured_ms, len(ops))
    devices = resolve_devices(_device_list(args.device))
    results = [[analyze(op, dev, t) for dev in devices] for op, t in zip(ops, times)]
    if args.json:
        json.dump([a.to_dict() for rows in results for a in rows], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from rooftop.tui.report import analysis_table, make_console

    console = make_console()
    for i, rows in enumerate(results):
        if i:
            console.print()
        console.print(analysis_table(rows))
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    profiles = [lookup_device(i) for i in args.ids] if args.ids else list(catalog().values())
    if args.json:
        out: list[dict[str, Any]] = []
        for p in profiles:
            d = p.to_dict()
            if "dram" in p.bandwidth:
                d["ridge"] = {path: p.ridge(path) for path in p.paths()}
            out.append(d)
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from rooftop.tui.report import devices_table, make_console, profile_detail

    console = make_console()
    if args.ids:
        for i, p in enumerate(profiles):
            if i:
                console.print()
            console.print(profile_detail(p))
    else:
        console.print(devices_table(profiles))
        console.print(
            "\nsources: ref = published measurement (seed 000 tables 3–5); datasheet = vendor dense figures. "
            "`rooftop devices ID` shows every roof with the case that produced it."
        )
    return 0


DEFAULT_PLOT_PATHS = ("fp64-tc", "fp32-fma", "bf16-tc", "fp8-tc")


def cmd_plot(args: argparse.Namespace) -> int:
    import plotext

    from rooftop.models.plotdata import intensity_span, point_series, roof_series
    from rooftop.tui.chart import draw_roofline

    devices = resolve_devices(_device_list(args.device))
    ops = parse_specs(args.op) if args.op else []
    analyses = [analyze(op, dev) for op in ops for dev in devices[:1]]
    wanted = _device_list([args.paths]) if args.paths else None
    for dev in devices:
        for p in wanted or []:
            if p != "all" and p not in dev.peak:
                raise NoRoof(f"{dev.id} has no {p} roof; it has: {', '.join(dev.paths())}")
    span = intensity_span(devices, [a.intensity for a in analyses])
    series = []
    for dev in devices:
        if wanted == ["all"]:
            paths = dev.paths()
        elif wanted:
            paths = wanted
        else:
            paths = [p for p in DEFAULT_PLOT_PATHS if p in dev.peak] + [a.path for a in analyses]
            paths = list(dict.fromkeys(paths))
        series += roof_series(dev, paths, ["dram"] + (["l2"] if "l2" in dev.bandwidth else []), span)
    series += [point_series(a) for a in analyses]
    size = os.get_terminal_size(sys.stdout.fileno()) if sys.stdout.isatty() else os.terminal_size((100, 30))
    plotext.clf()
    plotext.plotsize(args.width or size.columns, args.height or max(20, size.lines - 4))
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    title = "roofline: " + " vs ".join(f"{d.id} ({d.source})" for d in devices)
    draw_roofline(plotext, series, title, color=color)
    sys.stdout.write(plotext.build() + "\n")
    for a in analyses:
        sys.stdout.write(
            f"{a.op.describe()}: I = {a.intensity:.3g} FLOP/B on {a.path}, {a.regime}-bound on {a.device.id} "
            f"(I* = {a.ridge:.3g})\n"
        )
    return 0


def _measure_plot(cal: Any, samples: list[Any], width: int | None, height: int | None) -> str:
    """The measured roofline with the GEMM / FMA points, as text."""
    import plotext

    from rooftop.models.plotdata import intensity_span, roof_series
    from rooftop.tui.chart import draw_roofline
    from rooftop.tui.measure_report import point_series

    prof = cal.profile
    if not prof.peak or not prof.bandwidth:
        return "(no roofline: the run measured no compute roof or no bandwidth)"
    points = point_series(samples)
    span = intensity_span([prof], [x for s in points for x in s.xs], lo=0.01)
    series = roof_series(prof, prof.paths(), prof.levels(), span) + points
    size = os.get_terminal_size(sys.stdout.fileno()) if sys.stdout.isatty() else os.terminal_size((100, 30))
    plotext.clf()
    plotext.plotsize(width or size.columns, height or max(20, min(40, size.lines - 4)))
    draw_roofline(plotext, series, f"measured roofline: {prof.name}", color=sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    return plotext.build()


def cmd_measure(args: argparse.Namespace) -> int:
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rooftop.models.calibrate import calibrate
    from rooftop.probes.plan import PlanError, parse_only

    try:
        only = parse_only(args.only)
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    from rooftop.probes.backend import BackendError, select_backend
    from rooftop.probes.plan import build_plan, run_plan
    from rooftop.tui.report import make_console

    try:
        backend = select_backend(args.device, args.threads)
        plan = build_plan(backend, args.plan, only)
    except (BackendError, PlanError) as exc:
        raise UsageError(str(exc)) from None
    err = make_console(stderr=True)
    err.print(f"rooftop measure: {plan.name} plan, {len(plan.steps)} points on {backend.spec} ({backend.info.name})")
    for note in plan.notes:
        if "busy with other work" in note:
            err.print(f"rooftop measure: warning: {note}", style="yellow")
    samples = []
    interrupted = False
    start = time.perf_counter()
    columns = (TextColumn("{task.description:<34}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("starting", total=len(plan.steps))
        try:
            for prog, sample in run_plan(plan):
                samples.append(sample)
                bar.update(task, completed=prog.done, description=prog.label)
        except KeyboardInterrupt:
            interrupted = True
    wall = time.perf_counter() - start
    cal = calibrate(samples, backend.info.hardware())
    skipped = sum(1 for s in samples if s.skipped)
    err.print(
        f"rooftop measure: {len(samples)} points in {wall:.1f} s ({skipped} skipped, {len(cal.unstable)} unstable)"
        + (" — interrupted, showing what was measured" if interrupted else "")
    )
    if args.json:
        json.dump({
            "profile": cal.profile.to_dict(),
            "samples": [s.to_dict() for s in samples],
            "device_info": backend.info.to_dict(),
            "plan": plan.name,
            "notes": list(plan.notes) + list(cal.notes),
            "wall_s": wall,
            "interrupted": interrupted,
        }, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 130 if interrupted else 0
    from rooftop.tui.measure_report import measure_report

    console = make_console()
    console.print(measure_report(cal, samples, list(plan.notes)))
    if not args.no_plot:
        sys.stdout.write("\n" + _measure_plot(cal, samples, args.width, args.height) + "\n")
    return 130 if interrupted else 0


def build_parser() -> Parser:
    p = Parser(
        prog="rooftop",
        description=(
            "rooftop — a terminal roofline lab for GPU servers. It places an op (GEMM, attention, "
            "elementwise, a decode step) on a device's measured or published roofline: the regime that "
            "bounds it, the time it cannot beat, and what to do about it."
        ),
        epilog="Run `rooftop COMMAND --help` for each command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    op = sub.add_parser(
        "op", help="analyse ops on one or more devices", epilog=EPILOG_OP,
        description="Place ops on a device's roofline: W, Q, I, ridge, regime, time bound, advice.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    op.add_argument("spec", nargs="+", help=f"the op spec words (op kinds: {', '.join(op_kinds())})")
    op.add_argument("-d", "--device", action="append", metavar="ID",
                    help="device id (repeat or comma-separate for side by side); see `rooftop devices`")
    op.add_argument("--measured-ms", metavar="T", help="a measured kernel time in ms (one, or one per op, comma-separated)")
    op.add_argument("--json", action="store_true", help="print JSON (SI units) instead of the report")
    op.set_defaults(func=cmd_op)

    dv = sub.add_parser("devices", help="list the device catalog with provenance",
                        description="The built-in catalog: reference measurements and vendor datasheets (dense).")
    dv.add_argument("ids", nargs="*", metavar="ID", help="show every roof of these devices")
    dv.add_argument("--json", action="store_true", help="print JSON (SI units)")
    dv.set_defaults(func=cmd_devices)

    pl = sub.add_parser("plot", help="print a log-log roofline with ops' points",
                        description="Print the roofline of one or more devices (overlaid) with the ops' points.")
    pl.add_argument("-d", "--device", action="append", metavar="ID", help="device id (repeat to overlay)")
    pl.add_argument("--op", action="append", metavar="SPEC", help='an op to mark, e.g. --op "gemm 1 8192 8192 bf16"')
    pl.add_argument("--paths", metavar="LIST", help="compute paths to draw, comma-separated, or 'all'")
    pl.add_argument("--width", type=int, metavar="COLS", help="chart width (default: the terminal's)")
    pl.add_argument("--height", type=int, metavar="ROWS", help="chart height")
    pl.set_defaults(func=cmd_plot)

    ms = sub.add_parser(
        "measure", help="measure this machine's roofline (bandwidth, GEMM, FMA sweep, launch)",
        description="Measure the local GPU's (or CPU's) ceilings by the reference protocol, then print the "
                    "ceilings (value, case, stability) and the measured roofline. Progress goes to stderr.",
    )
    ms.add_argument("--plan", choices=("quick", "full"), default="quick", help="quick (default) or full sweeps")
    ms.add_argument("--device", metavar="DEV", help="cuda:N or cpu (default: the first GPU, else the CPU)")
    ms.add_argument("--only", metavar="LIST", help="comma-separated subset of: bandwidth,gemm,fma,launch")
    ms.add_argument("--threads", type=int, metavar="N", help="CPU only: torch threads (default: torch's, one per core)")
    ms.add_argument("--json", action="store_true", help="print {profile, samples, device_info} as JSON (SI units)")
    ms.add_argument("--no-plot", action="store_true", help="omit the roofline plot")
    ms.add_argument("--width", type=int, metavar="COLS", help="plot width")
    ms.add_argument("--height", type=int, metavar="ROWS", help="plot height")
    ms.set_defaults(func=cmd_measure)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except (SpecError, NoRoof, UnknownDevice, UsageError) as exc:
        msg = exc.args[0] if exc.args else str(exc)
        sys.stderr.write(f"rooftop {args.command}: error: {msg}\n")
        return 2
    except BrokenPipeError:  # `rooftop devices | head`
        return 0
    except Exception as exc:  # a bug, not bad input: one line unless asked for the traceback
        if os.environ.get("ROOFTOP_DEBUG"):
            raise
        sys.stderr.write(f"rooftop {args.command}: internal error: {exc!r} (set ROOFTOP_DEBUG=1 for the traceback)\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
