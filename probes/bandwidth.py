"""Bandwidth probes: read, copy, triad and write over a working-set sweep.

No flush between calls, so small working sets show the caches: the curve has
the launch-overhead region (a few KiB: time is the fixed cost per call), the
cache plateau, and past the last cache level the DRAM plateau (seed 000 §4,
figure 2). Each kernel is one torch call (docs/measure.md, "Probes"); `a = b + s*c` would make a
temporary and miscount bytes, so triad writes into `out=`.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any, Callable

from rooftop.models.sample import Sample
from rooftop.models.units import GiB, KiB, MiB, fmt_bytes

from .backend import Backend
from .steps import Step

CONVENTION = (
    "bandwidth = algorithmic bytes / time, each array counted once (read_reduce n·s, copy 2n·s, "
    "triad 3n·s, write n·s; write-allocate traffic not counted); working set = all arrays together; "
    "B comes from the kernels that read, write (a memset) is reported beside it"
)

def _triad(a: list[Any]) -> object:
    """a0 = a1 + s·a2 into a preallocated output (no temporary)."""
    # deferred: torch, only when a probe runs
    import torch

    return torch.add(a[1], a[2], alpha=0.5, out=a[0])


# family → (arrays, kernel over the arrays). Array 0 is the one written (or read, for read_reduce).
KERNELS: dict[str, tuple[int, Callable[[list[Any]], object]]] = {
    "read_reduce": (1, lambda a: a[0].sum()),
    "copy": (2, lambda a: a[0].copy_(a[1])),
    "triad": (3, _triad),
    "write": (1, lambda a: a[0].zero_()),
}
ELEMENT = 4  # fp32


def working_sets(top: float, bottom: float = 4 * KiB, factor: float = 4.0) -> list[int]:
    """Working sets from `bottom` up to `top`, geometric with `factor`, ending exactly at top."""
    out: list[int] = []
    ws = float(top)
    while ws >= bottom * 0.999:
        out.append(int(ws))
        ws /= factor
    return sorted(out)


CPU_TOP = 4 * GiB  # a CPU's reported LLC can be far smaller than the cache serving it (a VM's host L3)
MEMORY_SHARE = 0.25  # a CPU's sweep takes at most this share of the memory free when the plan is made
DRAM_SETS = 2  # calibration takes a CPU's B dram from the plateau of the two largest sets (models.calibrate)


def memory_cap(backend: Backend) -> int | None:
    """The most a CPU's sweep may take: MEMORY_SHARE of the free RAM now; None on a GPU (sized by its L2)."""
    return None if backend.is_cuda else int(backend.free_bytes() * MEMORY_SHARE)


def cpu_reach(backend: Backend) -> int:
    """How far a CPU's sweep should reach: ≥ 8×LLC and ≥ 4 GiB. The LLC that lscpu reports is no bound (a
    VM reports 32 MiB over a host whose cache served 1 GiB sets at 75 GB/s where DRAM gave 48–50), so the
    sweep reaches sets no host cache holds, and calibration takes B dram from the plateau of the two
    largest ones."""
    return int(max(8 * (backend.info.l2_bytes or 0), CPU_TOP))


def sweep_top(backend: Backend, cap: int | None = None) -> int:
    """Far past the last cache level: GPU ≥ 4×L2 and ≥ 512 MiB; CPU cpu_reach, capped by `cap` (default
    memory_cap: a quarter of the free memory)."""
    if backend.is_cuda:
        return int(max(4 * (backend.info.l2_bytes or 0), 512 * MiB))
    limit, reach = memory_cap(backend) if cap is None else cap, cpu_reach(backend)
    return int(reach if limit is None else min(reach, limit))  # memory_cap is None only on a GPU (above)


def cap_note(backend: Backend, top: int, cap: int) -> str:
    """The plan's note on its memory cap: the free memory it was drawn from, the largest set it allows."""
    reach = cpu_reach(backend)
    short = "" if top >= reach else (
        f", short of the {fmt_bytes(reach)} that no host cache holds: a cache may serve the largest sets")
    return (f"bandwidth: memory capped at {MEMORY_SHARE:.0%} of the {fmt_bytes(cap / MEMORY_SHARE)} free "
            f"({fmt_bytes(cap)}); the largest working set is {fmt_bytes(top)}{short}")


def elements(working_set: float, arrays: int) -> int:
    return max(1, int(working_set) // (arrays * ELEMENT))


ALIGN = 4096 // ELEMENT  # each array starts on a page of the shared buffer (a fresh allocation's alignment or better)


def _stride(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def buffer_bytes(family: str, working_set: float) -> int:
    """The bytes of the shared buffer that a point's arrays take, each starting on a page."""
    arrays, _ = KERNELS[family]
    return arrays * _stride(elements(working_set, arrays)) * ELEMENT


def arrays_of(buf: Any, arrays: int, n: int) -> list[Any]:
    """`arrays` disjoint, page-aligned views of n elements each, from the front of `buf`."""
    step = _stride(n)
    return [buf[i * step: i * step + n] for i in range(arrays)]


def template(family: str, working_set: float, memory_cap: int | None = None) -> Sample:
    arrays, _ = KERNELS[family]
    n = elements(working_set, arrays)
    nbytes = float(arrays * n * ELEMENT)
    conditions: dict[str, Any] = {"working_set": int(working_set)}  # nominal: arrays·n·4 rounds it down a little
    if memory_cap is not None:
        conditions["memory_cap"] = int(memory_cap)  # what the sweep was allowed to take (plan.memory_cap)
    return Sample(
        family=family,
        dtype="fp32",
        shape={"n": n, "arrays": arrays},
        flops=2.0 * n if family == "triad" else 0.0,  # triad: one multiply-add (2 FLOP) per element
        bytes=nbytes,
        footprint_bytes=nbytes,
        cache="warm",
        path=None,
        conditions=conditions,
    )


def _run(backend: Backend, tmpl: Sample, reserve: int) -> Sample:
    arrays, kernel = KERNELS[tmpl.family]
    n = tmpl.shape["n"]
    backend.check_fits(tmpl.footprint_bytes)
    buf = backend.scratch(buffer_bytes(tmpl.family, tmpl.conditions["working_set"]), reserve)
    bufs = arrays_of(buf, arrays, n)
    for i, b in enumerate(bufs):
        b.fill_(1.0 + i)
    backend.sync()
    stats = backend.measure(lambda: kernel(bufs))  # noqa: F821 - measured before the del below
    del bufs, buf
    return dataclasses.replace(tmpl, stats=stats)


def _then_release(backend: Backend, run: Callable[[], Sample]) -> Callable[[], Sample]:
    """The sweep's last point: its buffer goes back once it is measured, however the point ends."""
    def last() -> Sample:
        try:
            return run()
        finally:
            backend.release()
    return last


def steps(backend: Backend, sets: list[int], families: tuple[str, ...] = tuple(KERNELS),
          top_families: tuple[str, ...] | None = None, top_sets: int = 0,
          memory_cap: int | None = None) -> list[Step]:
    """One step per working set and kernel, smallest first, their arrays carved from one buffer taken once.

    The `top_sets` largest sets run only `top_families` (a CPU quick plan: one pass over its 4 GiB set
    takes longer than a whole point of a set under 64 MiB)."""
    top = set(sorted(sets)[-top_sets:]) if top_sets and top_families is not None else set()
    points = [(ws, fam) for ws in sets for fam in families if ws not in top or fam in (top_families or ())]
    reserve = max((buffer_bytes(fam, ws) for ws, fam in points), default=0)
    out = []
    for ws, fam in points:
        label = f"{fam} {fmt_bytes(ws)}"
        tmpl = template(fam, ws, memory_cap)
        out.append(Step(label, tmpl, partial(_run, backend, tmpl, reserve)))
    if out:
        out[-1] = dataclasses.replace(out[-1], run=_then_release(backend, out[-1].run))
    return out
