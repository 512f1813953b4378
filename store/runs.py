"""The Store: runs, their samples, ceilings and telemetry, and saved what-if ops.

A measuring process uses it like this (each call is its own short
transaction, committed before it returns, so a SIGKILL loses at most the
sample in flight)::

    store = Store.open(db_path)                  # --db / ROOFTOP_DB / the data dir
    run_id = store.begin_run(device_info, plan="quick", backend="cuda", versions={"torch": ...})
    for sample in plan:                          # rooftop.models.sample.Sample
        store.add_sample(run_id, sample)
    store.add_telemetry(run_id, rows)            # sampler snapshots: dicts with a "t" (epoch seconds)
    store.set_ceilings(run_id, profile)          # the DeviceProfile calibrated from the samples
    store.finish_run(run_id, "complete")         # or "cancelled" / "failed"

A run is named by its id (32 hex digits; any unique prefix of 4 or more
works), or by a name given with `rename`. The latest complete run of a device
that has ceilings is that device's measured profile (`profiles()`).

A Store may be handed to another thread (the TUI's measuring worker) but not
used by two threads at once; give each thread its own `Store.open`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import platform
import re
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Literal, Mapping, Sequence, get_args

from rooftop.models import plausible
from rooftop.models.catalog import catalog
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.units import fmt_when

from . import db
from .db import StoreError
from .locations import db_path
from .process import host_name, is_alive, process_token

RunStatus = Literal["running", "complete", "cancelled", "failed", "interrupted"]
STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
FINAL_STATUSES: tuple[RunStatus, ...] = ("complete", "cancelled", "failed")
# What a run holds, told by its plan: a measurement of the device's ceilings (plan quick, full, …),
# a profiled program (plan "profile", store.workloads) or a collectives sweep (plan "comm", store.comms).
RunKind = Literal["measurement", "profile", "comm", "fleet"]
PROFILE_PLAN = "profile"
COMM_PLAN = "comm"
FLEET_PLAN = "fleet"  # many devices measured at once: its members are measurement runs (store.fleets)
SHORT_ID = 8
MIN_PREFIX = 4
ACTIVE_S = 600.0  # a run of another host counts as running while it added a sample or began this recently
LOCAL = "local"  # the device id of this machine's latest measured profile (README: `--device local`, the default once measured)
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,63}")
HEX_RE = re.compile(r"[0-9a-fA-F]+")


# The plans that are no measurement, and the kind each is; every other plan (quick, full, …) measures the ceilings.
PLAN_KINDS: dict[str, RunKind] = {PROFILE_PLAN: "profile", COMM_PLAN: "comm", FLEET_PLAN: "fleet"}
KINDS: tuple[RunKind, ...] = get_args(RunKind)


def kind_of(plan: str) -> RunKind:
    """What a run of `plan` holds (RunKind): the one reading of a plan as a kind."""
    return PLAN_KINDS.get(plan, "measurement")


class UnknownRun(StoreError, LookupError):
    """A run reference that matches no run (or more than one)."""

    default_reason = "refused"


class ReadOnlyStore(StoreError):
    """A write to a store this process may only read (a read-only file, folder or mount)."""

    default_reason = "read-only"


class BadName(StoreError, ValueError):
    """A run name that is malformed, taken, or would shadow a catalog device or read as a run id."""

    default_reason = "refused"


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a run, in words for one line; None when it can.

    A run is found by name, id or id prefix (`run`), and a name works as
    `--device NAME`; so a name must not read as either of the others: no hex
    digits only from MIN_PREFIX long (`abc1` could be an id prefix; `fab` cannot), no catalog device id, not `local`.
    """
    if not NAME_RE.fullmatch(name):
        return "start with a letter, then letters, digits, '.', '_' or '-' (64 at most)"
    if len(name) >= MIN_PREFIX and HEX_RE.fullmatch(name):
        return ("a name of hex digits only (0-9, a-f) would read as a run id prefix; "
                "add a letter after f, or a '.', '_' or '-'")
    if name.lower() in {k.lower() for k in catalog()} | {LOCAL}:
        return "that is already a device id (the catalog's, or `local`); choose another so --device stays unambiguous"
    return None


@dataclass(frozen=True)
class Run:
    """One sweep on one device: where, with what, when, and how it ended."""

    id: str
    device_key: str  # the physical device; its runs form its history
    host: str
    device: Mapping[str, Any]  # what the backend reported about the device
    backend: str
    plan: str
    started_at: float  # epoch seconds
    status: RunStatus
    name: str | None = None
    versions: Mapping[str, Any] = field(default_factory=dict)
    ended_at: float | None = None
    imported_from: str | None = None  # None when measured on this machine
    samples: int = 0  # how many samples it holds
    has_ceilings: bool = False

    @property
    def short_id(self) -> str:
        return self.id[:SHORT_ID]

    @property
    def label(self) -> str:
        """How the run is named as a device: its name, else its short id."""
        return self.name or self.short_id

    @property
    def device_name(self) -> str:
        return str(self.device.get("name") or self.device_key)

    @property
    def kind(self) -> RunKind:
        """A profiled program, a collectives sweep, a fleet, or (any other plan) a measurement of the ceilings."""
        return kind_of(self.plan)


@dataclass(frozen=True)
class SampleGroup:
    """How many samples of one kernel family and dtype a run holds, and how many were skipped or unstable."""

    family: str
    dtype: str
    count: int
    skipped: int = 0
    unstable: int = 0


@dataclass(frozen=True)
class NewRun:
    """A whole run read from a file, ready for `Store.insert_runs`."""

    run: Run
    samples: Sequence[Sample] = ()
    telemetry: Sequence[Mapping[str, Any]] = ()
    profile: DeviceProfile | None = None
    measured: bool = False  # measured by rooftop on `run.host` (a fleet's member kept by its rank 0), not a file


def default_versions() -> dict[str, str]:
    """Versions rooftop can know without importing torch; the backend adds its own."""
    # deferred: importlib.metadata (~15 ms: it loads email and zipfile), only when a run is kept
    from importlib.metadata import PackageNotFoundError, version

    try:
        rooftop = version("rooftop")
    except PackageNotFoundError:
        rooftop = "unknown"
    return {"rooftop": rooftop, "python": platform.python_version(), "sqlite": sqlite3.sqlite_version}


def device_key_for(device_info: Mapping[str, Any], host: str) -> str:
    """A stable key for a physical device: its UUID when the backend gives one, else host/name/index."""
    if device_info.get("uuid"):
        return str(device_info["uuid"])
    name = device_info.get("name") or device_info.get("kind") or "device"
    return f"{host}/{name}/{device_info.get('index', 0)}"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


def _num(v: float | None) -> float | None:
    """A REAL column's value: SQLite stores NaN as NULL (kept explicit), and a whole number is bound as a
    float, as the column holds it (a JSON integer past 2^63 would not fit SQLite's INTEGER)."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


class Store:
    """rooftop's SQLite file. Open with `Store.open(path)`; every public method commits before returning."""

    def __init__(self, conn: sqlite3.Connection, path: Path, read_only: str = "") -> None:
        self.conn = conn
        self.path = path
        self.read_only = read_only  # why this process cannot write the file; '' when it can
        self.interrupted: list[str] = []  # runs this open found orphaned and marked interrupted
        self.no_room: StoreError | None = None  # why a store with no room to write was opened to read only
        self.room: db.NoRoom | None = None  # and what leaves it none, in words
        self.unreadable: dict[str, list[str]] = {}  # run id → values read as unknown (see `_unknown`)

    # -- lifecycle ---------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, recover: bool = True) -> "Store":
        """Open (creating if absent) the store at --db PATH / ROOFTOP_DB / the data dir.

        Raises StoreError, without touching the file, when it is not a rooftop database.
        A store this process cannot write is opened read-only (`read_only` says why): it can
        be read, and each write raises ReadOnlyStore; orphaned runs are left for a writer to mark.
        A store with no room to write (a full disk) is opened read-only too, `no_room` saying why:
        each write raises that error (reason `full`).
        """
        p = db_path(path)
        why = db.read_only_reason(p)
        try:
            conn = db.connect(p, read_only=why)
        except StoreError as exc:
            if exc.reason != "full" or why or not p.is_file():
                raise
            # no room to write (a full disk, a quota): what is there can still be read, listed and exported
            store = cls(db.connect_without_room(p, exc), p, "no room to write")
            store.no_room, store.room = exc, db.room_for(p)
            return store
        store = cls(conn, p, why)
        if recover and not why:
            store.interrupted = store.recover()
        return store

    @classmethod
    def open_existing(cls, path: str | os.PathLike[str] | None = None) -> "Store | None":
        """Open the store if its file exists; None otherwise (readers should not create files)."""
        p = db_path(path)
        return cls.open(p) if p.exists() else None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self) -> ContextManager[sqlite3.Connection]:
        """One write transaction (db.write); ReadOnlyStore, in one line, on a store opened read-only (the error
        that found no room, on a store opened read-only for that)."""
        if self.no_room is not None:
            raise StoreError(str(self.no_room), "full")
        if self.read_only:
            raise ReadOnlyStore(f"{self.path} is read-only ({self.read_only}); rooftop cannot change it: "
                                "make it writable, or copy it and use --db COPY")
        return db.write(self.conn)

    def recover(self) -> list[str]:
        """Mark `running` runs of dead processes on this host `interrupted`; their samples stay."""
        host = host_name()
        rows = self.conn.execute(
            "SELECT id, pid, proc_token FROM runs WHERE status = 'running' AND host = ?", (host,)
        ).fetchall()
        dead = [rid for rid, pid, token in rows if not (pid and is_alive(int(pid), token or ""))]
        marked = []
        for rid in dead:
            with self._write() as c:
                cur = c.execute(
                    "UPDATE runs SET status = 'interrupted', ended_at = COALESCE("
                    "(SELECT MAX(created_at) FROM samples WHERE run_id = ?), started_at)"
                    " WHERE id = ? AND status = 'running'",  # another process may have marked it first
                    (rid, rid),
                )
                if cur.rowcount:
                    marked.append(rid)
        return marked

    def running_beside(self, own: str | None = None) -> list[tuple[Run, int | None]]:
        """Runs another live process is measuring into this store now, with each one's pid: a `running` run's row
        is its lease. On this host its pid and start token say whether its process lives (a crash leaves a
        mark that reads dead, and the next open marks it interrupted); on another host, where that cannot be
        seen, it counts while it added a sample or began within ACTIVE_S. `own` (this process's run) is left out."""
        me, host, now = os.getpid(), host_name(), time.time()
        rows = self.conn.execute(
            "SELECT r.id, r.host, r.pid, r.proc_token, MAX(r.started_at, COALESCE(MAX(s.created_at), 0))"
            " FROM runs r LEFT JOIN samples s ON s.run_id = r.id WHERE r.status = 'running' GROUP BY r.id"
        ).fetchall()
        live = []
        for rid, where, pid, token, last in rows:
            if rid == own:
                continue
            if where == host:
                if not pid or int(pid) == me or not is_alive(int(pid), token or ""):
                    continue
            elif not (isinstance(last, (int, float)) and now - last < ACTIVE_S):
                continue
            live.append((rid, int(pid) if pid else None))
        return [(self.run(rid), pid) for rid, pid in live]

    # -- writing a run -----------------------------------------------------------

    def begin_run(
        self,
        device_info: Mapping[str, Any],
        plan: str,
        backend: str,
        versions: Mapping[str, Any] | None = None,
    ) -> str:
        """Start a run owned by this process; returns its id.

        `device_info` is kept whole; its "uuid" (else host + "name" + "index")
        says which physical device this is, so its runs form one history, and
        "name" is what listings show. `versions` adds to rooftop/python/sqlite
        (e.g. torch, CUDA, driver).
        """
        run_id = uuid.uuid4().hex
        host = host_name()
        pid = os.getpid()
        with self._write() as c:
            c.execute(
                "INSERT INTO runs (id, device_key, host, device_json, backend, versions_json, plan, started_at,"
                " status, pid, proc_token) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?)",
                (
                    run_id,
                    device_key_for(device_info, host),
                    host,
                    _dumps(dict(device_info)),
                    backend,
                    _dumps({**default_versions(), **dict(versions or {})}),
                    plan,
                    time.time(),
                    pid,
                    process_token(pid),
                ),
            )
        return run_id

    def add_sample(self, run_id: str, sample: Sample) -> int:
        """Keep one sample, committed at once; returns its sequence number in the run."""
        return self.add_samples(run_id, [sample])[-1]

    def add_samples(self, run_id: str, samples: Iterable[Sample]) -> list[int]:
        """Keep several samples in one transaction; returns their sequence numbers."""
        with self._write() as c:
            self._require(c, run_id)
            return _insert_samples(c, run_id, samples)

    def add_telemetry(self, run_id: str, rows: Iterable[Mapping[str, Any]]) -> int:
        """Keep sampler snapshots (dicts; "t" in epoch seconds, now if absent); returns how many."""
        with self._write() as c:
            self._require(c, run_id)
            return _insert_telemetry(c, run_id, rows)

    def set_ceilings(self, run_id: str, profile: DeviceProfile) -> None:
        """Store the run's calibrated profile (replacing any earlier one): ceilings plus device facts."""
        with self._write() as c:
            self._require(c, run_id)
            _replace_ceilings(c, run_id, profile)

    def finish_run(self, run_id: str, status: str = "complete") -> None:
        """End a run: complete, cancelled or failed. Its samples stay whatever the status."""
        if status not in FINAL_STATUSES:
            raise StoreError(f"cannot finish a run as {status!r}; use one of: {', '.join(FINAL_STATUSES)}")
        with self._write() as c:
            self._require(c, run_id)
            c.execute(
                "UPDATE runs SET status = ?, ended_at = ?, pid = NULL, proc_token = NULL WHERE id = ?",
                (status, time.time(), run_id),
            )

    def _require(self, c: sqlite3.Connection, run_id: str) -> None:
        if c.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise UnknownRun(f"no run {run_id!r} in {self.path}")

    # -- reading -----------------------------------------------------------------

    _RUN_SELECT = (
        "SELECT r.id, r.device_key, r.host, r.device_json, r.backend, r.plan, r.started_at, r.status, r.name,"
        " r.versions_json, r.ended_at, r.imported_from,"
        " (SELECT COUNT(*) FROM samples s WHERE s.run_id = r.id),"
        " EXISTS (SELECT 1 FROM ceilings c WHERE c.run_id = r.id)"
        " FROM runs r"
    )

    def _unknown(self, run_id: str, problem: str | None) -> bool:
        """Note a value that breaks `bounds` (a store written before imports were checked); True if bad.

        The value reads as unknown (NaN for a time, None for a fact, a ceiling left out), so
        every command still works; `unreadable` lets the command line say so once.
        """
        if problem and problem not in self.unreadable.setdefault(run_id, []):
            self.unreadable[run_id].append(problem)
        return problem is not None

    def _run_from_row(self, row: tuple) -> Run:
        started = math.nan if self._unknown(row[0], plausible.when_problem("started_at", row[6])) else row[6]
        ended = row[10] if row[10] is None or not self._unknown(row[0], plausible.when_problem("ended_at", row[10])) \
            else math.nan
        return Run(
            id=row[0], device_key=row[1], host=row[2], device=json.loads(row[3]), backend=row[4], plan=row[5],
            started_at=started, status=row[7], name=row[8], versions=json.loads(row[9]), ended_at=ended,
            imported_from=row[11], samples=row[12], has_ceilings=bool(row[13]),
        )

    def runs(self, device_key: str | None = None, *, kind: RunKind | None = None,
             status: RunStatus | None = None) -> list[Run]:
        """Every run, oldest first; of one device, of one kind (`Run.kind`), of one status, where given."""
        where: list[str] = []
        args: list[str] = []
        if device_key is not None:
            where, args = ["r.device_key = ?"], [device_key]
        if status is not None:
            where, args = [*where, "r.status = ?"], [*args, status]
        if kind is not None:  # the plans of the kind: a measurement's are every plan no other kind has
            plans = [p for p, k in PLAN_KINDS.items() if k == kind] or list(PLAN_KINDS)
            marks = ", ".join("?" * len(plans))
            where, args = [*where, f"r.plan {'IN' if kind != 'measurement' else 'NOT IN'} ({marks})"], [*args, *plans]
        sql = self._RUN_SELECT + (" WHERE " + " AND ".join(where) if where else "")
        return [self._run_from_row(r) for r in self.conn.execute(sql + " ORDER BY r.started_at, r.rowid", args)]

    def latest(self, kind: RunKind | None = None, status: RunStatus | None = None,
               where: Callable[[Run], bool] | None = None) -> Run | None:
        """The newest run of `kind` and `status` (each where given) that `where` accepts; None when there is none.

        Newest is the last of `runs()`: the latest start, the later insert of two that started together."""
        return next((r for r in reversed(self.runs(kind=kind, status=status)) if where is None or where(r)), None)

    def run(self, ref: str) -> Run:
        """A run by name, full id, or unique id prefix (≥ 4 hex digits); UnknownRun otherwise.

        A reference that is both a run's name and another run's id prefix (a
        name given before hex-only names were refused) is ambiguous, not guessed.
        """
        want = ref.strip()
        rows = self.conn.execute(self._RUN_SELECT + " WHERE lower(r.name) = lower(?)", (want,)).fetchall()
        if len(want) >= MIN_PREFIX and HEX_RE.fullmatch(want):
            named = {r[0] for r in rows}
            rows += [r for r in self.conn.execute(
                self._RUN_SELECT + " WHERE r.id LIKE ? ORDER BY r.id", (want.lower() + "%",)
            ) if r[0] not in named]
        if len(rows) == 1:
            return self._run_from_row(rows[0])
        if rows:
            ids = ", ".join(r[0][:SHORT_ID] for r in rows)
            raise UnknownRun(f"run {ref!r} is ambiguous ({ids}); give more of the id")
        raise UnknownRun(
            f"no run {ref!r} in {self.path}; give a run name or id (4+ hex digits) from `rooftop runs`"
        )

    def samples(self, run_id: str, limit: int | None = None, offset: int = 0) -> list[Sample]:
        """The run's samples in order of arrival; `limit`/`offset` read one page of them (in SQL, so a
        page of a run of 100k samples costs a page, not the run)."""
        out = []
        for r in self.conn.execute(
            "SELECT family, dtype, cache, shape_json, flops, bytes, footprint_bytes, path, median_s, p10_s, p90_s,"
            " min_s, iqr_ratio, repeats, calls, skipped, max_error, conditions_json"
            " FROM samples WHERE run_id = ? ORDER BY seq LIMIT ? OFFSET ?",
            (run_id, -1 if limit is None else max(0, limit), max(0, offset)),
        ):
            stats = TimeStats(r[8], r[9], r[10], r[11], r[12], r[13], r[14]) if r[8] is not None else None
            sample = Sample(
                family=r[0], dtype=r[1], cache=r[2], shape=json.loads(r[3]), flops=r[4], bytes=r[5],
                footprint_bytes=r[6], path=r[7], stats=stats, skipped=r[15], max_error=r[16],
                conditions=json.loads(r[17]),
            )
            if not self._unknown(run_id, plausible.sample_problem(sample)):
                out.append(sample)  # a point with impossible numbers is left out, not drawn or exported
        return out

    def sample_groups(self, run_id: str) -> list[SampleGroup]:
        """The run's samples counted per kernel family and dtype, in SQL: what `show` says of a run
        whose table it pages, without reading every sample."""
        rows = self.conn.execute(
            "SELECT family, dtype, COUNT(*), SUM(median_s IS NULL), SUM(median_s IS NOT NULL AND stable = 0)"
            " FROM samples WHERE run_id = ? GROUP BY family, dtype ORDER BY MIN(seq)",
            (run_id,),
        ).fetchall()
        return [SampleGroup(str(f), str(d), n, skipped or 0, unstable or 0) for f, d, n, skipped, unstable in rows]

    def telemetry(self, run_id: str) -> list[dict[str, Any]]:
        return [
            json.loads(d) for (d,) in self.conn.execute(
                "SELECT data_json FROM telemetry WHERE run_id = ? ORDER BY seq", (run_id,)
            )
        ]

    def stored_profile(self, run_id: str) -> DeviceProfile | None:
        """The profile exactly as set_ceilings stored it (provenance unchanged); None without ceilings."""
        row = self.conn.execute("SELECT profile_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        ceilings = self.conn.execute(
            "SELECT kind, key, value, source, case_, stable FROM ceilings WHERE run_id = ?", (run_id,)
        ).fetchall()
        if row is None or row[0] is None:
            return None
        d = json.loads(row[0])
        ceilings = [c for c in ceilings if not self._unknown(run_id, plausible.ceiling_problem(c[0], c[1], c[2]))]
        bandwidth = {k: Ceiling(v, s, c, bool(st)) for kind, k, v, s, c, st in ceilings if kind == "bandwidth"}
        peak = {k: Ceiling(v, s, c, bool(st)) for kind, k, v, s, c, st in ceilings if kind == "peak"}
        launch = [Ceiling(v, s, c, bool(st)) for kind, k, v, s, c, st in ceilings if kind == "launch"]
        for name in plausible.FACTS:
            self._unknown(run_id, plausible.fact_problem(name, d.get(name)))
        base = DeviceProfile.from_dict({**d, "bandwidth": {}, "peak": {}, "launch_overhead": None}, strict=False)
        return dataclasses.replace(
            base, bandwidth=bandwidth, peak=peak, launch_overhead=launch[0] if launch else None
        )

    def profile(self, ref: str) -> DeviceProfile:
        """The run as a device profile: id = its label, source measured (or imported when it came from a file)."""
        run = self.run(ref)
        return self._as_device(run)

    def _as_device(self, run: Run) -> DeviceProfile:
        stored = self.stored_profile(run.id)
        if stored is None:
            raise UnknownRun(
                f"run {run.label} ({run.status}) has no ceilings, so it is not a device profile; "
                "finished runs with ceilings are listed by `rooftop devices`"
            )
        source = "imported" if run.imported_from else "measured"

        def prov(c: Ceiling) -> Ceiling:
            return Ceiling(c.value, "imported", c.case, c.stable) if source == "imported" and c.source == "measured" else c

        when = fmt_when(run.started_at, "%Y-%m-%d", utc=True)
        return dataclasses.replace(
            stored,
            id=run.label,
            source=source,
            bandwidth={k: prov(c) for k, c in stored.bandwidth.items()},
            peak={k: prov(c) for k, c in stored.peak.items()},
            launch_overhead=prov(stored.launch_overhead) if stored.launch_overhead else None,
            notes=f"run {run.short_id} on {run.host or 'unknown host'}, {when}"
            + (f", imported from {run.imported_from}" if run.imported_from else ""),
            extra={**dict(stored.extra), "run_id": run.id, "device_key": run.device_key},
        )

    def profiles(self) -> dict[str, DeviceProfile]:
        """Measured and imported profiles by id: each device's latest complete run with ceilings, plus named runs."""
        chosen: dict[str, Run] = {}
        named: list[Run] = []
        for run in self.runs(status="complete"):  # oldest first, so later runs replace earlier ones
            if run.has_ceilings:
                chosen[run.device_key] = run
                if run.name:
                    named.append(run)
        picked = {r.id for r in list(chosen.values()) + named}
        out = {}
        for run in (r for r in self.runs() if r.id in picked):
            p = self._as_device(run)
            out[p.id] = p
        return out

    def local_profile(self) -> DeviceProfile | None:
        """The device `local`: the latest complete run measured on this host that has ceilings."""
        host = host_name()
        mine = self.latest(status="complete", where=lambda r: r.host == host and not r.imported_from and r.has_ceilings)
        return dataclasses.replace(self._as_device(mine), id=LOCAL) if mine else None

    # -- managing runs -----------------------------------------------------------

    def rename(self, ref: str, name: str) -> Run:
        """Give a run a name usable wherever a device id is (`--device NAME`); BadName if `name_problem` says no."""
        run = self.run(ref)
        problem = name_problem(name)
        if problem:
            raise BadName(f"cannot name a run {name!r}: {problem}")
        with self._write() as c:
            other = c.execute(
                "SELECT id FROM runs WHERE lower(name) = lower(?) AND id != ?", (name, run.id)
            ).fetchone()
            if other:
                raise BadName(f"the name {name!r} is taken by run {other[0][:SHORT_ID]}; choose another")
            c.execute("UPDATE runs SET name = ? WHERE id = ?", (name, run.id))
        return self.run(run.id)

    def delete(self, ref: str) -> Run:
        """Delete a run with its samples, ceilings and telemetry; refuses a run still being measured."""
        run = self.run(ref)
        if run.status == "running" and self._owner_alive(run.id):
            raise StoreError(f"run {run.label} is being measured right now; stop it before deleting it")
        with self._write() as c:
            c.execute("DELETE FROM runs WHERE id = ?", (run.id,))
        return run

    def _owner_alive(self, run_id: str) -> bool:
        host, pid, token = self.conn.execute(
            "SELECT host, pid, proc_token FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
        if host != host_name():
            return True  # another machine's process: assume it lives
        return bool(pid) and is_alive(int(pid), token or "")

    def insert_run(
        self,
        run: Run,
        samples: Iterable[Sample] = (),
        telemetry: Iterable[Mapping[str, Any]] = (),
        profile: DeviceProfile | None = None,
    ) -> bool:
        """Add a whole run from elsewhere (an import) in one transaction; False if its id is already here."""
        return self.insert_runs([NewRun(run, list(samples), list(telemetry), profile)])[0]

    def insert_runs(self, items: Sequence[NewRun]) -> list[bool]:
        """Add whole runs from elsewhere in ONE transaction; for each, False if its id was already here.

        All or nothing: an import cut off half-way (or refused by SQLite) leaves
        the store as it was, so importing the files again completes it. A run's
        name is kept only when it is free and `name_problem` allows it; the run
        stays reachable by id either way.
        """
        added = []
        with self._write() as c:
            for item in items:
                try:
                    added.append(_insert_new_run(c, item))
                except (sqlite3.IntegrityError, OverflowError) as exc:  # bad data, not a damaged file: say which run
                    raise StoreError(f"run {item.run.id[:SHORT_ID]} from {item.run.imported_from or 'a file'} "
                                     f"cannot be stored ({exc}); nothing was imported", "refused") from None
        return added

    # -- saved what-if ops -------------------------------------------------------

    def save_op(self, name: str, spec: str, devices: Iterable[str] = (), note: str = "") -> None:
        """Save (or replace) a named op spec with the devices it was looked at on."""
        with self._write() as c:
            c.execute(
                "INSERT OR REPLACE INTO saved_ops VALUES (?, ?, ?, ?, ?)",
                (name, spec, ",".join(devices), note, time.time()),
            )

    def saved_ops(self) -> list[dict[str, Any]]:
        return [
            {"name": n, "spec": s, "devices": [d for d in ds.split(",") if d], "note": note, "created_at": t}
            for n, s, ds, note, t in self.conn.execute(
                "SELECT name, spec, devices, note, created_at FROM saved_ops ORDER BY name"
            )
        ]

    def delete_op(self, name: str) -> bool:
        with self._write() as c:
            return c.execute("DELETE FROM saved_ops WHERE name = ?", (name,)).rowcount > 0

    def integrity_check(self) -> str:
        """SQLite's own check: 'ok' when the file is sound."""
        return "; ".join(r[0] for r in self.conn.execute("PRAGMA integrity_check"))


def _guarded(fn: Callable[..., Any], where: Callable[[tuple, dict], Any],
             conn: Callable[[tuple], sqlite3.Connection | None] = lambda a: None) -> Callable[..., Any]:
    """`fn`, with a sqlite3 or OS error met on the way turned into the store's one error (db.store_error, which
    asks the store's connection what limits it)."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except StoreError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise db.store_error(exc, where(args, kwargs), conn(args)) from exc

    return guarded


# Every public method of Store raises StoreError and nothing else: a locked, full or damaged
# file mid-command is said as what it is, by every caller alike.
for _name, _member in list(vars(Store).items()):
    if _name.startswith("_"):
        continue
    if isinstance(_member, classmethod):
        setattr(Store, _name, classmethod(_guarded(
            _member.__func__, lambda a, k: db_path(a[1] if len(a) > 1 else k.get("path")))))
    elif callable(_member):
        setattr(Store, _name, _guarded(_member, lambda a, k: a[0].path, lambda a: getattr(a[0], "conn", None)))


# -- writes inside a caller's transaction ------------------------------------------------


def _insert_new_run(c: sqlite3.Connection, item: NewRun) -> bool:
    run = item.run
    if c.execute("SELECT 1 FROM runs WHERE id = ?", (run.id,)).fetchone():
        return False
    name = run.name
    taken = bool(name) and c.execute("SELECT 1 FROM runs WHERE lower(name) = lower(?)", (name,)).fetchone()
    if name and (taken or name_problem(name)):
        name = None  # keep the local run's name, never shadow a device or an id; reachable by id
    status = "interrupted" if run.status == "running" else run.status  # nobody here owns it
    c.execute(
        "INSERT INTO runs (id, name, device_key, host, device_json, backend, versions_json, plan,"
        " imported_from, started_at, ended_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run.id, name, run.device_key, run.host, _dumps(dict(run.device)), run.backend,
            _dumps(dict(run.versions)), run.plan, None if item.measured else run.imported_from or "file", run.started_at,
            run.ended_at, status,
        ),
    )
    _insert_samples(c, run.id, item.samples)
    _insert_telemetry(c, run.id, item.telemetry)
    if item.profile is not None:
        _replace_ceilings(c, run.id, item.profile)
    return True


def _insert_samples(c: sqlite3.Connection, run_id: str, samples: Iterable[Sample]) -> list[int]:
    now = time.time()
    seq = c.execute("SELECT COALESCE(MAX(seq), -1) FROM samples WHERE run_id = ?", (run_id,)).fetchone()[0]
    seqs = []
    for s in samples:
        seq += 1
        st = s.stats
        c.execute(
            "INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id, seq, s.family, s.dtype, s.cache, _dumps(dict(s.shape)), _num(s.flops), _num(s.bytes),
                _num(s.footprint_bytes), s.path,
                _num(st.median_s) if st else None, _num(st.p10_s) if st else None,
                _num(st.p90_s) if st else None, _num(st.min_s) if st else None,
                _num(st.iqr_ratio) if st else None, st.repeats if st else None, st.calls if st else None,
                int(s.stable), s.skipped, _num(s.max_error), _dumps(dict(s.conditions)), now,
            ),
        )
        seqs.append(seq)
    return seqs


def _insert_telemetry(c: sqlite3.Connection, run_id: str, rows: Iterable[Mapping[str, Any]]) -> int:
    now = time.time()
    seq = c.execute("SELECT COALESCE(MAX(seq), -1) FROM telemetry WHERE run_id = ?", (run_id,)).fetchone()[0]
    n = 0
    for r in rows:
        seq += 1
        n += 1
        c.execute("INSERT INTO telemetry VALUES (?, ?, ?, ?)", (run_id, seq, float(r.get("t", now)), _dumps(dict(r))))
    return n


def _replace_ceilings(c: sqlite3.Connection, run_id: str, profile: DeviceProfile) -> None:
    facts = profile.to_dict()
    for k in ("bandwidth", "peak", "launch_overhead"):
        facts.pop(k)
    rows = [("bandwidth", k, ce) for k, ce in profile.bandwidth.items()]
    rows += [("peak", k, ce) for k, ce in profile.peak.items()]
    if profile.launch_overhead:
        rows.append(("launch", "launch", profile.launch_overhead))
    c.execute("DELETE FROM ceilings WHERE run_id = ?", (run_id,))
    c.executemany(
        "INSERT INTO ceilings VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(run_id, kind, key, ce.value, ce.source, ce.case, int(ce.stable)) for kind, key, ce in rows],
    )
    c.execute("UPDATE runs SET profile_json = ? WHERE id = ?", (_dumps(facts), run_id))
