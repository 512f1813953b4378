"""The database file: creation, WAL, versions and migrations, and refusing files that are not rooftop's."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from rooftop.store import db
from rooftop.store.db import SCHEMA_VERSION, StoreError
from rooftop.store.runs import Store


def snapshot(path: Path) -> tuple[bytes, int, list[str]]:
    """Everything that would show a file was touched: its bytes, mtime, and any journal files beside it."""
    side = sorted(p.name for p in path.parent.iterdir() if p.name != path.name)
    return path.read_bytes(), path.stat().st_mtime_ns, side


def test_new_file_gets_schema_wal_and_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "rooftop.db"
    with Store.open(path) as store:
        c = store.conn
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert c.execute("PRAGMA busy_timeout").fetchone()[0] == db.BUSY_TIMEOUT_MS
        assert c.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert c.execute("PRAGMA application_id").fetchone()[0] == db.APPLICATION_ID
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert db.OUR_TABLES <= tables
    with Store.open(path) as again:  # reopening an up-to-date file changes nothing
        assert again.runs() == []


def test_db_path_honours_argument_then_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFTOP_DB", str(tmp_path / "env.db"))
    with Store.open() as store:
        assert store.path == tmp_path / "env.db"
    with Store.open(tmp_path / "arg.db") as store:
        assert store.path == tmp_path / "arg.db"
    monkeypatch.delenv("ROOFTOP_DB")
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    with Store.open() as store:
        assert store.path == tmp_path / "home" / "rooftop.db"


def test_empty_file_is_initialised(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with Store.open(path) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.parametrize(
    "content",
    [b"this is a text file, not a database\n", b"SQLite format 3\x00" + os.urandom(4080), os.urandom(8192)],
    ids=["text", "sqlite-header-garbage", "random"],
)
def test_corrupt_file_is_refused_and_left_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "rooftop.db"
    path.write_bytes(content)
    before = snapshot(path)
    with pytest.raises(StoreError) as exc:
        Store.open(path)
    msg = str(exc.value)
    assert str(path) in msg and "\n" not in msg
    assert "--db" in msg  # says what to do
    assert snapshot(path) == before


def test_foreign_sqlite_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE runs (x)")  # even a table named like ours does not make it rooftop's
    conn.execute("INSERT INTO runs VALUES (1)")
    conn.commit()
    conn.close()
    before = snapshot(path)
    with pytest.raises(StoreError, match="not rooftop's") as exc:
        Store.open(path)
    assert str(path) in str(exc.value)
    assert snapshot(path) == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    conn.close()


def test_file_from_a_newer_rooftop_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    Store.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = snapshot(path)
    with pytest.raises(StoreError, match="newer rooftop"):
        Store.open(path)
    assert snapshot(path)[0] == before[0]


def test_directory_at_db_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="directory"):
        Store.open(tmp_path)


def test_migrations_run_forward_once_each(tmp_path: Path) -> None:
    """An old file is brought forward step by step; running again applies nothing twice."""
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    applied: list[int] = []

    def step(n: int) -> db.Migration:
        def run(c: sqlite3.Connection) -> None:
            applied.append(n)
            c.execute(f"CREATE TABLE t{n} (x)")

        return run

    assert db.migrate(conn, [step(0)]) == 1
    assert db.migrate(conn, [step(0), step(1), step(2)]) == 3
    assert db.migrate(conn, [step(0), step(1), step(2)]) == 3
    assert applied == [0, 1, 2]
    assert conn.execute("PRAGMA application_id").fetchone()[0] == db.APPLICATION_ID


def test_failed_migration_leaves_the_previous_version(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)

    def bad(c: sqlite3.Connection) -> None:
        c.execute("CREATE TABLE half (x)")
        raise RuntimeError("migration bug")

    db.migrate(conn, [lambda c: c.execute("CREATE TABLE ok (x)")])
    with pytest.raises(RuntimeError):
        db.migrate(conn, [lambda c: None, bad])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchone() is None


def test_schema_script_statements_survive_semicolons_in_comments(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    db._script("CREATE TABLE a (x -- one; two\n);\nCREATE TABLE b (y)")(conn)
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master")} == {"a", "b"}


def test_a_new_store_is_made_whole_beside_it_and_linked_into_place(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "new.db"
    with Store.open(path) as store:
        assert store.runs() == []
    assert sorted(p.name for p in path.parent.iterdir()) == ["new.db"]  # no temporary file left behind
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # set in the temporary file, kept
    raw.close()


def test_a_filesystem_without_hard_links_still_gets_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src, dst):  # as on a filesystem that has none (EPERM)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    path = tmp_path / "fat.db"
    with Store.open(path) as store:
        rid = store.begin_run({"name": "x"}, "quick", "cpu")
    with Store.open(path) as store:
        assert [r.id for r in store.runs()] == [rid]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fat.db"]
