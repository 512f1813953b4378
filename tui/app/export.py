"""The app's `e` and `E`: the tab on show written to a file, in a worker thread, and where it went said.

`e` writes the tab's report as HTML where the tab has one, else its chart as SVG; `E` always the chart as SVG.
The file goes where History's JSON export goes (AppConfig.export_dir, else the working directory), under a new
name (rooftop-roofline-h100.svg, then -2, -3…): a key press never replaces a file. Drawing takes a second or
two, so it runs off the UI thread; the worker posts FileWritten and the app says where the file went.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from textual.widget import Widget

from rooftop.models.errors import BadInput
from rooftop.store.db import StoreError
from rooftop.tui.app.messages import FileWritten
from rooftop.tui.share.figure import chart_svg
from rooftop.tui.share.files import OutError, write_new
from rooftop.tui.share.out import Shared

NOT_A_NAME = re.compile(r"[^A-Za-z0-9._-]+|\.{2,}|-{2,}")  # and no "..": a name, never a way up a folder


def file_stem(*words: str) -> str:
    """A file name stem from what is shown ("rooftop-roofline-h100-vs-h200"): safe in any folder."""
    words = tuple(NOT_A_NAME.sub("-", NOT_A_NAME.sub("-", x)).strip("-.") for x in ("rooftop", *words))
    return "-".join(w for w in words if w)[:96]


def export_folder(widget: Widget) -> Path:
    """Where the app's exports go: History's folder (AppConfig.export_dir), else the working directory."""
    folder = getattr(getattr(widget.app, "config", None), "export_dir", None)
    return Path(folder) if folder else Path.cwd()


def write_shared(folder: Path, stem: str, shared: Shared, svg: bool) -> Path:
    """The report (HTML) unless `svg` or there is none, else the first chart as SVG, to a new file in `folder`."""
    if shared.html is not None and not svg:
        return write_new(folder, stem, ".html", shared.html())
    if not shared.charts:
        raise OutError("nothing to export on this tab yet: no chart is drawn")
    return write_new(folder, stem, ".svg", chart_svg(shared.charts[0]))


def export_tab(widget: Widget, stem: str, build: Callable[[], Shared], svg: bool = False) -> None:
    """Build what the tab shares (`build`, in the worker: it may read the store) and write it; FileWritten
    tells the app where it went or why it could not be written."""
    folder = export_folder(widget)

    def work() -> None:
        try:
            path = write_shared(folder, stem, build(), svg)
        except (BadInput, StoreError, OSError) as exc:
            widget.post_message(FileWritten("", f"export failed: {exc}"))
            return
        widget.post_message(FileWritten(str(path), ""))

    widget.notify("exporting…", timeout=2)
    widget.run_worker(work, thread=True, group="export", description="export", exit_on_error=False)
