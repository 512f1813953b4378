"""The SQLite file: opening it safely, the schema, and forward migrations.

Why this module is careful:
- A file at the DB path that is not rooftop's (corrupt, another program's
  SQLite database, a text file) is inspected read-only and refused with a
  one-line `StoreError`; it is never written to, not even by switching it to WAL.
- Several rooftop processes share one file (one measuring, one reading or
  measuring). WAL lets readers run beside a writer; a busy timeout makes
  writers queue instead of failing; every write is a short `BEGIN IMMEDIATE`
  transaction so no reader ever has to upgrade to a writer (the case SQLite
  cannot wait out, and which surfaces "database is locked").
- The schema carries a version (`PRAGMA user_version`) and an application id;
  `MIGRATIONS[i]` takes version i to i + 1, so an old file is brought forward
  on open and a file from a newer rooftop is refused, not damaged.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Callable, Iterator, Sequence

APPLICATION_ID = 0x526F6F66  # "Roof": marks a SQLite file as rooftop's
BUSY_TIMEOUT_MS = 30_000  # a writer waits this long for another before giving up
SQLITE_MAGIC = b"SQLite format 3\x00"

Migration = Callable[[sqlite3.Connection], None]


class StoreError(Exception):
    """A problem with the database file, worded for one line: what is wrong and what to do."""


def _script(sql: str) -> Migration:
    """A migration from SQL text, run statement by statement inside the caller's transaction.

    (`executescript` would COMMIT first, breaking the one-transaction-per-step rule.)
    """

    def run(conn: sqlite3.Connection) -> None:
        stmt = ""
        for line in sql.splitlines(keepends=True):
            stmt += line
            if sqlite3.complete_statement(stmt):
                conn.execute(stmt)
                stmt = ""
        if stmt.strip():
            conn.execute(stmt)

    return run


SCHEMA_V1 = """
CREATE TABLE runs (
    id            TEXT PRIMARY KEY,            -- 32 hex digits; shown as its first 8
    name          TEXT UNIQUE,                 -- a name the user gives it (rooftop rename)
    device_key    TEXT NOT NULL,               -- which physical device: runs of one key form its history
    host          TEXT NOT NULL DEFAULT '',
    device_json   TEXT NOT NULL DEFAULT '{}',  -- what the backend reported (name, uuid, memory, clocks…)
    backend       TEXT NOT NULL DEFAULT '',
    versions_json TEXT NOT NULL DEFAULT '{}',  -- rooftop, python, torch, CUDA, driver…
    plan          TEXT NOT NULL DEFAULT '',
    imported_from TEXT,                        -- NULL when measured here; else the file it came from
    started_at    REAL NOT NULL,               -- seconds since the epoch
    ended_at      REAL,
    status        TEXT NOT NULL CHECK (status IN
                  ('running', 'complete', 'cancelled', 'failed', 'interrupted')),
    pid           INTEGER,                     -- the owning process, while running
    proc_token    TEXT,                        -- its start time, so a reused pid is not mistaken for it
    profile_json  TEXT                         -- the profile's facts besides ceilings (set_ceilings)
);
CREATE INDEX runs_by_device ON runs (device_key, status, started_at);
CREATE TABLE samples (
    run_id          TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,          -- order of arrival within the run
    family          TEXT NOT NULL,
    dtype           TEXT NOT NULL,
    cache           TEXT NOT NULL,
    shape_json      TEXT NOT NULL,
    flops           REAL NOT NULL,             -- W
    bytes           REAL NOT NULL,             -- Q
    footprint_bytes REAL NOT NULL,
    path            TEXT,
    median_s        REAL,                      -- time stats: NULL when skipped
    p10_s           REAL,
    p90_s           REAL,
    min_s           REAL,
    iqr_ratio       REAL,
    repeats         INTEGER,
    calls           INTEGER,
    stable          INTEGER NOT NULL,
    skipped         TEXT NOT NULL DEFAULT '',  -- why the point was not measured
    max_error       REAL,
    conditions_json TEXT NOT NULL DEFAULT '{}',
    created_at      REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE ceilings (
    run_id   TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    kind     TEXT NOT NULL CHECK (kind IN ('bandwidth', 'peak', 'launch')),
    key      TEXT NOT NULL,                    -- memory level, compute path, or 'launch'
    value    REAL NOT NULL,                    -- bytes/s, FLOP/s, seconds
    source   TEXT NOT NULL,
    case_    TEXT NOT NULL DEFAULT '',
    stable   INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (run_id, kind, key)
);
CREATE TABLE telemetry (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    t         REAL NOT NULL,                   -- seconds since the epoch
    data_json TEXT NOT NULL,                   -- one sampler snapshot (fields it could not read are absent)
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE saved_ops (
    name       TEXT PRIMARY KEY,
    spec       TEXT NOT NULL,                  -- the op spec words, e.g. 'gemm 1 8192 8192 bf16'
    devices    TEXT NOT NULL DEFAULT '',       -- comma-separated device ids it was analysed on
    note       TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
)
"""

# MIGRATIONS[i] takes a file from schema version i to i + 1. Append, never edit.
MIGRATIONS: tuple[Migration, ...] = (_script(SCHEMA_V1),)
SCHEMA_VERSION = len(MIGRATIONS)

OUR_TABLES = {"runs", "samples", "ceilings", "telemetry", "saved_ops"}


def _advice(path: Path) -> str:
    return f"move it away or point rooftop elsewhere with --db PATH or ROOFTOP_DB; rooftop left {path} untouched"


def inspect(path: Path) -> bool:
    """Check, without writing, that `path` is absent, empty, or a rooftop database.

    Returns True when the file needs creating/initialising. Raises StoreError
    for anything else, before any connection that could write to it is made.
    """
    if not path.exists():
        return True
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a database file; {_advice(path)}")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}; check its permissions") from None
    if not head:
        return True  # an empty file is an empty SQLite database
    if head != SQLITE_MAGIC:
        raise StoreError(f"{path} is not an SQLite database (corrupt or another kind of file); {_advice(path)}")
    try:
        ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path}: {exc}; {_advice(path)}") from None
    try:
        app_id = ro.execute("PRAGMA application_id").fetchone()[0]
        version = ro.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is corrupt ({exc}); {_advice(path)}") from None
    finally:
        ro.close()
    if app_id == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path} was written by a newer rooftop (schema {version}; this one knows up to "
                f"{SCHEMA_VERSION}); upgrade rooftop, or use another file with --db PATH"
            )
        return version < SCHEMA_VERSION
    if app_id == 0 and not tables:
        return True  # a fresh SQLite file with nothing in it
    raise StoreError(f"{path} is an SQLite database but not rooftop's; {_advice(path)}")


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, busy timeout, foreign keys."""
    needs_init = inspect(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path}: {exc}; check the directory exists and is writable") from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")  # a committed sample survives a power cut too
        conn.execute("PRAGMA foreign_keys = ON")
        if needs_init:
            migrate(conn, MIGRATIONS)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(f"cannot use {path}: {exc}; {_advice(path)}") from None
    return conn


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> int:
    """Bring the file forward to len(migrations), one transaction per step; returns the final version.

    Each step re-reads the version inside its write lock, so two processes
    opening an old file at once apply every step exactly once.
    """
    target = len(migrations)
    while True:
        with write(conn):
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version >= target:
                return version
            migrations[version](conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


@contextlib.contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One short write transaction: takes the write lock up front (BEGIN IMMEDIATE), waiting if busy."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


@contextlib.contextmanager
def read(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A consistent snapshot across several SELECTs (a deferred transaction that never writes)."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")
