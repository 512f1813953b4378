"""A fleet kept as a run: plan "fleet", holding its members (each an ordinary measured run).

The fleet run has no samples and no ceilings of its own (it is never a device's profile); its
device facts hold, under "fleet", how it was started (`all-gpus` or `torchrun`) and one entry per
member: rank, host, device, model, status, why it gave no result, what it ran under, and the id of
its run. `rooftop measure --all-gpus` keeps each GPU's run as it is measured, on this host; a
torchrun job's rank 0 keeps every rank's run when it gathers them (each with its own host), in one
transaction together with the fleet run (`fleet_runs` makes them; the CLI keeps them through the run keeper).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterable, Mapping, Sequence, cast

from rooftop.models.fleet import FleetReport, fleet_report, member_from_dict
from rooftop.models.profile import DeviceProfile
from rooftop.models.sample import Sample

from .db import StoreError
from .process import host_name
from .runs import FLEET_PLAN, NewRun, Run, RunStatus, Store, default_versions, device_key_for

PLAN = FLEET_PLAN
MEMBER_KEYS = ("rank", "local_rank", "host", "device", "model", "status", "error", "run_id", "sm_clock_mhz",
               "power_w", "power_limit_w", "max_temperature_c", "throttle", "processes", "wall_s")


def is_fleet(run: Run) -> bool:
    return run.plan == PLAN


def _member_run(p: Mapping[str, Any]) -> NewRun:
    """A rank's payload (measured elsewhere, gathered here) as a whole run for `insert_runs`."""
    info = dict(p.get("device_info") or {})
    host = str(p.get("host", ""))
    run = Run(
        id=uuid.uuid4().hex, device_key=device_key_for(info, host), host=host, device=info,
        backend=str(p.get("backend", "")), plan=str(p.get("plan", "")), started_at=float(p["started_at"]),
        # a rank's own RunResult.status, one of STATUSES (a lost rank has no samples, so no run)
        status=cast(RunStatus, str(p.get("status", "complete"))), versions=dict(p.get("versions") or {}),
        ended_at=float(p["ended_at"]) if p.get("ended_at") is not None else None,
    )
    profile = DeviceProfile.from_dict(p["profile"], strict=False) if p.get("profile") else None
    if profile is not None and not (profile.peak or profile.bandwidth):
        profile = None  # as `rooftop measure` keeps a run: a launch floor alone makes no device profile
    samples = [Sample.from_dict(s) for s in p.get("samples") or ()]
    return NewRun(run, samples, (), profile, measured=True)


def fleet_runs(payloads: Sequence[Mapping[str, Any]], mode: str, plan: str,
               started_at: float | None = None) -> list[NewRun]:
    """A fleet (one payload per rank, in rank order) as whole runs to keep together: the member runs
    measured elsewhere, then the fleet run (last), which refers to every member.

    A payload that carries its samples (a torchrun rank's, or an --all-gpus rank's whose store failed it)
    becomes a member run here; one with a `run_id` (an --all-gpus rank's, kept as it measured) is referred
    to. A member a stop ended is kept as it measured (cancelled); lost ranks stay as entries.
    """
    new = {i: _member_run(p) for i, p in enumerate(payloads)
           if not p.get("run_id") and p.get("started_at") is not None and (p.get("samples") or p.get("profile"))}
    members = []
    for i, p in enumerate(payloads):
        entry = {k: p.get(k) for k in MEMBER_KEYS}
        # its ceilings as it measured them: a run of the launch floor alone keeps no profile of its own
        entry["profile"] = p.get("profile")
        entry["run_id"] = new[i].run.id if i in new else p.get("run_id")
        entry["rank"] = int(p.get("rank", i))
        members.append(entry)
    models: dict[str, int] = {}
    for m in members:
        if m.get("model"):
            models[str(m["model"])] = models.get(str(m["model"]), 0) + 1
    kinds = {str((p.get("device_info") or {}).get("kind", "")) for p in payloads} - {""}
    info = {
        "name": "fleet: " + (", ".join(f"{n} × {k}" for k, n in models.items()) or f"{len(members)}, none measured"),
        "kind": kinds.pop() if len(kinds) == 1 else "mixed",
        "fleet": {"mode": mode, "plan": plan, "world": len(members), "members": members,
                  "hosts": sorted({str(m.get("host") or "") for m in members})},
    }
    now, host = time.time(), host_name()
    fleet = Run(id=uuid.uuid4().hex, device_key=device_key_for(info, host), host=host, device=info, backend=mode,
                plan=PLAN, started_at=started_at or _first_start(payloads) or now, ended_at=now,
                status=fleet_status(members), versions=default_versions())
    return [*new.values(), NewRun(fleet, measured=True)]


def fleet_status(members: Sequence[Mapping[str, Any]]) -> RunStatus:
    """failed when no member kept a run; cancelled when a stop ended one (what it measured is kept); else
    complete (a lost member is an entry of a complete fleet, flagged where it is shown)."""
    kept = [m for m in members if m.get("run_id")]
    if not kept:
        return "failed"
    return "cancelled" if any(m.get("status") == "cancelled" for m in kept) else "complete"


def _first_start(payloads: Sequence[Mapping[str, Any]]) -> float | None:
    starts = [float(p["started_at"]) for p in payloads if isinstance(p.get("started_at"), (int, float))]
    return min(starts) if starts else None


def save_fleet(store: Store, payloads: Sequence[Mapping[str, Any]], mode: str, plan: str,
               started_at: float | None = None) -> str:
    """Keep a fleet in ONE transaction (its members and the fleet run, or nothing); the fleet run's id.
    The CLI keeps it through the run keeper instead, which words a store's failure as for other runs."""
    runs = fleet_runs(payloads, mode, plan, started_at)
    store.insert_runs(runs)
    return runs[-1].run.id


def members_of(run: Run) -> list[Mapping[str, Any]]:
    fleet = run.device.get("fleet") if isinstance(run.device, Mapping) else None
    members = fleet.get("members") if isinstance(fleet, Mapping) else None
    if not isinstance(members, list):
        raise StoreError(f"run {run.label} is a fleet run without its members (an edited import?)")
    return [m for m in members if isinstance(m, Mapping)]


def with_members(store: Store, runs: Iterable[Run]) -> list[Run]:
    """The runs, each fleet run preceded by its members that the store holds, each run once: what an
    export writes, so that importing it restores the fleet with its members (their ids, and so the
    fleet's references to them, travel unchanged)."""
    out: dict[str, Run] = {}
    for run in runs:
        for rid in _member_run_ids(run):
            try:
                member = store.run(rid)
            except StoreError:  # deleted since: the fleet keeps its entry, the export has no run for it
                continue
            out.setdefault(member.id, member)
        out.setdefault(run.id, run)
    return list(out.values())


def _member_run_ids(run: Run) -> list[str]:
    """The ids of a fleet run's member runs; none for another run, or a fleet run without its members."""
    try:
        return [str(m["run_id"]) for m in members_of(run) if m.get("run_id")] if is_fleet(run) else []
    except StoreError:
        return []


def member_ids(store: Store) -> set[str]:
    """Every run that is a member of some fleet run."""
    return {rid for r in store.runs() for rid in _member_run_ids(r)}


def fleet_of(store: Store, run: Run) -> FleetReport:
    """The fleet run's report: each member's profile from its run, and the same device measured alone
    before (its latest complete run with ceilings that is no fleet's member), to see what sharing cost."""
    members = []
    belong = member_ids(store)
    everything = store.runs()
    for m in members_of(run):
        rid = m.get("run_id")
        profile = alone = None
        if rid:
            try:
                member_run = store.run(str(rid))
                profile = store.profile(member_run.id) if member_run.has_ceilings else None
            except StoreError:
                member_run = None
            if profile is None and isinstance(m.get("profile"), Mapping):
                profile = DeviceProfile.from_dict(m["profile"], strict=False)
            if member_run is not None:
                solo = [r for r in everything if r.device_key == member_run.device_key and r.id not in belong
                        and r.status == "complete" and r.has_ceilings and r.started_at < member_run.started_at
                        and r.plan == member_run.plan]
                alone = store.profile(solo[-1].id) if solo else None
        members.append(member_from_dict(m, profile, alone))
    return fleet_report(members)


def profiles_by_device(store: Store) -> dict[str, DeviceProfile]:
    """Each device's measured profile by its device key (a GPU's UUID): live telemetry divides each GPU's
    DRAM bandwidth by its own B, and a fleet's slow GPU reads against its own figure."""
    return by_device_key(store.profiles().values())


def by_device_key(profiles: Iterable[DeviceProfile]) -> dict[str, DeviceProfile]:
    """Store profiles (their `extra` names the run's device key) by device key; catalog ones have none."""
    return {str(p.extra["device_key"]): p for p in profiles if p.extra.get("device_key")}
