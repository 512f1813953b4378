"""Tables of one line per row, as `ps` and `kubectl` lay theirs out: one text column (an op with its shapes, a
kernel's or a cause's name) gives way to the width and ends in "…"; every figure keeps its width. Still too
narrow, the least needed columns are left out, said below the table. Wide (`--wide`), nothing is cut: the table
takes the width its longest row needs (the console prints it with `crop=False`); `--json` has the whole text.

At 80 columns Rich's own tables folded a long op name mid-word (`_cudnn_attenti` over `on_backward`) and
stacked its shapes down the row: one attention row of an H200 training step took 14 lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from rich.console import Console, ConsoleOptions, JustifyMethod
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

GAP = 1  # cells between two columns; two on each side of the text column, whose words must not run into a figure
LEAST = 20  # the text column's least width before a column is left out


@dataclass(frozen=True)
class Col:
    """A column: its heading, its justification, and when it goes when space is short (0: never; the
    highest goes first); `text` marks the one that gives way, `least` the width it keeps before another column
    goes, `most` what it may take (not when wide)."""

    header: str
    justify: JustifyMethod = "right"
    drop: int = 0
    text: bool = False
    least: int = LEAST
    most: int | None = None


def _cell(cell: str | Text, lead: str, trail: str) -> Text:
    """A cell as one line that ends in "…" when its column is narrower."""
    t = Text(lead) + cell + trail if isinstance(cell, Text) else Text(lead + str(cell) + trail)
    t.no_wrap, t.overflow = True, "ellipsis"
    return t


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class FitRows:
    """Rows of cells under `cols`, one line each at any width (see the module's docstring). An empty column
    (no row has anything in it) is left out: its heading alone says nothing."""

    def __init__(self, cols: Sequence[Col], rows: Sequence[Sequence[str | Text]], wide: bool = False,
                 header: bool = True, indent: int = 0) -> None:
        self.cols, self.wide, self.header, self.indent = list(cols), wide, header, indent
        last = len(self.cols) - 1
        lead = [" " if c.text and i else "" for i, c in enumerate(self.cols)]
        trail = [" " if c.text and i < last else "" for i, c in enumerate(self.cols)]
        self.heads = [lead[i] + c.header for i, c in enumerate(self.cols)]
        self.rows = [[_cell(c, lead[i], trail[i]) for i, c in enumerate(r)] for r in rows]
        self.need = [max([len(self.heads[i]) if header else 0, *(r[i].cell_len for r in self.rows)])
                     for i in range(len(self.cols))]

    def _span(self, shown: Sequence[int], least: bool = False) -> int:
        """The cells the columns `shown` take: the text column whole, or (`least`) at its least."""
        return self.indent + GAP * (len(shown) - 1) + sum(
            min(self.need[i], self.cols[i].least) if least and self.cols[i].text else self.need[i] for i in shown)

    def shown(self, width: int) -> list[int]:
        """The columns that leave the text column its least width (or all it needs) at `width`; all when wide."""
        shown = [i for i, c in enumerate(self.cols) if c.text or any(r[i].plain.strip() for r in self.rows)]
        while not self.wide and self._span(shown, True) > width and any(self.cols[i].drop for i in shown):
            shown.remove(max(shown, key=lambda i: self.cols[i].drop))
        return shown

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        shown = self.shown(options.max_width)
        t = Table(show_header=self.header, header_style="bold", box=None, pad_edge=False, padding=(0, GAP, 0, 0))
        for i in shown:
            c = self.cols[i]
            if c.text and not self.wide:  # the one column Rich may narrow (a no_wrap one never is)
                t.add_column(self.heads[i], justify=c.justify, overflow="ellipsis",
                             max_width=c.most + (1 if i else 0) if c.most else None)
            else:
                t.add_column(self.heads[i], justify=c.justify, no_wrap=True)
        for r in self.rows:
            t.add_row(*(r[i] for i in shown))
        width = max(options.max_width, self._span(shown)) if self.wide else options.max_width
        pad = " " * self.indent
        for line in console.render_lines(t, options.update(width=width - self.indent, height=None), pad=False):
            yield Text.assemble(pad, *((s.text, s.style or "") for s in line), no_wrap=True, overflow="ignore")
        left = [self.cols[i].header for i, c in enumerate(self.cols) if i not in shown and c.drop
                and any(r[i].plain.strip() for r in self.rows)]
        if left:
            yield Text(f"{_listed(left)} left out at {options.max_width} columns (--wide shows "
                       f"{'it' if len(left) == 1 else 'them'})", style="dim")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        whole = self._span(range(len(self.cols)))
        return Measurement(min(whole, options.max_width), whole if self.wide else min(whole, options.max_width))
