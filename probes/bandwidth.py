"""Bandwidth probes: read, copy, triad and write over a working-set sweep.

No flush between calls, so small working sets show the caches: the curve has
the launch-overhead region (a few KiB: time is the fixed cost per call), the
cache plateau, and past the last cache level the DRAM plateau (seed 000 §4,
figure 2). torch kernels as METHODS.md lists them; `a = b + s*c` would make a
temporary and miscount bytes, so triad writes into `out=`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from rooftop.models.sample import Sample
from rooftop.models.units import GiB, KiB, MiB

from .backend import Backend
from .steps import Step

CONVENTION = (
    "bandwidth = algorithmic bytes / time, each array counted once (read_reduce n·s, copy 2n·s, "
    "triad 3n·s, write n·s; write-allocate traffic not counted); working set = all arrays together; "
    "B comes from the kernels that read, write (a memset) is reported beside it"
)

def _triad(a: list[Any]) -> object:
    """a0 = a1 + s·a2 into a preallocated output (no temporary)."""
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


def sweep_top(backend: Backend) -> int:
    """Far past the last cache level: GPU ≥ 4×L2 and ≥ 512 MiB; CPU ≥ 8×LLC and ≥ 4 GiB, capped by a
    quarter of free memory. On a CPU the LLC that lscpu reports is no bound (a VM reports 32 MiB over a
    host whose cache served 1 GiB sets at 75 GB/s where DRAM gave 48–50), so the sweep reaches sets no
    host cache holds, and calibration takes B dram from the plateau of the two largest ones."""
    llc = backend.info.l2_bytes or 0
    if backend.is_cuda:
        return int(max(4 * llc, 512 * MiB))
    want = max(8 * llc, CPU_TOP)
    cap = backend.free_bytes() // 4
    return int(min(want, cap))


def elements(working_set: float, arrays: int) -> int:
    return max(1, int(working_set) // (arrays * ELEMENT))


def template(family: str, working_set: float) -> Sample:
    arrays, _ = KERNELS[family]
    n = elements(working_set, arrays)
    nbytes = float(arrays * n * ELEMENT)
    return Sample(
        family=family,
        dtype="fp32",
        shape={"n": n, "arrays": arrays},
        flops=2.0 * n if family == "triad" else 0.0,  # triad: one multiply-add (2 FLOP) per element
        bytes=nbytes,
        footprint_bytes=nbytes,
        cache="warm",
        path=None,
        conditions={"working_set": int(working_set)},  # nominal: arrays·n·4 rounds it down a little
    )


def _run(backend: Backend, family: str, working_set: float) -> Sample:
    import torch

    tmpl = template(family, working_set)
    arrays, kernel = KERNELS[family]
    n = tmpl.shape["n"]
    backend.check_fits(tmpl.footprint_bytes)
    dev = backend.torch_device
    bufs = [torch.empty(n, dtype=torch.float32, device=dev).fill_(1.0 + i) for i in range(arrays)]
    backend.sync()
    stats = backend.measure(lambda: kernel(bufs))  # noqa: F821 - measured before the del below
    del bufs
    return dataclasses.replace(tmpl, stats=stats)


def steps(backend: Backend, sets: list[int], families: tuple[str, ...] = tuple(KERNELS)) -> list[Step]:
    out = []
    for ws in sets:
        for fam in families:
            label = f"{fam} {ws / MiB:.3g} MiB" if ws >= MiB else f"{fam} {ws / KiB:.3g} KiB"
            out.append(Step(label, template(fam, ws), lambda f=fam, w=ws: _run(backend, f, w)))
    return out
