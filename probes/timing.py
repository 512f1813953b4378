"""The timing protocol of the reference measurements (shared/reference/README.md).

Warm-ups, then back-to-back calls filling a window (adaptive call count), time
per call = interval / calls, 7 samples per point; median, p10, p90, min and
iqr_ratio go into a TimeStats. The clock is the backend's: CUDA events around
the calls on a GPU, perf_counter_ns around synchronous work on the CPU. A cold
mode runs `before_sample` (an L2 flush) before each sample, outside the timed
interval.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol as TypingProtocol

from rooftop.models.sample import TimeStats


class Timer(TypingProtocol):
    """Times `calls` back-to-back calls of `fn`, finished on the device, in seconds."""

    def time_calls(self, fn: Callable[[], object], calls: int) -> float: ...

    def sync(self) -> None: ...


class TooSlow(Exception):
    """One call takes longer than the plan's per-call budget: the point is skipped."""


class Cancelled(Exception):
    """The run was asked to stop while this point was being timed: the point is dropped."""


@dataclass(frozen=True)
class Protocol:
    """The knobs of the protocol; the defaults are the reference's (GPU) values."""

    warmups: int = 5  # untimed calls before timing
    window_s: float = 0.020  # each sample fills about this much time with back-to-back calls
    repeats: int = 7  # samples per point
    max_calls: int = 200  # cap on back-to-back calls per sample (the reference's)
    warmup_budget_s: float = 0.25  # slow kernels stop warming up after this much time (≥ 1 warm-up)
    max_call_s: float = math.inf  # a single call slower than this skips the point (TooSlow)


GPU_PROTOCOL = Protocol()
# The CPU uses a 10 ms window so the quick plan stays quick on a small box; the
# rest is the reference's protocol.
CPU_PROTOCOL = Protocol(window_s=0.010)


def calls_for(per_call_s: float, window_s: float, max_calls: int) -> int:
    """Back-to-back calls that fill the window, between 1 and max_calls."""
    if per_call_s <= 0:
        return max_calls
    return max(1, min(max_calls, math.ceil(window_s / per_call_s)))


class CpuTimer:
    """perf_counter_ns around the calls; CPU torch ops return when their work is done."""

    def sync(self) -> None:
        return None

    def time_calls(self, fn: Callable[[], object], calls: int) -> float:
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        return (time.perf_counter_ns() - t0) / 1e9


def measure(
    fn: Callable[[], object],
    timer: Timer,
    protocol: Protocol = GPU_PROTOCOL,
    before_sample: Callable[[], object] | None = None,
    cancel: threading.Event | None = None,
) -> TimeStats:
    """Time `fn` by the protocol; TooSlow if one call exceeds protocol.max_call_s.

    `cancel` is checked between samples (Cancelled), so a slow point does not hold up a stop.
    """
    first = timer.time_calls(fn, 1)
    if first > protocol.max_call_s:
        raise TooSlow(f"one call takes {first:.3g} s, over the plan's {protocol.max_call_s:g} s budget per call")
    warm_times = [first]
    spent = first
    while len(warm_times) < protocol.warmups and spent < protocol.warmup_budget_s:
        t = timer.time_calls(fn, 1)
        warm_times.append(t)
        spent += t
    # A single timed call overstates tiny kernels (timer overhead); refine once with
    # a batch, which also serves as a last warm-up.
    calls = calls_for(min(warm_times), protocol.window_s, protocol.max_calls)
    if 1 < calls < protocol.max_calls:
        calls = calls_for(timer.time_calls(fn, calls) / calls, protocol.window_s, protocol.max_calls)
    per_call: list[float] = []
    for _ in range(protocol.repeats):
        if cancel is not None and cancel.is_set():
            raise Cancelled("stopped while timing")
        if before_sample is not None:
            before_sample()
            timer.sync()
        per_call.append(timer.time_calls(fn, calls) / calls)
    return TimeStats.from_times(per_call, calls)
