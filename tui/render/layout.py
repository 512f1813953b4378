"""The layout every text report shares: prose that wraps between items (a value keeps its unit), hanging
notes, trimmed lines for a file, and the console they print on."""

from __future__ import annotations

import os
import re
import sys
from typing import IO, Iterator, Sequence

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

NBSP = "\xa0"  # joins what a line must not split; printed as an ordinary space
# Spaces that only look like spaces: between a number and its unit (256 MiB, 87.1 µs, 1 FLOP/elem; not the
# 16 of bf16), around a relation (I = 4.00, T ≥ 1 ms) and inside a reference (seed 000 §6).
GLUE = re.compile(
    r"(?<![\w.])\d[\d.,]* (?=(?:[kMGTP]?FLOP|[KMGT]i?B|B|[nµm]?s|W|[MG]Hz)(?:/\w+)?(?!\w))"
    r"| (?=[=≈≥≤<>] )|(?<= [=≈≥≤<>]) "
    r"|(?<=\bseed) (?=\d)|(?<=\d) (?=§)"
)
WORD = re.compile(r"[^ ]+ *| +")  # a break may follow a run of ordinary spaces
WORD_OR_HYPHEN = re.compile(r"[^ -]+-+(?=[^ -])|[^ ]+ *| +")  # … or a '-' inside a name


def glued(text: str | Text) -> Text:
    """The text with its value–unit pairs (GLUE) joined by no-break spaces; styles kept."""
    t = Text(text) if isinstance(text, str) else text
    plain = GLUE.sub(lambda m: m.group().replace(" ", NBSP), t.plain)  # as long as before: spans still fit
    return Text(plain, style=t.style, spans=list(t.spans), end=t.end)


def break_offsets(plain: str, width: int, hyphens: bool = False) -> list[int]:
    """Where to break one line of text to fit `width` cells: after ordinary spaces, never at a
    no-break space; after a '-' too with `hyphens`; inside a word only when it is wider than the line."""
    offsets: list[int] = []
    col = 0
    for m in (WORD_OR_HYPHEN if hyphens else WORD).finditer(plain):
        word, start = m.group(), m.start()
        seen = cell_len(word.rstrip(" "))
        if col and col + seen > width:
            offsets.append(start)
            col = 0
        if seen > width:
            pieces = chop_cells(word, width)
            for piece in pieces[:-1]:
                start += len(piece)
                offsets.append(start)
            col = cell_len(pieces[-1])
        else:
            col += cell_len(word)
    return offsets


class Prose:
    """Text that wraps between items only: a value keeps its unit, a name breaks at its '-'.

    Rich wraps at any whitespace (a no-break space too), so "I = 1.000 FLOP/B" could end
    a line with "I" and a printed report would read "1.000 FLOP/B" as the next item. This
    wraps at ordinary spaces (GLUE marks the others) and prints the glue as spaces. In a
    grid column it gives a hanging indent.
    """

    def __init__(self, text: str | Text, style: str = "", hyphens: bool = False) -> None:
        """`style` is for a str (a Text brings its own); `hyphens` lets a name break after a '-'."""
        self.text = glued(Text(text, style=style) if isinstance(text, str) else text)
        self.hyphens = hyphens

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        width = max(options.max_width, 1)
        for para in self.text.split("\n", allow_blank=True):
            for line in para.divide(break_offsets(para.plain, width, self.hyphens)):
                line.rstrip()
                yield Text(line.plain.replace(NBSP, " "), style=line.style, spans=list(line.spans), no_wrap=True)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.text.plain
        words = [cell_len(m.group().rstrip(" ")) for m in (WORD_OR_HYPHEN if self.hyphens else WORD).finditer(plain)]
        widest = max((cell_len(line) for line in plain.split("\n")), default=0)
        return Measurement(min(max(words, default=0), widest), widest).clamp(max_width=options.max_width)


def hanging(rows: Sequence[tuple[str | Text, str | Text]]) -> Table:
    """Marked items (a marker, then text that wraps under itself): a grid of two columns."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for marker, text in rows:
        grid.add_row(marker, Prose(text))
    return grid


class TrimmedLines:
    """A text file that drops the spaces at the end of each line written to it.

    Rich pads every table cell and wrapped line to its width; on a terminal that is
    invisible, in a file it is noise (and `diff` shows it). Spaces are held back
    until the line goes on, so only those at a line's end are lost.
    """

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.held = ""

    @property
    def encoding(self) -> str:
        return getattr(self.out, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        lines = (self.held + text).split("\n")
        last = lines.pop()
        body = last.rstrip(" ")
        self.held = last[len(body):]
        self.out.write("".join(line.rstrip(" ") + "\n" for line in lines) + body)
        return len(text)

    def flush(self) -> None:
        self.out.flush()


def trimmed(text: str) -> str:
    """The text without spaces at its lines' ends (a chart pads every row to its width)."""
    return "\n".join(line.rstrip(" ") for line in text.split("\n"))


def make_console(stderr: bool = False) -> Console:
    """A console for the reports, as wide as the terminal or COLUMNS; piped or redirected (no terminal to
    fit), FALLBACK_WIDTH, whatever the terminal beside it (Rich asked stdin's: `| less` in a 200-column pane gave
    200-column files), and its lines carry no trailing spaces."""
    out = sys.stderr if stderr else sys.stdout
    tty = getattr(out, "isatty", lambda: False)()
    columns = os.environ.get("COLUMNS", "")
    # TrimmedLines is not an IO[str]: it has the part of one a Console writes through (write, flush, isatty, encoding)
    file: IO[str] | None = None if tty else TrimmedLines(out)  # type: ignore[assignment]
    # no markup, no emoji codes: a stored name like "[/bold]" or ":x:" is printed as it is
    console = Console(file=file, stderr=stderr, highlight=False, soft_wrap=False,
                      markup=False, emoji=False, width=None if tty or columns.isdigit() else FALLBACK_WIDTH)
    if console.width < MIN_WIDTH:  # COLUMNS=0 printed nothing at all, COLUMNS=1 a letter a line
        console.width = FALLBACK_WIDTH
    return console


MIN_WIDTH = 40  # narrower than this no report can be read: it is laid out at FALLBACK_WIDTH instead
FALLBACK_WIDTH = 80
