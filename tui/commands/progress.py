"""What `rooftop profile` is doing while it reads and places a trace, on one line of stderr that goes when it is
done: the bytes of the file being read, then each stage after it. A trace of a million events takes 5–10 s to
read and place on a 2-core machine, and silence that long reads as a hang.

Shown only where stderr is a terminal: piped or redirected, a bar has nothing to redraw and would leave only
residue in the file (nothing is imported for it then either).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rooftop.models.safetext import safe_text
from rooftop.models.units import MiB
from rooftop.tui.render.layout import make_console


class StageLine:
    """The stage line: a context manager; `reading(path)` gives load_trace its progress, `stage(text)` names the
    next stage. The line appears with the first of them (a program run before it keeps the terminal to itself)
    and goes when the block ends. Without a terminal on stderr, or outside a with block, both do nothing."""

    def __init__(self) -> None:
        self._err: Any = None
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> StageLine:
        err = make_console(stderr=True)
        self._err = err if err.is_terminal else None
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: types.TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()  # transient: the line goes, and what follows is printed where it was
        self._err = self._bar = None

    def _shown(self) -> bool:
        """Whether there is a line to update: started here the first time (a terminal on stderr only)."""
        if self._bar is None and self._err is not None:
            # deferred: rich.progress (~40 ms of imports), only where there is a terminal to draw it on
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            # no markup: a file named "[bold]x.json" is shown as it is named
            columns = (TextColumn("{task.description}", markup=False), BarColumn(),
                       TextColumn("{task.fields[size]}", markup=False), TimeElapsedColumn())
            # what is written to stdout or stderr meanwhile is printed above the line; drawn 4 times a second, which
            # costs the work under it about 1% (10, Rich's default, cost 2% on a 1 M-event trace)
            self._bar = Progress(*columns, console=self._err, transient=True, refresh_per_second=4)
            self._bar.start()
            self._task = self._bar.add_task("", total=None, size="")
        return self._bar is not None

    def stage(self, text: str) -> None:
        """The next stage, as a pulsing bar (no size is known)."""
        if self._shown():
            self._bar.update(self._task, description=safe_text(text), total=None, completed=0, size="")

    def reading(self, path: str | Path, what: str = "reading") -> Callable[[int, int], None] | None:
        """load_trace's `progress` for `path` (None without a terminal): the file's MiB read of its size, then,
        once all of it is read, the linking that follows."""
        if not self._shown():
            return None
        name = _short(safe_text(Path(path).name))
        bar, task = self._bar, self._task
        bar.update(task, description=f"{what} {name}", total=None, completed=0, size="")
        linking = "linking the kernels to their ops"

        def progress(done: int, size: int) -> None:
            if done < size:
                bar.update(task, total=size, completed=done, size=f"{done / MiB:,.0f} / {size / MiB:,.0f} MiB")
            else:  # all read: a pulsing bar again (never a full one, whose task rich counts as finished: its clock
                # would stop)
                bar.update(task, description=linking, total=None, completed=0, size=f"{done / MiB:,.0f} MiB")

        return progress


NAME_WIDTH = 32  # a file's name on the line, at most: with the bar, the MiB and the clock it fits 80 columns


def _short(name: str) -> str:
    """The name, its middle left out where it is longer than NAME_WIDTH (its start and its suffix say which)."""
    if len(name) <= NAME_WIDTH:
        return name
    tail = NAME_WIDTH // 3
    return f"{name[:NAME_WIDTH - tail - 1]}…{name[-tail:]}"
