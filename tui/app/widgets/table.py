"""A table that fits its width: columns drop or crop, by priority, before a row wraps."""


from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from rich.text import Text
from textual.widgets import DataTable



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

    def __init__(self, columns: Sequence[Col], **kwargs: Any) -> None:  # DataTable's own options, passed on
        super().__init__(**kwargs)
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
