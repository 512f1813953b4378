"""A `rooftop comm` sweep kept as a run: plan "comm", one sample per (collective, size).

Each sample is family "comm": Q is the message size S (so its bandwidth is
algbw), W the reduction's additions, and `conditions["comm"]` names the
collective, backend and world. The α-β fits go with the run's device facts
under "comm". A comm run has no ceilings: it is never a device's measured profile.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rooftop.models.comm import AlphaBeta
from rooftop.models.sample import Sample

from .runs import Run, Store

PLAN = "comm"


def comm_device_info(backend: str, world: int, device_name: str, fits: Mapping[str, AlphaBeta | None],
                     sweep: str) -> dict[str, Any]:
    return {
        "name": device_name,
        "kind": "gpu" if backend == "nccl" else "cpu",
        "comm": {"backend": backend, "world": world, "sweep": sweep,
                 "fits": {k: (v.to_dict() if v else None) for k, v in fits.items()}},
    }


def save_comm(store: Store, device_info: Mapping[str, Any], backend: str, samples: Sequence[Sample],
              status: str = "complete", versions: Mapping[str, Any] | None = None) -> str:
    """Keep a finished sweep as a run with `status`; returns its id."""
    run_id = store.begin_run(device_info, plan=PLAN, backend=backend, versions=versions)
    try:
        store.add_samples(run_id, samples)
    except BaseException:
        store.finish_run(run_id, "failed")
        raise
    store.finish_run(run_id, status)
    return run_id


def is_comm(run: Run) -> bool:
    return run.plan == PLAN
