"""History: the runs in the store — open one to see its points and ceilings; rename, delete, export."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from rooftop.store.io import export_json
from rooftop.tui.render.jsonout import dumps_json
from rooftop.models.safetext import safe_text
from rooftop.models.units import fmt_when
from rooftop.store.db import StoreError
from rooftop.store.runs import BadName, Run, Store, name_problem
from rooftop.tui.render.runkinds import StoredRun, read_run, run_detail, run_series
from rooftop.tui.services.context import open_db
from rooftop.tui.app.reads import read_store
from rooftop.tui.share.files import write_new
from rooftop.tui.app.widgets import Col, Dialog, ErrorLine, FitTable, RooflinePlot, TextField, watch_app

# The run table at 80 columns: plan, then the sample count, then the device go first (the detail
# below names them); a long name or device ends in "…" rather than push status off screen.
RUN_COLUMNS = (
    Col("run", "run"), Col("name", "name", max_width=16), Col("device", "device", drop=1, max_width=22),
    Col("status", "status"), Col("started", "started"), Col("samples", "samples", drop=2), Col("plan", "plan", drop=3),
)


def run_cells(r: Run) -> tuple[str | Text, ...]:
    """A run's cells in RUN_COLUMNS order; names are Text, since a DataTable reads a str as markup."""
    name, device, status, plan = (Text(safe_text(v)) for v in (r.name or "", r.device_name, r.status, r.plan))
    return r.short_id, name, device, status, fmt_when(r.started_at), str(r.samples), plan


class NameScreen(Dialog[str | None]):
    """Ask for a run's new name and save it; a refused name is said inline and the typed text kept.

    `save` does the renaming (it raises StoreError for a name the store refuses, e.g. one
    that is taken); the dialog closes only once it has succeeded, so nothing typed is lost.
    """

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]
    DEFAULT_CSS = """
    NameScreen { align: center middle; }
    NameScreen > Vertical { width: 68; max-width: 100%; height: auto; border: round $accent; background: $surface;
                            padding: 0 1; }
    NameScreen #name-hint { color: $text-muted; }
    """

    def __init__(self, current: str, save: Callable[[str], None]) -> None:
        super().__init__()
        self.current = current
        self.save = save

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Name the run: a letter, then letters, digits, '.', '_' or '-'.")
            yield Static("Enter saves, Esc cancels.", id="name-hint")
            yield TextField(self.current, id="new-name")
            yield ErrorLine(id="name-error")

    @on(Input.Changed)
    def _typing(self) -> None:
        self.query_one(ErrorLine).show(None)  # the error was about the text before this edit

    @on(Input.Submitted)
    def _done(self, event: Input.Submitted) -> None:
        if self.closed:
            return  # an Esc in the same read closed it: this Enter renames nothing
        name = event.value.strip()
        if not name:
            self.dismiss(None)
            return
        try:
            problem = name_problem(name)
            if problem:
                raise BadName(f"{name!r}: {problem}")
            self.save(name)
        except StoreError as exc:
            self.query_one(ErrorLine).show(exc)
            return
        self.dismiss(name)


class ConfirmScreen(Dialog[bool]):
    BINDINGS = [Binding("y", "dismiss(True)", "Yes"), Binding("n,escape", "dismiss(False)", "No")]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Static { width: 60; height: auto; border: round $warning; background: $surface; padding: 1; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Static(f"{self.question}  [y/n]")


class History(Widget):
    """The History tab over the store at `db_path`."""

    BINDINGS = [
        Binding("r", "rename", "Rename"),
        Binding("d", "delete", "Delete"),
        Binding("e", "export", "Export"),
        Binding("f5", "reload", "Reload", show=False),
    ]

    @dataclass
    class StoreChanged(Message):
        """Runs were renamed or deleted: device lists elsewhere may need the news."""

    def __init__(self, db_path: Path | None, export_dir: Path | None = None, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.db_path = db_path
        self.export_dir = export_dir or Path.cwd()
        self.run_ids: list[str] = []
        self.selected: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="hist-status")
        yield FitTable(RUN_COLUMNS, id="hist-table", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="hist-body", classes="beside"):
            with VerticalScroll(id="hist-detail-scroll"):
                yield Static("", id="hist-detail")
            yield RooflinePlot(id="hist-plot", classes="chart-beside")

    def on_mount(self) -> None:
        self.reload()
        watch_app(self, init=False, runs_changed=lambda _count: self.reload())  # read just now

    def _open(self) -> Store | None:
        return open_db(self.db_path, create=False)

    def _open_for_change(self) -> Store:
        """The store, for renaming, deleting or exporting a run it listed; StoreError if it is gone since."""
        store = self._open()
        if store is None:
            raise StoreError("the database is gone since the list was read; press F5 to reload")
        return store

    @dataclass
    class RunsRead(Message):
        """The store's runs, newest first, read in a worker (`path` None: no store yet; `error`: why unreadable)."""

        runs: list[Run]
        path: Path | None
        error: str = ""

    @dataclass
    class RunRead(Message):
        """One run as the detail and the plot show it, read in a worker (None: the store is gone)."""

        run_id: str
        data: StoredRun | None
        error: str = ""

    def reload(self) -> None:
        """Read the runs again, off the UI thread; `_runs_read` lists them."""
        self._read_runs()

    @work(thread=True, exclusive=True, group="hist-runs")
    def _read_runs(self) -> None:
        found, error = read_store(self.db_path, lambda store: (list(reversed(store.runs())), store.path))  # newest first
        runs, path = found if found is not None else ([], None)
        self.post_message(self.RunsRead(runs, path, error))

    @on(RunsRead)
    def _runs_read(self, m: RunsRead) -> None:
        status = self.query_one("#hist-status", Static)
        t = self.query_one("#hist-table", FitTable)
        t.set_rows([])
        self.run_ids = []
        if m.error:
            status.update(Text(f"✗ {m.error}", style="bold red"))
            return
        if m.path is None:
            status.update(Text("no measurements stored yet: press m to measure this machine, or `rooftop import FILE`",
                               style="dim"))
            return
        runs = m.runs
        t.set_rows((r.id, run_cells(r)) for r in runs)
        self.run_ids = [r.id for r in runs]
        # r, d and e are in the footer; the path is what this line is for
        status.update(Text(f"{len(runs)} run{'' if len(runs) == 1 else 's'} in {m.path}", style="dim"))
        if self.run_ids:
            self.show_run(self.selected if self.selected in self.run_ids else self.run_ids[0])

    @on(DataTable.RowSelected, "#hist-table")
    @on(DataTable.RowHighlighted, "#hist-table")
    def _row(self, event: DataTable.RowSelected | DataTable.RowHighlighted) -> None:
        if event.row_key.value:
            self.show_run(str(event.row_key.value))

    def show_run(self, run_id: str) -> None:
        """Show the run: read off the UI thread, drawn by `_run_read` (unless another run is chosen meanwhile)."""
        self.selected = run_id
        self._read_run(run_id)

    @work(thread=True, exclusive=True, group="hist-run")
    def _read_run(self, run_id: str) -> None:
        data, error = read_store(self.db_path, lambda store: read_run(store, run_id))
        self.post_message(self.RunRead(run_id, data, error))

    @on(RunRead)
    def _run_read(self, m: RunRead) -> None:
        if m.run_id != self.selected:
            return  # read for a run chosen before the one on show now
        detail = self.query_one("#hist-detail", Static)
        if m.error:
            detail.update(Text(f"✗ {m.error}", style="red"))
            return
        if m.data is None:
            return
        run = m.data.run
        detail.update(run_detail(m.data))
        self.query_one("#hist-plot", RooflinePlot).show(run_series(m.data),
                                                        safe_text(f"run {run.label}: {run.device_name}"))

    # -- actions ---------------------------------------------------------------------

    def _current(self) -> str | None:
        if not self.selected:
            self.notify("no run selected", severity="warning", timeout=3)
        return self.selected

    def action_reload(self) -> None:
        self.reload()

    def action_rename(self) -> None:
        run_id = self._current()
        if run_id is None:
            return

        def save(name: str) -> None:
            with self._open_for_change() as store:
                store.rename(run_id, name)

        def done(name: str | None) -> None:
            if not name:
                return
            self.notify(f"run {run_id[:8]} is now {name!r}: use it as --device {name}", timeout=4)
            self.reload()
            self.post_message(self.StoreChanged())

        self.app.push_screen(NameScreen("", save), done)

    def action_delete(self) -> None:
        run_id = self._current()
        if run_id is None:
            return

        def done(yes: bool | None) -> None:
            if not yes:
                return
            try:
                with self._open_for_change() as store:
                    store.delete(run_id)
            except StoreError as exc:
                self.notify(str(exc), severity="error", timeout=6)
                return
            self.selected = None
            self.notify(f"deleted run {run_id[:8]}", timeout=3)
            self.reload()
            self.post_message(self.StoreChanged())

        self.app.push_screen(ConfirmScreen(f"delete run {run_id[:8]} and all its samples?"), done)

    def action_export(self) -> None:
        run_id = self._current()
        if run_id is None:
            return

        try:
            with self._open_for_change() as store:
                doc = export_json(store, [store.run(run_id)])
            out = write_new(self.export_dir, f"rooftop-{run_id[:8]}", ".json", dumps_json(doc))
        except (StoreError, OSError) as exc:
            self.notify(f"export failed: {exc}", severity="error", timeout=6)
            return
        self.notify(f"exported to {out}", timeout=5)
