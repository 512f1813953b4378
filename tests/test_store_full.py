"""A full disk is said as a full disk ("disk full (N bytes free)"), never as damage, by every command; a file
SQLite may not grow on a disk with room is said as that.

Real ways to fill it: SQLite's own SQLITE_FULL from a file's page limit (`PRAGMA max_page_count`,
set on each connection the command opens), a file-size limit (`ulimit -f`, which SQLite reports as
"disk I/O error"), and, where this process may mount one, a 1 MiB tmpfs filled to the last byte: there a
reader cannot even make its -shm, and SQLite says "disk I/O error".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from probe_fixtures import tiny_sizes
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.store import db as dbmod
from rooftop.store.io import export_json
from rooftop.store.runs import Store
from rooftop.tui.cli import main


@pytest.fixture(autouse=True)
def no_user_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ROOFTOP_DB", raising=False)


def measured_store(path: Path) -> str:
    with Store.open(path) as s:
        rid = s.begin_run({"name": "Lab GPU", "uuid": "GPU-full"}, "quick", "cuda", {"torch": "2.5.1"})
        s.add_samples(rid, [synthetic_sample(i) for i in range(3)])
        s.set_ceilings(rid, DeviceProfile(id="local", name="Lab GPU", source="measured",
                                          bandwidth={"dram": Ceiling(2e12, "measured", "read_reduce:134217728")},
                                          peak={"bf16-tc": Ceiling(4e14, "measured", "8192x8192x8192")}))
        s.finish_run(rid, "complete")
    return rid


def export_file(tmp_path: Path, n: int) -> Path:
    with Store.open(tmp_path / "src.db") as s:
        rid = s.begin_run({"name": "Other GPU", "uuid": "GPU-other"}, "quick", "cuda")
        s.add_samples(rid, [synthetic_sample(i) for i in range(n)])
        s.finish_run(rid)
        doc = export_json(s, s.runs())
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(doc))
    return f


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def said_full(err: str) -> bool:
    return "disk full (" in err and "bytes free)" in err and "damaged" not in err and "integrity_check" not in err


def said_capped(err: str) -> bool:
    """A file SQLite may not grow on a disk with room: its page limit, named with its size, not a full disk, not a
    quota, and not damage either."""
    return ("reached its page limit (PRAGMA max_page_count = " in err and " pages of 4,096 bytes" in err
            and "raise the limit" in err and "disk full" not in err and "quota" not in err
            and "damaged" not in err and "integrity_check" not in err)


def no_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on every connection a command opens may not grow its file: SQLite's own SQLITE_FULL on the
    next page."""
    real = dbmod.connect

    def connect(path: Path, read_only: str = ""):
        conn = real(path, read_only)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    monkeypatch.setattr(dbmod, "connect", connect)


def test_an_import_into_a_store_that_may_not_grow_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "r.db"
    measured_store(db)
    exported = export_file(tmp_path, 300)
    no_room(monkeypatch)
    rc, out, err = cli(capsys, "import", str(exported), "--db", str(db))
    assert rc == 2 and err.count("\n") == 1 and said_capped(err), err  # was "disk quota, or a page limit"
    with Store.open(db) as s:  # nothing half-imported
        assert len(s.runs()) == 1


def test_measure_exits_non_zero_when_its_run_cannot_be_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from rooftop.probes import plan as planmod

    real = planmod.build_plan
    monkeypatch.setattr(planmod, "build_plan", lambda b, name="quick", only=None, sizes=None:
                        real(b, name, only, sizes=tiny_sizes()))
    bad = tmp_path / "not-a-db\x1b]0;p\x07"
    bad.write_text("plain text")  # the store cannot be used: nothing of the run is kept
    rc, out, err = cli(capsys, "measure", "--device", "cpu", "--only", "launch", "--no-plot", "--db", str(bad))
    assert rc == 1, err  # was 0: a script took the run for kept
    flat = err.replace("\n", " ")  # the console wraps the warning at its width
    assert "warning: the run is not kept in the store: " in flat and flat.count("not kept in the store") == 2, err
    assert "launch" in out  # the report stays
    assert "\x1b" not in err and "\\x1b]0;p\\x07" in err.replace("\n", ""), err  # its path, shown escaped
    assert bad.read_text() == "plain text"
    rc, out, err = cli(capsys, "measure", "--device", "cpu", "--only", "launch", "--json", "--db", str(bad))
    doc = json.loads(out)
    assert rc == 1 and doc["run_id"] is None and "the run is not kept in the store: " in doc["store_error"]


@pytest.fixture
def full_disk(tmp_path: Path):
    """A real 1 MiB disk holding a measured store, filled to the last byte; skipped where mounting is not allowed."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if sys.platform != "linux" or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                                                 capture_output=True).returncode:
        pytest.skip("this process may not mount a tmpfs (a real full disk needs one)")
    try:
        measured_store(mnt / "r.db")
        with open(mnt / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        yield mnt / "r.db"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _mounted(tmp_path: Path, size: str) -> Path:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if sys.platform != "linux" or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                                                 capture_output=True).returncode:
        pytest.skip("this process may not mount a tmpfs (a small disk needs one)")
    return mnt


def test_a_page_limit_on_a_small_disk_with_room_is_the_page_limit_not_a_full_disk(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A 32 MiB disk with 31 MiB free: the page limit stopped the import, not the disk (it was 'disk full')."""
    mnt = _mounted(tmp_path, "32m")
    try:
        db = mnt / "r.db"
        measured_store(db)
        exported = export_file(tmp_path, 300)
        no_room(monkeypatch)
        rc, out, err = cli(capsys, "import", str(exported), "--db", str(db))
        assert rc == 2 and err.count("\n") == 1 and said_capped(err), err
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_file_size_limit_is_named_not_an_io_error(tmp_path: Path) -> None:
    """`ulimit -f` below what an import needs: SQLite says only "disk I/O error"; the line names the limit."""
    import resource

    db = tmp_path / "r.db"
    measured_store(db)
    exported = export_file(tmp_path, 300)
    size = max(db.stat().st_size, (tmp_path / "r.db-wal").stat().st_size if (tmp_path / "r.db-wal").exists() else 0)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))
    env = {**os.environ, "ROOFTOP_HOME": str(tmp_path / "home")}
    p = subprocess.run([sys.executable, "-m", "rooftop.tui", "import", str(exported), "--db", str(db)],
                       preexec_fn=limit, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert f"file-size limit (ulimit -f: {size:,} bytes)" in p.stderr and "ulimit -f unlimited" in p.stderr, p.stderr
    assert "disk full" not in p.stderr and "damaged" not in p.stderr, p.stderr  # was "could not be used: disk I/O"
    with Store.open(db) as s:  # nothing half-imported
        assert len(s.runs()) == 1


def test_a_really_full_disk_is_full_not_damage(full_disk: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = str(full_disk)
    for argv in (["runs"], ["show", "1"], ["import", str(export_file(tmp_path, 3))]):
        rc, out, err = cli(capsys, *argv, "--db", db)
        assert rc == 2 and err.count("\n") == 1 and said_full(err), (argv, err)  # was "is corrupt"
    rc, out, err = cli(capsys, "op", "gemm", "8", "8", "8", "-d", "local", "--db", db)
    assert rc == 2 and said_full(err) and "unknown device" not in err, err  # was "unknown device 'local'"
    rc, out, err = cli(capsys, "op", "gemm", "8", "8", "8", "-d", "h100", "--db", db)
    assert rc == 0 and said_full(err), err  # a catalog device needs no store: a warning, and the answer


def test_a_fleet_that_cannot_be_kept_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from rooftop.tui.commands.fleet import _report
    from test_store_fleets import payload

    payloads = [payload(0, "node0", 4.6e12, "GPU-a"), payload(1, "node0", 4.6e12, "GPU-b")]
    bad = tmp_path / "not-a-db"
    bad.write_text("plain text")
    args = argparse.Namespace(no_save=False, db=str(bad), json=True)
    assert _report(args, payloads, "all-gpus", "quick", 60.0) == 1  # was 0 after "the fleet was not saved"
    err = capsys.readouterr().err
    assert "the fleet run is not kept" in err and "not kept in the store" in err, err
    args = argparse.Namespace(no_save=False, db=str(tmp_path / "ok.db"), json=True)
    assert _report(args, payloads, "all-gpus", "quick", 60.0) == 0
    assert "saved as run" in capsys.readouterr().err
