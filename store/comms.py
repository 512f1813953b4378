"""A `rooftop comm` sweep kept as a run: plan "comm", one sample per (collective, size).

Each sample's family is its collective (allreduce, …, h2d_pinned): Q is the
message size S (so its bandwidth is algbw), W the reduction's additions, and
`conditions["comm"]` holds the collective, backend, world and bus factor. The
α-β fits are not stored: they follow from the samples (models.comm.fit_points).
Samples are kept as they come, so a stopped sweep keeps what it measured. A comm
run has no ceilings: it is never a device's measured profile.
"""

from __future__ import annotations

from typing import Any, Mapping

from .runs import COMM_PLAN, Run, Store

PLAN = COMM_PLAN


def comm_device_info(backend: str, world: int, device_name: str, sweep: str) -> dict[str, Any]:
    return {"name": device_name, "kind": "gpu" if backend == "nccl" else "cpu",
            "comm": {"backend": backend, "world": world, "sweep": sweep}}


def begin_comm(store: Store, device_info: Mapping[str, Any], backend: str,
               versions: Mapping[str, Any] | None = None) -> str:
    return store.begin_run(device_info, plan=PLAN, backend=backend, versions=versions)


def is_comm(run: Run) -> bool:
    return run.kind == "comm"
