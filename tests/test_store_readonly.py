"""A store this process may not write: read as it is, and every write refused as read-only.

The condition is made real, not faked: the CLI runs in a child process that the kernel
refuses to let write the file or folder. Tests run as root here, and root passes
permission bits through CAP_DAC_OVERRIDE; so as root the child is started by
`setpriv` with that capability (and DAC_READ_SEARCH) dropped from its bounding set:
it keeps uid 0 (it can still run this Python under /root) but obeys the file's
mode like any user. As another user, a chmod alone is real.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.store.db import read_only_reason
from rooftop.store.runs import ReadOnlyStore, Store
from rooftop.tui.cli import main

DROP = ["--bounding-set", "-dac_override,-dac_read_search"]


def without_override() -> list[str]:
    """The command prefix that starts a child bound by file modes; skips where none can be made."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: root writes a file whatever its mode, so no store is read-only")
    probe = subprocess.run([setpriv, *DROP, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"setpriv cannot drop CAP_DAC_OVERRIDE here ({probe.stderr.strip()}); root writes any file")
    return [setpriv, *DROP]


def rooftop(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*without_override(), sys.executable, "-m", "rooftop.tui.cli", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})


def one_run(db: Path) -> str:
    with Store.open(db) as store:
        rid = store.begin_run({"name": "Lab GPU", "uuid": "GPU-ro"}, "quick", "cuda")
        for i in range(3):
            store.add_sample(rid, synthetic_sample(i))
        store.finish_run(rid, "complete")
    return rid


@pytest.fixture
def restore_modes(tmp_path: Path):  # so pytest can remove what the test made read-only
    yield
    for p in [tmp_path, *tmp_path.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def test_a_read_only_file_is_listed_and_writes_say_read_only(tmp_path: Path, restore_modes: None) -> None:
    db = tmp_path / "r.db"
    rid = one_run(db)
    db.chmod(0o444)
    before = db.read_bytes()
    out = rooftop(db, "runs")
    assert out.returncode == 0, out.stderr
    assert rid[:8] in out.stdout and "complete" in out.stdout and out.stderr == ""
    out = rooftop(db, "show", rid[:8])
    assert out.returncode == 0 and "read_reduce" in out.stdout, out.stderr
    for args in (("rename", rid[:8], "labbox"), ("delete", rid[:8])):
        out = rooftop(db, *args)
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and "is read-only (the file is read-only)" in out.stderr, out.stderr
        assert "corrupt" not in out.stderr and "damaged" not in out.stderr
    assert db.read_bytes() == before


def test_a_store_in_a_read_only_folder_is_listed_and_nothing_is_made_beside_it(tmp_path: Path,
                                                                                restore_modes: None) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "r.db"
    rid = one_run(db)
    assert sorted(p.name for p in folder.iterdir()) == ["r.db"]  # the writer's -wal and -shm went with it
    folder.chmod(0o555)
    out = rooftop(db, "runs", "--json")
    assert out.returncode == 0, out.stderr
    assert rid in out.stdout
    out = rooftop(db, "rename", rid[:8], "labbox")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert f"is read-only (its folder {folder} is read-only)" in out.stderr, out.stderr
    exported = tmp_path / "run.json"
    assert main(["export", rid, "-o", str(exported), "--db", str(db)]) == 0  # reading: fine as root too
    out = rooftop(folder / "new.db", "import", str(exported))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert f"cannot create {folder / 'new.db'}: the folder {folder} is read-only" in out.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["r.db"]


def test_a_writable_store_is_not_read_only(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    one_run(db)
    assert read_only_reason(db) == "" and read_only_reason(tmp_path / "new" / "x.db") == ""
    with Store.open(db) as store:
        assert store.read_only == ""


def test_a_store_opened_read_only_refuses_every_write(tmp_path: Path) -> None:
    """The guard itself, in this process: a Store opened as another user would open it (mode=ro)."""
    from rooftop.store import db as dbmod

    path = tmp_path / "r.db"
    rid = one_run(path)
    store = Store(dbmod.connect(path, read_only="the file is read-only"), path, "the file is read-only")
    try:
        assert [r.id for r in store.runs()] == [rid] and len(store.samples(rid)) == 3
        for write in (lambda: store.rename(rid, "labbox"), lambda: store.delete(rid),
                      lambda: store.begin_run({"name": "x"}, "quick", "cpu"), lambda: store.save_op("a", "ew 1")):
            with pytest.raises(ReadOnlyStore, match="read-only"):
                write()
    finally:
        store.close()
