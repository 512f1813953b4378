"""`rooftop profile`: the user's own program on the measured roofline.

Three inputs: a Python program run under torch.profiler (`-- python script.py
ARGS…`), an existing Chrome/Kineto trace (`--trace FILE`), or an Nsight Compute
raw CSV (`--ncu FILE`). The first two give the op groups, the step split and
MFU (rooftop.models.workload) and are kept as a run; the third gives real
kernels with measured bytes per level (rooftop.models.ncu). torch is imported
only to run a program.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from rooftop.probes.torchrun import is_torchrun
from rooftop.tui.job_cmd import is_job, profile_job, profile_torchrun
from rooftop.tui.jsonout import print_json

EPILOG = """\
examples:
  rooftop profile -d h100 --steps 3 -- python train.py --epochs 1
  rooftop profile --trace run.trace.json.gz -d h200
  rooftop profile --trace traces/ -d a100-80g-ds          (one trace per rank)
  rooftop profile -- torchrun --nproc-per-node 2 train.py  (kept as one profile)
  rooftop profile --ncu kernels.csv -d h200 --json

W and Q are estimates: rooftop's op models applied to the shapes and dtypes
the profiler recorded (each array read or written once; an FMA is 2 FLOP).
Ops without a model keep their time with Q from their tensors' sizes. Times,
the span and the gaps between kernels are measured.
"""
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
TOP = 20


def add_profile_command(sub: Any) -> None:
    """Add the `profile` subcommand to the CLI's subparsers."""
    from rooftop.tui.cli import add_db_option, add_device_option

    pr = sub.add_parser(
        "profile", help="your own program on the roofline: its ops, the gaps between kernels, MFU",
        description="Run a Python program under torch.profiler (or read a trace it wrote, or an Nsight Compute "
                    "raw CSV) and place its ops on a device's roofline: time share, achieved FLOP/s and B/s, "
                    "regime, the bound T and the fraction of the roof; the step split into kernel time and idle "
                    "time; MFU beside bandwidth utilisation.",
        epilog=EPILOG,
    )
    add_device_option(pr, "the device whose roofs to use (default: the GPU the trace or CSV names, "
                          "else this machine's)")
    pr.add_argument("--steps", type=int, default=3, metavar="N",
                    help="steps to record after one warm-up step (a step: one outermost nn.Module call; default 3)")
    pr.add_argument("--trace", metavar="FILE", nargs="+",
                    help="read a Chrome/Kineto trace (.json or .json.gz) instead; several files, or a folder of them, "
                         "are one trace per rank of a distributed job (read one at a time)")
    pr.add_argument("--link", choices=("nvlink", "pcie", "net"),
                    help="the link the job's collectives crossed (default: told from the group's ranks)")
    pr.add_argument("--ncu", metavar="FILE", help="read an Nsight Compute `--csv --page raw` export instead")
    pr.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                    help="two stored profiles side by side: each op group's time, and the step split")
    pr.add_argument("--save-trace", metavar="FILE", help="keep the trace of a program run here (with -- torchrun: "
                                                             "a folder, one trace per rank)")
    pr.add_argument("--top", type=int, default=TOP, metavar="N", help=f"op groups to list (default {TOP})")
    pr.add_argument("--json", action="store_true",
                    help="print one JSON object: ops and summary (SI units); the program's output goes to stderr")
    pr.add_argument("--no-save", action="store_true", help="do not keep this profile in the store")
    add_db_option(pr)
    pr.add_argument("program", nargs=argparse.REMAINDER, help="-- python script.py ARGS… (the program to run)")
    pr.set_defaults(func=cmd_profile)


def clean(text: str) -> str:
    """Text from a trace made safe for a terminal: control characters dropped."""
    return CONTROL.sub("", text)


def _drop_nested(text: str, open_: str, close: str) -> str:
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            depth += 1
        elif ch == close and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def short_kernel(name: str) -> str:
    """A kernel's name without its return type, template arguments, parameters and namespaces:
    `void at::native::reduce_kernel<512, 1, …>(…)` → `reduce_kernel`."""
    s = clean(name).replace("(anonymous namespace)", "anon")
    s = _drop_nested(_drop_nested(s, "<", ">"), "(", ")").strip()
    s = s.split(" ")[-1] if " " in s else s
    return s.split("::")[-1] or clean(name)


class ProfileError(Exception):
    """Bad input to `rooftop profile`: one line on stderr, exit status 2."""


def cmd_profile(args: argparse.Namespace) -> int:
    """Handled here, not by the CLI's main: run as `python -m rooftop.tui.cli`, that module is __main__
    and its UsageError is not the one this module would import (as measure_cmd does)."""
    from rooftop.tui.cli import UsageError

    try:
        return _cmd_profile(args)
    except (ProfileError, UsageError) as exc:
        sys.stderr.write(f"rooftop profile: error: {exc.args[0] if exc.args else exc}\n")
        return 2


def _cmd_profile(args: argparse.Namespace) -> int:
    program = list(args.program or [])
    if program and program[0] == "--":
        program = program[1:]
    given = [x for x in (args.trace, args.ncu, args.compare) if x] + (["program"] if program else [])
    if len(given) != 1:
        raise ProfileError("give one of: -- python script.py ARGS…, -- torchrun … script.py, --trace FILE [FILE…|DIR], "
                           "--ncu FILE, or --compare RUN RUN")
    if args.steps < 1:
        raise ProfileError(f"--steps must be at least 1, got {args.steps}")
    if args.top < 0:
        raise ProfileError(f"--top must be 0 or more, got {args.top}")
    if args.ncu:
        return _ncu(args)
    if args.compare:
        return _compare(args)
    if args.trace and is_job(args.trace):
        return profile_job(args, args.trace, " ".join(args.trace), "trace")
    if program and is_torchrun(program):
        return profile_torchrun(program, args)
    if args.trace:
        trace = _load(args.trace[0])
        source, backend = str(args.trace[0]), "trace"
        world = trace.distributed.get("world_size")
        if isinstance(world, int) and world > 1:  # one rank of a job: shown as the job's rank table too
            return profile_job(args, args.trace, source, backend, {Path(source): trace})
    else:
        trace, source = _run_program(program, args)
        backend = "torch.profiler"
    from rooftop.models.workload import build_workload

    device, note = _trace_device(args, trace)
    work = build_workload(trace, device, device_note=note)
    run_id = None if args.no_save else _save(args, work, source, backend)
    if args.json:
        doc = work.to_dict()
        doc["run_id"] = run_id
        print_json(doc)
        return 0
    from rooftop.tui.report import make_console

    console = make_console()
    console.print(profile_report(work, args.top))
    if run_id:
        sys.stderr.write(f"rooftop profile: saved as run {run_id[:8]}\n")
    return 0


def _load(path: str) -> Any:
    from rooftop.models.trace import TraceError
    from rooftop.store.tracefile import load_trace

    try:
        return load_trace(path)
    except TraceError as exc:
        raise ProfileError(clean(str(exc))) from None


def _run_program(program: list[str], args: argparse.Namespace) -> tuple[Any, str]:
    try:
        import torch  # noqa: F401 - the profiler needs it; say so in one line when it is missing
    except ImportError:
        raise ProfileError("running a program needs torch (pip install torch); --trace FILE reads a trace without it")
    from rooftop.models.trace import EmptyTrace, TraceError
    from rooftop.probes.profiler import NotPython, ProgramFailed, run_script
    from rooftop.store.tracefile import load_trace

    with tempfile.TemporaryDirectory(prefix="rooftop-profile-") as tmp:
        out = Path(args.save_trace) if args.save_trace else Path(tmp) / "trace.json"
        try:
            # with --json, stdout carries the one JSON object: the program's own output goes to stderr
            with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
                rec = run_script(program, out, steps=args.steps)
        except NotPython as exc:
            raise ProfileError(str(exc)) from None
        except ProgramFailed as exc:
            raise ProfileError(str(exc)) from None
        if not rec.trace_path.is_file():
            raise ProfileError("the program recorded nothing (it ended before the profiler wrote its trace)")
        try:
            trace = load_trace(rec.trace_path)
        except EmptyTrace:
            raise ProfileError(f"{clean(' '.join(program))} ran no torch ops: nothing to place on the roofline") from None
        except TraceError as exc:
            raise ProfileError(clean(str(exc))) from None
    if rec.whole_run:
        sys.stderr.write("rooftop profile: no step seen (no nn.Module call): the whole run was recorded\n")
    elif rec.warmup_only:
        sys.stderr.write("rooftop profile: the program ran one step: showing it, first-call costs included\n")
    elif rec.steps_kept < args.steps:
        sys.stderr.write(f"rooftop profile: the program ran {rec.steps_seen} steps; recorded {rec.steps_kept} "
                         "after the warm-up step\n")
    return trace, " ".join(program)


def _device(args: argparse.Namespace, trace_device: str, source: str = "trace") -> Any:
    from rooftop.models.catalog import find_by_name
    from rooftop.tui.cli import _device_list, resolve_devices, store_profiles

    ids = _device_list(getattr(args, "device", None))
    if not ids and trace_device:
        found = find_by_name(trace_device)
        if found:
            sys.stderr.write(f"rooftop profile: using {found.id}, the reference profile for the {source}'s "
                             f"{clean(trace_device)}\n")
            return found
    return resolve_devices(ids, store_profiles(args, ids))[0]


def _trace_device(args: argparse.Namespace, trace: Any) -> tuple[Any, str]:
    """The device whose roofs to use for a trace, and how it was chosen, in one line for the report: -d; the
    trace's own GPU's family; or, where rooftop has no reference for it, the default device, said plainly."""
    from rooftop.models.devicefamily import place_device
    from rooftop.tui.cli import _device_list, resolve_devices, store_profiles

    ids = _device_list(getattr(args, "device", None))
    if ids:
        return resolve_devices(ids, store_profiles(args, ids))[0], ""
    if not trace.on_device:
        return resolve_devices([], store_profiles(args, []))[0], ""
    if trace.device_name:
        placed = place_device(trace.device_name, trace.device_props)
        if placed.profile is not None:
            sys.stderr.write(clean(f"rooftop profile: using {placed.profile.id}: {placed.note}") + "\n")
            return placed.profile, placed.note
        dev = resolve_devices([], store_profiles(args, []))[0]
        other = " (another vendor's)" if placed.vendor and dev.vendor and placed.vendor != dev.vendor else ""
        note = (f"{placed.note}: the roofs shown are {dev.id}'s{other}, not its own; give -d ID (`rooftop devices` "
                "lists them) or measure on that machine (`rooftop measure`) and give -d local")
    else:
        dev = resolve_devices([], store_profiles(args, []))[0]
        note = (f"the trace does not name its GPU (no deviceProperties): the roofs shown are {dev.id}'s; "
                "give -d ID for the GPU it ran on")
    sys.stderr.write(clean(f"rooftop profile: {note}") + "\n")
    return dev, note


def _save(args: argparse.Namespace, work: Any, source: str, backend: str, job: Any = None) -> str | None:
    from rooftop.store.db import StoreError
    from rooftop.store.profiles import save_profile
    from rooftop.tui.cli import open_store

    try:
        with open_store(args, create=True) as store:
            return save_profile(store, work, source=source, backend=backend, job=job)
    except StoreError as exc:
        sys.stderr.write(f"rooftop profile: warning: not saved: {exc}\n")
        return None


# -- the report ----------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f}%" if x >= 0.001 else f"{100 * x:.2g}%"


def op_label(g: Any) -> str:
    """How an op group reads in a table: torch's name (without `aten::`), dtype, input shapes."""
    name = g.op[6:] if g.op.startswith("aten::") else g.op
    return clean(" ".join(x for x in (name, g.dtype, g.shapes_text) if x))


def achieved_text(g: Any) -> str:
    """What the group achieved on its limiting resource: B/s when memory-bound, FLOP/s otherwise."""
    from rooftop.models.units import fmt_bandwidth, fmt_flops_rate

    if g.flops > 0 and g.regime == "compute":
        return fmt_flops_rate(g.achieved_flops)
    return fmt_bandwidth(g.achieved_bandwidth) if g.bytes > 0 else ""


def ops_table(work: Any, top: int = TOP) -> Table:
    """The op groups, memcpy / memset and the overlap of streams by share of the span, with the idle time as a
    row of its own: each row's share is its time alone on the device, so the shares add up to 100%."""
    from rooftop.models.units import fmt_bandwidth, fmt_bytes, fmt_time

    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("share", "right"), ("time", "right"), ("calls", "right"), ("op dtype shapes", "left"),
                      ("I", "right"), ("achieved", "right"), ("regime", "left"), ("of roof", "right")):
        t.add_column(col, justify=just, no_wrap=col != "op dtype shapes", overflow="fold",
                     ratio=1 if col == "op dtype shapes" else None)
    span = work.span_s or 1.0
    rows: list[tuple[float, list[Any]]] = []
    rows.append((work.idle_s, [_pct(work.idle_s / span), fmt_time(work.idle_s), "", Text("idle time", style="bold"),
                               "", "", "", ""]))
    if work.overlap_s > 0:
        rows.append((work.overlap_s, [_pct(work.overlap_s / span), fmt_time(work.overlap_s), "",
                                      Text("overlap (two or more streams at once)", style="bold"), "", "", "", ""]))
    for x in work.transfers:
        label = f"{x.label} {fmt_bytes(x.bytes)}" if x.bytes else x.label
        rows.append((x.alone_s, [_pct(x.alone_s / span), fmt_time(x.time_s), str(x.calls), Text(label),
                                 "", fmt_bandwidth(x.achieved_bandwidth) if x.bytes else "",
                                 x.level if x.bandwidth else f"no {x.level} roof", _pct(x.fraction_of_roof)]))
    flagged = {f.subject for f in work.flags if f.kind == "op"}
    for g in work.groups[:top]:
        i = g.intensity
        roof = _pct(g.fraction_of_roof) + (" !" if g.op in flagged and (g.fraction_of_roof or 0) > 1.1 else "")
        rows.append((g.alone_s, [
            _pct(g.alone_s / span), fmt_time(g.time_s), str(g.calls), Text(op_label(g)),
            "" if i is None else ("inf" if i == float("inf") else f"{i:.3g}"), achieved_text(g), g.regime, roof,
        ]))
    for _, r in sorted(rows, key=lambda x: -x[0]):
        t.add_row(*r)
    return t


IDLE_LEGEND = ("host wait: the CPU issued the next kernel only after the device went idle (busy in that op, in "
               "a sync or a copy); kernel wait: a gap of about two launches; other: the next kernel was queued, "
               "waiting on another stream or an event")


def idle_lines(work: Any) -> list[Text]:
    """The idle time by cause (host wait, kernel wait, other), largest first."""
    from rooftop.models.units import fmt_time

    if not work.idle_causes:
        return []
    span = work.span_s or 1.0
    by: dict[str, float] = {}
    for c in work.idle_causes:
        by[c.category] = by.get(c.category, 0.0) + c.time_s
    head = ", ".join(f"{k} {fmt_time(v)}" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))
    out = [Text(f"idle time by cause: {head}", style="bold")]
    for c in work.idle_causes[:8]:
        out.append(Text(f"  {_pct(c.time_s / span):>6} {fmt_time(c.time_s):>9}  {c.category:<11} {clean(c.cause)} "
                        f"({c.gaps} gap{'s' if c.gaps != 1 else ''})"))
    out.append(Text(IDLE_LEGEND, style="dim"))
    return out


def kernel_lines(work: Any, n: int = 5) -> list[Text]:
    """The top kernels by time: name, calls, time, achieved FLOP/s and GB/s (W and Q from their ops)."""
    from rooftop.models.units import fmt_bandwidth, fmt_flops_rate, fmt_time

    if not work.top_kernels:
        return []
    out = [Text("top kernels (W and Q from the ops that launched them):", style="bold")]
    for k in work.top_kernels[:n]:
        rate = ", ".join(x for x in (fmt_flops_rate(k.achieved_flops) if k.flops else "",
                                     fmt_bandwidth(k.achieved_bandwidth) if k.bytes else "") if x)
        out.append(Text(f"  {fmt_time(k.time_s):>9} ×{k.calls:<5} {short_kernel(k.name)}" + (f"  {rate}" if rate else "")))
    return out


def step_lines(work: Any) -> list[Text]:
    from rooftop.models.units import fmt_time

    if not work.steps:
        return []
    out = [Text("per step:", style="bold")]
    for s in work.steps:
        what = f"{s.kernels} kernels, busy" if work.on_device else "busy"
        out.append(Text(f"  {clean(s.name)}: CPU {fmt_time(s.cpu_s)}; {what} {fmt_time(s.busy_s)} of "
                        f"{fmt_time(s.span_s)}, idle {fmt_time(s.idle_s)}"))
    return out


def mfu_text(work: Any) -> str:
    """MFU against the main matmul path's roof; above 100% it is not a fact but a low roof, and says so."""
    from rooftop.models.units import fmt_flops_rate

    if work.mfu is None:
        return "MFU n/a (no matmul FLOPs on a path this device has)"
    text = f"MFU {_pct(work.mfu)} of {work.mfu_path} {fmt_flops_rate(work.device.F(work.mfu_path))}"
    if work.mfu > 1.0:
        text += " — above 100%, so that roof is low (not a measured fact: see the flags)"
    return text


def split_lines(work: Any) -> list[Text]:
    """The step split and what each fix would give (Amdahl), then MFU beside bandwidth utilisation."""
    from rooftop.models.units import fmt_bandwidth, fmt_ratio, fmt_time

    span = work.span_s or 1.0
    what = "kernels" if work.on_device else "ops"
    if not work.on_device:
        idle_why = "Python and framework time between ops"
    elif work.idle_causes:
        idle_why = f"mostly {clean(work.idle_causes[0].cause)}"
    elif work.idle_s > work.busy_s:
        idle_why = "the device waits for the CPU to issue kernels"
    else:
        idle_why = "gaps between kernels"
    s = work.summary()
    overlap = f", overlap {fmt_time(work.overlap_s)}" if work.overlap_s > 0 else ""
    lines = [
        Text(f"span {fmt_time(work.span_s)}: {what} busy {fmt_time(work.busy_s)} ({_pct(work.busy_s / span)}){overlap}, "
             f"idle {fmt_time(work.idle_s)} ({_pct(work.idle_s / span)}) — {idle_why}"
             + (f"; {work.kernels} kernels" if work.on_device else "")),
        Text(f"every op at its roof: {fmt_time(work.at_roof_s)} ({fmt_ratio(s['speedup_at_roof'] or 0)}); "
             f"no gaps: {fmt_time(work.no_gaps_s)} ({fmt_ratio(s['speedup_without_gaps'] or 0)}); "
             f"both: {fmt_time(work.bound_s)} (the sum of the ops' bounds T)"),
    ]
    dev = work.device
    bw = (f"bandwidth {_pct(work.bandwidth_utilisation)} of {fmt_bandwidth(dev.B('dram'))}"
          if work.bandwidth_utilisation is not None else "")
    lines.append(Text(f"{mfu_text(work)} · {bw} (over the span; roofs of {dev.id})".replace(" ·  (", " (")))
    top = work.largest_share()
    lines.append(Text(f"largest share: {'idle time' if top == 'idle' else clean(top)}", style="bold"))
    if work.device_note:
        lines.append(Text(f"device: {clean(work.device_note)}", style="yellow"))
    from rooftop.models.workload import flag_lines

    for f in flag_lines(work.flags):
        lines.append(Text(f"flag: {clean(f)}", style="bold red"))
    for n in work.notes:
        lines.append(Text(f"note: {clean(n)}", style="yellow"))
    lines.append(Text("W and Q are estimates from the recorded shapes and dtypes (rooftop's op models); "
                      "times are measured.", style="dim"))
    return lines


def profile_report(work: Any, top: int = TOP) -> Group:
    head = Text(f"{clean(work.device_name) or ('CPU program' if not work.on_device else 'GPU program')} on the "
                f"roofs of {work.device.id} ({work.device.name})", style="bold")
    extra = [x for part in (idle_lines(work), kernel_lines(work), step_lines(work)) if part for x in (Text(""), *part)]
    return Group(head, Text(""), ops_table(work, top), *extra, Text(""), *split_lines(work))


# -- Nsight Compute ---------------------------------------------------------------------


def _ncu(args: argparse.Namespace) -> int:
    from rooftop.models.ncu import NcuError, read_ncu

    p = Path(args.ncu)
    if not p.is_file():
        raise ProfileError(f"{p}: no such file (give an `ncu --csv --page raw` export)")
    try:
        with p.open(encoding="utf-8", errors="replace", newline="") as f:
            export = read_ncu(f)
    except NcuError as exc:
        raise ProfileError(f"{p}: {exc}") from None
    if export.skipped:
        sys.stderr.write(f"rooftop profile: {clean(export.warning())}\n")
    kernels = export.kernels
    device = _device(args, kernels[0].device_name, "profile")  # no -d: the GPU ncu ran on, as a trace's
    if args.json:
        print_json({"device": device.id, "kernels": [k.to_dict(device) for k in kernels],
                    "skipped_rows": export.skipped})
        return 0
    shown = sorted(kernels, key=lambda k: -k.time_s)[: max(args.top, 1)]  # the longest: a table of 100k helps no one
    from rooftop.models.units import fmt_bandwidth, fmt_bytes, fmt_flops, fmt_time
    from rooftop.tui.report import make_console

    cols = ("kernel", "time", "DRAM", "L2→SM", "tensor W", "I dram", "DRAM B/s", "roof")
    rows = []
    for k in shown:
        d = {p["level"]: p for p in k.points(device)}.get("dram", {})
        rows.append([
            short_kernel(k.name), fmt_time(k.time_s),
            fmt_bytes(k.dram_bytes) if k.dram_bytes is not None else "",
            fmt_bytes(k.l2_bytes) if k.l2_bytes is not None else "",
            fmt_flops(k.tensor_ops) if k.tensor_ops else "",
            f"{d['intensity']:.3g}" if d.get("intensity") else "",
            fmt_bandwidth(d.get("achieved_bandwidth", 0.0)) if d else "", _pct(d.get("fraction_of_roof")),
        ])
    t = Table(header_style="bold", box=None, pad_edge=False, padding=(0, 1, 0, 0))
    for j, col in enumerate(cols):
        if col == "kernel":
            t.add_column(col, no_wrap=True, overflow="ellipsis", max_width=16)
        else:  # numbers are never squeezed: the kernel's name gives way
            t.add_column(col, justify="right", no_wrap=True, min_width=max(len(col), *(len(r[j]) for r in rows)))
    for r in rows:
        t.add_row(Text(r[0]), *r[1:])
    console = make_console()
    console.print(Group(
        Text(f"{len(kernels)} kernels from Nsight Compute, on the roofs of {device.id}"
             + (f"; the {len(shown)} longest (--top N, or --json for all)" if len(shown) < len(kernels) else ""),
             style="bold"), Text(""), t,
        Text(""),
        Text("Bytes are measured: rate × kernel time per level (DRAM; L2→SM). Tensor W is the tensor pipes' "
             "count (sm__ops_path_tensor_src_*), so padding rows are counted too; kernels without tensor work "
             "are placed by bandwidth.", style="dim"),
    ))
    return 0


# -- two stored profiles -------------------------------------------------------------------


def _stored(store: Any, ref: str) -> tuple[Any, list[dict], dict]:
    from rooftop.store.profiles import is_profile

    run = store.run(ref)
    if not is_profile(run):
        raise ProfileError(f"run {run.label} is a {run.plan or 'measurement'} run, not a profile "
                           "(`rooftop runs` lists them; profiles have plan 'profile')")
    groups = [s.conditions.get("profile", {}) for s in store.samples(run.id)]
    return run, [g for g in groups if g], dict(run.device.get("profile") or {})


def _compare(args: argparse.Namespace) -> int:
    from rooftop.models.profilediff import diff_groups, diff_split
    from rooftop.models.units import fmt_ratio, fmt_time
    from rooftop.store.db import StoreError
    from rooftop.tui.cli import open_store
    from rooftop.tui.report import make_console

    try:
        with open_store(args) as store:
            (ra, ga, sa), (rb, gb, sb) = (_stored(store, r) for r in args.compare)
    except StoreError as exc:
        raise ProfileError(str(exc)) from None
    diffs = diff_groups(ga, gb)
    split = diff_split(sa, sb)
    if args.json:
        print_json({"a": ra.id, "b": rb.id, "summary": {k: list(v) for k, v in split.items()},
                   "ops": [d.to_dict() for d in diffs]})
        return 0

    def both(key: str, fmt: Any) -> str:
        a, b = split[key]
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return "n/a"
        return f"{fmt(a)} → {fmt(b)}" + (f" ({fmt_ratio(b / a)})" if a else "")

    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("op dtype shapes", "left"), ("A", "right"), ("B", "right"), ("B / A", "right")):
        t.add_column(col, justify=just, no_wrap=col != "op dtype shapes", overflow="fold",
                     ratio=1 if col == "op dtype shapes" else None)
    from rooftop.models.workload import OpGroup

    for d in diffs[: args.top]:
        label = op_label(OpGroup(op=d.op, shapes=d.shapes, dtype=d.dtype, model="", path="", counting=""))
        t.add_row(Text(label), fmt_time(d.time_a_s) if d.time_a_s is not None else "—",
                  fmt_time(d.time_b_s) if d.time_b_s is not None else "—",
                  fmt_ratio(d.ratio) if d.ratio is not None else "")
    make_console().print(Group(
        Text(f"A = run {ra.label} ({clean(ra.device_name)}), B = run {rb.label} ({clean(rb.device_name)})", style="bold"),
        Text(f"span {both('span_s', fmt_time)}; busy {both('device_busy_s', fmt_time)}; "
             f"idle {both('idle_s', fmt_time)}; bound {both('bound_s', fmt_time)}"),
        Text(f"MFU {both('mfu', _pct)}; bandwidth {both('bandwidth_utilisation', _pct)}"),
        Text(""), t,
    ))
    return 0
