"""Many devices measured at once, through torch's own launchers: the process layout behind a fleet run.

Two ways in, one result (one payload per rank, or why there is none):

- `run_local` (`rooftop measure --all-gpus`): one process per device, started by
  `torch.multiprocessing.start_processes` (spawn), each ending with its parent (lifeline). Each
  puts its payload on a queue; a rank that dies is named by its exit code, one that hangs by the
  bounded wait, and the others' payloads are kept.
- `RankGroup` (`torchrun … rooftop measure --fleet`): the ranks torchrun (or `srun torchrun`)
  started meet on a gloo group; each posts its host at once and its payload when done, and rank 0
  gathers them with `gather_object`. Each rank measures in a child of its own (`run_local`, one
  job), so a measurement that dies or hangs costs its row, not the rank: the rank posts a "lost"
  payload saying how. If the gather still does not complete within the wait (a whole rank hung
  or died), rank 0 reads what was posted and names the ranks that posted nothing.

A payload is plain data (a dict), so it crosses processes and hosts by pickle. What a rank does
is the caller's (`target`): this module only starts, waits and collects.
"""

from __future__ import annotations

import datetime
import logging
import os
import pickle
import queue as queue_mod
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .comm import stop_ranks
from .lifeline import die_with_parent

DEFAULT_WAIT_S = 300.0  # once the first rank is done, how long the others may take
PEERS_POLL_S = 1.0  # how often a rank asks whether its peers are done (one store request each time)
KEY = "rooftop-fleet"


class FleetError(Exception):
    """A fleet that cannot start (bad layout, no devices); worded for one line."""


@dataclass(frozen=True)
class RankEnv:
    """Where this process sits in a torchrun job: the variables torchrun (and torch's Slurm path) set."""

    rank: int
    world: int
    local_rank: int
    local_world: int

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "RankEnv | None":
        """None outside a launcher (no RANK / WORLD_SIZE); FleetError for values that are not counts."""
        env = os.environ if env is None else env
        if "RANK" not in env or "WORLD_SIZE" not in env:
            return None
        try:
            rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
            local_rank = int(env.get("LOCAL_RANK", rank))
            local_world = int(env.get("LOCAL_WORLD_SIZE", world))
        except ValueError:
            raise FleetError("RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE must be whole numbers "
                             "(as torchrun sets them)") from None
        if not (0 <= rank < world and 0 <= local_rank < local_world):
            raise FleetError(f"RANK {rank} of WORLD_SIZE {world} (LOCAL_RANK {local_rank} of {local_world}) "
                             "is not a place in the job")
        return cls(rank, world, local_rank, local_world)


def cpu_share(local_rank: int, local_world: int, cpus: Sequence[int]) -> list[int]:
    """This rank's share of the host's CPUs: an equal, disjoint slice (at least one each; ranks beyond
    the CPUs share them round-robin)."""
    cpus = sorted(cpus)
    if not cpus:
        return []
    per = max(1, len(cpus) // max(1, local_world))
    start = (local_rank * per) % len(cpus)
    return cpus[start:start + per] or cpus[:per]


def pin_cpu_share(local_rank: int, local_world: int) -> list[int]:
    """Pin this process to its share of the CPUs (where the OS allows); returns the share."""
    try:
        have = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        have = list(range(os.cpu_count() or 1))
    share = cpu_share(local_rank, local_world, have)
    try:
        os.sched_setaffinity(0, share)
    except (AttributeError, OSError):
        pass
    return share


def lost(rank: int, host: str, device: str, why: str) -> dict[str, Any]:
    """The payload of a rank that gave none."""
    return {"rank": rank, "host": host, "device": device, "status": "lost", "error": why}


# -- one host, one process per device ------------------------------------------------


def _local_main(rank: int, target: Callable[..., dict[str, Any]], jobs: Sequence[Any], out: Any,
                parent_pid: int) -> None:
    """One spawned rank: run `target(rank, job)`, put its payload (or its failure) on `out`."""
    die_with_parent(parent_pid)
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the ranks
    try:
        payload = target(rank, jobs[rank])
    except Exception as exc:  # reported as the rank's one line
        payload = {"rank": rank, "host": socket.gethostname(), "status": "failed",
                   "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
    out.put((rank, payload))


def run_local(target: Callable[..., dict[str, Any]], jobs: Sequence[Any], wait_s: float = DEFAULT_WAIT_S,
              cancel: Any = None, poll_s: float = 0.2,
              on_payload: Callable[[int, dict[str, Any]], None] | None = None,
              peers_done: Callable[[], bool] | None = None) -> list[dict[str, Any]]:
    """Start one process per job at once; returns one payload per rank, in rank order.

    `target(rank, job)` runs in each (a module-level function: spawn pickles it by name). A rank
    that exits without a payload is reported with its exit code; one still running `wait_s` after
    the first payload arrived is stopped and reported as hung. `cancel` (an Event) stops them all.
    `peers_done` says whether a rank elsewhere has finished (a torchrun rank's peers): from then
    on the same bounded wait runs, so a process of one job that hangs is stopped too.
    """
    import torch.multiprocessing as tmp

    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    host = socket.gethostname()
    n = len(jobs)
    if n < 1:
        raise FleetError("no device to measure")
    ctx = tmp.get_context("spawn")
    out = ctx.Queue()
    procs = tmp.start_processes(_local_main, args=(target, list(jobs), out, os.getpid()), nprocs=n,
                                join=False, start_method="spawn")
    got: dict[int, dict[str, Any]] = {}
    first_done: float | None = None
    asked_peers = 0.0

    def drain(block_s: float) -> None:
        nonlocal first_done
        try:
            rank, payload = out.get(timeout=block_s)
        except queue_mod.Empty:
            return
        got[rank] = payload
        first_done = first_done or time.monotonic()
        if on_payload:
            on_payload(rank, payload)

    try:
        while len(got) < n:
            if cancel is not None and cancel.is_set():
                break
            drain(poll_s)
            dead = [r for r, p in enumerate(procs.processes)
                    if r not in got and not p.is_alive() and p.exitcode is not None]
            if dead:
                drain(0.5)  # its payload may still be in the pipe
                for r in dead:
                    if r not in got:
                        got[r] = lost(r, host, _device(jobs[r]), _death(procs.processes[r].exitcode))
                        first_done = first_done or time.monotonic()
            if first_done is None and peers_done is not None and time.monotonic() - asked_peers >= PEERS_POLL_S:
                asked_peers = time.monotonic()
                first_done = asked_peers if peers_done() else None
            if first_done is not None and time.monotonic() - first_done > wait_s:
                for r in range(n):
                    if r not in got:
                        got[r] = lost(r, host, _device(jobs[r]),
                                      f"no result within {wait_s:g} s of the first rank's; stopped it")
                break
    finally:
        stop_ranks(procs)
        out.close()
        out.join_thread()
    return [got.get(r) or lost(r, host, _device(jobs[r]), "stopped before it finished") for r in range(n)]


def _device(job: Any) -> str:
    return str(job.get("device", "")) if isinstance(job, Mapping) else ""


def _death(code: int | None) -> str:
    import signal

    if code is not None and code < 0:
        try:
            return f"it died of {signal.Signals(-code).name}"
        except ValueError:
            return f"it died of signal {-code}"
    return f"it exited with status {code} before giving a result"


# -- ranks started by torchrun, across hosts -----------------------------------------


class RankGroup:
    """This rank's gloo group (env:// rendezvous, as torchrun sets it) and its key-value store."""

    def __init__(self, env: RankEnv, wait_s: float = DEFAULT_WAIT_S) -> None:
        import torch.distributed as dist

        self.env, self.wait_s, self._dist = env, wait_s, dist
        if not dist.is_available():
            raise FleetError("this torch build has no torch.distributed")
        try:
            dist.init_process_group("gloo", init_method="env://", rank=env.rank, world_size=env.world,
                                    timeout=datetime.timedelta(seconds=wait_s))
        except Exception as exc:  # the rendezvous's failure, in one line
            raise FleetError(f"the ranks could not meet ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
                             "start them with torchrun (MASTER_ADDR, MASTER_PORT)") from None
        from torch.distributed.distributed_c10d import _get_default_store

        self.store = _get_default_store()
        self.post("host", socket.gethostname())

    def post(self, what: str, value: Any) -> None:
        self.store.set(f"{KEY}/{what}/{self.env.rank}", pickle.dumps(value))

    def posted(self, what: str, rank: int) -> Any:
        key = f"{KEY}/{what}/{rank}"
        try:
            return pickle.loads(self.store.get(key)) if self.store.check([key]) else None
        except Exception:  # a store that went away: nothing posted
            return None

    def peers_done(self) -> bool:
        """Whether another rank has posted its payload (asked before this rank posts its own)."""
        try:
            return int(self.store.add(f"{KEY}/done", 0)) > 0
        except Exception:  # a store that went away: the gather's own timeout decides
            return False

    def gather(self, payload: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Rank 0: every rank's payload in rank order (lost ones named); other ranks: None."""
        self.post("payload", payload)
        self.store.add(f"{KEY}/done", 1)
        dist = self._dist
        result: list[Any] | None = [None] * self.env.world if self.env.rank == 0 else None
        try:
            dist.gather_object(payload, result, dst=0)
        except Exception:  # a rank hung or died: the store has what was posted
            if self.env.rank != 0:
                return None
            result = [self.posted("payload", r) for r in range(self.env.world)]
        if self.env.rank != 0:
            return None
        assert result is not None
        out = []
        for r, p in enumerate(result):
            if isinstance(p, dict):
                out.append(p)
                continue
            host = self.posted("host", r) or "unknown host"
            out.append(lost(r, str(host), "", f"no result within {self.wait_s:g} s (it hung or died)"))
        return out

    def close(self) -> None:
        if self._dist.is_initialized():
            try:
                self._dist.destroy_process_group()
            except Exception:  # a peer already gone
                pass
