"""One fleet member: measure this rank's device and say what came of it as plain data (a payload).

The same for both launchers: `rooftop measure --all-gpus` spawns one process per GPU that runs
`measure_member`, and each rank of a torchrun job (`rooftop measure --fleet`) spawns one child that
runs it (so a measurement that dies leaves the rank alive to say so). A payload crosses processes and hosts by pickle, so it holds dicts, not objects; it
carries the samples when the run is not kept here (a torchrun rank's: rank 0 keeps them all).
No textual, no rich: a service both front ends could use.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Mapping

from rooftop.models.fleet import run_conditions
from rooftop.probes.backend import select_backend
from rooftop.probes.plan import build_plan
from rooftop.probes.telemetry import Sampler
from rooftop.tui.services.measure import _versions, measure_run


def device_processes(snapshot: Any, nvml_index: int | None, skip: set[int]) -> tuple[str, ...]:
    """The other processes NVML names on GPU `nvml_index` ("1234 python"), leaving out `skip` (this fleet's)."""
    if nvml_index is None or snapshot is None:
        return ()
    for g in snapshot.gpus:
        if g.index == nvml_index:
            return tuple(f"{p.pid} {p.name or '?'}" for p in g.processes if p.pid not in skip)
    return ()


def measure_member(rank: int, job: Mapping[str, Any], stop: threading.Event | None = None) -> dict[str, Any]:
    """Measure `job["device"]` with `job["plan"]` (and `only`, `threads`, CPU share `cpus`); the payload.

    `job["store"]` keeps the run as it measures, in `job["db"]`; otherwise (or when the store failed it)
    the payload carries the samples, for whoever gathers it to keep. It runs in a process of its own;
    `stop` (its starter's SIGTERM) ends the plan at the next point, and the payload holds what was
    measured, as `rooftop measure` keeps a cancelled run.
    """
    if job.get("cpus"):
        try:
            os.sched_setaffinity(0, job["cpus"])
        except (AttributeError, OSError):
            pass
    backend = select_backend(job.get("device"), job.get("threads"))
    plan = build_plan(backend, str(job.get("plan", "quick")), job.get("only"))
    info = backend.info.to_dict()
    started = time.time()
    skip = {os.getpid(), os.getppid(), *[int(p) for p in job.get("fleet_pids", ())]}
    with Sampler() as sampler:
        processes = device_processes(sampler.sample_once(), backend.info.nvml_index, skip) if backend.is_cuda else ()
        result = measure_run(plan, job.get("db"), store=bool(job.get("store")), sampler=sampler, cancel=stop)
    prof = result.calibration.profile
    has_ceilings = bool(prof.peak or prof.bandwidth or prof.launch_overhead)
    payload: dict[str, Any] = {
        "rank": rank, "local_rank": job.get("local_rank", rank), "host": socket.gethostname(),
        "device": backend.spec, "model": backend.info.name, "status": result.status, "error": result.error,
        "store_error": result.store_error, "run_id": result.run_id if job.get("store") else None,
        "points": len(result.samples),
        "profile": prof.to_dict() if has_ceilings else None, "device_info": info, "plan": plan.name,
        "backend": backend.spec, "versions": _versions(info), "started_at": started, "ended_at": time.time(),
        "wall_s": result.wall_s, "processes": list(processes), "notes": list(plan.notes),
        **{k: list(v) if isinstance(v, tuple) else v for k, v in run_conditions(result.samples).items()},
    }
    if payload["run_id"] is None:  # not kept here: whoever gathers the payloads keeps it
        payload["samples"] = [s.to_dict() for s in result.samples]
    return payload


def store_warning(exc: object, kept_as: str | None = None, member: str | None = None) -> str:
    """Every store failure of a fleet, worded here and only here: what is not kept and the store's own reason
    (which names the file and --db). The fleet run (all or none: its members with it), the fleet run kept but
    not read back, or one --all-gpus member whose own run the store failed part way (`member`, with the
    measurement's own words for it)."""
    if member is not None:
        return f"rooftop measure: warning: {member}'s run is not wholly kept in the store: {exc}"
    if kept_as is not None:
        return (f"rooftop measure: warning: the fleet run is kept as run {kept_as[:8]}, but the store failed "
                f"reading it back: {exc}")
    return f"rooftop measure: warning: the fleet run is not kept in the store: {exc}"
