"""Many devices measured at once, through torch's own launchers: the process layout behind a fleet run.

Two ways in, one result (one payload per rank, or why there is none):

- `run_local` (`rooftop measure --all-gpus`): one process per device, started by
  `torch.multiprocessing.start_processes` (spawn), each ending with its parent (lifeline). Each
  puts its payload on a queue; a rank that dies is named by its exit code, one that hangs by the
  bounded wait, and the others' payloads are kept.
- `RankGroup` (`torchrun … rooftop measure --fleet`): the ranks torchrun (or `srun torchrun`)
  started meet on a gloo group and its key-value store; each posts its host at once, a sign of life
  every second, and its payload when done. Each rank measures in a child of its own (`run_local`, one
  job), so a measurement that dies or hangs costs its row, not the rank: the rank posts a "lost"
  payload saying how. One rank keeps the fleet: rank 0, or when rank 0 is gone the lowest rank still
  alive (claimed in the store, so never two). It reads the posted payloads, in a Python loop, so a
  stop signal is seen at once, and names each rank that posted nothing: gone silent (its process
  ended), or still silent when the wait ran out (it hung).

A stop (SIGTERM, SIGINT, SIGHUP: the rank's `cancel`) is not a loss. Each measuring child is asked to
stop (SIGTERM, which it turns into the plan's cancel) and hands in what it measured within
STOP_GRACE_S; the keeper waits STOP_PEERS_S from the stop for the others' rows, then keeps what came:
all well inside the 30 s torchrun gives its ranks before it kills them.

A payload is plain data (a dict), so it crosses processes and hosts by pickle. What a rank does
is the caller's (`target`): this module only starts, stops, waits and collects.
"""

from __future__ import annotations

import datetime
import logging
import os
import pickle
import queue as queue_mod
import signal
import socket
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from rooftop.models.errors import BadInput
from .comm import stop_ranks
from .lifeline import die_with_parent

log = logging.getLogger(__name__)

DEFAULT_WAIT_S = 300.0  # once the first rank is done, how long the others may take
PEERS_POLL_S = 1.0  # how often a rank asks whether its peers are done (one store request each time)
STOP_GRACE_S = 10.0  # after a stop, how long a measuring child has to hand in what it measured
STOP_PEERS_S = 15.0  # after a stop, how long the keeper waits for the other ranks' rows
BEAT_S = 1.0  # each rank's sign of life in the store
SILENT_S = 10.0  # a rank with no sign of life for this long is gone (its process ended, or its host)
CHUNK = 4 << 20  # a payload goes into the store in pieces: torch's TCPStore refuses a value over 8 MiB
KEY = "rooftop-fleet"
NOT_ASKED = "-"  # the keeper's word when it was asked to keep nothing (--no-save)


class FleetError(BadInput):
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


def lost(rank: int, host: str, device: str, why: str) -> dict[str, Any]:
    """The payload of a rank that gave none."""
    return {"rank": rank, "host": host, "device": device, "status": "lost", "error": why}


# -- one host, one process per device ------------------------------------------------


def _local_main(rank: int, target: Callable[..., dict[str, Any]], jobs: Sequence[Any], out: Any,
                parent_pid: int) -> None:
    """One spawned rank: run `target(rank, job, stop)`, put its payload (or its failure) on `out`.

    The parent decides when to stop: Ctrl-C and a hang-up reach the whole process group (torchrun sends
    its signal to the rank's), so they are ignored here; the parent's SIGTERM sets `stop`, and the target
    ends at its next check with what it measured.
    """
    die_with_parent(parent_pid)

    stop = threading.Event()
    for sig in ("SIGINT", "SIGHUP"):
        if hasattr(signal, sig):
            signal.signal(getattr(signal, sig), signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        payload = target(rank, jobs[rank], stop)
    except Exception as exc:  # broad on purpose: the rank's process ends here, its failure said in one line
        payload = {"rank": rank, "host": socket.gethostname(), "status": "failed",
                   "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
    out.put((rank, payload))


def run_local(target: Callable[..., dict[str, Any]], jobs: Sequence[Any], wait_s: float = DEFAULT_WAIT_S,
              cancel: Any = None, poll_s: float = 0.2,
              on_payload: Callable[[int, dict[str, Any]], object] | None = None,
              peers_done: Callable[[], bool] | None = None) -> list[dict[str, Any]]:
    """Start one process per job at once; returns one payload per rank, in rank order.

    `target(rank, job, stop)` runs in each (a module-level function: spawn pickles it by name). A
    rank that exits without a payload is reported with its exit code; one still running `wait_s` after
    the first payload arrived is stopped and reported as hung. `cancel` (an Event) stops them all: each
    is asked (SIGTERM: its `stop`) and has STOP_GRACE_S to hand in what it measured. `peers_done` says
    whether a rank elsewhere has finished (a torchrun rank's peers): from then on the same bounded wait
    runs, so a process of one job that hangs is stopped too.
    """
    # deferred: torch, only when ranks start
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
    stopping: float | None = None  # when the stop was passed on to the ranks

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
            if stopping is None and cancel is not None and cancel.is_set():
                stopping = time.monotonic()
                for r, p in enumerate(procs.processes):
                    if r not in got and p.is_alive():
                        p.terminate()  # the rank's stop: it hands in what it measured
            if stopping is not None and time.monotonic() - stopping > STOP_GRACE_S:
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
            if stopping is None and first_done is not None and time.monotonic() - first_done > wait_s:
                for r in range(n):
                    if r not in got:
                        got[r] = lost(r, host, _device(jobs[r]),
                                      f"no result within {wait_s:g} s of the first rank's; stopped it")
                break
    finally:
        stop_ranks(procs)
        out.close()
        out.join_thread()
    why = f"stopped before it gave a result (none within {STOP_GRACE_S:g} s of the stop)"
    return [got.get(r) or lost(r, host, _device(jobs[r]), why) for r in range(n)]


def _device(job: Any) -> str:
    return str(job.get("device", "")) if isinstance(job, Mapping) else ""


def _death(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"it died of {signal.Signals(-code).name}"
        except ValueError:
            return f"it died of signal {-code}"
    return f"it exited with status {code} before giving a result"


# -- ranks started by torchrun, across hosts -----------------------------------------


class RankGroup:
    """This rank's gloo group (env:// rendezvous, as torchrun sets it), its key-value store, and its sign of
    life there. `cancel` is the rank's stop (set by a signal): waits shorten to STOP_PEERS_S from it."""

    def __init__(self, env: RankEnv, wait_s: float = DEFAULT_WAIT_S, cancel: Any = None) -> None:
        # deferred: torch, only when ranks start
        import torch.distributed as dist

        self.env, self.wait_s, self._dist, self.cancel = env, wait_s, dist, cancel
        if not dist.is_available():
            raise FleetError("this torch build has no torch.distributed")
        try:
            dist.init_process_group("gloo", init_method="env://", rank=env.rank, world_size=env.world,
                                    timeout=datetime.timedelta(seconds=wait_s))
        except Exception as exc:  # broad on purpose: torch.distributed's rendezvous raises many kinds; said in one line
            raise FleetError(f"the ranks could not meet ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
                             "start them with torchrun (MASTER_ADDR, MASTER_PORT)") from None
        # deferred: torch, only when ranks start
        from torch.distributed.distributed_c10d import _get_default_store

        self.store = _get_default_store()
        self._stopped_at: float | None = None
        self._closed = threading.Event()
        self._keeper = False
        self.said: str | None = None  # a rank another keeps for: the run id it was kept as ('' not kept), None unsaid
        self._try(lambda: self.post("host", socket.gethostname()))
        threading.Thread(target=self._beat, name="rooftop-fleet-beat", daemon=True).start()

    # -- the store, never raising: a store that went away reads as nothing posted ----------------

    def _try(self, op: Callable[[], Any], default: Any = None) -> Any:
        try:
            return op()
        except (RuntimeError, OSError):  # the store's host is gone or refused (torch's DistError): the waits decide
            return default

    def post(self, what: str, value: Any) -> None:
        """Post `value` under this rank, in pieces (the store takes at most 8 MiB a value)."""
        data = pickle.dumps(value)
        pieces = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)] or [b""]
        for i, piece in enumerate(pieces):
            # torch's stub says str; the binding takes bytes as well, and a pickled piece is bytes
            self.store.set(f"{KEY}/{what}/{self.env.rank}/{i}", piece)  # type: ignore[arg-type]
        self.store.set(f"{KEY}/{what}/{self.env.rank}", str(len(pieces)))  # last: the pieces are all there

    def posted(self, what: str, rank: int) -> Any:
        key = f"{KEY}/{what}/{rank}"

        def read() -> Any:
            if not self.store.check([key]):
                return None
            n = int(self.store.get(key))
            return pickle.loads(b"".join(self.store.get(f"{key}/{i}") for i in range(n)))

        return self._try(read)

    def _beat(self) -> None:
        while not self._closed.wait(BEAT_S):
            self._note_stop()  # within BEAT_S of the signal, however long the measurement takes to end
            if self._try(lambda: self.store.add(f"{KEY}/beat/{self.env.rank}", 1)) is None:
                return

    def peers_done(self) -> bool:
        """Whether another rank has posted its payload (asked before this rank posts its own)."""
        return int(self._try(lambda: self.store.add(f"{KEY}/done", 0), 0)) > 0

    # -- gathering -------------------------------------------------------------------------------

    def _note_stop(self) -> None:
        """When the stop came: the waits after it count from then."""
        if self.cancel is not None and self.cancel.is_set() and self._stopped_at is None:
            self._stopped_at = time.monotonic()

    def _deadline(self, normal: float, after_stop: float = STOP_PEERS_S) -> float:
        """`normal`, or `after_stop` seconds after the stop once the rank is stopped (whichever is sooner)."""
        self._note_stop()
        return min(normal, self._stopped_at + after_stop) if self._stopped_at is not None else normal

    def gather(self, payload: dict[str, Any], poll_s: float = 0.5) -> list[dict[str, Any]] | None:
        """Post this rank's payload; the keeper (rank 0, or the lowest rank alive once rank 0 is gone) gets
        every rank's in rank order, lost ones named, and must call `kept`; every other rank gets None once
        the keeper has said so, or is gone, or the wait ran out (`said` tells which)."""
        posted_at = time.monotonic()
        self._try(lambda: self.post("payload", payload))
        self._try(lambda: self.store.add(f"{KEY}/done", 1))
        beats = _Beats(self)
        while True:
            # all() asks rank by rank and stops at the first one alive: one request while rank 0 is
            if self.env.rank == 0 or all(beats.silent(r) for r in range(self.env.rank)):
                if self._claim():
                    return self._collect(payload, beats, poll_s)
            if self._try(lambda: self.store.check([f"{KEY}/kept"]), True):  # kept, or the store is gone
                self.said = self._read_kept()
                self._try(lambda: self.store.add(f"{KEY}/heard", 1))  # the keeper may now go (and its store)
                return None
            # a keeper alive but silent this long is stuck (its own wait is one wait_s); after a stop it waits
            # STOP_PEERS_S, then keeps: time for that, inside torchrun's 30 s
            if time.monotonic() > self._deadline(posted_at + 2 * self.wait_s + SILENT_S, STOP_PEERS_S + 10):
                return None
            time.sleep(max(poll_s, PEERS_POLL_S))

    def _claim(self) -> bool:
        """Become the keeper, unless another rank already is (one atomic store request)."""
        me = str(self.env.rank).encode()
        # torch's stub says str; the binding takes bytes as well, and answers the stored value as bytes
        return self._try(lambda: self.store.compare_set(f"{KEY}/keeper", "", me)) == me  # type: ignore[arg-type]

    def _collect(self, mine: dict[str, Any], beats: "_Beats", poll_s: float) -> list[dict[str, Any]]:
        got: dict[int, dict[str, Any]] = {self.env.rank: mine}
        why: dict[int, str] = {}
        begun = time.monotonic()
        while len(got) + len(why) < self.env.world:
            for r in range(self.env.world):
                if r in got or r in why:
                    continue
                p = self.posted("payload", r)
                if isinstance(p, dict):
                    got[r] = p
                elif beats.silent(r):
                    why[r] = ("the job's store could not be reached (its launcher is gone)" if beats.gone
                              else f"its process ended about {beats.lived(r):.0f} s into the run: no sign of life "
                                   f"for {SILENT_S:g} s")
            now = time.monotonic()
            if len(got) + len(why) < self.env.world and now > self._deadline(begun + self.wait_s):
                told = (f"it sent nothing within {STOP_PEERS_S:g} s of the stop" if self._stopped_at is not None
                        else f"it hung: nothing within {self.wait_s:g} s of rank {self.env.rank}'s result")
                why.update({r: told for r in range(self.env.world) if r not in got and r not in why})
                break
            time.sleep(poll_s)
        return [got[r] if r in got else lost(r, str(self.posted("host", r) or ""), "", why[r])
                for r in range(self.env.world)]

    def kept(self, run_id: str | None) -> None:
        """The keeper's word to the others that the fleet is dealt with (`run_id`: kept as; None: not kept; NOT_ASKED:
        not to be kept, --no-save)."""
        self._try(lambda: self.store.set(f"{KEY}/kept", run_id or ""))
        self._keeper = True

    def _read_kept(self) -> str | None:
        v = self._try(lambda: self.store.get(f"{KEY}/kept") if self.store.check([f"{KEY}/kept"]) else None)
        return v.decode() if isinstance(v, bytes) else None

    def _wait_heard(self, most_s: float = 3.0) -> None:
        """The keeper, before it leaves: the others have read its word (without an agent, rank 0 hosts the
        store, which ends with it). Bounded: a rank that is gone hears nothing."""
        others = sum(1 for r in range(self.env.world)
                     if r != self.env.rank and self._try(partial(self.store.check, [f"{KEY}/payload/{r}"]), False))
        deadline = time.monotonic() + most_s
        while time.monotonic() < deadline and int(self._try(lambda: self.store.add(f"{KEY}/heard", 0), others)) < others:
            time.sleep(0.1)

    def close(self) -> None:
        if self._keeper:
            self._wait_heard()
        self._closed.set()
        if self._dist.is_initialized():
            try:
                self._dist.destroy_process_group()
            except (RuntimeError, OSError) as exc:  # a peer already gone (torch's DistError)
                log.debug("destroy_process_group: %s", exc)


class _Beats:
    """The other ranks' signs of life as this rank has seen them: a rank whose count stops moving for
    SILENT_S is gone. Counts, not clocks: hosts' clocks need not agree."""

    def __init__(self, group: RankGroup) -> None:
        self.group = group
        self._seen: dict[int, tuple[int, float]] = {}
        self.gone = False  # the store itself could not be reached

    def _count(self, rank: int) -> int:
        return int(self.group._try(lambda: self.group.store.add(f"{KEY}/beat/{rank}", 0), -1))

    def silent(self, rank: int) -> bool:
        now, count = time.monotonic(), self._count(rank)
        if count < 0:  # the store itself is gone: nobody can be heard
            self.gone = True
            return True
        last = self._seen.get(rank)
        if last is None or last[0] != count:
            self._seen[rank] = (count, now)
            return False
        return now - last[1] > SILENT_S

    def lived(self, rank: int) -> float:
        """About how long `rank` was alive after it met the others: one sign of life a BEAT_S."""
        return self._seen.get(rank, (0, 0.0))[0] * BEAT_S
