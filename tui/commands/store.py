"""`rooftop runs`, `show`, `rename`, `delete`, `export`, `import`: the runs in the store."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Sequence

from rooftop.models.calibrate import Calibration
from rooftop.models.comm import comm_points, fit_points
from rooftop.models.safetext import safe_text
from rooftop.models.spec import SpecError, parse_count
from rooftop.models.units import fmt_count
from rooftop.store.comms import is_comm
from rooftop.store.critpath import stored_joined, stored_path
from rooftop.store.db import inspect
from rooftop.store.fleets import fleet_of
from rooftop.store.io import (
    CSV_LIMITS, IMPORT_LIMITS, add_sources, export_csv, export_json, measurement_document, read_sources, run_document,
)
from rooftop.store.locations import db_path, is_chosen
from rooftop.store.runs import Run, Store
from rooftop.store.workloads import (
    is_profile, placed_on, profile_document, profile_problem, profile_summary, stored_workload,
)
from rooftop.tui.commands.common import UsageError, add_db_option, add_out_option, add_wide_option, command_text
from rooftop.tui.commands.job import share_profile
from rooftop.tui.render.comm import comm_report
from rooftop.tui.render.critpath import joined_text
from rooftop.tui.render.job import job_report
from rooftop.tui.render.jsonout import dumps_json, print_json
from rooftop.tui.render.profile import profile_device, profile_report
from rooftop.tui.render.report import Prose, make_console, profile_detail
from rooftop.tui.render.runs import run_facts, runs_table, sample_groups_table, samples_table
from rooftop.tui.services.context import NotAProfile, open_store, store_profiles


def _runs_of(store: Store, refs: Sequence[str]) -> list[Run]:
    return [store.run(r) for r in refs]


def cmd_runs(args: argparse.Namespace) -> int:
    path = db_path(args.db)
    if not path.exists():
        why = (f"its folder {path.parent} does not exist: create it, or give another --db" if
               is_chosen(args.db) and not path.parent.is_dir() else "`rooftop import FILE` or a measurement creates it")
        sys.stdout.write("[]\n" if args.json else safe_text(f"no runs yet: {path} does not exist; {why}") + "\n")
        return 0
    with open_store(args.db) as store:
        runs = store.runs()
        if args.json:
            print_json([_run_json(r) for r in runs])
            return 0

        console = make_console()
        if not runs:
            console.print(Prose(safe_text(f"no runs in {store.path} yet: `rooftop measure` records one, "
                                          "`rooftop import FILE` adds some")))
            return 0
        console.print(runs_table(runs))
        console.print()
        devices = (" Complete runs with roofs work as --device; profile and comm runs have none." if
                   any(_is_device(r) for r in runs) else "")
        console.print(Prose(safe_text(f"{fmt_count(len(runs), 'run')} in {store.path}. Name a run by its id (4+ hex "
                                      f"digits) or a name (`rooftop rename RUN NAME`).{devices}")))
    return 0


def _run_json(run: Run) -> dict[str, Any]:
    return {**dataclasses.asdict(run), "short_id": run.short_id}


SHOW_ROWS = 50  # sample rows `rooftop show` lists by default: a run of 100k samples is counted, not printed


def cmd_show(args: argparse.Namespace) -> int:
    """One run; a profile or a comm run as `rooftop profile` / `rooftop comm` show theirs, after the facts.

    A measurement's samples are counted per kernel in SQL and listed a page at a time (--page, --rows,
    --all), so a large run shows at once; a comm or profile run's report reads all of its samples.
    """
    if args.out:
        # deferred: the share modules (xml.etree, ~20 ms of imports), only with --out
        from rooftop.tui.share.out import out_target

        out_target(args.out)  # a bad path is said before the store is read
    with open_store(args.db) as store:
        run = store.run(args.run)
        if args.out:
            _share_run(args, store, run)
        if args.json:
            # deferred: the run kinds' JSON (~15 ms of imports: the check rules), only for show --json
            from rooftop.tui.render.runkinds import show_json_extra

            print_json({**run_document(store, run), **show_json_extra(run, store.samples(run.id))})
            return 0

        _page_of(run, args)  # a page past the last is refused before anything is printed
        console = make_console()
        console.print(run_facts(run))
        if run.has_ceilings:
            console.print()
            console.print(profile_detail(store.profile(run.id)))
        report = SHOW_REPORTS.get(run.kind)
        shown = report is not None and report(console, args, store, run)
        if run.samples and not shown:
            _show_sample_page(console, store, run, args)
    return 0


def _show_fleet(console: Any, args: argparse.Namespace, store: Store, run: Run) -> bool:
    """A fleet run's table of members and what was flagged."""
    # deferred: the fleet tables (~8 ms of imports), only to show a fleet run
    from rooftop.tui.render.fleet import fleet_flag_lines, fleet_tables

    report = fleet_of(store, run)
    console.print()
    console.print(fleet_tables(report))
    for line in fleet_flag_lines(report):
        console.print(line)
    return True


def _show_sample_page(console: Any, store: Store, run: Run, args: argparse.Namespace) -> None:
    """One page of the run's samples (read with LIMIT/OFFSET), after a count of them per kernel when the
    page is not all of them, and a line saying how many are not shown and how to see them."""
    rows, first = _page_of(run, args)
    page = store.samples(run.id, rows, first)
    if rows is not None and rows < run.samples:
        console.print()
        console.print(sample_groups_table(store.sample_groups(run.id)))
    console.print()
    console.print(samples_table(page, start=first))
    after = max(0, run.samples - first - rows) if rows else 0
    if first or after:
        console.print()
        console.print(Prose(_page_line(run.samples, first, rows or 0, args.page, after)))


def _page_of(run: Run, args: argparse.Namespace) -> tuple[int | None, int]:
    """The page --rows/--page/--all ask for: (rows, first row); a page past the last one is refused."""
    if args.all and args.page != 1:  # the page was ignored: every sample was listed
        raise UsageError(f"--all lists every sample and --page {args.page} one page of them: give one")
    rows = None if args.all else args.rows
    first = (args.page - 1) * rows if rows else 0
    if first and rows and first >= run.samples:  # first is 0 without rows
        pages = max(1, -(-run.samples // rows))
        raise UsageError(f"--page {args.page}: the run has {fmt_count(run.samples, 'sample')}, "
                         f"{fmt_count(pages, 'page')} of {rows}; give --page 1 to {pages}")
    return rows, first


def _page_line(total: int, first: int, rows: int, page: int, after: int) -> str:
    """Which samples the page listed, how many it left out, and the options that show them."""
    line = f"samples {first}–{min(total, first + rows) - 1} of {total:,} listed"
    if after:
        line += f"; {after:,} after these not shown: --page {page + 1} lists the next {min(rows, after):,}"
    return line + "; --rows N lists N per page, --all every one"


def _show_comm(console: Any, args: argparse.Namespace, store: Store, run: Run) -> bool:
    """A comm run as `rooftop comm` reports it; False (the samples table instead) when its points are malformed."""
    samples = store.samples(run.id)
    try:
        points = comm_points(samples)
        report = comm_report(points, fit_points(points), run.backend) if points else None
    except (KeyError, TypeError, ValueError) as exc:  # an imported run whose points name no known collective
        sys.stderr.write(safe_text(f"rooftop show: a stored collective is malformed ({exc}): showing the samples "
                                   "as stored") + "\n")
        return False
    if report is None:
        return False
    console.print()
    console.print(report)
    return True


def _same(a: Any, b: Any) -> bool:
    """Two stored figures agree (None with None; numbers to a part in 10⁹, as JSON keeps them)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return a is None and b is None


def _show_profile(console: Any, args: argparse.Namespace, store: Store, run: Run) -> bool:
    """The profile's report on the roofs it was placed on; False (the samples table instead) when those roofs are
    no longer known or the stored profile is malformed."""
    samples = store.samples(run.id)
    problem = profile_problem(run, samples)
    if problem:  # a store written before imports were checked may hold one
        sys.stderr.write(safe_text(f"rooftop show: the stored profile is malformed ({problem}): "
                                   "showing its op groups as stored") + "\n")
        return False
    placed, device = _placed_device(args, run)
    if device is None:
        sys.stderr.write(safe_text(f"rooftop show: the roofs this profile was placed on "
                                   f"({placed or '?'}) are not known here: "
                                   "showing its op groups as stored") + "\n")
        return False
    try:
        work = stored_workload(run, samples, device)
    except ValueError as exc:
        sys.stderr.write(safe_text(f"rooftop show: {exc}: showing its op groups as stored") + "\n")
        return False
    stored, now = profile_summary(run), work.summary()
    if "headline" not in stored:  # kept before MFU left out the ops above their roof: its figures counted every op
        now = {"mfu": work.mfu_over(work.groups), "bandwidth_utilisation": work.bandwidth_over(work.groups)}
    if any(not _same(stored.get(k), now[k]) for k in ("mfu", "bandwidth_utilisation")):
        sys.stderr.write(safe_text(f"rooftop show: the roofs of {placed} have changed since this profile was "
                                   "taken: showing its op groups as stored") + "\n")
        return False
    console.print()
    job = stored.get("job")
    if isinstance(job, dict) and job.get("ranks"):  # a distributed job's: its ranks first, as profile shows them
        console.print(job_report(job, args.wide), crop=not args.wide)
        console.print()

    joined = stored_joined(stored)
    console.print(profile_report(work, wide=args.wide, path=stored_path(stored),
                                 path_note=joined_text(joined) if joined else ""), crop=not args.wide)
    return True


def _placed_device(args: argparse.Namespace, run: Run) -> tuple[str | None, Any]:
    """The name of the roofs a profile was placed on, and those roofs (a DeviceProfile) where they are still known:
    the catalog's, or a measured or named run's in the store; None where they are not."""
    placed = placed_on(run)
    try:
        extra = store_profiles(args.db, [placed] if placed else [])
    except NotAProfile:
        extra = {}
    return placed, profile_device(run, extra)


SHARED_KINDS = ("profile", "measurement")  # the kinds of run `show --out` writes


def _share_run(args: argparse.Namespace, store: Store, run: Run) -> None:
    """--out FILE: a kept profile as `rooftop profile --out` wrote it (its report made of the document its --json
    printed, on the roofs it was placed on), a kept measurement as its report (ceilings with their conditions, the
    roofline, the curves); a comm or fleet run is refused in one line before anything is written."""
    if run.kind not in SHARED_KINDS:
        raise UsageError(f"--out {args.out}: run {run.label} is a {run.kind} run; --out writes a kept "
                         f"{' or a '.join(SHARED_KINDS)} (`rooftop show {run.short_id} --json` has this one's figures)")
    samples = store.samples(run.id)
    if run.kind == "profile":
        placed, device = _placed_device(args, run)
        if device is None:
            raise UsageError(f"--out {args.out}: the roofs profile {run.label} was placed on ({placed or '?'}) are "
                             "not known here, so it cannot be drawn on them")
        try:
            doc = profile_document(run, samples) if not profile_problem(run, samples) else None
        except ValueError:
            doc = None
        if doc is None:
            raise UsageError(f"--out {args.out}: the stored profile {run.label} is malformed "
                             "(`rooftop show` lists its op groups as stored)")
        share_profile(args, doc, device)
        return
    _share_measurement(args, store, run, samples)


def _share_measurement(args: argparse.Namespace, store: Store, run: Run, samples: list) -> None:
    """--out FILE of a kept measurement: the report `measure_report` makes of what `measure --json` printed."""
    # deferred: the share modules (xml.etree, ~60 ms of imports), only with --out
    from rooftop.tui.share.charts import measure_charts
    from rooftop.tui.share.figure import chart_svg_inline
    from rooftop.tui.share.html import rooftop_version
    from rooftop.tui.share.out import Shared, share_out
    from rooftop.tui.share.reports import measure_report

    prof = store.stored_profile(run.id)
    if prof is None:
        raise UsageError(f"--out {args.out}: run {run.label} has no ceilings (it did not complete), so there is no "
                         "roofline to draw; `rooftop show` lists its samples")
    charts = measure_charts(Calibration(prof, (), (), (), ()), samples, run.started_at)
    doc = measurement_document(store, run)
    share_out(args.out, Shared(charts, lambda: measure_report(
        doc, [chart_svg_inline(c) for c in charts], version=rooftop_version(), command=command_text(args))))


# What `rooftop show` prints after a run's facts and ceilings, by its kind (`Run.kind`): the report of the command
# that made it; a measurement's (and one whose report cannot be made) is its table of samples.
SHOW_REPORTS = {"comm": _show_comm, "profile": _show_profile, "fleet": _show_fleet}


def cmd_rename(args: argparse.Namespace) -> int:
    with open_store(args.db) as store:
        run = store.rename(args.run, args.name)
        use = f"; use it as --device {run.name}" if _is_device(run) else ""
        sys.stdout.write(safe_text(f"run {run.short_id} is now {run.name}{use}") + "\n")
    return 0


def _is_device(run: Run) -> bool:
    """A run that works as --device: complete, with ceilings (a profile or comm run has none)."""
    return run.status == "complete" and run.has_ceilings


def cmd_delete(args: argparse.Namespace) -> int:
    with open_store(args.db) as store:
        run = store.delete(args.run)
        sys.stdout.write(safe_text(f"deleted run {run.short_id}{f' ({run.name})' if run.name else ''} "
                                   f"and its {fmt_count(run.samples, 'sample')}") + "\n")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with open_store(args.db) as store:
        runs = store.runs() if args.all else _runs_of(store, args.run)
        if not runs:
            raise UsageError("name one or more runs (see `rooftop runs`), or give --all")
        if args.format == "json":
            doc = export_json(store, runs)
            text = dumps_json(doc)
            if not args.out or args.out == "-":
                sys.stdout.write(text)
                return 0
            out = Path(args.out)
            _refuse_overwrite([out], args.force)
            out.write_text(text, encoding="utf-8")
            brought = len(doc["runs"]) - len({r.id for r in runs})  # a fleet run's members come with it
            sys.stdout.write(safe_text(f"wrote {fmt_count(len(doc['runs']), 'run')} to {out}"
                                       + (f" ({brought} of them a fleet's members)" if brought else "")) + "\n")
            return 0
        if args.out == "-":
            raise UsageError("--out -: a CSV export writes two files (summary.csv and roofs.csv) into a folder, "
                             "so it cannot go to stdout; give a folder, or --format json for stdout")
        runs = _csv_runs(runs, named=not args.all)
        files = export_csv(store, runs)
    folder = Path(args.out or f"rooftop-{runs[0].short_id if len(runs) == 1 else 'runs'}")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder}: CSV export writes summary.csv and roofs.csv into a folder; {folder} is a file")
    targets = [folder / name for name in files]
    _refuse_overwrite(targets, args.force)
    folder.mkdir(parents=True, exist_ok=True)
    for t in targets:
        t.write_text(files[t.name], encoding="utf-8")
    sys.stdout.write(safe_text(f"wrote {', '.join(str(t) for t in targets)}") + "\n")
    return 0


def _csv_runs(runs: list, named: bool) -> list:
    """The runs the CSVs can carry: a profile's op groups and a comm sweep's collectives have no columns there
    (they would come back as other runs). One named is refused; with --all they are left out, said in one line."""
    left = [r for r in runs if is_profile(r) or is_comm(r)]
    if not left:
        return runs
    what = ", ".join(f"{r.label} ({r.kind})" for r in left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
    if named or len(left) == len(runs):
        raise UsageError(f"{what}: a profile or comm run has no place in the CSVs (they hold measured points and "
                         "ceilings); export it with --format json")
    sys.stderr.write(safe_text(f"rooftop export: left out {fmt_count(len(left), 'run')} the CSVs cannot carry, "
                               f"{what}: export {'it' if len(left) == 1 else 'them'} with --format json") + "\n")
    return [r for r in runs if r not in left]


def _refuse_overwrite(paths: list, force: bool) -> None:
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise UsageError(f"{', '.join(existing)} already exists; choose another --out, or add --force to overwrite")


def cmd_import(args: argparse.Namespace) -> int:
    inspect(db_path(args.db))  # an unusable database is named first (read-only: creates nothing)
    sources = read_sources(args.files)  # then a refused file stops the import before the database is created
    with open_store(args.db, create=True) as store:
        for res in add_sources(store, sources):
            names = ", ".join(r.label for r in res.added)
            line = f"{res.path} ({res.kind}): added {fmt_count(len(res.added), 'run')}"
            line += f" [{names}]" if names else ""
            if res.skipped:
                kept = "it was" if len(res.skipped) == 1 else "they were"
                line += f"; {len(res.skipped)} already present, left as {kept}"
            sys.stdout.write(safe_text("; ".join([line, *res.notes])) + "\n")
    return 0


def _count_option(text: str) -> int:
    """argparse type of --rows / --page: a whole number ≥ 1, written as the op language writes counts (1e3, 2^10)."""
    try:
        return parse_count(text, "value")
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_store_commands(sub: Any) -> None:
    """runs, show, rename, delete, export, import."""
    rn = sub.add_parser("runs", help="list the measured and imported runs in the store",
                        description="Every run in the store, oldest first: status, device, host, samples.")
    rn.add_argument("--json", action="store_true", help="print JSON")
    add_db_option(rn)
    rn.set_defaults(func=cmd_runs)

    sh = sub.add_parser("show", help="show one run: facts, ceilings, samples",
                        description="One run: where and how it was measured, its ceilings and its sample points, "
                                    f"{SHOW_ROWS} to a page (a run with more is first counted per kernel); "
                                    "a comm run as `rooftop comm` shows it, a profile as `rooftop profile` does.")
    sh.add_argument("run", metavar="RUN", help="run id (4+ hex digits) or name")
    sh.add_argument("--json", action="store_true", help="print the run as rooftop JSON (SI units, every sample)")
    sh.add_argument("--rows", type=_count_option, default=SHOW_ROWS, metavar="N",
                    help=f"sample rows per page (default {SHOW_ROWS}); a larger run is counted per kernel above them")
    sh.add_argument("--page", type=_count_option, default=1, metavar="P", help="which page of samples (default 1)")
    sh.add_argument("--all", action="store_true", help="list every sample (slow for a run of many thousands)")
    add_wide_option(sh)
    add_out_option(sh, "a kept profile or measurement: .html its whole report, .svg or .png its roofline")
    add_db_option(sh)
    sh.set_defaults(func=cmd_show)

    re_ = sub.add_parser("rename", help="give a run a name (usable as --device NAME when it has roofs)",
                         description="Name a run; the name of a complete run with roofs works wherever a device "
                                     "id does.")
    re_.add_argument("run", metavar="RUN", help="run id or current name")
    re_.add_argument("name", metavar="NAME", help="letters, digits, '.', '_', '-'; starting with a letter; not hex "
                                                  "digits only (that reads as a run id), not a device id")
    add_db_option(re_)
    re_.set_defaults(func=cmd_rename)

    de = sub.add_parser("delete", help="delete a run and its samples",
                        description="Delete a run with its samples, ceilings and telemetry (not undoable; "
                                    "`rooftop export RUN` first to keep a copy).")
    de.add_argument("run", metavar="RUN", help="run id or name")
    add_db_option(de)
    de.set_defaults(func=cmd_delete)

    ex = sub.add_parser("export", help="write runs as rooftop JSON or the reference CSVs",
                        description="json: rooftop's own complete format (to stdout, or --out FILE). "
                                    "csv: the reference repository's summary.csv (every measured point) and "
                                    "roofs.csv (B per memory level, F per compute path), into --out FOLDER "
                                    "(default rooftop-RUNID); `rooftop import FOLDER` makes each run one run "
                                    f"again. {CSV_LIMITS}")
    ex.add_argument("run", nargs="*", metavar="RUN", help="run ids or names")
    ex.add_argument("--all", action="store_true", help="every run in the store")
    ex.add_argument("--format", choices=("json", "csv"), default="json", help="json (default) or csv")
    ex.add_argument("-o", "--out", metavar="PATH", help="json: a file ('-' = stdout); csv: a folder (two files)")
    ex.add_argument("--force", action="store_true", help="overwrite existing files")
    add_db_option(ex)
    ex.set_defaults(func=cmd_export)

    im = sub.add_parser("import", help="import rooftop JSON or the reference roofs.csv / summary.csv",
                        description="Import runs: rooftop JSON exports, or the reference repository's roofs.csv "
                                    "(ceilings) and summary.csv (sample points). A summary.csv and a roofs.csv from "
                                    "one folder (give the folder, or both files) are one export: each target becomes "
                                    "ONE run with the points of the one and the ceilings of the other. Each device "
                                    "becomes a profile; importing a file again adds nothing. Every file is checked "
                                    "before anything is stored: if one is refused, nothing is imported. "
                                    f"{IMPORT_LIMITS} {CSV_LIMITS}")
    im.add_argument("files", nargs="+", metavar="FILE", help="a .json or .csv file, or a folder of a CSV export")
    add_db_option(im)
    im.set_defaults(func=cmd_import)
