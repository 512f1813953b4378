"""Collectives timed across ranks: the sweep behind `rooftop comm`.

Ranks are started by torch's own launcher (`torch.multiprocessing.start_processes`,
spawn) and meet by env:// rendezvous on 127.0.0.1 and a free port, as torchrun's
ranks do; gloo runs them on CPUs, NCCL on the local GPUs (one rank per GPU).
Each point follows the probes' timing protocol (probes.timing.measure): every
rank times the same back-to-back calls after a barrier, and the slowest rank's
time is the point's (all-reduced MAX), so every rank takes the same adaptive
decisions and the collective is counted done when its last rank is. Rank 0
reports each point through a queue; the parent turns them into Samples.
torch is imported inside functions only.
"""

from __future__ import annotations

import datetime
import logging
import os
import queue as queue_mod
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal

from rooftop.models.comm import COLLECTIVES, COPIES, bus_factor, reduce_flops
from rooftop.models.errors import BadInput
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.units import MiB

from .backend import CudaTimer
from .devinfo import parse_size
from .lifeline import die_with_parent
from .timing import CPU_PROTOCOL, GPU_PROTOCOL, Protocol, TooSlow, measure

DTYPE = "fp32"  # gloo reduces fp32 everywhere; the same on NCCL keeps the two comparable
ELEM = 4
# Message sizes S (nccl-tests' size column: the whole buffer; all-gather's output, reduce-scatter's input).
SIZES = {
    "quick": (8, 1024, 32 * 1024, MiB, 32 * MiB, 256 * MiB),
    "full": tuple(8 * 4**k for k in range(13)) + (256 * MiB,),  # 8 B, 32 B, … 128 MiB, 256 MiB
}
MAX_GLOO_WORLD = 64
RENDEZVOUS_TIMEOUT_S = 60.0


class CommError(BadInput):
    """The sweep cannot run as asked (a backend, a world size, a port this machine cannot give, ranks that
    cannot meet); a failure on the way is the result's `error`, not this."""


@dataclass(frozen=True)
class CommPlan:
    backend: str  # gloo | nccl
    world: int
    sizes: tuple[int, ...]
    collectives: tuple[str, ...] = tuple(COLLECTIVES)
    protocol: Protocol = CPU_PROTOCOL
    name: str = "quick"
    port: int = 0  # 0: a free one
    copies: bool = False  # also host↔device copies on GPU 0 (nccl only)
    notes: tuple[str, ...] = ()

    @property
    def points(self) -> int:
        return len(self.sizes) * (len(self.collectives) + (len(COPIES) if self.copies else 0))


def max_world(backend: str, gpus: int, cpus: int) -> int:
    """The most ranks allowed: one per GPU for NCCL; for gloo 2 per CPU, at most MAX_GLOO_WORLD."""
    return gpus if backend == "nccl" else min(MAX_GLOO_WORLD, 2 * max(1, cpus))


def build_comm_plan(backend: str, world: int | None, plan: str = "quick", port: int = 0,
                    gpus: int | None = None, cpus: int | None = None, max_size: str | None = None) -> CommPlan:
    """Check the request against this machine; CommError naming what is allowed."""
    if backend not in ("gloo", "nccl"):
        raise CommError(f"backend {backend!r} is unknown; choose gloo (CPUs) or nccl (GPUs)")
    if plan not in SIZES:
        raise CommError(f"plan {plan!r} is unknown; choose one of: {', '.join(SIZES)}")
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    if gpus is None:
        gpus = _gpu_count() if backend == "nccl" else 0
    if backend == "nccl" and gpus < 1:
        raise CommError("nccl needs CUDA GPUs and this machine has none; use --backend gloo")
    top = max_world(backend, gpus, cpus)
    world = world if world is not None else min(top, 2 if backend == "gloo" else gpus)
    notes: tuple[str, ...] = ()
    collectives = tuple(COLLECTIVES)
    if backend == "nccl" and gpus == 1 and world == 1:
        collectives, notes = (), ("one GPU: it has no peer to run NCCL collectives against; host↔device copies only",)
    elif world < 2:
        raise CommError(f"--world {world}: a collective needs at least 2 ranks (allowed: 2 … {top})")
    if world > top:
        why = f"one rank per GPU, {gpus} here" if backend == "nccl" else f"2 per CPU, {cpus} CPUs here, at most {MAX_GLOO_WORLD}"
        raise CommError(f"--world {world} is more ranks than allowed: 2 … {top} ({why})")
    if not 0 <= port < 65536:
        raise CommError(f"--port {port} is not a TCP port (1 … 65535, or 0 for a free one)")
    sizes = SIZES[plan]
    if max_size is not None:
        cap = _size_arg(max_size)
        sizes = tuple(s for s in sizes if s <= cap)
        if not sizes:
            raise CommError(f"--max-size {max_size} leaves no message size (the smallest is {SIZES[plan][0]} B)")
    return CommPlan(backend, world, sizes, collectives, protocol=CPU_PROTOCOL if backend == "gloo" else GPU_PROTOCOL,
                    name=plan, port=port, copies=backend == "nccl", notes=notes)


def _size_arg(text: str) -> int:
    try:
        n = parse_size(text)
    except (ValueError, AttributeError):
        n = -1
    if n < 1:
        raise CommError(f"--max-size {text!r} is not a size; write bytes, or with K, M or G (binary): 1M, 64K")
    return n


def _gpu_count() -> int:
    # deferred: torch, only when a comm sweep runs
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it), for the rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- one rank -------------------------------------------------------------------


class DistTimer:
    """Times calls on every rank after a barrier; returns the slowest rank's interval (the same on all)."""

    def __init__(self, dist: Any, torch: Any, device: Any) -> None:
        self._dist, self._torch, self._device = dist, torch, device
        self._cell = torch.zeros(1, dtype=torch.float64, device=device)

    def sync(self) -> None:
        if self._device.type == "cuda":
            self._torch.cuda.synchronize(self._device)

    def time_calls(self, fn: Callable[[], object], calls: int) -> float:
        self.sync()
        self._dist.barrier()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        self.sync()
        self._cell.fill_((time.perf_counter_ns() - t0) / 1e9)
        self._dist.all_reduce(self._cell, op=self._dist.ReduceOp.MAX)
        return float(self._cell.item())


def collective_call(name: str, size: int, world: int, rank: int, dist: Any, torch: Any, device: Any) -> tuple[Callable[[], object], int]:
    """The call timing `name` on a message of about `size` bytes, and the exact size it moves."""
    per_rank = max(1, size // (ELEM * world))  # all-gather / reduce-scatter: a whole number per rank
    whole = max(1, size // ELEM)
    z = lambda n: torch.ones(n, dtype=torch.float32, device=device)  # noqa: E731
    if name == "allreduce":
        x = z(whole)
        return (lambda: dist.all_reduce(x)), whole * ELEM
    if name == "broadcast":
        x = z(whole)
        return (lambda: dist.broadcast(x, src=0)), whole * ELEM
    if name == "allgather":
        x, out = z(per_rank), z(per_rank * world)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return (lambda: gather(out, x)), per_rank * world * ELEM
    if name == "reducescatter":
        x, out = z(per_rank * world), z(per_rank)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return (lambda: scatter(out, x)), per_rank * world * ELEM
    if name == "sendrecv":
        x, y = z(whole), z(whole)
        nxt, prv = (rank + 1) % world, (rank - 1) % world

        def sendrecv() -> None:
            ops = [dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, y, prv)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
        return sendrecv, whole * ELEM
    raise ValueError(f"unknown collective {name!r}")


def rank_main(rank: int, plan: CommPlan, port: int, out: Any, parent_pid: int | None = None) -> None:
    """One rank's sweep (the target torch's launcher spawns); rank 0 puts each point on `out`."""
    if parent_pid is not None:
        die_with_parent(parent_pid)  # a SIGKILLed `rooftop comm` leaves no rank behind
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the ranks; a terminal's Ctrl-C reaches all
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "WORLD_SIZE": str(plan.world), "LOCAL_RANK": str(rank)})
    # deferred: torch, only when a comm sweep runs
    import torch
    import torch.distributed as dist

    if plan.backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        torch.set_num_threads(1)  # the ranks share the CPUs
        device = torch.device("cpu")
    try:
        dist.init_process_group(plan.backend, init_method="env://", rank=rank, world_size=plan.world,
                                timeout=datetime.timedelta(seconds=RENDEZVOUS_TIMEOUT_S))
    except Exception as exc:  # broad on purpose: any failure here is the rendezvous's, said by the parent in one line
        if rank == 0:
            out.put(("rendezvous", f"{type(exc).__name__}: {_one_line(exc)}"))
        sys.exit(3)
    try:
        timer = DistTimer(dist, torch, device)
        for coll in plan.collectives:
            for size in plan.sizes:
                point: dict[str, Any] = {"collective": coll, "size": size}
                try:
                    fn, point["bytes"] = collective_call(coll, size, plan.world, rank, dist, torch, device)
                    point["stats"] = measure(fn, timer, plan.protocol).__dict__
                except TooSlow as exc:
                    point["skipped"] = str(exc)
                except (RuntimeError, MemoryError) as exc:  # out of memory, unsupported here
                    point["skipped"] = _one_line(exc)
                    dist.barrier()  # every rank fails alike (same size, same call), so they stay in step
                if rank == 0:
                    out.put(("point", point))
        dist.barrier()
    except Exception as exc:  # broad on purpose: this rank's process ends here, its failure said by the parent in one line
        if rank == 0:
            out.put(("failed", f"{type(exc).__name__}: {_one_line(exc)}"))
        sys.exit(4)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("…" if len(text) > 300 else "")


# -- the parent -----------------------------------------------------------------

CommStatus = Literal["complete", "cancelled", "failed"]  # how a comm run ended (the store's statuses, less two)


@dataclass
class CommResult:
    plan: CommPlan
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0
    status: CommStatus = "complete"
    error: str = ""


def point_sample(plan: CommPlan, point: dict[str, Any]) -> Sample:
    """A rank-0 point as a Sample named by its collective: Q = the message size S (so its bandwidth is
    algbw), W = the reduction's adds; conditions["comm"] marks it a comm point."""
    coll, size = point["collective"], int(point.get("bytes", point["size"]))
    stats = TimeStats(**point["stats"]) if point.get("stats") else None
    return Sample(
        family=coll, dtype=DTYPE, shape={"bytes": size, "world": plan.world},
        flops=reduce_flops(coll, plan.world, size / ELEM), bytes=float(size), footprint_bytes=float(size),
        cache="streaming", stats=stats, path=None, skipped=point.get("skipped", "") if stats is None else "",
        conditions={"comm": {"collective": coll, "backend": plan.backend, "world": plan.world,
                             "factor": bus_factor(coll, plan.world)}},
    )


def run_comm(plan: CommPlan, on_point: Callable[[Sample, int], None] | None = None,
             cancel: threading.Event | None = None) -> CommResult:
    """Start plan.world ranks, collect rank 0's points; the ranks are gone when this returns or raises.

    CommError when the rendezvous cannot start. KeyboardInterrupt passes
    through after the ranks are stopped.
    """
    result = CommResult(plan)
    t0 = time.perf_counter()
    if plan.collectives:
        _run_ranks(plan, result, on_point, cancel)
    if plan.copies and result.status == "complete":
        for s in host_device_sweep(plan, cancel):
            result.samples.append(s)
            if on_point:
                on_point(s, len(result.samples))
    result.wall_s = time.perf_counter() - t0
    return result


def host_device_sweep(plan: CommPlan, cancel: threading.Event | None = None, index: int = 0) -> list[Sample]:
    """H2D and D2H copies of each size on GPU `index`, from pinned and from pageable host memory.

    Timed with CUDA events by the probes' protocol in this process (no ranks needed).
    """
    # deferred: torch, only when a comm sweep runs
    import torch

    dev = torch.device("cuda", index)
    timer = CudaTimer(dev)
    out: list[Sample] = []
    for name in COPIES:
        for size in plan.sizes:
            if cancel is not None and cancel.is_set():
                return out
            n = max(1, size // ELEM)
            pinned = name.endswith("_pinned")
            host = torch.ones(n, dtype=torch.float32, pin_memory=pinned)
            gpu = torch.ones(n, dtype=torch.float32, device=dev)
            if name.startswith("h2d"):
                fn: Callable[[], object] = lambda: gpu.copy_(host, non_blocking=pinned)  # noqa: E731
            else:
                fn = lambda: host.copy_(gpu, non_blocking=pinned)  # noqa: E731
            point: dict[str, Any] = {"collective": name, "size": size, "bytes": n * ELEM}
            try:
                point["stats"] = measure(fn, timer, plan.protocol).__dict__
            except (TooSlow, RuntimeError) as exc:
                point["skipped"] = _one_line(exc)
            out.append(point_sample(replace(plan, world=1), point))
    return out


def _run_ranks(plan: CommPlan, result: CommResult, on_point: Callable[[Sample, int], None] | None,
               cancel: threading.Event | None) -> None:
    # deferred: torch, only when a comm sweep runs
    import torch.multiprocessing as tmp

    # torch's launcher logs each rank it terminates after another failed; the failure itself is reported in one line
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    port = plan.port or free_port()
    ctx = tmp.get_context("spawn")
    out = ctx.Queue()
    procs = tmp.start_processes(rank_main, args=(plan, port, out, os.getpid()), nprocs=plan.world, join=False,
                                start_method="spawn")
    problem: tuple[str, str] | None = None

    def drain() -> None:
        nonlocal problem
        while True:
            try:
                kind, payload = out.get_nowait()
            except queue_mod.Empty:
                return
            if kind == "point":
                s = point_sample(plan, payload)
                result.samples.append(s)
                if on_point:
                    on_point(s, len(result.samples))
            elif problem is None:
                problem = (kind, payload)

    try:
        while True:
            if cancel is not None and cancel.is_set():
                result.status = "cancelled"
                break
            try:
                done = procs.join(timeout=0.2)
            except (tmp.ProcessRaisedException, tmp.ProcessExitedException) as exc:  # a rank died: the others were stopped
                time.sleep(0.2)
                drain()
                kind, text = problem or ("failed", _one_line(exc))
                if kind == "rendezvous":
                    raise CommError(f"the ranks could not meet on 127.0.0.1:{port} ({text})") from None
                result.status, result.error = "failed", text
                break
            drain()
            if done:
                break
    finally:
        stop_ranks(procs)
        out.close()
        out.join_thread()


def stop_ranks(procs: Any, grace_s: float = 3.0) -> None:
    """Terminate, then kill, every rank still alive; wait for each (no orphans, no zombies)."""
    for p in procs.processes:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs.processes:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
