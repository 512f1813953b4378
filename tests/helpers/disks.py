"""Real small disks for the tests of a full store: a tmpfs of a given size, mounted where this process may.

CI may run as a user who cannot mount: the tests that need one are skipped there, and the same conditions
are also made without a disk (a file-size limit, a page limit) by tests that run everywhere.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def small_disk(tmp_path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (`1m`, `32m`) at tmp_path/disk, unmounted after; the test is skipped where mounting is
    not allowed."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if sys.platform != "linux" or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                                                 capture_output=True).returncode:
        pytest.skip("this process may not mount a tmpfs (a small disk needs one)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(folder: Path) -> None:
    """Write to a file in `folder` until its disk refuses another byte."""
    with open(folder / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
