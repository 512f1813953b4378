"""Profile: the kept profiles of your programs — pick one, read its op groups by time share and its step split.

A profile is made on the command line (`rooftop profile -- python script.py`,
`--trace FILE`) and kept in the store; this tab only shows it, as stored.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Static

from rooftop.models.program.critpath import CriticalPath, FixFirst
from rooftop.models.program.job import TOP_GROUPS
from rooftop.models.units import fmt_bandwidth, fmt_bytes, fmt_flops_rate, fmt_percent, fmt_time
from rooftop.models.program.workload import RANGES, OpGroup, flag_lines
from rooftop.models.sample import Sample
from rooftop.store.db import StoreError
from rooftop.store.runs import Run
from rooftop.store.critpath import stored_path
from rooftop.store.workloads import StoredProfile, placed_on, profile_summary, stored_profile
from rooftop.tui.app.export import export_tab, file_stem
from rooftop.tui.render.job import job_head, rank_group_rows, rank_rows, straggler_lines
from rooftop.tui.render.critpath import fix_cells, opened_text, panel_head
from rooftop.tui.render.profile import (basis_text, counted_cells, coverage_text, headline_lines, intensity_text, op_label,
                                        ranges_text, short_kernel, summed_text, times_text)
from rooftop.tui.render.text import clean
from rooftop.tui.app.reads import read_store
from rooftop.tui.app.widgets import Col, FitTable, watch_app
from rooftop.tui.services.context import profile_points
from rooftop.tui.share.charts import profile_chart
from rooftop.tui.share.out import Shared

RUNS = (Col("run", "run"), Col("device", "device", max_width=22), Col("started", "started"),
        Col("ops", "ops", drop=1), Col("source", "source", drop=2, max_width=40))
OPS = (Col("share", "share"), Col("time", "time"), Col("calls", "calls", drop=2),
       Col("op", "op dtype shapes", max_width=34), Col("I", "I", drop=3), Col("regime", "regime", drop=1),
       Col("roof", "of roof"))
# W and Q as the trace's GPU counters counted them, each where some op group has it
COUNTED = {"measured_flops": Col("wc", "W counted", drop=1), "measured_bytes": Col("qc", "Q counted", drop=1)}
FIX = (Col("saves", "saves"), Col("of_path", "of path", drop=2), Col("op", "op group", max_width=40),
       Col("regime", "regime", drop=1), Col("roof", "of roof"))
RANKS = (Col("rank", "rank"), Col("step", "step", drop=3), Col("busy", "busy", drop=2), Col("idle", "idle", drop=4),
         Col("compute", "compute"), Col("comm", "comm"), Col("exposed", "exposed"), Col("mfu", "MFU", drop=1))


def _pct(x: Any) -> str:
    return fmt_percent(x) if isinstance(x, (int, float)) else ""


def run_row(run: Run) -> tuple[str | Text, ...]:
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started_at))
    source = str(profile_summary(run).get("source", ""))
    return run.short_id, Text(clean(run.device_name)), started, str(run.samples), Text(clean(source))


def group_key(n: int) -> str:
    """The op table's row key of the n-th op group (the fix-first panel opens it by this)."""
    return f"op:{n}"


def _share(t: float, span: float) -> str:
    return _pct(t / span if span else None)


def op_rows(kept: StoredProfile) -> list[tuple[str | None, tuple[str | Text, ...]]]:
    """The idle time, the overlap of streams, memcpy / memset and the op groups, by share of the span (largest
    first): each row's share is its time alone on the device, so they add up to 100%. An op group's row is keyed
    by `group_key`."""
    span = kept.summary.get("span_s") or 0.0
    counted = counted_keys(kept.groups)
    rows: list[tuple[float, tuple[str | Text, ...], str | None]] = []  # (time alone, cells, an op group's key)
    idle = kept.summary.get("idle_s") or 0.0
    rows.append((idle, (_share(idle, span), fmt_time(idle), "", Text("idle time", style="bold"), "", "", ""), None))
    overlap = kept.rows.overlap_s
    if overlap > 0:
        rows.append((overlap, (_share(overlap, span), fmt_time(overlap), "", Text("overlap of streams", style="bold"),
                               "", "", ""), None))
    for x in kept.rows.transfers:
        label = clean(x.label) + (f" {fmt_bytes(x.bytes)}" if x.bytes else "")
        rows.append((x.alone_s, (_share(x.alone_s, span), fmt_time(x.time_s), str(x.calls), Text(label), "",
                                 clean(x.level), _pct(x.fraction_of_roof)), None))
    for n, g in enumerate(kept.groups):
        i = g.intensity
        measured = dict(zip(COUNTED, counted_cells(g.measured_flops, g.measured_bytes)))
        rows.append((g.alone_s, (_share(g.alone_s, span), fmt_time(g.time_s), str(g.calls), Text(op_label(g)),
                                 intensity_text(i) if i is not None and math.isfinite(i) else "", g.regime,
                                 _pct(g.fraction_of_roof), *(measured[k] for k in counted)), group_key(n)))
    width = len(OPS) + len(counted)  # the rows that are no op group get empty cells there
    return [(key, r + ("",) * (width - len(r))) for _, r, key in sorted(rows, key=lambda x: -x[0])]


def counted_keys(groups: Sequence[OpGroup]) -> tuple[str, ...]:
    """The counted figures (measured_flops, measured_bytes) some op group of a kept profile has."""
    return tuple(k for k in COUNTED if any(getattr(g, k) is not None for g in groups))


def ops_columns(groups: Sequence[OpGroup]) -> tuple[Col, ...]:
    """The op table's columns: W and Q counted too where the profile's trace carried GPU counters."""
    return OPS + tuple(COUNTED[k] for k in counted_keys(groups))


def rows_text(kept: StoredProfile) -> Text:
    """Below the table: the idle time by cause, the top kernels, the steps and the flags of a kept profile."""
    span = kept.summary.get("span_s") or 0.0
    more = kept.rows
    text = Text()
    if more.idle_causes:
        text.append("idle time by cause\n", style="bold")
    for c in more.idle_causes[:6]:
        text.append(f"  {_share(c.time_s, span):>6} {fmt_time(c.time_s):>9}  {clean(c.category)}: {clean(c.cause)} "
                    f"({c.gaps} gaps)\n")
    if more.top_kernels:
        text.append("top kernels\n", style="bold")
    for k in more.top_kernels[:5]:
        t, w, q = k.time_s, k.flops, k.bytes
        rate = ", ".join(x for x in (fmt_flops_rate(w / t) if w and t else "",
                                     fmt_bandwidth(q / t) if q and t else "") if x)
        text.append(f"  {fmt_time(t):>9} ×{k.calls} {short_kernel(k.name)}" + (f"  {rate}" if rate else "") + "\n")
    for st in more.steps:
        text.append(f"  {clean(st.name)}: busy {fmt_time(st.busy_s)} of {fmt_time(st.span_s)}, "
                    f"idle {fmt_time(st.idle_s)}\n")
    for line in flag_lines(more.flags):
        text.append(f"flag: {clean(line)}\n", style="bold red")
    return text


class ProfilePane(Widget):
    """The Profile tab over the store at `db_path`."""

    BINDINGS = [Binding("f5", "reload", "Reload", show=False)]

    def __init__(self, db_path: Path | None, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.db_path = db_path
        self.run_ids: list[str] = []
        # the run on show, its op groups (its lowest rank's) and its job (None for one program)
        self.shown: tuple[Run, StoredProfile, dict[str, Any] | None] | None = None
        self.path: CriticalPath | None = None  # the run on show's critical path, as kept (None: none kept)
        self.chosen: str | None = None  # the profile asked for last: what a read coming back is drawn for

    def compose(self) -> ComposeResult:
        yield Static("", id="prof-status")
        yield FitTable(RUNS, id="prof-runs", cursor_type="row", zebra_stripes=True)
        yield Static("", id="prof-split")
        with VerticalScroll(id="prof-ops-scroll"):
            for widget in (Static("", id="prof-path"), FitTable(FIX, id="prof-fix", cursor_type="row"),
                           Static("", id="prof-group")):  # fix first, and the op group ↵ opened from it
                widget.display = False
                yield widget
            job = Static("", id="prof-job")  # a distributed job: its ranks and straggler; a rank opens below
            job.display = False
            yield job
            ranks = FitTable(RANKS, id="prof-ranks", cursor_type="row", zebra_stripes=True)
            ranks.display = False
            yield ranks
            title = Static("", id="prof-ops-title")  # a job's: whose op groups these are (show_rank)
            title.display = False  # no row of its own otherwise (a row counts at 24 lines)
            yield title
            yield FitTable(OPS, id="prof-ops", zebra_stripes=True)
            yield Static("", id="prof-more")

    def on_mount(self) -> None:
        self.reload()
        watch_app(self, init=False, runs_changed=lambda _: self.reload())  # a run renamed or deleted in History

    def action_reload(self) -> None:
        self.reload()

    @dataclass
    class ProfilesRead(Message):
        """The kept profiles, newest first, read in a worker (`error`: why the store is unreadable)."""

        runs: list[Run]
        error: str = ""

    @dataclass
    class ProfileRead(Message):
        """One kept profile read in a worker (run None: the store is gone; `bad`: why its op groups or rows are
        not ones rooftop kept, where they are not, its split shown without them)."""

        run_id: str
        run: Run | None
        kept: StoredProfile | None
        error: str = ""
        bad: str = ""

    def export_file(self, svg: bool) -> None:
        """e / E: the profile on show, its op groups on its device's roofline, to a file (app/export.py)."""
        if self.shown is None:
            self.notify("nothing to export yet: choose a profile", severity="warning", timeout=4)
            return
        run, db = self.shown[0], self.db_path
        dev = getattr(self.app, "profiles", {}).get(placed_on(run) or "")
        if dev is None:
            self.notify(f"this profile's device ({placed_on(run) or 'unknown'}) has no roofline here to export",
                        severity="warning", timeout=6)
            return

        def build() -> Shared:  # in the worker: the op groups are read from the store
            read, error = read_store(db, lambda store: profile_points(store, run))
            if read is None:
                raise StoreError(error or "the store is gone", "missing")
            points, links = read
            return Shared([profile_chart(dev, points, links, f"profile: {run.label} on {dev.id}", run.started_at)])

        export_tab(self, file_stem("profile", run.label, dev.id), build, svg)

    def reload(self) -> None:
        """Read the kept profiles again, off the UI thread; `_profiles_read` lists them."""
        self._read_profiles()

    @work(thread=True, exclusive=True, group="prof-runs")
    def _read_profiles(self) -> None:
        runs, error = read_store(self.db_path, lambda store: list(reversed(store.runs(kind="profile"))))
        self.post_message(self.ProfilesRead(runs or [], error))

    @on(ProfilesRead)
    def _profiles_read(self, m: ProfilesRead) -> None:
        status = self.query_one("#prof-status", Static)
        table = self.query_one("#prof-runs", FitTable)
        table.set_rows([])
        self.run_ids = []
        if m.error:
            status.update(Text(f"✗ {m.error}", style="bold red"))
            return
        runs = m.runs
        if not runs:
            status.update(Text("no profiles kept yet: `rooftop profile -- python script.py ARGS…` runs your program "
                               "and keeps one (or `rooftop profile --trace FILE.json`)", style="dim"))
            self.query_one("#prof-split", Static).update("")
            self.query_one("#prof-ops", FitTable).set_rows([])
            more = self.query_one("#prof-more", Static)
            more.update("")
            more.display = False
            return
        table.set_rows((r.id, run_row(r)) for r in runs)
        self.run_ids = [r.id for r in runs]
        status.update(Text(f"{len(runs)} profile{'' if len(runs) == 1 else 's'}; the newest first", style="dim"))
        self.show_run(self.run_ids[0])

    @on(DataTable.RowSelected, "#prof-runs")
    @on(DataTable.RowHighlighted, "#prof-runs")
    def _row(self, event: DataTable.RowSelected | DataTable.RowHighlighted) -> None:
        if event.row_key.value:
            self.show_run(str(event.row_key.value))

    def show_run(self, run_id: str) -> None:
        """Show a kept profile: read off the UI thread, drawn by `_profile_read` (unless another is chosen since)."""
        self.chosen = run_id
        self._read_profile(run_id)

    @work(thread=True, exclusive=True, group="prof-run")
    def _read_profile(self, run_id: str) -> None:
        read, error = read_store(self.db_path, lambda store: kept_profile(store.run(run_id), store.samples(run_id)))
        run, kept, bad = read or (None, None, "")
        self.post_message(self.ProfileRead(run_id, run, kept, error, bad))

    @on(ProfileRead)
    def _profile_read(self, m: ProfileRead) -> None:
        if m.run_id != self.chosen:
            return  # read for a profile chosen before the one on show now
        split = self.query_one("#prof-split", Static)
        if m.error:
            split.update(Text(f"✗ {m.error}", style="red"))
            return
        if m.run is None or m.kept is None:
            return
        run, kept = m.run, m.kept
        self.path, bad = kept_path(run)
        split.update(split_text(run, self.path))
        self.show_path(bad)
        job = stored_job(run)
        self.shown = (run, kept, job)
        pane, ranks = self.query_one("#prof-job", Static), self.query_one("#prof-ranks", FitTable)
        pane.display = ranks.display = job is not None
        try:
            pane.update(job_text(job) if job else "")
            ranks.set_rows([(str(r["rank"]), row) for r, row in zip(job["ranks"], rank_rows(job))] if job else [])
        except (KeyError, TypeError, ValueError):  # an edited import: say so, show the op groups still
            pane.update(Text("this run's job is not one rooftop kept (edited?): its rank table is left out",
                             style="yellow"))
            ranks.display = False
        self.show_rank(None)
        more = self.query_one("#prof-more", Static)
        more.update(rows_text(kept) if not m.bad else
                    Text(f"this run's op groups are not ones rooftop kept (edited?): {clean(m.bad)}", style="yellow"))
        more.display = True

    def show_path(self, bad: str) -> None:
        """The fix-first panel of the run on show: the path's head, its top op groups by saving (none kept: hidden;
        kept malformed: why, in one line)."""
        head, table = self.query_one("#prof-path", Static), self.query_one("#prof-fix", FitTable)
        self.query_one("#prof-group", Static).display = False
        path = self.path
        head.display = bool(bad) or (path is not None and path.graph)
        table.display = path is not None and path.graph and bool(path.fix_first)
        head.update(Text(f"this run's critical path is not one rooftop kept (edited?): {clean(bad)}", style="yellow")
                    if bad else panel_head(path) if path is not None and path.graph else "")
        table.set_rows([(str(i), fix_cells(f, path.length_s)) for i, f in enumerate(path.fix_first)]
                       if path is not None and path.graph else [])

    @on(DataTable.RowSelected, "#prof-fix")
    def _fix(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.open_group(int(event.row_key.value))

    def open_group(self, i: int) -> None:
        """Open the i-th fix-first row's op group: what it is and saves, below the panel; its row in the op table
        under the cursor."""
        if self.path is None or self.shown is None or not 0 <= i < len(self.path.fix_first):
            return
        f, groups = self.path.fix_first[i], self.shown[1].groups
        n = find_group(groups, f)
        opened = self.query_one("#prof-group", Static)
        opened.update(opened_text(f.label, groups[n] if n is not None else None, f, self.path))
        opened.display = True
        ops = self.query_one("#prof-ops", FitTable)
        if n is not None and group_key(n) in ops.rows:
            ops.move_cursor(row=ops.get_row_index(group_key(n)), animate=False)
        self.query_one("#prof-ops-scroll", VerticalScroll).scroll_to_widget(opened, animate=False)

    @on(DataTable.RowSelected, "#prof-ranks")
    @on(DataTable.RowHighlighted, "#prof-ranks")
    def _rank(self, event: DataTable.RowSelected | DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.show_rank(int(event.row_key.value))

    def show_rank(self, rank: int | None) -> None:
        """The op groups of one rank of the job on show (None: its lowest, whose op groups are kept whole)."""
        if self.shown is None:
            return
        run, kept, job = self.shown
        title = self.query_one("#prof-ops-title", Static)
        table = self.query_one("#prof-ops", FitTable)
        ranks = [r["rank"] for r in job["ranks"]] if job else []
        if job is None or not ranks or rank is None or rank == ranks[0]:
            table.set_rows(op_rows(kept), columns=ops_columns(kept.groups))
            more = " (↑↓ in the rank table opens another rank's)" if len(ranks) > 1 else ""
            title.update(Text(f"rank {ranks[0]}'s op groups{more}", style="dim") if ranks else "")
            title.display = bool(ranks)
            return
        table.set_rows(((None, row) for row in rank_group_rows(job, rank)), columns=OPS)
        title.update(Text(f"rank {rank}'s op groups: its {TOP_GROUPS} largest compute groups, shares of its span",
                          style="dim"))
        title.display = True


def stored_job(run: Run) -> dict[str, Any] | None:
    """A kept job (its ranks with a rank number each, lowest first), or None for a profile of one program."""
    job = profile_summary(run).get("job")
    if not isinstance(job, dict):
        return None
    ranks = sorted((r for r in job.get("ranks") or () if isinstance(r, dict) and isinstance(r.get("rank"), int)
                    and not isinstance(r.get("rank"), bool)), key=lambda r: r["rank"])
    return {**job, "ranks": ranks} if ranks else None


def job_text(job: dict[str, Any]) -> Group:
    """A kept job's head and straggler, above its rank table (the collectives are in the Roofline tab, on their
    links, and in `rooftop show` / `--json`)."""
    return Group(job_head(job), *straggler_lines(job))  # an op group's line ends in "…" at the pane's edge


def kept_path(run: Run) -> tuple[CriticalPath | None, str]:
    """A kept profile's critical path (None: kept before there was one) and, where it is malformed, why."""
    try:
        return stored_path(profile_summary(run)), ""
    except ValueError as exc:
        return None, str(exc)


def find_group(groups: Sequence[OpGroup], f: FixFirst) -> int | None:
    """The index of the op group a fix-first row names: by its label, else the longest group of its op."""
    by_label = [n for n, g in enumerate(groups) if op_label(g) == clean(f.label)]
    if by_label:
        return by_label[0]
    of_op = [n for n, g in enumerate(groups) if g.op == f.key[0]] if f.key else []
    return max(of_op, key=lambda n: groups[n].time_s, default=None)


def kept_profile(run: Run, samples: Sequence[Sample]) -> tuple[Run, StoredProfile, str]:
    """A kept profile read back for the tab, and why its op groups and rows are left out where they are malformed
    ('' when they are not): its split is shown still."""
    try:
        return run, stored_profile(run, samples), ""
    except ValueError as exc:
        return run, StoredProfile(profile_summary(run)), str(exc)


def split_text(run: Run, path: CriticalPath | None = None) -> Text:
    """The step split of a kept profile: busy and idle, what each fix would give (summed, where no critical path
    was re-timed), MFU, the largest share."""
    s = profile_summary(run)
    span, busy, idle = s.get("span_s") or 0.0, s.get("device_busy_s") or 0.0, s.get("idle_s") or 0.0
    what = "kernels" if s.get("on_device") else "ops"
    ranges = s.get("kernel_times") == RANGES  # a trace of counter ranges: no kernel was timed
    text = Text(f"on the roofs of {s.get('device', '?')}: span {fmt_time(span)}, {what} busy {fmt_time(busy)}, "
                f"idle {fmt_time(idle)} ({_pct(idle / span if span else None)})\n")
    if ranges:
        text = Text(f"on the roofs of {s.get('device', '?')}: {ranges_text(span, s.get('kernels', '?'))}\n")
    at_roof, no_gaps = s.get("step_at_roof_s"), s.get("step_without_gaps_s")
    if isinstance(at_roof, (int, float)) and isinstance(no_gaps, (int, float)) and not ranges and \
            (path is None or not path.graph):
        why = f" ({clean(path.why_not)})" if path is not None and path.why_not else ""
        text.append(summed_text(at_roof, no_gaps, s.get("bound_s"), span, brief=True) + why + "\n")
    top = s.get("largest_share")
    mfu = s.get("mfu")
    low = " (above 100%: the roof is low, see the flags)" if isinstance(mfu, (int, float)) and mfu > 1 else ""
    text.append(f"MFU {_pct(mfu) or 'n/a'}{low} · bandwidth {_pct(s.get('bandwidth_utilisation')) or 'n/a'}; "
                f"largest share: {'idle time' if top == 'idle' else clean(str(top))}", style="bold")
    on = bool(s.get("on_device"))
    for line in headline_lines(s.get("headline"), on):
        text.append(f"\n{clean(line)}")
    if s.get("device_note"):
        text.append(f"\ndevice: {clean(str(s['device_note']))}", style="yellow")
    cov = clean(coverage_text(s.get("coverage"), on, brief=True))  # a profile kept before it was counted: none
    times = times_text(s.get("kernel_times"), s.get("counted_by"))
    text.append("\n" + (f"{cov}; {times}" if cov else basis_text(s.get("kernel_times"), s.get("counted_by"),
                                                                 short=True)), style="" if cov else "dim")
    return text
