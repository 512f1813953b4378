"""`rooftop profile --trace A B … | DIR` and `-- torchrun …`: a distributed job, read one rank at a time.

Each trace is read, reduced to its rank's summary (rooftop.models.program.job) and
dropped before the next is read, so the job's size does not bound memory. A
file that does not belong (another job, a rank seen twice, a damaged file) gets
one line naming it and is left out; the ranks that read well are kept.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rich.text import Text

from rooftop.models.devicefamily import trace_vendor
from rooftop.models.links import GPU_LINK_LEVELS, gpu_link
from rooftop.models.profile import DeviceProfile
from rooftop.models.program.critpath import WindowError, windows_of
from rooftop.models.program.job import (
    MAX_WORLD, align, build_job, foreign_ranks, group_conflicts, missing_count, missing_text, process_groups,
    summarize, without,
)
from rooftop.models.program.jobpath import HeldRanks, job_path
from rooftop.models.program.workload import build_workload
from rooftop.models.safetext import safe_text
from rooftop.models.trace.read import TraceError
from rooftop.probes.torchrun import Stopped, run_torchrun
from rooftop.store.critpath import path_doc
from rooftop.tui.commands.common import UsageError, _device_list, command_text
from rooftop.tui.commands.progress import StageLine
from rooftop.tui.render.critpath import joined_text
from rooftop.tui.render.job import job_report
from rooftop.tui.render.jsonout import print_json
from rooftop.tui.render.profile import TOP, profile_report, relabelled
from rooftop.tui.render.report import make_console
from rooftop.tui.render.text import clean
from rooftop.tui.services.stopsignals import leave_terminal, stop_on_signals
from rooftop.tui.services.workloads import keep_workload, link_roofs, trace_device

if TYPE_CHECKING:
    from rooftop.models.trace.read import Trace

TRACE_SUFFIXES = (".json", ".json.gz")
# only a name that says `rank`: a date, a version or a model's size in a name (train-20261130, ROCm6_2,
# qwen2.5) is no rank
RANK_IN_NAME = re.compile(r"(?<![a-z])rank[-_.]?(\d+)(?!\d)", re.IGNORECASE)
JOB_FIELDS = ("world size", "backend", "GPU", "NCCL version")  # what must agree between the ranks of one job


def trace_files(paths: list[str]) -> list[Path]:
    """The trace files given: files as named, a folder's .json / .json.gz files (sorted by name); TraceError for
    a folder with none."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(x for x in p.iterdir() if x.is_file() and x.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise TraceError(f"{p}: a folder with no traces in it (.json or .json.gz)")
            out.extend(found)
        else:
            out.append(p)
    return out


def rank_from_name(path: Path) -> int | None:
    """The rank a file name gives: `…rank-3…`, `rank_3`, `rank3`; None where the name does not say `rank`."""
    m = RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def is_count(x: Any) -> bool:
    """A whole number that JSON gave as one (True is no rank nor world size, though Python counts it an int)."""
    return isinstance(x, int) and not isinstance(x, bool)


def world_of(d: Any) -> tuple[int | None, str]:
    """The trace's world size (None where it gives none) and, where it gives one that cannot be, why."""
    w = d.get("world_size")
    if w is None:
        return None, ""
    if not is_count(w) or not 1 <= w <= MAX_WORLD:
        return None, (f"world_size {clean_value(w)} in its distributedInfo is not a plausible world size "
                      f"(a whole number 1..{MAX_WORLD:,})")
    return w, ""


def rank_of(d: Any, path: Path, world: int | None) -> tuple[int | None, str]:
    """The file's rank: its distributedInfo's, else its name's (`…rank-N…`); and why it has none it can use."""
    r = d.get("rank")
    where = "in its distributedInfo"
    if r is None:
        r, where = rank_from_name(path), "in its name"
        if r is None:
            return None, "no rank in its distributedInfo or its name (name such files …rank-N…)"
    top = (world or MAX_WORLD) - 1
    allowed = f"a whole number 0..{top}" + (f", world size {world}" if world else "")
    if not is_count(r):
        return None, f"rank {clean_value(r)} {where} is not a rank ({allowed})"
    if not 0 <= r <= top:
        return None, f"rank {r} {where} is outside the job's ranks ({allowed})"
    return r, ""


def clean_value(x: Any) -> str:
    """A value from the file, short and safe to print."""
    text = clean(repr(x) if isinstance(x, str) else str(x))
    return text if len(text) <= 40 else text[:39] + "…"


def is_job(paths: list[str]) -> bool:
    """More than one trace, or a folder of them."""
    return len(paths) > 1 or any(Path(p).is_dir() for p in paths)


def job_vendor(trace: Any, device: Any) -> str:
    """The GPU vendor of a job's traces: the trace's device (its name, else its properties), else the profile's."""
    return trace_vendor(trace.device_name, trace.device_props) or str(getattr(device, "vendor", "") or "")


def read_job(paths: list[Path], device_for: Callable[[Trace], tuple[DeviceProfile, str]],
             read: dict[Path, Any] | None = None, held: Any = None, *, db: str | Path | None = None,
             link: str | None = None, per_node: int | None = None, window: str | None = None,
             line: StageLine | None = None) -> tuple[Any, Any, list[str]]:
    """Read the traces one at a time: (the job, the lowest rank's workload, the problems). `device_for(trace)`
    chooses the device's roofs from the first trace read; `read` holds traces already read, by path (given
    up as they are used); `held` (a rooftop.models.program.jobpath.HeldRanks) keeps, within its limits, the ranks' traces
    for the job's critical path. The job's link roofs come from the store at `db` (a comm run's, else the
    device's); `link` is --link, `per_node` the ranks per node torchrun started (None: told from the ranks);
    `window` is --window NAME, checked against the first trace read before its roofs are chosen; `line` shows each
    file as it is read."""
    read = read if read is not None else {}
    line = line or StageLine()  # none given: one never entered, which shows nothing
    # deferred: gzip and the trace reader (~8 ms of imports), only when a trace is read
    from rooftop.store.tracefile import load_trace

    summaries = []
    problems: list[str] = []
    seen: dict[int, Path] = {}
    job_id: tuple | None = None
    groups: dict[str, Any] = {}  # the process groups named so far: name → (size, ranks)
    first_path: Path | None = None
    first_work = device = None
    intra = "nvlink"
    for k, p in enumerate(paths, 1):
        try:
            trace = read.pop(p) if p in read else load_trace(p, line.reading(p, f"reading {k}/{len(paths)}"))
        except TraceError as exc:
            problems.append(f"{clean(str(exc))}: left out")
            continue
        d = trace.distributed
        file_world, why = world_of(d)
        rank, why = (None, why) if why else rank_of(d, p, file_world or (job_id[0] if job_id else None))
        if rank is None:
            problems.append(f"{p}: {why}: left out")
            continue
        ident = (file_world, d.get("backend"), trace.device_name or None, d.get("nccl_version"))
        mine = process_groups(d)
        if job_id is None:
            job_id, first_path = ident, p
        differ = [f"{name} {clean(str(x))} against {clean(str(y))} in {first_path}"
                  for name, x, y in zip(JOB_FIELDS, ident, job_id) if x is not None and y is not None and x != y]
        differ += [f"process group {clean(name)} has {x} against {y} in {first_path}"
                   for name, x, y in group_conflicts(groups, mine)]
        if differ:
            problems.append(f"{p}: from another job ({'; '.join(differ)}): left out")
            continue
        if rank in seen:
            problems.append(f"{p}: rank {rank} again ({seen[rank]} is rank {rank} too): left out")
            continue
        seen[rank] = p
        job_id = tuple(x if x is not None else y for x, y in zip(job_id, ident))  # what a later file adds
        groups = {**mine, **groups}
        if device is None:
            check_window(trace, window)  # a --window NAME it lacks: one line, said before the roofs
            device = device_for(trace)
            intra = gpu_link(job_vendor(trace, device[0]))
        line.stage(f"placing rank {rank}'s op groups on the roofs of {device[0].id}")
        work = build_workload(trace, device[0], device_note=device[1])
        summaries.append(summarize(trace, work, rank, str(p)))
        if held is not None:
            held.add(rank, trace, work)
        if first_work is None or rank < min(s.rank for s in summaries[:-1]):
            first_work = work
        del trace, work
    if not summaries:
        return None, None, problems
    world = job_id[0] if job_id and isinstance(job_id[0], int) and job_id[0] > 0 else None
    backend = str(job_id[1] or "") if job_id else ""
    if world:
        summaries = in_world(summaries, world, problems)
        if not summaries:
            return None, None, problems
    summaries, al = one_job(summaries, problems)
    if world:
        have = {x.rank for x in summaries}
        if missing_count(have, world):
            problems.append(f"missing ranks: {missing_text(have, world)} ({len(have)} of {world} ranks read: no "
                            "trace given for the rest)")
    assert device is not None  # set with the first trace read, and summaries is not empty
    roofs = link_roofs(db, device[0], backend, intra)
    link = link or ""
    if link in GPU_LINK_LEVELS:  # --link nvlink on an AMD job: its GPU link, xGMI
        link = intra
    job = build_job(summaries, world, backend, roofs, per_node=per_node,
                    link=link, problems=problems, alignment=al, intra=intra)
    return job, first_work, problems


def one_job(summaries: list[Any], problems: list[str]) -> tuple[list[Any], Any]:
    """The ranks of the lowest rank's job, aligned: one whose collectives cannot be of it (they pair with none of
    the lowest rank's, or they ended far apart in wall-clock time) gets its line and is left out."""
    summaries = sorted(summaries, key=lambda x: x.rank)
    al = align(summaries)
    foreign = foreign_ranks(summaries, al)
    for x in summaries:
        if x.rank in foreign:
            problems.append(f"{x.path}: rank {x.rank}: {foreign[x.rank]}: left out")
    return [x for x in summaries if x.rank not in foreign], without(al, set(foreign))


def in_world(summaries: list[Any], world: int, problems: list[str]) -> list[Any]:
    """The ranks inside 0..world-1: a file that gave no world size of its own was read before the job's was
    known; one beyond it gets its line here."""
    for x in summaries:
        if x.rank >= world:
            problems.append(f"{x.path}: rank {x.rank} is outside the job's ranks (0..{world - 1}, "
                            f"world size {world}): left out")
    return [x for x in summaries if x.rank < world]


def profile_job(args: argparse.Namespace, paths: list[str], source: str, backend: str, read: Any = None,
                per_node: int | None = None) -> int:
    """Many traces, one job: the rank table, the straggler, the collectives; the lowest rank's op groups; the job's
    critical path (each collective joined across the ranks held for it). The roofs are picked as for one trace
    (services' `trace_device`), from the first trace read; `per_node`: the ranks per node torchrun started."""
    files = trace_files(paths)
    held = HeldRanks()
    ids = _device_list(getattr(args, "device", None))
    with StageLine() as line:
        job, work, problems = read_job(files, lambda t: trace_device(args.db, ids, t), read, held, db=args.db,
                                       link=args.link, per_node=per_node, window=getattr(args, "window", None),
                                       line=line)
        if job is not None:
            line.stage("the job's critical path and its what-ifs")
            path, joined = job_critical_path(held, {r.rank for r in job.ranks}, getattr(args, "window", None))
    if job is None and len(problems) == 1 and [Path(paths[0])] == files:  # one file named: its problem alone
        raise UsageError(problems[0].removesuffix(": left out"))
    if job is None:
        print_problems(problems)
        raise UsageError("no trace could be read as a rank of the job (each file's problem is above)")
    del held  # the ranks' traces go before the report is made
    print_problems(problems)
    with StageLine() as line:
        if not args.no_save:
            line.stage("keeping the run")
        run_id = None if args.no_save else keep_workload(args.db, work, source, backend, job.to_dict(), path=path,
                                                         joined=joined)
        if getattr(args, "out", None):
            line.stage(f"writing {Path(args.out).name}")
            share_profile(args, profile_doc(work, path, run_id, job, joined), work.device)
    if args.json:
        print_json(profile_doc(work, path, run_id, job, joined))
        return 0
    console = make_console()
    console.print(job_report(job.to_dict(), args.wide), crop=not args.wide)
    console.print(Text(""))
    console.print(Text(f"rank {job.ranks[0].rank}'s op groups:", style="bold"))
    console.print(profile_report(work, args.top, args.wide, path, joined_text(joined) if joined else ""),
                  crop=not args.wide)
    if run_id:
        sys.stderr.write(f"rooftop profile: saved as run {run_id[:8]}\n")
    return 0


def profile_doc(work: Any, path: Any, run_id: str | None, job: Any = None, joined: Any = None) -> dict[str, Any]:
    """The one document `rooftop profile --json` prints (and its HTML report is made of): the workload's ops and
    summary, a job's ranks and collectives (`job`), the critical path (`joined`: a job's, whose it is), the run id."""
    doc = work.to_dict()
    if job is not None:
        doc.update(job.to_dict())
    if path is not None:
        doc.update(path_doc(path, joined))
    doc["run_id"] = run_id
    return doc


def share_profile(args: argparse.Namespace, doc: dict[str, Any], device: Any) -> None:
    """--out FILE: the profile `doc` (what --json prints) as its HTML report, or its roofline as SVG / PNG."""
    # deferred: the share modules (xml.etree, ~60 ms of imports), only with --out
    from rooftop.tui.share.figure import chart_svg_inline
    from rooftop.tui.share.html import rooftop_version
    from rooftop.tui.share.out import Shared, share_out
    from rooftop.tui.share import reports

    top = getattr(args, "top", TOP)  # `rooftop show` has no --top: the terminal's number of op groups
    charts = reports.profile_charts(doc, device, top)
    # in the page the roofline's title would repeat the page's own (the same words): the line under it stays
    inline = [replace(c, title="") if i == 0 else c for i, c in enumerate(charts)]
    share_out(args.out, Shared(charts, lambda: reports.profile_report(
        doc, [chart_svg_inline(c) for c in inline], version=rooftop_version(), command=command_text(args),
        top=top)))


def job_critical_path(held: Any, ranks: set[int], window: str | None) -> tuple[Any, Any]:
    """The job's critical path (its op groups named as the op table names them) and whose it is, from the ranks'
    traces `held` among `ranks` (those the job kept); (None, None) where none of them is held."""
    kept = held.of(ranks)
    if not kept:  # the one rank held past the limit was left out of the job
        return None, None
    check_window(kept[0].trace, window)
    alone = ""
    if held.over:
        alone = (f"the job's {held.read} rank traces are more than its critical path holds at once "
                 f"({held.limit_text()}), so each collective is not joined across the ranks")
    path, joined, work = job_path(kept, window, alone)
    return relabelled(path, work), joined


def check_window(trace: Any, name: str | None) -> None:
    """UsageError (one line naming some the trace has) where --window NAME names no annotation of the trace."""
    if name is not None:
        try:
            windows_of(trace, name)
        except WindowError as exc:  # said with the option it came from
            raise UsageError(f"--window {name}: {exc}") from None


def profile_torchrun(program: list[str], args: argparse.Namespace) -> int:
    """`-- torchrun …` (or `python -m torch.distributed.run …`): torch's launcher starts the ranks, each under the
    profiler, each writing its trace; the traces are then read as one job. SIGTERM, SIGINT and SIGHUP stop it:
    the ranks are stopped and one line says what was kept (exit status 128 + the signal)."""
    with stop_on_signals(threading.Event()) as stopped:  # from the start: torch alone takes seconds to load
        try:
            # deferred: torch (seconds to load), only when a program is launched
            import torch  # noqa: F401 - the launcher and the profiler need it
        except ImportError:
            raise UsageError("running a program needs torch (pip install torch); --trace FILE reads a trace without it")
        except KeyboardInterrupt:
            return tell_stopped(Stopped(signal.SIGINT, launched=False), args.save_trace)
        with tempfile.TemporaryDirectory(prefix="rooftop-profile-") as tmp:
            out = Path(args.save_trace) if args.save_trace else Path(tmp)
            try:
                with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
                    launched = run_torchrun(program, out, steps=args.steps, log_dir=Path(tmp) / "torchelastic",
                                            stopped=stopped)
            except Stopped as exc:  # NotPython, ProgramFailed: bad input, said by the exit map
                return tell_stopped(exc, args.save_trace)
            if stopped:  # as the launch ended: its traces are not read
                return tell_stopped(Stopped(stopped[0], launched.traces), args.save_trace)
            if not launched.traces:
                raise UsageError("no rank wrote a trace (the program ended before the profiler wrote one)")
            status = profile_job(args, [str(p) for p in launched.traces], " ".join(program), "torch.profiler",
                                 per_node=launched.nproc_per_node)
        if stopped:  # while the traces were read and the report made: it is whole
            sys.stderr.write(f"rooftop profile: stopped by {signal.Signals(stopped[0]).name} after the job ended; "
                             "the report is complete\n")
            return 128 + stopped[0]
        return status


def tell_stopped(stop: Any, save_trace: str | None) -> int:
    """The one line a stopped launch ends with, saying what was kept; its exit status (128 + the signal)."""
    name = signal.Signals(stop.signum).name
    if stop.signum == getattr(signal, "SIGHUP", None):
        leave_terminal()  # the terminal is gone: the line still goes to a file or a pipe
    n = len(stop.traces)
    written = f"the {n} rank trace{'s' if n != 1 else ''} written so far"
    if not stop.launched:
        what = f"stopped by {name} before the job started; nothing is kept"
    elif not n:
        what = f"stopped by {name}: the job and its ranks are stopped; nothing is kept (no rank had written its trace)"
    elif save_trace:
        what = (f"stopped by {name}: the job and its ranks are stopped; no profile is kept; {written} "
                f"{'are' if n != 1 else 'is'} kept in {save_trace}")
    else:
        what = (f"stopped by {name}: the job and its ranks are stopped; nothing is kept ({written} "
                f"{'are' if n != 1 else 'is'} deleted; --save-trace DIR keeps them)")
    sys.stderr.write(safe_text(f"rooftop profile: {what}") + "\n")  # the folder is the user's
    return 128 + stop.signum


def print_problems(problems: list[str]) -> None:
    for p in problems:
        sys.stderr.write(safe_text(f"rooftop profile: {p}") + "\n")  # it may quote a file's text
