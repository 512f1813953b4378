"""Reusable widgets: the roofline chart, a table that fits its width, and the help screen."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, ScreenResultType
from textual.widget import Widget
from textual.widgets import DataTable, Select, Static
from textual_plotext import PlotextPlot

from rooftop.models.plotdata import Series
from rooftop.models.safetext import safe_text
from rooftop.tui.render.chart import draw_bandwidth, draw_fma, draw_gemm, draw_roofline, legend_lines

DRAWERS = {"roofline": draw_roofline, "bandwidth": draw_bandwidth, "gemm": draw_gemm, "fma": draw_fma}


class RooflinePlot(PlotextPlot):
    """A log-log chart (a roofline, or bandwidth against working set): set the series, it redraws.

    plotext state is rebuilt on each render, so a resize never re-logs the data.
    """

    can_focus = True  # so the keys of the tab it sits in ([ ] p) reach it by keyboard

    DEFAULT_CSS = """
    RooflinePlot { min-height: 10; min-width: 30; }
    RooflinePlot:focus { border: round $accent; }
    """

    def __init__(self, *, kind: str = "roofline", id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self._draw = DRAWERS[kind]
        self._series: list[Series] = []
        self._title = ""
        self._legend: bool | str = True  # False: the tab's side legend has it all; "points": its lines

    @property
    def series(self) -> list[Series]:
        return list(self._series)

    def show(self, series: list[Series], title: str = "", kind: str | None = None, legend: bool | str = True) -> None:
        """Draw `series`; legend=False when the tab shows the legend itself, "points" when a side legend
        has the lines and the points go below the chart (the Roofline tab: they fit there at 80×24)."""
        if kind is not None:
            self._draw = DRAWERS[kind]
        self._series = [dataclasses.replace(s, label=safe_text(s.label)) for s in series]  # labels name devices
        self._title = safe_text(title)
        self._legend = legend
        self.refresh()

    def render(self):  # noqa: ANN201 - textual's RenderResult
        """The chart, and its legend below it: plotext's own covers the chart's upper left (where the
        slopes rise) and is left out when it has more entries than rows."""
        self.plt.clear_figure()
        if not self._series:
            self.plt.title(self._title or "no data yet")
            return super().render()
        self._draw(self.plt, self._series, self._title, legend=False)
        width, height = self.size
        from plotext import colorize  # ANSI as the chart's own, so a swatch has its line's colour

        legend = legend_lines(self._series, width, colorize, lines_too=self._legend is True) if self._legend else []
        legend = legend[: max(0, height - 8)]  # the chart keeps 8 rows at least
        chart_rows = height - len(legend)
        self.plt.plotsize(width, chart_rows)
        self.plt._set_size(width, chart_rows)  # as PlotextPlot.render does, for plotext's resizing
        self.plt.theme(self._get_plotext_theme_name(self.app.theme))
        chart = Text.from_ansi(self.plt.build().rstrip("\n"))
        return Group(chart, *(Text.from_ansi(line, overflow="ellipsis", no_wrap=True) for line in legend))


@dataclass(frozen=True)
class Col:
    """A FitTable column: what goes first when the table is too narrow, and how wide a cell may grow."""

    key: str
    label: str
    drop: int = 0  # 0: always shown; when space is short the highest goes first
    max_width: int | None = None  # longer cells end in "…" (a detail elsewhere shows them whole)


def cell_width(cell: str | Text) -> int:
    """Cells a DataTable cell or heading takes (it reads str as markup)."""
    return (Text.from_markup(cell) if isinstance(cell, str) else cell).cell_len


def crop(cell: str | Text, width: int | None) -> str | Text:
    """The cell, ending in "…" when longer than `width`; unchanged (a str stays a str) otherwise."""
    if width is None or cell_width(cell) <= width:
        return cell
    text = Text.from_markup(cell) if isinstance(cell, str) else cell.copy()
    text.truncate(width, overflow="ellipsis")
    return text


class FitTable(DataTable):
    """A DataTable that leaves out its least important columns instead of cutting them at the right edge.

    At 80 columns a table of runs or roofs is wider than the screen; a column cut in
    half reads as a wrong value, a missing one does not. Rows are set whole with
    `set_rows`; the table re-fits them whenever its width changes.
    """

    def __init__(self, columns: Sequence[Col], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.cols = list(columns)
        self._rows: list[tuple[str | None, tuple[str | Text, ...]]] = []
        self._shown: list[str] = []

    @property
    def shown(self) -> list[str]:
        """The keys of the columns on screen now."""
        return list(self._shown)

    def set_rows(self, rows: Iterable[tuple[str | None, Sequence[str | Text]]],
                 columns: Sequence[Col] | None = None) -> None:
        """All the rows, each (row key or None, one cell per column), and new columns if given."""
        if columns is not None:
            self.cols = list(columns)
        self._rows = [(key, tuple(crop(c, col.max_width) for c, col in zip(cells, self.cols))) for key, cells in rows]
        self._refit(force=True)

    def on_resize(self) -> None:
        self._refit()

    def _fitting(self) -> list[str]:
        """The keys of the columns that fit the width, dropping the highest `drop` first."""
        width = self.content_size.width
        if width <= 0:  # not laid out yet: all of them, until the first resize
            return [c.key for c in self.cols]
        if len(self._rows) + 1 > self.content_size.height:
            width -= self.styles.scrollbar_size_vertical
        pad = 2 * self.cell_padding
        need = {c.key: pad + max([cell_width(crop(c.label, c.max_width))] + [cell_width(r[i]) for _, r in self._rows])
                for i, c in enumerate(self.cols)}
        shown = list(self.cols)
        while sum(need[c.key] for c in shown) > width and any(c.drop for c in shown):
            shown.remove(max(shown, key=lambda c: c.drop))
        return [c.key for c in shown]

    def _refit(self, force: bool = False) -> None:
        keys = self._fitting()
        if keys == self._shown and not force:
            return
        self._shown = keys
        index = [i for i, c in enumerate(self.cols) if c.key in keys]
        cursor = self._cursor_key()
        with self.prevent(DataTable.RowHighlighted):  # the same row stays highlighted: nothing new to show
            self.clear(columns=True)
            for i in index:
                col = self.cols[i]
                self.add_column(crop(col.label, col.max_width), key=col.key)
            for key, cells in self._rows:
                self.add_row(*(cells[i] for i in index), key=key)
            if cursor is not None and cursor in self.rows:
                self.move_cursor(row=self.get_row_index(cursor), animate=False)

    def _cursor_key(self) -> str | None:
        if not self.row_count or not self.is_valid_row_index(self.cursor_row):
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value


HELP = """\
# rooftop

A roofline lab: where an op sits on this device's ceilings, what bounds it, what to do about it.

| key | does |
|---|---|
| `1`–`7` | Live · Roofline · What-if · Compare · History · LLM · Profile |
| `m` | measure this machine (quick plan) |
| `c` / `Esc` | cancel the running measurement (what was measured is kept) |
| `v` | Live: the next sweep's curve — GB/s vs working set, TFLOP/s vs n or M, FMA sweep vs R |
| `[` / `]` | What-if: halve / double M (or the batch) — watch the point cross the ridge; LLM: the batch |
| `,` / `.` | LLM: halve / double the context |
| `PgUp` / `PgDn` | LLM under 90 columns: scroll to the op table's end and the chart |
| `p` | What-if: pin the op to the Roofline tab, or unpin it; pins are kept in the store |
| `r` `d` `e` | History: rename, delete, export the selected run |
| `Tab` | move between fields; `Esc` leaves a text field |
| `?` | this help |
| `q` | quit |

**Op specs** (What-if): `gemm 1 8192 8192 bf16`, `gemv 8192 8192 fp16`,
`attn b=8 h=32 kv=8 d=128 t=8192 decode`, `ew n=1e9 fp32`, `fma 64 fp32`,
`norm 4096 4096 bf16`, `softmax 4096 4096`. Numbers: `8192`, `1e9`, `2^20`, `8k`.

Under 90 columns, What-if and History put their chart below the text,
or leave it out when the terminal is under 30 rows (LLM scrolls to it): the Roofline tab (`2`)
draws the What-if op, and a measured run's points when you pick its device.
Tables leave out their least needed columns rather than cut one in half.

Bytes and FLOPs are algorithmic (each array once; an FMA is 2 FLOP), so
T = max(W/F, Q/B) is a lower bound. Every ceiling says where it came from:
measured here, a published reference measurement, or a datasheet.
"""


class Dialog(ModalScreen[ScreenResultType]):
    """A modal screen that closes once: keys that come together (Esc and Enter in one read) may
    each ask it to close, and a second dismiss would pop the screen below it."""

    @property
    def closed(self) -> bool:
        """No longer the screen on top: dismissed already (or not shown yet)."""
        return not self.is_attached or self.app.screen is not self

    def dismiss(self, result: ScreenResultType | None = None) -> AwaitComplete:
        if self.closed:
            return AwaitComplete()  # closed already: this later key asks nothing
        return super().dismiss(result)


class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 100%; height: 80%; border: round $accent; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        from textual.widgets import Markdown  # markdown-it costs ~40 ms: only when help is asked for

        with VerticalScroll():
            yield Markdown(HELP)


class ErrorLine(Static):
    """An inline error under a form; it takes no row while there is none (a row counts at 24 lines)."""

    DEFAULT_CSS = """
    ErrorLine { height: auto; display: none; }
    ErrorLine.-shown { display: block; }
    """

    def show(self, exc: Exception | None) -> None:
        """Show what went wrong (the exception's first argument), or nothing."""
        self.set_class(exc is not None, "-shown")
        self.update("" if exc is None else Text(f"✗ {exc.args[0] if exc.args else exc}", style="bold red"))


def watch_app(widget: Widget, init: bool = True, **callbacks: Callable[..., object]) -> None:
    """Call each callback with the app's state of that name now (unless not `init`), and again
    whenever it changes.

    A tab calls this from its on_mount, once its widgets exist: it reads what it shows as it is
    built and follows it afterwards, and the app never has to reach into a tab that may not be
    built yet. State the app does not keep (a test's bare App) is left alone.
    """
    reactives = getattr(type(widget.app), "_reactives", {})
    for name, callback in callbacks.items():
        if name in reactives:
            widget.watch(widget.app, name, callback, init=init)


def device_options(ids: Iterable[str]) -> list[tuple[Text, str]]:
    """Select options for device ids: each prompt a Text (a Select reads a str as markup, and a run's
    name may hold '[/bold]'), its control characters written visibly."""
    return [(Text(safe_text(i)), i) for i in ids]


def refresh_select(select: Select, ids: list[str], extra: list[str] = ()) -> None:  # type: ignore[assignment]
    """New options for a device Select, keeping its value when it still exists."""
    keep = select.value
    options = device_options(list(extra) + list(ids))
    with select.prevent(Select.Changed):
        select.set_options(options)
        if keep in [v for _, v in options]:
            select.value = keep
