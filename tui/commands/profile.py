"""`rooftop profile`: the user's own program on the measured roofline.

Three inputs: a Python program run under torch.profiler (`-- python script.py
ARGS…`), an existing Chrome/Kineto trace (`--trace FILE`), or an Nsight Compute
raw CSV (`--ncu FILE`). The first two give the op groups, the step split and
MFU (rooftop.models.program.workload) and are kept as a run; the third gives real
kernels with measured bytes per level (rooftop.models.ncu). torch is imported
only to run a program.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any

from rooftop.models.links import LINK_LEVELS
from rooftop.models.program.critpath import critical_path
from rooftop.models.program.opcontext import reads_inside
from rooftop.models.program.profilediff import diff_groups, diff_split
from rooftop.models.program.workload import build_workload
from rooftop.models.safetext import safe_text
from rooftop.models.trace.read import EmptyTrace, TraceError
from rooftop.probes.profiler import run_script
from rooftop.store.workloads import StoredProfile, is_profile, profile_problem, stored_profile
from rooftop.probes.torchrun import is_torchrun
from rooftop.tui.commands.common import (
    UsageError, _device_list, add_db_option, add_device_option, add_out_option, add_wide_option,
)
from rooftop.tui.commands.progress import StageLine
from rooftop.tui.commands.job import (
    TRACE_SUFFIXES,
    check_window,
    is_job,
    profile_doc,
    profile_job,
    profile_torchrun,
    share_profile,
    trace_files,
)
from rooftop.tui.render.jsonout import print_json
from rooftop.tui.render.profile import TOP, compare_report, ncu_report, profile_report, relabelled
from rooftop.tui.render.report import make_console
from rooftop.tui.render.text import clean
from rooftop.tui.services.context import open_store
from rooftop.tui.services.workloads import check_local_gpu, file_device, keep_workload, trace_device

EPILOG = """\
examples:
  rooftop profile -d h100 --steps 3 -- python train.py --epochs 1
  rooftop profile --trace run.trace.json.gz -d h200
  rooftop profile --trace traces/ -d a100-80g-ds          (one trace per rank)
  rooftop profile --trace replay.json.gz --graph-capture capture_traces/
                                      (each graph-replayed kernel gets its op)
  rooftop profile -- torchrun --nproc-per-node 2 train.py  (kept as one profile)
  rooftop profile --ncu kernels.csv -d h200 --json
  rooftop profile run.trace.json.gz -d h200  (a trace or .csv named alone: read)

W and Q are estimates: rooftop's op models applied to the shapes and dtypes
the profiler recorded (each array read or written once; an FMA is 2 FLOP).
An op without a model says "W unknown": its time is kept, with no W, Q or
bound. Times, the span and the gaps between kernels are measured.
"""


def add_profile_command(sub: Any) -> None:
    """Add the `profile` subcommand to the CLI's subparsers."""
    pr = sub.add_parser(
        "profile", help="your own program on the roofline: its ops, the gaps between kernels, MFU",
        description="Run a Python program under torch.profiler (or read a trace it wrote, or an Nsight Compute "
                    "raw CSV) and place its ops on a device's roofline: time share, achieved FLOP/s and B/s, "
                    "regime, the bound T and the fraction of the roof; the step split into kernel time and idle "
                    "time; MFU beside bandwidth utilisation. Progress (the MiB of a trace read, then each stage) "
                    "goes to stderr where it is a terminal.",
        epilog=EPILOG,
    )
    add_device_option(pr, "the device whose roofs to use (default: the GPU the trace or CSV names, "
                          "else this machine's)")
    pr.add_argument("--steps", type=int, default=3, metavar="N",
                    help="steps to record after one warm-up step (a step: one outermost nn.Module call; default 3)")
    pr.add_argument("--trace", metavar="FILE", nargs="+",
                    help="read a Chrome/Kineto trace (.json or .json.gz) instead; several files, or a folder of them, "
                         "are one trace per rank of a distributed job (read one at a time)")
    pr.add_argument("--graph-capture", metavar="CAPTURE", nargs="+",
                    help="with --trace: the trace of the CUDA/HIP graph capture (files or a folder; vLLM's "
                         "capture_traces/, SGLang's --enable-profile-cuda-graph): each graph-replayed kernel gets "
                         "the op that launched it at capture, shown as (graph) rows")
    pr.add_argument("--link", choices=LINK_LEVELS,
                    help="the link the job's collectives crossed (default: told from the group's ranks)")
    pr.add_argument("--ncu", metavar="FILE", help="read an Nsight Compute `--csv --page raw` export instead")
    pr.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                    help="two stored profiles side by side: each op group's time, and the step split")
    pr.add_argument("--save-trace", metavar="FILE", help="keep the trace of a program run here (with -- torchrun: "
                                                             "a folder, one trace per rank)")
    pr.add_argument("--window", metavar="NAME",
                    help="the critical path of each instance of the annotation NAME (a record_function range) "
                         "instead of each profiler step")
    pr.add_argument("--top", type=int, default=TOP, metavar="N", help=f"op groups to list (default {TOP})")
    pr.add_argument("--json", action="store_true",
                    help="print one JSON object: ops and summary (SI units); the program's output goes to stderr")
    add_wide_option(pr)
    add_out_option(pr, ".html the whole report, .svg or .png the op groups on the roofline")
    pr.add_argument("--no-save", action="store_true", help="do not keep this profile in the store")
    add_db_option(pr)
    pr.add_argument("program", nargs=argparse.REMAINDER, help="-- python script.py ARGS… (the program to run)")
    pr.set_defaults(func=cmd_profile, _parser=pr)  # the parser, to read options given after a trace file


def files_to_read(program: list[str]) -> tuple[str | None, list[str]]:
    """('trace', files) when the program's words start with trace files (.json / .json.gz, there or not) or
    folders holding some, and options (or nothing) follow; ('ncu', [file]) for a .csv file; else (None, []). Such a
    file is read as --trace / --ncu would read it, since nobody means to run it."""
    if not program:
        return None, []
    first = Path(program[0])
    if first.is_file() and first.name.lower().endswith(".csv") and (len(program) == 1 or program[1].startswith("-")):
        return "ncu", program[:1]

    def trace_like(p: Path) -> bool:
        if p.is_file() or not p.exists():  # a trace's name that is not there: the trace reader says no such file
            return p.name.endswith(TRACE_SUFFIXES)
        try:
            return p.is_dir() and any(x.is_file() and x.name.endswith(TRACE_SUFFIXES) for x in p.iterdir())
        except OSError:  # a folder it may not list: not taken for traces (the run path then says why)
            return False

    files: list[str] = []
    for word in program:
        if word.startswith("-") or not trace_like(Path(word)):
            break
        files.append(word)
    if not files or (len(files) < len(program) and not program[len(files)].startswith("-")):
        return None, []
    return "trace", files


def cmd_profile(args: argparse.Namespace) -> int:
    program = list(args.program or [])
    if program and program[0] == "--":
        program = program[1:]
    read_as, files = files_to_read(program)
    if read_as and not (args.trace or args.ncu or args.compare):  # `rooftop profile run.json.gz`: read, not run
        rest = program[len(files):]  # the options after the files, which the program's words took in
        args.program = []
        if rest:
            args._parser.parse_args(rest, namespace=args)
        setattr(args, read_as, files if read_as == "trace" else files[0])
        program = [w for w in args.program or [] if w != "--"][:1]  # a program too: "give one of", below
    given = [x for x in (args.trace, args.ncu, args.compare) if x] + (["program"] if program else [])
    if len(given) != 1:
        raise UsageError("give one of: -- python script.py ARGS…, -- torchrun … script.py, --trace FILE [FILE…|DIR], "
                           "--ncu FILE, or --compare RUN RUN")
    if len(_device_list(getattr(args, "device", None))) > 1:  # the rest were dropped without a word
        raise UsageError(f"-d {safe_text(','.join(_device_list(args.device)))}: a profile is placed on one "
                           "device's roofs; give one -d (or `rooftop profile --compare` two kept runs)")
    if args.save_trace and (args.trace or args.ncu or args.compare):
        raise UsageError("--save-trace keeps the trace of a program run here; with --trace, --ncu or --compare "
                           "there is none to keep")
    if args.graph_capture and not args.trace:
        raise UsageError("--graph-capture joins a graph replay to its capture: give the replay with --trace FILE")
    if args.graph_capture and is_job(args.trace):
        raise UsageError("--graph-capture joins one replay trace to its capture: give one --trace FILE")
    if args.window is not None and (args.ncu or args.compare):
        raise UsageError("--window NAME picks the windows of a trace's critical path: give --trace FILE or a "
                           "program to run, not --ncu or --compare")
    if args.out and (args.ncu or args.compare):
        raise UsageError("--out writes a trace's or a program's profile: give --trace FILE or a program to run, "
                         "not --ncu or --compare")
    if args.out:
        # deferred: the share modules (xml.etree, ~20 ms of imports), only with --out
        from rooftop.tui.share.out import out_target

        out_target(args.out)  # a bad path costs nothing: said before the trace is read or the program run
    if args.steps < 1:
        raise UsageError(f"--steps must be at least 1, got {args.steps}")
    if args.top < 0:
        raise UsageError(f"--top must be 0 or more, got {args.top}")
    if args.ncu:
        return _ncu(args)
    if args.compare:
        return _compare(args)
    if args.trace and is_job(args.trace):
        return profile_job(args, args.trace, " ".join(args.trace), "trace")
    ids = _device_list(getattr(args, "device", None))
    if program and not ids:
        check_local_gpu(args.db)  # before the program runs, not after: it may run for minutes
    if program and is_torchrun(program):
        return profile_torchrun(program, args)
    with StageLine() as line:
        trace, source, backend = _trace_of(args, program, line)
        world = trace.distributed.get("world_size")
        one_rank = bool(args.trace) and isinstance(world, int) and world > 1  # shown as the job's rank table too
        if not one_rank:
            work, path, run_id = _placed(args, trace, ids, source, backend, line)
    if one_rank:
        return profile_job(args, args.trace, source, backend, {Path(source): trace})
    if args.json:
        print_json(profile_doc(work, path, run_id))
        return 0

    console = make_console()
    console.print(profile_report(work, args.top, args.wide, path), crop=not args.wide)
    if run_id:
        sys.stderr.write(f"rooftop profile: saved as run {run_id[:8]}\n")
    return 0


def _trace_of(args: argparse.Namespace, program: list[str], line: StageLine) -> tuple[Any, str, str]:
    """The trace to place (--trace FILE's, joined to its --graph-capture; else the program's, run here), where it
    came from, and by what."""
    if not args.trace:
        trace, source = _run_program(program, args, line)
        return trace, source, "torch.profiler"
    # deferred: gzip and the trace reader (~8 ms of imports), only when a trace is read
    from rooftop.store.tracefile import load_trace

    trace = load_trace(args.trace[0], line.reading(args.trace[0]))  # TraceError naming the file: bad input
    if args.graph_capture:
        trace = _join_capture(trace, args.graph_capture, line)
    return trace, str(args.trace[0]), "trace"


def _placed(args: argparse.Namespace, trace: Any, ids: list[str], source: str, backend: str,
            line: StageLine) -> tuple[Any, Any, str | None]:
    """The trace on its device's roofs: its workload, its critical path, the run id it is kept as (None with
    --no-save); its --out file written. Each stage is named on `line` as it begins."""
    check_window(trace, args.window)  # before the roofs are chosen: a wrong name is the one line said
    device, note = trace_device(args.db, ids, trace)
    line.stage(f"placing the op groups on the roofs of {device.id}")
    work = build_workload(trace, device, device_note=note)
    line.stage("the critical path and its what-ifs")
    path = relabelled(critical_path(trace, work, args.window), work)
    run_id = None
    if not args.no_save:
        line.stage("keeping the run")
        run_id = keep_workload(args.db, work, source, backend, path=path)
    if args.out:
        line.stage(f"writing {Path(args.out).name}")
        share_profile(args, profile_doc(work, path, run_id), work.device)
    return work, path, run_id


def _join_capture(trace: Any, paths: list[str], line: StageLine) -> Any:
    """The replay joined to the graph captures in `paths` (files or folders), read as --trace reads a trace (each
    shown on the stage `line` as it is read)."""
    # deferred: the capture joiner and the trace reader (gzip: ~18 ms of imports), only with --graph-capture
    from rooftop.models.trace.capture import CaptureError, join_captures
    from rooftop.store.tracefile import load_trace

    try:
        files = trace_files(paths)
    except TraceError as exc:  # said with the option it came from
        raise UsageError(f"--graph-capture {exc}") from None
    captures = [(f.name, load_trace(f, line.reading(f, "reading the capture"))) for f in files]
    line.stage("joining the replay to its capture")
    try:
        return join_captures(trace, captures, whole_subtree=reads_inside)[0]
    except CaptureError as exc:
        raise UsageError(f"--graph-capture: {exc}") from None


def _run_program(program: list[str], args: argparse.Namespace, line: StageLine) -> tuple[Any, str]:
    try:
        # deferred: torch (seconds to load), only when a program is run
        import torch  # noqa: F401 - the profiler needs it; say so in one line when it is missing
    except ImportError:
        raise UsageError("running a program needs torch (pip install torch); --trace FILE reads a trace without it")
    # deferred: gzip and the trace reader (~8 ms of imports), only when a trace is read
    from rooftop.store.tracefile import load_trace

    with tempfile.TemporaryDirectory(prefix="rooftop-profile-") as tmp:
        out = Path(args.save_trace) if args.save_trace else Path(tmp) / "trace.json"
        # with --json, stdout carries the one JSON object: the program's own output goes to stderr
        with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
            rec = run_script(program, out, steps=args.steps)  # NotPython, ProgramFailed: bad input
        if not rec.trace_path.is_file():
            raise UsageError("the program recorded nothing (it ended before the profiler wrote its trace)")
        try:
            trace = load_trace(rec.trace_path, line.reading(rec.trace_path, "reading the program's trace"))
        except EmptyTrace:
            raise UsageError(f"{clean(' '.join(program))} ran no torch ops: nothing to place on the roofline") from None
    if rec.whole_run:
        sys.stderr.write("rooftop profile: no step seen (no nn.Module call): the whole run was recorded\n")
    elif rec.warmup_only:
        sys.stderr.write("rooftop profile: the program ran one step: showing it, first-call costs included\n")
    elif rec.steps_kept < args.steps:
        sys.stderr.write(f"rooftop profile: the program ran {rec.steps_seen} steps; recorded {rec.steps_kept} "
                         "after the warm-up step\n")
    return trace, " ".join(program)


# -- Nsight Compute ---------------------------------------------------------------------


def _ncu(args: argparse.Namespace) -> int:
    # deferred: the Nsight Compute reader (~9 ms of imports), only with --ncu
    from rooftop.models.ncu import DEVICE_NAME, NcuError, read_ncu

    p = Path(args.ncu)
    if not p.is_file():
        raise UsageError(f"{p}: no such file (give an `ncu --csv --page raw` export)")
    try:
        with p.open(encoding="utf-8", errors="replace", newline="") as f:
            export = read_ncu(f)
    except NcuError as exc:
        raise UsageError(f"{p}: {exc}") from None
    if export.skipped:
        sys.stderr.write(f"rooftop profile: {clean(export.warning())}\n")
    kernels = export.kernels
    device = file_device(args.db, _device_list(getattr(args, "device", None)), "profile",  # no -d: the GPU ncu
                         kernels[0].device_name, unnamed=f"no {DEVICE_NAME} column")[0]  # ran on, as a trace's
    if args.json:
        print_json({"device": device.id, "kernels": [k.to_dict(device) for k in kernels],
                    "skipped_rows": export.skipped})
        return 0

    make_console().print(ncu_report(kernels, device, args.top, args.wide), crop=not args.wide)
    return 0


# -- two stored profiles -------------------------------------------------------------------


def _stored(store: Any, ref: str) -> tuple[Any, StoredProfile]:
    run = store.run(ref)
    if not is_profile(run):
        raise UsageError(f"run {run.label} is a {run.plan or 'measurement'} run, not a profile "
                           "(`rooftop runs` lists them; profiles have plan 'profile')")
    samples = store.samples(run.id)
    problem = profile_problem(run, samples)  # a store written before imports were checked may hold one
    if problem:
        raise UsageError(f"run {run.label}: the stored profile is malformed ({problem}), so it cannot be compared")
    return run, stored_profile(run, samples)


def _compare(args: argparse.Namespace) -> int:
    with open_store(args.db) as store:
        (ra, pa), (rb, pb) = (_stored(store, r) for r in args.compare)
    diffs = diff_groups(pa.groups, pb.groups)
    split = diff_split(pa.summary, pb.summary)
    if args.json:
        print_json({"a": ra.id, "b": rb.id, "summary": {k: list(v) for k, v in split.items()},
                   "ops": [d.to_dict() for d in diffs]})
        return 0

    make_console().print(compare_report(ra, rb, split, diffs, args.top, args.wide), crop=not args.wide)
    return 0
