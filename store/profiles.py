"""A profiled program kept as a run: plan "profile", one sample per op group.

So `rooftop runs`, `show`, `export` / `import` and the History tab handle it
like any run: each op group is a Sample of family "profile" (W, Q and the
per-call time; `shape` holds the op model's dimensions) whose `conditions`
carry the rest (op name, recorded input shapes, calls, total time, regime,
bound). The step split (span, device busy, idle, MFU) is kept with the run's
device facts under "profile". A profile run has no ceilings: it is never a
device's measured profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rooftop.models.profile import DeviceProfile
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.timeline import IdleCause, StepSplit
from rooftop.models.workload import Flag, OpGroup, TopKernel, Transfer, Workload

from .runs import Run, Store

PLAN = "profile"
FAMILY = "profile"


def group_sample(g: OpGroup) -> Sample:
    """One op group as a sample: per-call time as the median, the calls as repeats."""
    per_call = g.time_s / g.calls if g.calls else g.time_s
    stats = TimeStats(median_s=per_call, p10_s=per_call, p90_s=per_call, min_s=per_call, iqr_ratio=0.0,
                      repeats=max(1, g.calls), calls=1)
    return Sample(
        family=FAMILY, dtype=g.dtype or "", shape={k: int(v) for k, v in g.shape.items()},
        flops=g.flops / g.calls if g.calls else g.flops, bytes=g.bytes / g.calls if g.calls else g.bytes,
        cache="warm", stats=stats if per_call > 0 else None, path=g.path or None,
        skipped="" if per_call > 0 else "no time recorded",
        conditions={"profile": {k: v for k, v in g.to_dict().items() if k not in ("flops", "bytes")}},
    )


def save_profile(store: Store, work: Workload, source: str, backend: str,
                 versions: Mapping[str, Any] | None = None, job: Mapping[str, Any] | None = None) -> str:
    """Keep `work` as a complete run; returns its id. A distributed job's ranks, straggler and collectives
    (`rooftop.models.job.Job.to_dict`) are kept beside it under "job"; `work` is its lowest rank's."""
    device_info = {
        "name": work.device_name or ("CPU" if not work.on_device else "GPU"),
        "kind": "gpu" if work.on_device else "cpu",
        "profile": {**work.summary(), "source": source, "notes": list(work.notes), "rows": work.rows()},
    }
    if job is not None:
        device_info["profile"]["job"] = dict(job)
    run_id = store.begin_run(device_info, plan=PLAN, backend=backend, versions=versions)
    try:
        store.add_samples(run_id, [group_sample(g) for g in work.groups])
    except BaseException:
        store.finish_run(run_id, "failed")
        raise
    store.finish_run(run_id, "complete")
    return run_id


def is_profile(run: Run) -> bool:
    return run.plan == PLAN


def stored_groups(samples: Sequence[Sample]) -> list[OpGroup]:
    """The op groups of a stored profile, as `save_profile` kept them (W and Q back to all calls), largest first.

    Raises ValueError when a sample's stored group is not one `save_profile` could have written (an edited import).
    """
    groups = []
    for s in samples:
        g = s.conditions.get("profile") if isinstance(s.conditions, Mapping) else None
        if not isinstance(g, Mapping) or not g:
            continue
        try:
            calls = int(g.get("calls") or 0)
            bound = g.get("bound_s")
            groups.append(OpGroup(
                op=str(g.get("op", "?")), shapes=list(g.get("shapes") or []), dtype=str(g.get("dtype") or ""),
                model=str(g.get("model") or ""), path=str(g.get("path") or ""), counting=str(g.get("counting") or ""),
                shape={str(k): int(v) for k, v in dict(g.get("shape") or {}).items()}, calls=calls,
                time_s=float(g.get("time_s") or 0.0), flops=s.flops * calls if calls else s.flops,
                bytes=s.bytes * calls if calls else s.bytes, kernels=int(g.get("kernels") or 0),
                bound_s=None if bound is None else float(bound), regime=str(g.get("regime") or ""),
                alone_s=float(g.get("time_alone_s", g.get("time_s")) or 0.0),
            ))
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"a stored op group is malformed ({exc})") from None
    return sorted(groups, key=lambda g: -g.time_s)


def stored_rows(s: Mapping[str, Any]) -> dict[str, Any]:
    """The rows beside the op groups (memcpy / memset, overlap, idle causes, top kernels, steps, flags) as
    `Workload` fields, from a stored profile (none for a profile kept before they were)."""
    rows = s.get("rows") if isinstance(s.get("rows"), Mapping) else {}
    overlap = rows.get("overlap") if isinstance(rows.get("overlap"), Mapping) else {}
    return {
        "transfers": tuple(Transfer.from_dict(d) for d in rows.get("transfers") or ()),
        "overlap_s": float(overlap.get("time_s") or 0.0),
        "idle_causes": tuple(IdleCause.from_dict(d) for d in rows.get("idle_causes") or ()),
        "top_kernels": tuple(TopKernel.from_dict(d) for d in rows.get("top_kernels") or ()),
        "steps": tuple(StepSplit.from_dict(d) for d in rows.get("steps") or ()),
        "flags": tuple(Flag.from_dict(d) for d in rows.get("flags") or ()),
        "device_note": str(s.get("device_note") or ""),
    }


def stored_workload(run: Run, samples: Sequence[Sample], device: DeviceProfile) -> Workload:
    """The profile as `rooftop profile` reported it, rebuilt from the run on the roofs it was placed on.

    Raises ValueError when the stored split, an op group or a row is malformed.
    """
    s = run.device.get("profile") if isinstance(run.device.get("profile"), Mapping) else {}
    try:
        return Workload(groups=tuple(stored_groups(samples)), device=device, on_device=bool(s.get("on_device")),
                        kernels=int(s.get("kernels") or 0), span_s=float(s.get("span_s") or 0.0),
                        busy_s=float(s.get("device_busy_s") or 0.0), device_name=str(s.get("trace_device") or ""),
                        notes=tuple(str(n) for n in (s.get("notes") or ())), **stored_rows(s))
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"the stored profile is malformed ({exc})") from None


def profile_json(run: Run, samples: Sequence[Sample]) -> dict[str, Any]:
    """{ops, summary, notes} as `rooftop profile --json` gave them: the ops from the samples, the split as stored."""
    s = dict(run.device.get("profile") or {})
    span = s.get("span_s") if isinstance(s.get("span_s"), (int, float)) else 0.0
    ops = [{**g.to_dict(), "share": g.alone_s / span if span > 0 else None} for g in stored_groups(samples)]
    notes = list(s.pop("notes", None) or [])
    rows = s.pop("rows", None)
    s.pop("source", None)
    return {"ops": ops, "summary": s, "notes": notes, **(rows if isinstance(rows, Mapping) else {})}
