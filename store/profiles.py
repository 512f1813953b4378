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

from typing import Any, Mapping

from rooftop.models.sample import Sample, TimeStats
from rooftop.models.workload import OpGroup, Workload

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
                 versions: Mapping[str, Any] | None = None) -> str:
    """Keep `work` as a complete run; returns its id."""
    device_info = {
        "name": work.device_name or ("CPU" if not work.on_device else "GPU"),
        "kind": "gpu" if work.on_device else "cpu",
        "profile": {**work.summary(), "source": source, "notes": list(work.notes)},
    }
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
