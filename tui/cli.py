"""The `rooftop` command line.

Imports stay light: `rooftop --help`, `rooftop op`, `rooftop devices` and
`rooftop plot` never load torch (a test checks it).
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
    from rooftop.tui.measure_cmd import add_measure_command  # light: torch loads only when measuring
    add_measure_command(sub)

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
