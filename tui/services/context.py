"""The context a command or the app works in: the store, opened with one error policy, the profiles
it offers beside the catalog, and the default device.

No textual, no rich: both front ends use these, and word what they say themselves.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Literal, Mapping, Sequence, overload

from rooftop.models.catalog import catalog, lookup_device
from rooftop.models.errors import BadInput
from rooftop.models.plotdata import collective_points, job_links, sample_series
from rooftop.models.profile import DeviceProfile
from rooftop.models.safetext import safe_text
from rooftop.probes.identify import local_placement
from rooftop.store.db import StoreError, read_only_reason, store_error
from rooftop.store.locations import db_path, is_chosen
from rooftop.store.runs import Run, Store, UnknownRun
from rooftop.store.workloads import job_collectives, placed_on

if TYPE_CHECKING:  # types only: the plot data loads when a command draws it
    from rooftop.models.plotdata import Series


class NotAProfile(BadInput):
    """A device id that names a run of the store, but one with no ceilings (or `local` with none measured)."""


# -- the store: one opener, one error policy ----------------------------------------------
#
# The store raises StoreError and nothing else (with a reason: locked, read-only, damaged, …),
# so every caller here and in the app catches exactly that; what it then says is its own.


@overload
def open_db(db: str | Path | None, *, create: Literal[True] = True, recover: bool = True) -> Store: ...
@overload
def open_db(db: str | Path | None, *, create: bool, recover: bool = True) -> Store | None: ...
def open_db(db: str | Path | None, *, create: bool = True, recover: bool = True) -> Store | None:
    """The one way tui opens the store: at `db` (--db), else ROOFTOP_DB, else the user data directory.

    None when `create` is off and there is no database there yet (reading never creates one).
    `recover` marks the runs of dead processes interrupted (`store.interrupted` lists them).
    """
    try:
        path = db_path(db)
        if not create and not path.exists():
            return None
        if is_chosen(db) and not path.parent.is_dir():
            raise StoreError(f"folder {path.parent} {'is a file' if path.parent.exists() else 'does not exist'}; "
                             "create it or give another --db (or ROOFTOP_DB)", "missing")
    except OSError as exc:  # the data directory cannot be made or read
        raise store_error(exc, db or "the data directory") from exc
    return Store.open(path, recover=recover)


@contextlib.contextmanager
def store_session(db: str | Path | None, *, create: bool = False) -> Iterator[Store | None]:
    """`open_db` as a context: the store (None when there is none and `create` is off), closed after."""
    store = open_db(db, create=create)
    try:
        yield store
    finally:
        if store is not None:
            store.close()


@contextlib.contextmanager
def open_store(db: str | Path | None, create: bool = False) -> Iterator[Store]:
    """A command's store at `db` (--db as given) / ROOFTOP_DB / the data dir, as a context; StoreError if unusable.

    Only commands that add data create the file; the others say there is none yet. Runs found
    cut off are named on stderr; values read as unknown (see `warn_unreadable`) when the command
    is done.
    """
    path = Path(db_file(db))
    if not create and path.is_file() and path.stat().st_size == 0:
        raise StoreError(f"{path} is an empty file, not a rooftop database; point --db PATH / ROOFTOP_DB at one",
                         "foreign")
    store = open_db(db, create=create)  # the option as given: a named file's folder is not made
    if store is None:
        raise StoreError(f"no rooftop database at {path} yet: `rooftop import FILE` or a measurement creates it "
                         "(or point --db PATH / ROOFTOP_DB at one)", "missing")
    tell_interrupted(store)
    tell_no_room(store)
    try:
        yield store
    finally:
        warn_unreadable(store)
        store.close()


def tell_interrupted(store: Store) -> None:
    """Name on stderr the runs this open found cut off (their process is gone)."""
    for rid in store.interrupted:
        sys.stderr.write(f"rooftop: run {rid[:8]} was cut off (its process is gone); marked interrupted, samples kept\n")


def cannot_create(db: str | Path | None) -> str:
    """Why no store can be made at `db` (--db, ROOFTOP_DB, the data dir) to keep a run; '' when one can."""
    try:
        why = read_only_reason(db_path(db))
    except OSError as exc:  # the data directory cannot be found or read
        why = exc.strerror or str(exc)
    return f"it cannot be created: {why}" if why else ""


def tell_no_room(store: Store) -> None:
    """Say on stderr that a store with no room to write (a full disk) is read, and that nothing new is kept."""
    if store.room is not None:
        sys.stderr.write(safe_text(f"rooftop: warning: database {store.path} is read only for now, with no room to "
                                   f"write: {store.room.words}; {store.room.hint} to keep anything new") + "\n")


def db_file(db: str | Path | None) -> str:
    """The database file `db` (a command's --db as given; None: ROOFTOP_DB, else the data dir) names."""
    return str(db_path(db))


# -- the default device ----------------------------------------------------------------------

FALLBACK_DEVICE = "h100"
DefaultWhy = Literal["local", "catalog", "unknown", "fallback"]


@dataclass(frozen=True)
class DefaultDevice:
    """The device shown when none is named, and why it is that one (each front end words it)."""

    profile: DeviceProfile
    why: DefaultWhy  # local: this host's measured profile; catalog: the catalog's profile of the GPU found
    # here; unknown: a GPU found here that no profile fits (FALLBACK_DEVICE shown, not its roofs); fallback: none
    gpu: str = ""  # unknown: the GPU found here, in words
    closest: tuple[str, ...] = ()  # unknown: the catalog's profiles nearest it


def default_device(profiles: Mapping[str, DeviceProfile] | None = None) -> DefaultDevice:
    """The one default-device rule: this host's latest measured profile (`local`, when it is a whole
    roofline), else the catalog's profile of the GPU found here, else FALLBACK_DEVICE (said to be another
    GPU's roofs where a GPU was found)."""
    local = (profiles or {}).get("local")
    if local is not None and local.is_roofline():
        return DefaultDevice(local, "local")

    placed = local_placement()
    if placed is not None and placed.profile is not None:
        return DefaultDevice(placed.profile, "catalog")
    fallback = lookup_device(FALLBACK_DEVICE, dict(profiles or {}))
    if placed is not None and placed.identity is not None:
        return DefaultDevice(fallback, "unknown", placed.identity.called(), placed.closest)
    return DefaultDevice(fallback, "fallback")


def not_this_gpu(chosen: DefaultDevice) -> str:
    """For an unknown GPU here: that the roofs shown are another GPU's, and how to get its own (-d, measure)."""
    near = f" (closest: {', '.join(chosen.closest)})" if chosen.closest else ""
    return (f"this machine's {chosen.gpu} is not in rooftop's catalog: the roofs shown are {chosen.profile.id}'s, "
            f"not its own; give -d ID{near} or measure it (`rooftop measure`, then -d local)")


def resolve_devices(ids: list[str], extra: dict[str, DeviceProfile] | None = None) -> list[DeviceProfile]:
    """Profiles for --device ids; with none, the default device, said on stderr."""
    if ids:
        return [lookup_device(i, extra) for i in ids]
    chosen = default_device(extra)
    p = chosen.profile
    if chosen.why == "local":
        sys.stderr.write(safe_text(f"rooftop: using local, this machine's latest measured profile ({p.name})") + "\n")
    elif chosen.why == "catalog":
        sys.stderr.write(safe_text(f"rooftop: using {p.id}, the {p.source} profile for this machine's {p.name}") + "\n")
    elif chosen.why == "unknown":
        sys.stderr.write(safe_text(f"rooftop: {not_this_gpu(chosen)}") + "\n")
    else:
        sys.stderr.write(
            f"rooftop: no --device given and no known GPU found; using {FALLBACK_DEVICE} (reference measurement)\n"
        )
    return [p]


# -- what a command reads from the store -----------------------------------------------------

_TOLD: set[str] = set()  # runs warned about by this command; begin_command() starts it afresh


def begin_command() -> None:
    """A new command starts: its warnings about unreadable runs are told afresh."""
    _TOLD.clear()


def warn_unreadable(store: Store) -> None:
    """One line for the values a store holds that no import would accept now (written by an older
    rooftop): they were shown as unknown or left out, so the command still did its work. Each run
    is named once per command, however often the store was opened."""
    new = {rid: problems for rid, problems in store.unreadable.items() if rid not in _TOLD and problems}
    store.unreadable.clear()
    if not new:
        return
    _TOLD.update(new)
    first, more = next(iter(new.values()))[0], sum(map(len, new.values())) > 1
    sys.stderr.write(safe_text(
        f"rooftop: warning: run{'s' if len(new) > 1 else ''} {', '.join(rid[:8] for rid in new)} in {store.path} "
        f"hold{'s' if len(new) == 1 else ''} values no import accepts ({first}{', …' if more else ''}); shown as "
        "unknown or left out (`rooftop delete RUN` removes a run)") + "\n")


def profiles_on_offer(store: Store) -> dict[str, DeviceProfile]:
    """The profiles a store offers beside the catalog: its measured and imported ones, and `local` (this host's
    latest measured one, the default device) where there is one. Both front ends read them here."""
    found = store.profiles()
    local = store.local_profile()
    if local is not None:
        found["local"] = local
    return found


def store_profiles(db: str | Path | None, ids: Sequence[str] = ()) -> dict[str, DeviceProfile]:
    """Measured and imported profiles for --device (the store at `db`), plus any run named in `ids` by id or
    prefix.

    A missing database means none; an unusable one is reported in one line and the
    catalog still works, so `rooftop op --device h100` never depends on the store.
    """
    path = Path(db_file(db))
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return {}  # nothing stored (an empty file is left alone: reading never creates a database)
    not_profiles: list[str] = []
    try:
        with store_session(path) as store, contextlib.ExitStack() as later:
            if store is None:  # removed since the check above
                return {}
            later.callback(warn_unreadable, store)
            tell_no_room(store)
            found = profiles_on_offer(store)  # `local`: the default device, and one of the ids an unknown one is told of
            known = {k.lower() for k in [*found, *catalog()]}
            for i in ids:
                if i.lower() in known:
                    continue
                if i.lower() == "local":
                    not_profiles.append(f"no complete run measured on this host yet, so there is no device "
                                        f"'local' in {path} (a run of `--only launch` has no roofs); measure "
                                        "one, or name a device from `rooftop devices`")
                    continue
                try:
                    run = store.run(i)
                except UnknownRun:
                    continue  # not a run either: lookup_device names what exists
                try:
                    found[i] = store.profile(run.id)
                except StoreError as exc:  # a run without ceilings (running, failed, points only)
                    not_profiles.append(str(exc))
    except StoreError as exc:
        stored = [i for i in ids if i.lower() not in {k.lower() for k in catalog()}]
        if stored:  # `-d local` (or a run) lives in the store: say why it cannot be read, not "unknown device"
            raise StoreError(f"device {stored[0]!r} is kept in the store, which cannot be read: {exc}",
                             exc.reason) from None
        sys.stderr.write(safe_text(f"rooftop: warning: {exc}; showing the built-in catalog only") + "\n")
        return {}
    if not_profiles:
        raise NotAProfile(not_profiles[0])
    return found


def stored_runs(devices: Sequence[DeviceProfile]) -> list[tuple[str, str]]:
    """(label, run id) of each device that is a store run (a measured or imported profile names its run)."""
    return [(d.id, str(d.extra["run_id"])) for d in devices
            if d.source in ("measured", "imported") and d.extra.get("run_id")]


def run_points(store: Store, devices: Sequence[DeviceProfile]) -> list[Series]:
    """Sample points of the devices that are store runs, as plot series (each labelled with its device's id)."""
    return [s for label, rid in stored_runs(devices) for s in sample_series(store.samples(rid), label)]


def store_points(db: str | Path | None, devices: list[DeviceProfile]) -> list[Series]:
    """`run_points` from the store at `db` (a command's: unusable is StoreError); [] when no device is a run."""
    if not stored_runs(devices):
        return []
    with open_store(db) as store:
        return run_points(store, devices)


def run_dates(db: str | Path | None, devices: list[DeviceProfile]) -> dict[str, float]:
    """When each device that is a store run was measured (its run's start, epoch seconds), by the device's id:
    a shared chart says the day its roofs are from. {} when no device is a run."""
    runs = stored_runs(devices)
    if not runs:
        return {}
    with open_store(db) as store:
        return {label: store.run(rid).started_at for label, rid in runs}


def latest_profile_points(db: str | Path | None, device_id: str) -> tuple[list[Series], dict[str, float]]:
    """The newest kept profile placed on `device_id`, for its roofline: its op groups as points and, for a
    distributed job, its collectives as points on their links' slopes; and the ceiling (bytes/s) of each link
    those crossed. ([], {}) when there is none."""
    try:
        with store_session(db) as store:
            if store is None:
                return [], {}
            runs = [r for r in store.runs() if r.kind == "profile" and r.status == "complete"
                    and placed_on(r) == device_id]
            if not runs:
                return [], {}
            return profile_points(store, max(runs, key=lambda r: r.started_at))
    except StoreError:
        return [], {}


def profile_points(store: Store, run: Run) -> tuple[list[Series], dict[str, float]]:
    """A kept profile's op groups as points, its job's collectives as points on their links' slopes, and the
    ceiling (bytes/s) of each link those crossed: what its roofline draws over the device's roofs."""
    colls = job_collectives(run)
    return sample_series(store.samples(run.id), run.label) + collective_points(colls), job_links(colls)