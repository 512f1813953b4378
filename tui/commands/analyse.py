"""`rooftop op`, `plot`, `devices`, `compare`: ops and devices on the roofline, from the catalog or the store."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from functools import partial
from itertools import combinations
from typing import Any

from rooftop.models.analysis import analyze, devices_with_roof
from rooftop.models.catalog import catalog, lookup_device
from rooftop.models.compare import common_paths, compare_path, thread_note
from rooftop.models.links import LINK_LEVELS
from rooftop.models.plotdata import PLOT_PATHS, intensity_span, point_series, roof_series
from rooftop.models.profile import NoRoof
from rooftop.models.safetext import safe_text
from rooftop.models.spec import SpecError, op_kinds, parse_specs
from rooftop.store.locations import db_path
from rooftop.tui.commands.common import (
    UsageError, _device_list, _measured_times, _path_list, add_db_option, add_device_option, add_out_option,
    command_text, plot_size,
)
from rooftop.tui.render.chart import roofline_text
from rooftop.tui.render.jsonout import print_json
from rooftop.tui.render.report import (
    Prose, analysis_table, compare_tables, devices_table, make_console, profile_detail, trimmed,
)
from rooftop.tui.services.context import open_store, resolve_devices, run_dates, store_points, store_profiles


EPILOG_OP = """\
op specs (one or more; a new op starts at each op name):
  gemm M N K [dtype] [batch=B] [out=DTYPE] [wdtype=DTYPE]  (or m=M n=N k=K)
  gemv N K [dtype] [wdtype=DTYPE]            a GEMM with M = 1 (batch-1 decode)
  attn b=B h=H [kv=KV] [d=D] [q=Q] t=T [flash|naive|decode] [causal]
       [kvdtype=fp8] [window=W]
  allreduce|allgather|reducescatter N [dtype] world=W [level=LINK]
  p2p N [dtype] [level=LINK]                 N elements in the message; LINK:
                                             nvlink, xgmi (AMD), pcie, net
  ew N [dtype] [flops=F] [reads=R] [writes=W] elementwise (y = a*x + b)
  fma R [N] [dtype]                          FMA sweep: R FMAs per element
  norm ROWS COLS [dtype] [rms|layer]         softmax ROWS COLS [dtype]
numbers: 8192, 1e9 (1E9, .5e1), 2^20, 8k (= 8192), 16M; dtypes: fp64 fp32 tf32 fp16 bf16 fp8
int8 fp4 (default bf16; fp32 for ew and fma); any op takes level=LEVEL to read
from a cache instead of dram, where the profile has that slope: level=l1 or
level=l2 on a GPU, level=l2 (private caches) or level=llc on a CPU.

examples:
  rooftop op gemm 1 8192 8192 bf16 --device h100 --device h200
  rooftop op attn b=8 h=32 d=128 t=8192 decode --device h100 --measured-ms 0.55
  rooftop op gemm 4096 4096 4096 fp32 ew n=1e9 fp32 --json

Bytes and FLOPs are algorithmic: each array read or written once, an FMA is
2 FLOP, so the time shown is a lower bound T = max(W/F, Q/B). JSON is in SI
units (FLOP, bytes, seconds, FLOP/s, bytes/s).
"""


def pinned_ops(args: argparse.Namespace) -> list:  # models.ops ops
    """The ops pinned in the app (What-if, p), which the store keeps; none when there is no store yet.

    A saved pin that no longer parses is named on stderr and left out: it must not sink the others.
    """
    if not db_path(getattr(args, "db", None)).exists():
        return []
    ops = []
    with open_store(args.db) as store:
        for saved in store.saved_ops():
            try:
                ops += parse_specs([str(saved["spec"])])
            except SpecError as exc:
                sys.stderr.write(safe_text(f"rooftop op: left out the saved pin {saved['spec']!r}: {exc}") + "\n")
    return ops


def check_out(args: argparse.Namespace) -> None:
    """A bad --out is told before any work."""
    if getattr(args, "out", None):
        # deferred: the share modules (xml.etree, ~20 ms of imports), only with --out
        from rooftop.tui.share.out import out_target

        out_target(args.out)


def share_roofline(args: argparse.Namespace, devices: list, series: list, title: str,
                   report: Callable[..., str]) -> None:
    """--out: the roofline as the command drew it, with each device's source and date, as SVG or PNG; or as
    HTML, `report(charts_svg, version=, command=)` (a share.reports builder given the command's --json)."""
    # deferred: the share modules (xml.etree, ~60 ms of imports), only with --out
    from rooftop.tui.share.charts import roofline_chart
    from rooftop.tui.share.figure import chart_svg_inline
    from rooftop.tui.share.html import rooftop_version
    from rooftop.tui.share.out import Shared, share_out

    charts = [roofline_chart(devices, series, title, run_dates(args.db, devices))]
    share_out(args.out, Shared(charts, lambda: report([chart_svg_inline(c) for c in charts],
                                                      version=rooftop_version(), command=command_text(args))))


def roofline_series(devices: list, analyses: list, wanted: list[str] | None = None,
                    points: Sequence[Any] = ()) -> list:  # models.plotdata Series
    """Each device's roofs (the paths asked, else the usual four and the ops' own) and a slope per level, then
    the ops' points (each labelled with its device where more than one device is drawn), then `points` (a
    store run's samples), the intensity span wide enough for them all."""
    span = intensity_span(devices, [a.intensity for a in analyses] + [x for s in points for x in s.xs])
    series = []
    for dev in devices:
        if wanted == ["all"]:
            paths = dev.paths()
        elif wanted:
            paths = wanted
        else:
            paths = [p for p in PLOT_PATHS if p in dev.peak] + [a.path for a in analyses]
            paths = list(dict.fromkeys(paths))
        series += roof_series(dev, paths, dev.levels(), span)  # a slope per level: dram, l2, l1 (CPU: llc)
    many = len({a.device.id for a in analyses}) > 1
    series += [point_series(a, f"{a.op.describe()} on {a.device.id}" if many else None) for a in analyses]
    return series + list(points)


def cmd_op(args: argparse.Namespace) -> int:
    check_out(args)
    given = parse_specs(args.spec) if args.spec else []
    ops = given + (pinned_ops(args) if args.pinned else [])
    if not ops:
        raise UsageError("no op to analyse: give an op spec (e.g. gemm 1 8192 8192 bf16)"
                         + (", or pin ops in the app (p on the What-if tab)" if args.pinned else ", or --pinned"))
    times = _measured_times(args.measured_ms, len(ops))
    ids = _device_list(args.device)
    devices = resolve_devices(ids, store_profiles(args.db, ids))
    results = []
    for i, (op, t) in enumerate(zip(ops, times)):
        row = []
        for dev in devices:
            try:
                row.append(analyze(op, dev, t))
            except NoRoof as exc:
                if i < len(given):  # an op the user typed: say so and stop, as always, with where it can go
                    have = devices_with_roof(op, catalog().values())
                    raise NoRoof(f"{exc}" + (f"; catalog devices with one: {', '.join(have)}" if have else "")) from None
                sys.stderr.write(safe_text(f"rooftop op: left out the pin {op.spec()!r} on {dev.id}: {exc}") + "\n")
        if row:
            results.append(row)
    payload = [a.to_dict() for rows in results for a in rows]
    if args.out:
        # deferred: the share modules (xml.etree, ~60 ms of imports), only with --out
        from rooftop.tui.share.reports import op_report

        share_roofline(args, devices, [dataclasses.replace(s, label=safe_text(s.label))
                                       for s in roofline_series(devices, [a for rows in results for a in rows])],
                       safe_text("roofline: " + " vs ".join(f"{d.id} ({d.source})" for d in devices)),
                       partial(op_report, payload))
    if args.json:
        print_json(payload)
        return 0

    console = make_console()
    for i, rows in enumerate(results):
        if i:
            console.print()
        console.print(analysis_table(rows))
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    extra = store_profiles(args.db, args.ids)
    profiles = [lookup_device(i, extra) for i in args.ids] if args.ids else [*catalog().values(), *extra.values()]
    if args.json:
        out: list[dict[str, Any]] = []
        for p in profiles:
            d = p.to_dict()
            if "dram" in p.bandwidth:
                d["ridge"] = {path: p.ridge(path) for path in p.paths()}
            out.append(d)
        print_json(out)
        return 0

    console = make_console()
    if args.ids:
        for i, p in enumerate(profiles):
            if i:
                console.print()
            console.print(profile_detail(p))
    else:
        console.print(devices_table(profiles))
        console.print()
        console.print(Prose(
            "sources: ref = published measurement (RealZST/llm-infra-notes, roofline/data); datasheet = vendor "
            "dense figures; "
            "measured / imported = the store's runs (each device's latest complete run, plus named runs; "
            "`rooftop runs`). `rooftop devices ID` shows every roof with the case that produced it."
        ))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    check_out(args)
    ops = parse_specs(args.op) if args.op else []  # bad input first: one line, before any note on the device
    ids = _device_list(args.device)
    devices = resolve_devices(ids, store_profiles(args.db, ids))
    analyses = [analyze(op, dev) for op in ops for dev in devices[:1]]
    wanted = _path_list(args.paths) if args.paths is not None else None
    for dev in devices:
        for p in wanted or []:
            if p != "all" and p not in dev.peak:
                raise NoRoof(f"{dev.id} has no {p} roof; it has: {', '.join(dev.paths())}")
    points = store_points(args.db, devices) if args.points else []
    series = roofline_series(devices, analyses, wanted, points)
    series = [dataclasses.replace(s, label=safe_text(s.label)) for s in series]  # names from a store or a file
    title = safe_text("roofline: " + " vs ".join(f"{d.id} ({d.source})" for d in devices))
    if args.out:
        # deferred: the share modules (xml.etree, ~60 ms of imports), only with --out
        from rooftop.tui.share.reports import plot_report

        share_roofline(args, devices, series, title, partial(plot_report, [d.to_dict() for d in devices]))
    sys.stdout.write(trimmed(roofline_text(series, title, args.width, args.height)) + "\n")
    sys.stdout.flush()  # the chart first, then the console's lines
    console = make_console()
    for a in analyses:
        console.print(Prose(f"{a.op.describe()}: I = {a.intensity:.3g} FLOP/B on {a.path}, {a.regime}-bound on "
                            f"{safe_text(a.device.id)} (I* = {a.ridge:.3g})"))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    ids = _device_list(args.devices, "DEVICE")
    if len(ids) < 2:
        raise UsageError("compare needs at least two devices: rooftop compare A B [C…] (catalog ids, run ids or names)")
    check_out(args)
    profiles = resolve_devices(ids, store_profiles(args.db, ids))
    pairs = []
    for a, b in combinations(profiles, 2):
        if "dram" not in a.bandwidth or "dram" not in b.bandwidth:
            continue
        pairs += [(a, b, compare_path(a, b, path)) for path in common_paths(a, b)]
    out = {
        "devices": [{**p.to_dict(), "ridge": {k: p.ridge(k) for k in p.paths()} if "dram" in p.bandwidth else {}}
                    for p in profiles],
        "pairs": [{"a": a.id, "b": b.id, "path": c.path, "level": c.level, "crossover": c.crossover.intensity,
                   "higher_below": c.crossover.higher_below, "higher_above": c.crossover.higher_above,
                   "ridges": c.ridges} for a, b, c in pairs],
        "notes": [n for n in (thread_note(profiles),) if n],
    }
    if args.out:
        share_compare(args, profiles, out)
    if args.json:
        print_json(out)
        return 0

    make_console().print(compare_tables(profiles, pairs))
    return 0


def share_compare(args: argparse.Namespace, profiles: list, payload: dict[str, Any]) -> None:
    """--out on compare: the memory roofs side by side (a link's slope, pcie or xgmi, would stretch the axes by
    decades), and as HTML the crossovers and each device's roofs (`payload`: what --json prints)."""
    # deferred: the share modules (xml.etree, ~60 ms of imports), only with --out
    from rooftop.tui.share.reports import compare_report

    memory = [dataclasses.replace(p, bandwidth={k: v for k, v in p.bandwidth.items() if k not in LINK_LEVELS})
              for p in profiles]
    share_roofline(args, profiles, [dataclasses.replace(s, label=safe_text(s.label))
                                    for s in roofline_series(memory, [])],
                   safe_text("rooflines compared: " + " vs ".join(f"{d.id} ({d.source})" for d in profiles)),
                   partial(compare_report, payload))


def add_analyse_commands(sub: Any) -> None:
    """op, devices, plot."""
    op = sub.add_parser(
        "op", help="analyse ops on one or more devices", epilog=EPILOG_OP,
        description="Place ops on a device's roofline: W, Q, I, ridge, regime, time bound, advice.",
    )
    op.add_argument("spec", nargs="*", help=f"the op spec words (op kinds: {', '.join(op_kinds())})")
    op.add_argument("--pinned", action="store_true",
                    help="also the ops pinned in the app (p on the What-if tab), which the store keeps")
    add_device_option(op, "device id (repeat or comma-separate for side by side); see `rooftop devices`")
    op.add_argument("--measured-ms", metavar="T", help="a measured kernel time in ms (one, or one per op, comma-separated)")
    op.add_argument("--json", action="store_true", help="print JSON (SI units) instead of the report")
    add_out_option(op, ".html the report (the ops' analysis and advice), .svg or .png the roofline with the "
                       "ops' points")
    op.set_defaults(func=cmd_op)

    dv = sub.add_parser("devices", help="list the device catalog with provenance",
                        description="The built-in catalog: reference measurements and vendor datasheets (dense).")
    dv.add_argument("ids", nargs="*", metavar="ID", help="show every roof of these devices")
    dv.add_argument("--json", action="store_true", help="print JSON (SI units)")
    dv.set_defaults(func=cmd_devices)

    pl = sub.add_parser("plot", help="print a log-log roofline with ops' points",
                        description="Print the roofline of one or more devices (overlaid) with the ops' points.")
    add_device_option(pl, "device id (repeat to overlay)")
    pl.add_argument("--op", action="append", metavar="SPEC", help='an op to mark, e.g. --op "gemm 1 8192 8192 bf16"')
    pl.add_argument("--paths", metavar="LIST", help="compute paths to draw, comma-separated, or 'all'")
    pl.add_argument("--width", type=plot_size, metavar="COLS", help="chart width (default: the terminal's)")
    pl.add_argument("--height", type=plot_size, metavar="ROWS", help="chart height (default: the terminal's)")
    pl.add_argument("--points", action="store_true",
                    help="also draw the measured (or imported) sample points of devices that are store runs")
    add_out_option(pl, ".html the report (the roofline, each device's roofs), .svg or .png the roofline")
    pl.set_defaults(func=cmd_plot)
    for cmd in (op, dv, pl):
        add_db_option(cmd)


def add_compare_command(sub: Any) -> None:
    """compare (listed after the store's commands in --help)."""
    cp = sub.add_parser("compare", help="profiles side by side: B, F, ridges, crossovers",
                        description="Devices side by side: bandwidth per level, peak per path, ridges, and the "
                                    "intensity where each pair's roofs cross.")
    cp.add_argument("devices", nargs="+", metavar="DEVICE", help="catalog ids, run ids or run names (two or more)")
    cp.add_argument("--json", action="store_true", help="print JSON (SI units)")
    add_out_option(cp, ".html the report (the crossovers, each device's roofs), .svg or .png the rooflines "
                       "overlaid")
    add_db_option(cp)
    cp.set_defaults(func=cmd_compare)
