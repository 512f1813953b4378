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

from helpers.disks import fill, small_disk
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
    with small_disk(tmp_path, "1m") as mnt:
        measured_store(mnt / "r.db")
        fill(mnt)
        yield mnt / "r.db"


def test_a_page_limit_on_a_small_disk_with_room_is_the_page_limit_not_a_full_disk(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A 32 MiB disk with 31 MiB free: the page limit stopped the import, not the disk (it was 'disk full')."""
    with small_disk(tmp_path, "32m") as mnt:
        db = mnt / "r.db"
        measured_store(db)
        exported = export_file(tmp_path, 300)
        no_room(monkeypatch)
        rc, out, err = cli(capsys, "import", str(exported), "--db", str(db))
        assert rc == 2 and err.count("\n") == 1 and said_capped(err), err


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


def said_read_only(err: str, words: str) -> bool:
    """A reader's one warning: the store is read, nothing new can be kept, and why (not damage)."""
    return (err.count("\n") == 1 and "is read only for now, with no room to write: " in err and words in err
            and "to keep anything new" in err and "damaged" not in err)


def test_a_really_full_disk_is_read_and_only_writes_are_refused(full_disk: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Every read command works on a full disk (they all exited 2), so the data can be taken elsewhere; a write is
    refused as a full disk, never as damage."""
    db = str(full_disk)
    with Store.open(full_disk) as s:
        [run] = s.runs()
    rc, out, err = cli(capsys, "runs", "--db", db)
    assert rc == 0 and run.id[:8] in out and said_read_only(err, "disk full ("), err
    rc, out, err = cli(capsys, "show", run.id[:8], "--db", db)
    assert rc == 0 and "Lab GPU" in out and said_read_only(err, "disk full ("), err
    rc, out, err = cli(capsys, "export", run.id[:8], "--db", db)
    assert rc == 0 and json.loads(out)["runs"][0]["id"] == run.id, err
    rc, out, err = cli(capsys, "op", "gemm", "8", "8", "8", "-d", "local", "--db", db)
    assert rc == 0 and "local" in out and said_read_only(err, "disk full ("), err
    rc, out, err = cli(capsys, "import", str(export_file(tmp_path, 3)), "--db", db)
    assert rc == 2 and err.count("\n") == 1 and said_full(err), err


def test_a_store_this_process_may_not_grow_is_read_all_the_same(tmp_path: Path) -> None:
    """The same without a disk to fill (any user): a file-size limit of 0 leaves a reader no room for its index,
    as a full disk does. `runs`, `show`, `export` answer, with one warning naming the limit."""
    import resource

    db = tmp_path / "r.db"
    rid = measured_store(db)

    def no_room() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
    env = {**os.environ, "ROOFTOP_HOME": str(tmp_path / "home")}
    for argv in (["runs"], ["show", rid[:8]], ["export", rid[:8]]):
        p = subprocess.run([sys.executable, "-m", "rooftop.tui", *argv, "--db", str(db)], preexec_fn=no_room,
                           capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0 and rid[:8] in p.stdout, (argv, p.stderr)  # was exit 2, "disk I/O error"
        assert said_read_only(p.stderr, "file-size limit (ulimit -f: 0 bytes)"), (argv, p.stderr)
    assert json.loads(p.stdout)["runs"][0]["id"] == rid


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


def test_a_store_that_fills_mid_run_says_the_points_it_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The store fills after some points were committed: measure said "not kept in the store" while those points
    were a run (interrupted at the next open). It says how many it kept and as which run."""
    import dataclasses

    from rooftop.models.units import KiB
    from rooftop.probes import plan as planmod

    real = planmod.build_plan
    many = dataclasses.replace(tiny_sizes(), working_sets=tuple(4 * KiB * (i + 1) for i in range(40)))
    monkeypatch.setattr(planmod, "build_plan", lambda b, name="quick", only=None, sizes=None:
                        real(b, name, only, sizes=many))
    db = tmp_path / "r.db"
    measured_store(db)
    real_connect = dbmod.connect

    def connect(path: Path, read_only: str = ""):
        conn = real_connect(path, read_only)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # room for the run and its first points
        return conn

    monkeypatch.setattr(dbmod, "connect", connect)
    rc, out, err = cli(capsys, "measure", "--device", "cpu", "--only", "bandwidth", "--json", "--db", str(db))
    doc = json.loads(out)
    monkeypatch.setattr(dbmod, "connect", real_connect)
    with Store.open(db) as s:
        run = s.run(doc["run_id"])
        kept = len(s.samples(run.id))
    flat = err.replace("\n", " ")
    assert rc == 1 and 0 < kept < len(doc["samples"]), (rc, kept)
    assert "not kept in the store" not in flat, err  # was: not kept, with the points in the store
    assert f"kept in part as run {run.id[:8]}: {kept} of {len(doc['samples'])} points" in flat, err
    assert doc["kept_samples"] == kept
