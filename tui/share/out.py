"""What a command shares, written to the file its --out names: the format by the extension.

A command builds a `Shared` once its work is done: its charts, and its HTML report as a function (built
only when .html was asked for). It checks the path with `out_target` before the work, so a bad --out
costs nothing, and it says where the file went on stderr, so stdout stays the report or its --json.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rooftop.models.safetext import safe_text
from rooftop.tui.share.figure import Chart, chart_png, chart_svg
from rooftop.tui.share.files import OutError, out_format, write_atomic


@dataclass(frozen=True)
class Shared:
    """A command's result as files: the charts (.svg and .png write the first) and the HTML report."""

    charts: list[Chart] = field(default_factory=list)
    html: Callable[[], str] | None = None


def out_target(path: str, *, html: bool = True, charts: bool = True) -> str:
    """`out_format(path)`, and OutError when the command has nothing of that format to write."""
    fmt = out_format(path)
    if fmt == "html" and not html:
        raise OutError(f"--out {path}: this command writes a chart, not a report; use .svg or .png")
    if fmt != "html" and not charts:
        raise OutError(f"--out {path}: this command writes a report, not a chart; use .html")
    return fmt


def write_out(path: str, shared: Shared) -> Path:
    """Write `shared` to `path` in the format its extension names, whole or not at all."""
    fmt = out_format(path)
    if fmt == "html":
        if shared.html is None:
            raise OutError(f"--out {path}: this command writes a chart, not a report; use .svg or .png")
        return write_atomic(path, shared.html())
    if not shared.charts:
        raise OutError(f"--out {path}: nothing to draw: no roof, point or curve to chart; no file written")
    chart = shared.charts[0]
    return write_atomic(path, chart_svg(chart) if fmt == "svg" else chart_png(chart))


def wrote_line(path: Path) -> str:
    """The one line a command prints on stderr once its file is written: where, and how big."""
    size = path.stat().st_size
    return f"wrote {path} ({max(1, round(size / 1000))} kB)"


def share_out(path: str, shared: Shared) -> Path:
    """write_out, then the line saying so on stderr."""
    written = write_out(path, shared)

    sys.stderr.write(safe_text(wrote_line(written)) + "\n")
    return written
