"""The context a command or the app works in: the store, opened with one error policy, the profiles
it offers beside the catalog, and the default device.

No textual, no rich: both front ends use these, and word what they say themselves.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
from typing import Any, Iterator, Sequence

from rooftop.models.catalog import catalog, lookup_device
from rooftop.models.profile import DeviceProfile
from rooftop.models.safetext import safe_text
from rooftop.store.db import StoreError


class NotAProfile(Exception):
    """A device id that names a run of the store, but one with no ceilings (or `local` with none measured)."""


FALLBACK_DEVICE = "h100"


def resolve_devices(ids: list[str], extra: dict[str, DeviceProfile] | None = None) -> list[DeviceProfile]:
    """Profiles for --device ids; with none: this host's measured profile, the detected GPU's reference, else h100."""
    if ids:
        return [lookup_device(i, extra) for i in ids]
    if extra and "local" in extra and extra["local"].is_roofline():
        sys.stderr.write(safe_text(f"rooftop: using local, this machine's latest measured profile "
                                   f"({extra['local'].name})") + "\n")
        return [extra["local"]]
    from rooftop.probes.identify import local_reference_profile

    found = local_reference_profile()
    if found:
        sys.stderr.write(f"rooftop: using {found.id}, the reference profile for this machine's {found.name}\n")
        return [found]
    sys.stderr.write(
        f"rooftop: no --device given and no known GPU found; using {FALLBACK_DEVICE} (reference measurement)\n"
    )
    return [lookup_device(FALLBACK_DEVICE, extra)]


@contextlib.contextmanager
def open_store(args: argparse.Namespace, create: bool = False) -> Iterator[Any]:
    """The store at --db / ROOFTOP_DB / the data dir, as a context; StoreError if unusable.

    Only commands that add data create the file; the others say there is none yet. Values
    read as unknown (see `warn_unreadable`) are named when the command is done.
    """
    from rooftop.store.locations import db_path
    from rooftop.store.runs import Store

    path = db_path(getattr(args, "db", None))
    if not create and path.is_file() and path.stat().st_size == 0:
        raise StoreError(f"{path} is an empty file, not a rooftop database; point --db PATH / ROOFTOP_DB at one")
    if not create and not path.exists():
        raise StoreError(f"no rooftop database at {path} yet: `rooftop import FILE` or a measurement creates it "
                         "(or point --db PATH / ROOFTOP_DB at one)")
    store = Store.open(path)
    for rid in store.interrupted:
        sys.stderr.write(f"rooftop: run {rid[:8]} was cut off (its process is gone); marked interrupted, samples kept\n")
    try:
        yield store
    finally:
        warn_unreadable(store)
        store.close()


_TOLD: set[str] = set()  # runs warned about by this command; begin_command() starts it afresh


def begin_command() -> None:
    """A new command starts: its warnings about unreadable runs are told afresh."""
    _TOLD.clear()


def warn_unreadable(store: Any) -> None:
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


def store_profiles(args: argparse.Namespace, ids: Sequence[str] = ()) -> dict[str, DeviceProfile]:
    """Measured and imported profiles for --device, plus any run named in `ids` by id or prefix.

    A missing database means none; an unusable one is reported in one line and the
    catalog still works, so `rooftop op --device h100` never depends on the store.
    """
    from rooftop.store.locations import db_path
    from rooftop.store.runs import Store

    path = db_path(getattr(args, "db", None))
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return {}  # nothing stored (an empty file is left alone: reading never creates a database)
    not_profiles: list[str] = []
    try:
        with Store.open(path) as store, contextlib.ExitStack() as later:
            later.callback(warn_unreadable, store)
            found = store.profiles()
            local = store.local_profile()  # the default device, and one of the ids an unknown one is told of
            if local is not None:
                found["local"] = local
            known = {k.lower() for k in [*found, *catalog()]}
            for i in ids:
                if i.lower() in known:
                    continue
                if i.lower() == "local":
                    not_profiles.append(f"no complete run measured on this host yet, so there is no device "
                                        f"'local' in {path}; measure one, or name a device from `rooftop devices`")
                    continue
                try:
                    run = store.run(i)
                except StoreError:
                    continue  # not a run either: lookup_device names what exists
                try:
                    found[i] = store.profile(run.id)
                except StoreError as exc:  # a run without ceilings (running, failed, points only)
                    not_profiles.append(str(exc))
    except StoreError as exc:
        sys.stderr.write(safe_text(f"rooftop: warning: {exc}; showing the built-in catalog only") + "\n")
        return {}
    except sqlite3.DatabaseError as exc:  # a rooftop file damaged inside
        sys.stderr.write(f"rooftop: warning: database {path} is damaged ({exc}); showing the built-in catalog only\n")
        return {}
    if not_profiles:
        raise NotAProfile(not_profiles[0])
    return found


def store_points(args: argparse.Namespace, devices: list[DeviceProfile]) -> list:
    """Sample points of the devices that are store runs (their profile names the run), as plot series."""
    from rooftop.models.plotdata import sample_series

    runs = [(d.id, d.extra["run_id"]) for d in devices if d.source in ("measured", "imported") and "run_id" in d.extra]
    if not runs:
        return []
    with open_store(args) as store:
        return [s for label, rid in runs for s in sample_series(store.samples(rid), label)]


def db_file(args: argparse.Namespace) -> str:
    from rooftop.store.locations import db_path

    return str(db_path(getattr(args, "db", None)))


def latest_profile_points(db_path: Any, device_id: str) -> list:
    """The op groups of the newest kept profile placed on `device_id`, as points for its roofline ([] if none)."""
    import sqlite3

    from rooftop.models.plotdata import sample_series
    from rooftop.store.db import StoreError
    from rooftop.store.runs import Store

    try:
        store = Store.open_existing(db_path)
        if store is None:
            return []
        with store:
            runs = [r for r in store.runs() if r.plan == "profile" and r.status == "complete"
                    and (r.device.get("profile") or {}).get("device") == device_id]
            if not runs:
                return []
            run = max(runs, key=lambda r: r.started_at)
            return sample_series(store.samples(run.id), run.label)
    except (StoreError, sqlite3.DatabaseError, OSError):
        return []
