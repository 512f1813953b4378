"""The store raises StoreError and nothing else, with a reason: locked, read-only, damaged, foreign, full.

Real SQLite files throughout: a second connection holds the write lock, `max_page_count` fills
the file, bytes are overwritten to damage it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from helpers.store_writer import damage_pages
from rooftop.store import db as dbmod
from rooftop.store.db import StoreError, error_reason, store_error
from rooftop.store.runs import BadName, ReadOnlyStore, Store, UnknownRun
from rooftop.tui.cli import main

INFO = {"name": "Test GPU", "kind": "gpu", "vendor": "nvidia"}


def new_store(path: Path) -> str:
    with Store.open(path) as s:
        rid = s.begin_run(INFO, plan="quick", backend="cuda:0")
        s.finish_run(rid, "complete")
    return rid


@pytest.fixture
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer waits 0.1 s for the lock instead of 30 s, so a held lock shows at once."""
    monkeypatch.setattr(dbmod, "BUSY_TIMEOUT_MS", 100)


def test_a_held_write_lock_is_locked_not_damaged(tmp_path: Path, short_wait: None) -> None:
    path = tmp_path / "r.db"
    new_store(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Store.open(path, recover=False) as s:
            with pytest.raises(StoreError) as info:
                s.save_op("gemv", "gemv 8192 8192 bf16")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert info.value.reason == "locked"
    assert "locked" in str(info.value) and "damaged" not in str(info.value) and str(path) in str(info.value)


def test_the_cli_says_locked_in_one_line(tmp_path: Path, short_wait: None, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.db"
    rid = new_store(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        rc = main(["rename", rid[:8], "lab", "--db", str(path)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "is locked" in err and "damaged" not in err, err


def test_a_full_file_is_full(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    new_store(path)
    with Store.open(path) as s:
        pages = s.conn.execute("PRAGMA page_count").fetchone()[0]
        s.conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own SQLITE_FULL, as a full disk gives
        with pytest.raises(StoreError) as info:
            for i in range(2000):
                s.save_op(f"op{i}", "x" * 2000)
    assert info.value.reason == "full" and "disk is full" in str(info.value)


def test_damage_inside_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    new_store(path)
    damage_pages(path)
    with pytest.raises(StoreError) as info:
        with Store.open(path) as s:
            s.runs()
    assert info.value.reason == "damaged" and str(path) in str(info.value)


@pytest.mark.parametrize("content", [b"not a database at all\n", b"SQLite format 3\x00" + b"\x00" * 200])
def test_a_file_that_is_not_rooftops_is_foreign(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "r.db"
    path.write_bytes(content)
    with pytest.raises(StoreError) as info:
        Store.open(path)
    assert info.value.reason in ("foreign", "damaged")
    if content.startswith(b"not"):
        assert info.value.reason == "foreign"


def test_another_programs_sqlite_is_foreign(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE t (x)")
    c.commit()
    c.close()
    with pytest.raises(StoreError) as info:
        Store.open(path)
    assert info.value.reason == "foreign" and "not rooftop's" in str(info.value)


def test_refusals_and_read_only_name_their_reason(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    new_store(path)
    with Store.open(path) as s:
        with pytest.raises(UnknownRun) as unknown:
            s.run("ffffffff")
        with pytest.raises(BadName) as bad:
            s.rename(s.runs()[0].id, "h100")
    assert unknown.value.reason == "refused" and bad.value.reason == "refused"
    ro = Store(dbmod.connect(path, read_only="the file is read-only"), path, "the file is read-only")
    with ro, pytest.raises(ReadOnlyStore) as info:
        ro.save_op("gemv", "gemv 8192 8192 bf16")
    assert info.value.reason == "read-only"


@pytest.mark.parametrize("exc, reason", [
    (sqlite3.OperationalError("database is locked"), "locked"),
    (sqlite3.OperationalError("attempt to write a readonly database"), "read-only"),
    (sqlite3.OperationalError("database or disk is full"), "full"),
    (sqlite3.DatabaseError("database disk image is malformed"), "damaged"),
    (sqlite3.DatabaseError("file is not a database"), "foreign"),
    (OSError(28, "No space left on device"), "full"),
    (OSError(30, "Read-only file system"), "read-only"),
])
def test_errors_map_to_reasons(exc: BaseException, reason: str) -> None:
    assert error_reason(exc) == reason
    assert store_error(exc, "/x/r.db").reason == reason
