"""Rank bodies for the fleet layout tests (spawn pickles a target by module and name, so they live here).

Cheap ones return a payload at once; the faulty ones die or hang, as a broken GPU's process would.
"""

from __future__ import annotations

import os
import socket
import time


def quick(rank: int, job: dict, stop=None) -> dict:
    return {"rank": rank, "host": socket.gethostname(), "device": job["device"], "status": "complete",
            "pid": os.getpid()}


def rank1_dies(rank: int, job: dict, stop=None) -> dict:
    if rank == 1:
        os._exit(7)
    return quick(rank, job, stop)


def rank1_hangs(rank: int, job: dict, stop=None) -> dict:
    if rank == 1:
        time.sleep(600)
    return quick(rank, job, stop)


def hangs(rank: int, job: dict, stop=None) -> dict:
    """A measurement stuck on its device: it never gives a result."""
    time.sleep(600)
    return quick(rank, job, stop)


def rank0_raises(rank: int, job: dict, stop=None) -> dict:
    if rank == 0:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    return quick(rank, job, stop)


def tell_and_hang(rank: int, job: dict, stop=None) -> dict:
    """Write this rank's pid where the test looks, then hang (a GPU stuck in a kernel)."""
    with open(f"{job['dir']}/{rank}.pid", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
    return quick(rank, job, stop)


def torchrun_rank(rank: int, job: dict, stop=None) -> dict:
    """A rank as torchrun starts one (its variables set), meeting the others on a gloo group; rank 1 can hang
    instead of sending its row, as a rank stuck on its GPU would."""
    from rooftop.probes.fleet import RankEnv, RankGroup

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(job["port"]), "RANK": str(rank),
                       "WORLD_SIZE": str(job["world"]), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(job["world"])})
    group = RankGroup(RankEnv.from_env(), wait_s=job["wait_s"])
    try:
        if rank == 1 and job.get("hang"):
            time.sleep(600)
        rows = group.gather({**quick(rank, job), "blob": b"x" * job.get("blob", 0)})
        if rows is not None:
            group.kept(None)
    finally:
        group.close()
    return {**quick(rank, job), "gathered": rows}


def until_stopped(rank: int, job: dict, stop=None) -> dict:
    """Measure "points" until told to stop (SIGTERM, as run_local passes a stop on), then hand in how far it got."""
    with open(f"{job['dir']}/{rank}.pid", "w") as f:
        f.write(str(os.getpid()))
    points = 0
    while not stop.wait(0.05):
        points += 1
    return {**quick(rank, job, stop), "status": "cancelled", "points": points}
