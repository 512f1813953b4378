"""One step of a plan: time one kernel at one size, and never let a failure escape.

A step knows the sample it would produce (family, dtype, shape, W, Q) before it
runs, so a point that cannot run — out of memory, unsupported dtype, a kernel
error, over the time budget — is still recorded, as skipped with its reason.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from rooftop.models.sample import Sample

from .backend import Unsupported
from .timing import Cancelled, TooSlow


@dataclass(frozen=True)
class Step:
    label: str  # for the progress bar: "read_reduce 64 MiB", "gemm bf16 4096³"
    template: Sample  # what the step measures; stats None
    run: Callable[[], Sample]  # the measured sample (raises on failure)


def is_oom(exc: BaseException) -> bool:
    name = type(exc).__name__
    return "OutOfMemory" in name or isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def run_step(step: Step, on_oom: Callable[[], None] | None = None) -> Sample:
    """The step's sample, or its template marked skipped with the reason (Cancelled passes through)."""
    try:
        return step.run()
    except Cancelled:
        raise
    except (Unsupported, TooSlow) as exc:
        reason = str(exc)
    except Exception as exc:  # broad on purpose: OOM, a dtype the library lacks, a kernel that fails (torch, triton): its point says so
        if is_oom(exc):
            reason = f"out of memory: {first_line(exc)}"
            if on_oom:
                on_oom()
        else:
            reason = f"kernel error: {type(exc).__name__}: {first_line(exc)}"
    return dataclasses.replace(step.template, stats=None, skipped=reason)


class Budget:
    """Keeps a sweep inside the per-call time budget, per key (a dtype).

    Points run in order of growing work. A point is skipped without running
    when the largest measured point of its key predicts (time ∝ work) a call over
    the limit, or when a smaller point of its key was already too slow.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._slow: dict[str, tuple[float, str]] = {}
        self._last: dict[str, tuple[float, float]] = {}  # key → (work, seconds per call)

    def check(self, key: str, work: float) -> None:
        hit = self._slow.get(key)
        if hit and work >= hit[0]:
            raise TooSlow(f"{hit[1]} was already over the {self.limit_s:g} s per-call budget")
        last = self._last.get(key)
        if last and last[0] > 0 and work > last[0]:
            predicted = last[1] * work / last[0]
            if predicted > self.limit_s:
                raise TooSlow(f"predicted {predicted:.3g} s per call, over the {self.limit_s:g} s budget")

    def guard(self, key: str, work: float, what: str, fn: Callable[[], Sample]) -> Sample:
        """Run fn unless the budget says no; learn from what it measured."""
        self.check(key, work)
        try:
            sample = fn()
        except TooSlow:
            old = self._slow.get(key)
            if old is None or work < old[0]:
                self._slow[key] = (work, what)
            raise
        if sample.stats is not None and work >= self._last.get(key, (0.0, 0.0))[0]:
            self._last[key] = (work, sample.stats.median_s)
        return sample
