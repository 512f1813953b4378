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
- A new file appears whole: the schema is built in a temporary file beside it
  and hard-linked into place (never over a file another process made first),
  so a reader racing the first write never finds an empty or half-made file.
- A store this process cannot write (a read-only file, folder or mount) is
  opened read-only (`mode=ro`; `immutable=1` where no -shm can be made beside
  it), so it can still be listed; writing to it is refused as read-only.
- The schema carries a version (`PRAGMA user_version`) and an application id;
  `MIGRATIONS[i]` takes version i to i + 1, so an old file is brought forward
  on open and a file from a newer rooftop is refused, not damaged.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Literal, Sequence

from rooftop.models.errors import BadInput
APPLICATION_ID = 0x526F6F66  # "Roof": marks a SQLite file as rooftop's
BUSY_TIMEOUT_MS = 30_000  # a writer waits this long for another before giving up
SQLITE_MAGIC = b"SQLite format 3\x00"

Migration = Callable[[sqlite3.Connection], None]


# Why the store failed, for a caller that acts on it (the app retries nothing; a command says it).
# locked: another process held the write lock past the busy timeout; read-only: this process may
# not write; damaged: the file is corrupt inside; foreign: not rooftop's (another file or program,
# a newer rooftop's schema); full: no space left; missing: no database there yet; refused: a request
# the store turns down (an unknown run, a bad name); unusable: anything else (cannot open or create).
Reason = Literal["locked", "read-only", "damaged", "foreign", "full", "missing", "refused", "unusable"]


class StoreError(BadInput):
    """A problem with the database file, worded for one line: what is wrong and what to do.

    The store raises this and nothing else: sqlite3 and OS errors met while using the file
    become one (`store_error`), with a `reason`.
    """

    default_reason: Reason = "unusable"  # a subclass names its own (UnknownRun: refused, …)

    def __init__(self, message: str, reason: Reason | None = None) -> None:
        super().__init__(message)
        self.reason: Reason = reason or self.default_reason


# SQLite's primary result codes (sqlite_errorcode & 0xff) that say why a statement failed
_SQLITE_REASONS: dict[int, Reason] = {5: "locked", 6: "locked", 8: "read-only", 11: "damaged", 13: "full",
                                      26: "foreign"}


# Free bytes below which the store's disk is full: SQLite's next pages, a WAL frame or the 32 KiB -shm
# index of a reader no longer fit, and it says "disk I/O error" (a reader) or SQLITE_FULL (a writer).
LOW_SPACE = 1 << 20


def free_bytes(path: Path | str) -> int | None:
    """Free bytes on the disk of the store's folder (its nearest existing one); None when unknown."""
    folder = Path(path).absolute().parent
    try:
        return shutil.disk_usage(next((f for f in (folder, *folder.parents) if f.exists()), folder)).free
    except OSError:
        return None


def _io_error(exc: BaseException) -> bool:
    """An I/O failure (SQLITE_IOERR, or an OS error other than a refusal): what a full disk gives a reader."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == 10
    return isinstance(exc, OSError) or "disk i/o error" in str(exc).lower()


def error_reason(exc: BaseException, path: Path | str | None = None, conn: sqlite3.Connection | None = None) -> Reason:
    """Why a sqlite3 or OS error happened, as a StoreError reason.

    With the store's `path`, an I/O error where something leaves the store no room (a full disk, a quota, this
    process's file-size limit) is `full`, not damage: that is what makes a reader's -shm or a writer's page fail.
    """
    reason = _reason(exc)
    if reason in ("damaged", "unusable") and path is not None and _io_error(exc) \
            and no_room(path, conn, strict=True) is not None:
        return "full"
    return reason


def _reason(exc: BaseException) -> Reason:
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return "full"
        return "read-only" if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else "unusable"
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if isinstance(code, int) and (code & 0xFF) in _SQLITE_REASONS:
        return _SQLITE_REASONS[code & 0xFF]
    text = str(exc).lower()
    for words, reason in (("locked", "locked"), ("readonly", "read-only"), ("read-only", "read-only"),
                          ("disk is full", "full"), ("not a database", "foreign")):
        if words in text:
            return reason  # type: ignore[return-value]
    return "damaged" if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError) \
        else "unusable"


def store_error(exc: BaseException, path: Path | str, conn: sqlite3.Connection | None = None) -> StoreError:
    """A sqlite3 or OS error met while using the store at `path` (through `conn`, when there is one), as one line
    saying what to do."""
    reason = error_reason(exc, path, conn)
    if reason == "locked":
        msg = (f"database {path} is locked: another rooftop held it for over {BUSY_TIMEOUT_MS // 1000} s ({exc}); "
               "try again when it is done")
    elif reason == "full":
        room = room_for(path, conn)
        msg = f"database {path} cannot be used: {room.words} ({exc}); {room.hint}, or use another --db PATH"
    elif reason == "read-only":
        msg = f"database {path} cannot be written ({exc}); make it writable, or copy it and use --db COPY"
    elif reason in ("damaged", "foreign"):  # damage found mid-command: name the file
        msg = (f"database {path} is damaged ({exc}); check it with `sqlite3 FILE 'PRAGMA integrity_check'`, "
               "or use another --db PATH")
    else:
        msg = f"database {path} could not be used: {getattr(exc, 'strerror', None) or exc}"
    return StoreError(msg, reason)


ROOM = 64 * 1024 * 1024  # a disk with this much free is not what stopped SQLite growing a file
PROBE = 1024 * 1024  # bytes a test write beside the store tries, to learn what refuses it
_EDQUOT = getattr(errno, "EDQUOT", -1)
_SPACE_ERRNOS = (errno.ENOSPC, _EDQUOT, errno.EFBIG)


@dataclass(frozen=True)
class NoRoom:
    """What leaves the store no room to grow, in words, and what to do about it."""

    words: str
    hint: str


def _disk_words(free: int | None) -> str:
    return "disk full" + (f" ({free:,} bytes free)" if free is not None else "")


def _probe(folder: Path) -> int | None:
    """The errno a test write of PROBE bytes in `folder` fails with (ENOSPC, EDQUOT, EFBIG), or None: it fits,
    or the folder cannot be written at all (a read-only store is not short of room). The file goes at once."""
    tmp = folder / f".rooftop-room-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return exc.errno if exc.errno in _SPACE_ERRNOS else None
    try:
        chunk = b"\0" * 65536
        for _ in range(PROBE // len(chunk)):
            os.write(fd, chunk)
        os.fsync(fd)
        return None
    except OSError as exc:
        return exc.errno if exc.errno in _SPACE_ERRNOS else None
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()


def _page_room(conn: sqlite3.Connection | None) -> tuple[int, int, int] | None:
    """(bytes the connection's page limit leaves, the limit in pages, the page size), where one below SQLite's
    default is set (`PRAGMA max_page_count`); None otherwise."""
    if conn is None:
        return None
    try:
        limit = conn.execute("PRAGMA max_page_count").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        with contextlib.closing(sqlite3.connect(":memory:")) as fresh:
            default = fresh.execute("PRAGMA max_page_count").fetchone()[0]
    except sqlite3.Error:
        return None
    return (max(0, limit - pages) * size, limit, size) if limit < default else None


def _size_limit_room(path: Path) -> tuple[int, int] | None:
    """(bytes this process's file-size limit leaves the store or its -wal, the limit), where one is set
    (`ulimit -f`); None otherwise."""
    try:
        import resource  # deferred: resource is POSIX only; elsewhere the ImportError leaves no limit
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    largest = 0
    for f in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            largest = max(largest, f.stat().st_size)
    return max(0, soft - largest), soft


def room_for(path: Path | str, conn: sqlite3.Connection | None = None) -> NoRoom:
    """What leaves the store no room, for a store known to have none (`no_room`, else its disk)."""
    return no_room(path, conn) or NoRoom(_disk_words(free_bytes(path)), "free some space")


def no_room(path: Path | str, conn: sqlite3.Connection | None = None, strict: bool = False) -> NoRoom | None:
    """What leaves the store at `path` no room, found by asking each thing that can: a test write beside it (a
    used-up quota, a folder's own limit), the connection's page limit, this process's file-size limit, the disk's
    free space; the one leaving least room is named as what it is (a page limit on a disk with room is not a full
    disk). None where none is short of room. `strict` (for an I/O error, which damage gives too) counts a limit or
    the disk only when it leaves under a page or LOW_SPACE, or the test write fails."""
    p = Path(path).absolute()
    folder = next((f for f in (p.parent, *p.parent.parents) if f.exists()), p.parent)
    free = free_bytes(p)
    shown = f"{free:,} bytes" if free is not None else "room"
    probe = _probe(folder)
    if probe == _EDQUOT:
        return NoRoom(f"the disk quota for this user is used up (the disk itself has {shown} free)",
                      "free some of the quota or ask for a larger one (`quota -s` shows it)")
    near = LOW_SPACE if strict else ROOM
    candidates: list[tuple[int, NoRoom]] = []
    page = _page_room(conn)
    if page is not None and (page[0] < page[2] or (not strict and page[0] < near)):
        left, limit, size = page
        candidates.append((left, NoRoom(
            f"the store reached its page limit (PRAGMA max_page_count = {limit:,} pages of {size:,} bytes, "
            f"{limit * size:,} bytes) though its disk has {shown} free", "raise the limit")))
    sized = _size_limit_room(p)
    if sized is not None and (sized[0] < near or probe == errno.EFBIG):
        candidates.append((sized[0], NoRoom(
            f"the store reached this process's file-size limit (ulimit -f: {sized[1]:,} bytes) though its disk "
            f"has {shown} free", "raise it (`ulimit -f unlimited`) and run again")))
    if free is not None and free < near:
        candidates.append((free, NoRoom(_disk_words(free), "free some space")))
    if candidates:
        return min(candidates, key=lambda c: c[0])[1]
    if probe == errno.ENOSPC:
        return NoRoom(f"its folder {folder} is out of space though the disk reports {shown} free (a project "
                      "quota or a container's storage limit)", "free space within that limit or raise it")
    if strict:
        return None
    return NoRoom(f"the store cannot grow though its disk has {shown} free and a test write beside it fits "
                  "(something else caps the file)", "check what limits the file")


def _say_if_full(exc: BaseException, path: Path) -> None:
    """Raise the full disk's StoreError where `exc` comes from one; else return, for the caller's own words."""
    if error_reason(exc, path) == "full":
        raise store_error(exc, path) from None


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


def inspect(path: Path, immutable: bool = False) -> bool:
    """Check, without writing, that `path` is absent, empty, or a rooftop database.

    Returns True when the file needs creating/initialising. Raises StoreError
    for anything else, before any connection that could write to it is made.
    """
    if not path.exists():
        return True
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a database file; {_advice(path)}", "foreign")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        _say_if_full(exc, path)
        raise StoreError(f"cannot read {path}: {exc.strerror}; check its permissions", error_reason(exc)) from None
    if not head:
        return True  # an empty file is an empty SQLite database
    if head != SQLITE_MAGIC:
        raise StoreError(f"{path} is not an SQLite database (corrupt or another kind of file); {_advice(path)}",
                         "foreign")
    try:
        ro = sqlite3.connect(read_only_uri(path, immutable), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        _say_if_full(exc, path)
        raise StoreError(f"cannot open {path}: {exc}; {_advice(path)}", error_reason(exc)) from None
    try:
        app_id = ro.execute("PRAGMA application_id").fetchone()[0]
        version = ro.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        _say_if_full(exc, path)  # no room for the reader's -shm: a full disk, not damage
        raise StoreError(f"{path} is corrupt ({exc}); {_advice(path)}", "damaged") from None
    finally:
        ro.close()
    if app_id == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path} was written by a newer rooftop (schema {version}; this one knows up to "
                f"{SCHEMA_VERSION}); upgrade rooftop, or use another file with --db PATH", "foreign"
            )
        return version < SCHEMA_VERSION
    if app_id == 0 and not tables:
        return True  # a fresh SQLite file with nothing in it
    raise StoreError(f"{path} is an SQLite database but not rooftop's; {_advice(path)}", "foreign")


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def read_only_reason(path: Path) -> str:
    """Why this process cannot write the store at `path`, in words; '' when it can.

    os.access asks the kernel with this process's own rights, so a 0444 file, a folder without
    write permission and a read-only mount all say no (root passes the permission bits, as it
    really can write). The folder matters as much as the file: WAL needs its -wal and -shm beside it.
    """
    path = path.absolute()
    if path.exists():
        if not os.access(path, os.W_OK):
            return "the file is read-only"
        return "" if _writable(path.parent) else f"its folder {path.parent} is read-only"
    existing = next((p for p in path.parents if p.exists()), None)
    if existing is not None and not _writable(existing):
        return f"the folder {existing} is read-only"
    return ""


def read_only_uri(path: Path, immutable: bool = False) -> str:
    """A URI that opens `path` for reading only, without writing anything beside it.

    `immutable=1` where the folder is read-only and no -shm is there: SQLite cannot make the
    WAL index, and with no -shm nobody is writing the file (a writer keeps one beside it);
    or where asked (`immutable`: a store with no room for its -shm and nothing in its -wal).
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    if immutable or (not _writable(path.absolute().parent) and not path.with_name(path.name + "-shm").exists()):
        uri += "&immutable=1"
    return uri


def create(path: Path) -> None:
    """Make a new store at `path` whole, or leave the one another process made first.

    The schema is built in a temporary file beside it, then hard-linked into place: a reader
    finds no file or a complete one, never the empty file an in-place creation shows for a
    moment. Where the filesystem has no hard links, `connect` creates it in place as before.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.new")
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")  # kept in the file's header
            conn.execute("PRAGMA synchronous = FULL")
            migrate(conn, MIGRATIONS)
        finally:
            conn.close()  # the last connection checkpoints: everything is in the file itself
        with contextlib.suppress(FileExistsError):  # another process was first: use its file
            os.link(tmp, path)
    except OSError:
        pass  # no hard links here (or no room): connect makes the file in place
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink()


def connect(path: Path, read_only: str = "") -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, busy timeout, foreign keys.

    `read_only` (why the store cannot be written, from `read_only_reason`) opens it for reading
    only: nothing is written, not even the switch to WAL or a migration.
    """
    if read_only:
        return _connect_read_only(path, read_only)
    return _connect_writable(path)


def connect_without_room(path: Path, full: StoreError) -> sqlite3.Connection:
    """A read-only connection to a store with no room to write (`full`, the error a writable open met): a full
    disk must not keep its data from being listed or exported elsewhere.

    A reader normally makes the -shm index beside the file; with no room for it the file is opened immutable,
    which is whole only while its -wal holds nothing (a clean close or checkpoint leaves it empty). Where the -wal
    holds writes, they cannot be read without that index: `full` is raised, saying so.
    """
    with contextlib.suppress(StoreError):  # an index already beside it (a writer's) serves a reader as it is
        return _connect_read_only(path, "no room to write")
    wal = path.with_name(path.name + "-wal")
    try:
        pending = wal.stat().st_size if wal.exists() else 0
    except OSError:
        pending = 1
    if pending:
        raise StoreError(f"{full}; its last writes are still in {wal} ({pending:,} bytes), which cannot be read "
                         "without room for its index", "full")
    if inspect(path, immutable=True):  # empty, or needing an upgrade: nothing a reader can use before a write
        raise full
    return _connect_read_only(path, "no room to write", immutable=True)


def _connect_writable(path: Path) -> sqlite3.Connection:
    if not path.exists():
        create(path)
    needs_init = inspect(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        _say_if_full(exc, path)
        raise StoreError(f"cannot open {path}: {exc}; check the directory exists and is writable",
                         error_reason(exc)) from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")  # a committed sample survives a power cut too
        conn.execute("PRAGMA foreign_keys = ON")
        if needs_init:
            migrate(conn, MIGRATIONS)
    except sqlite3.DatabaseError as exc:
        conn.close()
        _say_if_full(exc, path)
        raise StoreError(f"cannot use {path}: {exc}; {_advice(path)}", error_reason(exc)) from None
    return conn


def _connect_read_only(path: Path, why: str, immutable: bool = False) -> sqlite3.Connection:
    if not path.exists():
        raise StoreError(f"cannot create {path}: {why}; point --db PATH or ROOFTOP_DB at a writable place",
                         "read-only")
    if inspect(path, immutable):
        raise StoreError(f"{path} is read-only ({why}) and holds no rooftop data this version can read "
                         "(it is empty, or must be upgraded by writing it); make it writable, or use another --db PATH",
                         "read-only")
    try:
        conn = sqlite3.connect(read_only_uri(path, immutable), uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                               isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        _say_if_full(exc, path)
        raise StoreError(f"cannot read {path} ({why}): {exc}; {_advice(path)}", error_reason(exc)) from None
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
        if conn.in_transaction:  # SQLite already rolled back after some errors (a full disk): say those, not this
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
