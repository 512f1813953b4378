"""What `rooftop profile` asks of the store, by value: the roofs of a file's GPU (a trace's, an ncu export's),
the link roofs of a distributed job, and keeping a workload as a run.

Each takes the database (--db as given, None for ROOFTOP_DB or the data directory) and the device ids given
(-d), never the command's options. The lines said on stderr are the command's, word for word.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypeAlias

from rooftop.models.devicefamily import place_by_units, place_device, same_card
from rooftop.models.program.collectives import LINKS, LinkRoof
from rooftop.models.comm import comm_points, fit_points
from rooftop.models.errors import BadInput
from rooftop.models.links import link_on
from rooftop.models.profile import DeviceProfile
from rooftop.models.safetext import clean, safe_text
from rooftop.models.program.workload import Workload, roof_source
from rooftop.probes.identify import local_placement
from rooftop.store.comms import is_comm
from rooftop.store.db import StoreError
from rooftop.store.workloads import PLAN, group_sample, profile_device_info
from rooftop.tui.services.context import open_store, resolve_devices, store_profiles, tell_interrupted
from rooftop.tui.services.keeper import RunKeeper

if TYPE_CHECKING:
    from rooftop.models.program.critpath import CriticalPath
    from rooftop.models.devicefamily import Placement
    from rooftop.models.program.jobpath import Joined
    from rooftop.models.trace.read import Trace

Db: TypeAlias = "str | Path | None"  # --db as given: None is ROOFTOP_DB, else the data directory


class NoRoofs(BadInput):
    """A file's GPU (or this machine's) that no profile fits and that was not measured here: its roofs would be
    another GPU's, so it is refused in one line naming -d."""


def _unknown_gpu(placed: Placement) -> str:
    """One line for a GPU no profile fits: what it is, and how to give it roofs (-d, the closest, measure)."""
    near = f"closest: {', '.join(placed.closest)}; " if placed.closest else ""
    return (f"{placed.note}: give -d ID for its roofs ({near}`rooftop devices` lists them), or measure it "
            "(`rooftop measure` on its machine) and give -d local")


def _measured_card(db: Db, placed: Placement) -> DeviceProfile | None:
    """This machine's measured profile (`local`) where it is of the very card `placed` names, else None."""
    local = store_profiles(db, []).get("local")
    return local if local is not None and placed.identity is not None and same_card(local, placed.identity) else None


def check_local_gpu(db: Db) -> None:
    """NoRoofs, before a program runs here, where NVML names a GPU no profile fits and none was measured."""
    placed = local_placement()
    if placed is not None and placed.profile is None and _measured_card(db, placed) is None:
        raise NoRoofs(clean(_unknown_gpu(placed)))


def _placed(db: Db, name: str, props: Mapping[str, Any], metadata: Mapping[str, Any],
            source: str) -> tuple[DeviceProfile, str]:
    """The profile a file's GPU is placed on, and how, said on stderr; this machine's measured `local` where it
    is that very card and the catalog has none; else NoRoofs naming -d."""
    placed = place_device(name, props, metadata=metadata, whose=f"the {source}'s")
    if placed.profile is not None:
        sys.stderr.write(clean(f"rooftop profile: using {placed.profile.id}: {placed.note}") + "\n")
        return placed.profile, placed.note
    local = _measured_card(db, placed)
    if local is None:
        raise NoRoofs(clean(_unknown_gpu(placed)))
    note = f"{placed.note}; using local, this machine's measured profile of that card"
    sys.stderr.write(clean(f"rooftop profile: {note}") + "\n")
    return local, note


def _by_kernel_units(units: int) -> tuple[DeviceProfile, str]:
    """The profile for a trace that names no GPU but whose kernels say its SM count (models.devicefamily's
    rule), said on stderr; a count no profile has is an unknown GPU, refused as one."""
    placed = place_by_units(units)
    if placed.profile is None:
        raise NoRoofs(clean(_unknown_gpu(placed)))
    sys.stderr.write(clean(f"rooftop profile: using {placed.profile.id}: {placed.note}") + "\n")
    return placed.profile, placed.note


def file_device(db: Db, ids: Sequence[str], source: str, name: str, props: Mapping[str, Any] | None = None,
                metadata: Mapping[str, Any] | None = None, on_device: bool = True, kernel_units: int | None = 0,
                unnamed: str = "no deviceProperties") -> tuple[DeviceProfile, str]:
    """The one rule for the roofs of a file's GPU (a trace's, an ncu export's), and how they were chosen, in one
    line for the report: the device `ids` (-d); the file's own GPU, by its `name` and `props`; a GPU no profile
    fits is refused in one line naming -d (its roofs would be another GPU's); a file that ran on the CPU, or
    names no GPU (`unnamed` says what it lacks), gets the default device, said plainly."""
    if ids:
        return resolve_devices(list(ids), store_profiles(db, ids))[0], ""
    if not on_device:
        dev = resolve_devices([], store_profiles(db, []))[0]
        if dev.kind == "cpu":
            return dev, ""
        note = (f"the {source} ran on the CPU: the roofs shown are {dev.id}'s, a GPU's; measure this CPU "
                "(`rooftop measure --device cpu`) and give -d local, or give -d ID")
        sys.stderr.write(clean(f"rooftop profile: {note}") + "\n")
        return dev, note
    if name or props:
        return _placed(db, name, props or {}, metadata or {}, source)
    if kernel_units:  # no deviceProperties, but CUPTI's kernel records say the SM count (an NVIDIA GPU)
        return _by_kernel_units(kernel_units)
    dev = resolve_devices([], store_profiles(db, []))[0]
    note = (f"the {source} does not name its GPU ({unnamed}): the roofs shown are {dev.id}'s; "
            "give -d ID for the GPU it ran on")
    sys.stderr.write(clean(f"rooftop profile: {note}") + "\n")
    return dev, note


def trace_device(db: Db, ids: Sequence[str], trace: Trace) -> tuple[DeviceProfile, str]:
    """The device whose roofs to use for a trace, and how it was chosen (`file_device`'s rule)."""
    return file_device(db, ids, "trace", trace.device_name, trace.device_props, trace.metadata, trace.on_device,
                       trace.kernel_units)


# -- a distributed job's links ---------------------------------------------------------------


def link_roofs(db: Db, device: DeviceProfile, backend: str, intra: str = "nvlink") -> dict[str, LinkRoof]:
    """Each link's ceiling: the latest complete `rooftop comm` run of this backend (its best busbw and its α-β
    fit: measured), else the device profile's link bandwidth (datasheet or measured, as the profile says) and
    its α where the profile keeps one. `intra` is the GPU link (nvlink, or xgmi on AMD), the one a GPU
    backend's run measured."""
    roofs: dict[str, LinkRoof] = {}
    alphas = dict(device.extra.get("link_alpha_s", {}) or {})  # a measured profile's α per link, where kept
    for lvl in LINKS:
        name, key = link_on(device, lvl)  # an AMD profile may keep its xGMI under nvlink
        if key is not None and name not in roofs:
            a = alphas.get(key)
            roofs[name] = LinkRoof(name, device.B(key), float(a) if isinstance(a, (int, float)) else None,
                                   roof_source(device, key))
    measured = _measured_link(db, backend, intra)
    if measured is not None:
        roofs[measured.level] = measured
    return roofs


def _measured_link(db: Db, backend: str, intra: str = "nvlink") -> LinkRoof | None:
    """The link roof the latest complete comm run of `backend` measured (its allreduce), else None."""
    try:
        with open_store(db) as store:
            runs = [r for r in store.runs() if is_comm(r) and r.backend == backend and r.status == "complete"]
            if not runs:
                return None
            run = runs[-1]
            points = [p for p in comm_points(store.samples(run.id)) if p.collective == "allreduce" and p.busbw]
    except (StoreError, OSError):
        return None
    if not points:
        return None
    fit = fit_points(points).get("allreduce")
    best = max(p.busbw for p in points if p.busbw is not None)
    return LinkRoof("net" if backend == "gloo" else intra, best, fit.alpha_s if fit else None,
                    f"measured: rooftop comm run {run.short_id} ({backend}, world {points[0].world})")


# -- keeping a workload ----------------------------------------------------------------------


def keep_workload(db: Db, work: Workload, source: str, backend: str, job: Mapping[str, Any] | None = None,
                  path: CriticalPath | None = None, joined: Joined | None = None) -> str | None:
    """Keep the profile (and its critical path; a job's: whose it is, `joined`) as a run (plan "profile", one
    sample per op group); its id, or None when not kept (the reason said on stderr)."""
    def not_saved(exc: Exception, _begun: bool) -> None:
        sys.stderr.write(safe_text(f"rooftop profile: warning: the run is not kept in the store: {exc}") + "\n")  # it names the --db path

    keeper = RunKeeper(db, on_error=not_saved, on_open=tell_interrupted)
    keeper.begin(profile_device_info(work, source, job, path, joined), plan=PLAN, backend=backend)
    keeper.add(group_sample(g) for g in work.groups)
    run_id = keeper.finish("complete")
    return run_id if keeper.error is None else None
