"""Where a shared file may go, and writing it whole or not at all.

A command checks its --out path (`out_format`) before it does its work, so a typo in the folder costs
nothing; the file itself is written to a temporary name in the same folder and renamed into place
(`write_atomic`), so a reader never sees half a chart and a failed write leaves no file behind.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path
from typing import Any

from rooftop.models.errors import BadInput

FORMATS = {".svg": "svg", ".png": "png", ".html": "html", ".htm": "html"}
ALLOWED = ".svg, .png or .html"
MATPLOTLIB_HINT = "writing .svg/.png needs matplotlib: pip install 'rooftop[share]'"


class OutError(BadInput, ValueError):
    """An --out path that cannot be written, or a format this command does not write."""


def out_format(path: str) -> str:
    """The format an --out path asks for ("svg", "png" or "html"), once its folder is known to take a file."""
    target = Path(path)
    fmt = FORMATS.get(target.suffix.lower())
    if fmt is None:
        what = f"'{target.suffix}'" if target.suffix else "no extension"
        raise OutError(f"--out {path}: {what} is not a format rooftop writes; use {ALLOWED}")
    if target.is_dir():
        raise OutError(f"--out {path}: is a folder; give a file name ending in {ALLOWED}")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise OutError(f"--out {path}: the folder {parent} does not exist; create it or choose another")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutError(f"--out {path}: the folder {parent} is read-only; choose a folder you can write to")
    return fmt


def _file_mode(target: Path) -> int:
    """The mode the file gets: the one it has if it exists, else a new file's."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        return _new_mode()


def _new_mode() -> int:
    """What a plain open() gives a new file: 0666 less the umask, read from /proc where it can be (os.umask()
    would change it for every thread meanwhile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write `data` to `path` through a temporary file in the same folder and os.replace; on any failure the
    temporary file is removed and the old file (if any) is left as it was. OutError says what failed."""
    target = Path(path)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise OutError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _file_mode(target))
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutError(f"cannot write {target}: {exc.strerror or exc}") from None
        raise
    return target


def write_new(folder: Path, stem: str, suffix: str, data: str | bytes) -> Path:
    """Write `data` to folder/stem+suffix, or stem-2, stem-3…: the first name not taken, never replacing a file
    (a key press cannot ask for --force). Written whole to a temporary name, then linked into place: the link
    fails on a name taken meanwhile, so there is no window for a race, and a reader never sees half a file."""
    blob = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.chmod(tmp, _new_mode())
        for n in itertools.count(1):
            path = folder / f"{stem}{'' if n == 1 else f'-{n}'}{suffix}"
            try:
                os.link(tmp, path)
            except FileExistsError:
                continue
            return path
        raise AssertionError("unreachable")  # itertools.count never ends
    finally:
        os.unlink(tmp)


def need_matplotlib() -> Any:
    """matplotlib, for drawing on its own Figure and Agg/SVG canvases (pyplot and its global backend are never
    touched, so the app's threads can draw); OutError naming the extra to install when it is missing."""
    try:
        # deferred: matplotlib is the optional extra rooftop[share]
        import matplotlib
        from matplotlib.backends import backend_agg  # noqa: F401  (the canvas every chart is measured on)
    except ImportError:
        raise OutError(MATPLOTLIB_HINT) from None
    return matplotlib
