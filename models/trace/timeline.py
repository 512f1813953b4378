"""The device's timeline from a trace: busy, overlap, the gaps and what each gap waited for, per step.

Pure functions over `rooftop.models.trace.read` activities. Busy time is the union
of the activities' intervals (kernels, memcpy, memset; several streams count
once); each activity's *alone* time is the part of it during which nothing
else ran, and the time two or more ran at once is the overlap, so alone times
+ overlap + idle = the span exactly, and no share of the span passes 100%.

A gap (the device idle between two activities) gets one cause, read from the
trace, in HTA's three categories and by HTA's rules (its idle time breakdown),
asked in its order: first, was the next activity launched only after the device
went idle?
- yes: host wait, the device waited for the CPU to launch it, and the trace
  says what held the CPU: a host sync (cudaDeviceSynchronize /
  cudaStreamSynchronize / `.item()`) running during the gap; else a memcpy call
  holding the CPU for most of it; else the CPU op that issued the activity;
- no (it was queued, or the trace has no launch for it) and the gap is under
  HTA's 30 µs: kernel wait, the time between kernels issued back to back;
- no, and longer: other, the queued activity waited on something else (another
  stream, an event).
A sync or a copy running during a gap says nothing of a kernel that was already
queued: a thread's sync, or a copy waiting on the device, does not hold back
what another launch put in the queue before it.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .read import ITEM_OPS, HostCall, Kernel, Trace, union_length

KERNEL_WAIT_NS = 30_000  # HTA's consecutive_kernel_delay (30 µs): a gap before a queued kernel under it is kernel wait
TOP_CAUSES = 6  # CPU ops named one by one among the causes; the rest are summed


@dataclass(frozen=True)
class Sweep:
    """The union of the activities, the time two or more ran at once, and each one's time alone."""

    busy_s: float
    overlap_s: float
    alone_s: tuple[float, ...]  # per activity, in the order given


def sweep(acts: Sequence[Kernel]) -> Sweep:
    """Walk the activities' starts and ends in time order (activities sorted by start)."""
    n = len(acts)
    if n == 0:
        return Sweep(0.0, 0.0, ())
    hi = -math.inf
    for k in acts:  # the common case: one stream, nothing overlaps
        if k.ts < hi:
            break
        hi = max(hi, k.end)
    else:
        return Sweep(sum(k.dur for k in acts), 0.0, tuple(k.dur for k in acts))
    alone = [0.0] * n
    busy = overlap = 0.0
    heap: list[tuple[float, int]] = []
    t = acts[0].ts
    i = 0
    while i < n or heap:
        if i < n and (not heap or acts[i].ts < heap[0][0]):
            nxt = acts[i].ts
            push = True
        else:
            nxt = heap[0][0]
            push = False
        seg = nxt - t
        if seg > 0 and heap:
            busy += seg
            if len(heap) == 1:
                alone[heap[0][1]] += seg
            else:
                overlap += seg
        t = nxt
        if push:
            heapq.heappush(heap, (acts[i].end, i))
            i += 1
        else:
            heapq.heappop(heap)
    return Sweep(busy, overlap, tuple(alone))


def gaps(acts: Sequence[Kernel]) -> list[tuple[float, float, int]]:
    """The idle intervals between the activities (sorted by start), inside the span: (start, end, the index of
    the activity that ended it)."""
    out: list[tuple[float, float, int]] = []
    hi = -math.inf
    for i, k in enumerate(acts):
        ts = k.ts
        if ts > hi > -math.inf:
            out.append((hi, ts, i))
        end = ts + k.dur
        hi = max(hi, end)
    return out


@dataclass(frozen=True)
class IdleCause:
    """Idle time put down to one cause: its kind as HTA names it, the gaps and their total time."""

    cause: str  # "host sync", "memcpy (host side)", "launch overhead", "CPU: aten::…", "queued, waiting"
    category: str  # host wait, kernel wait, other
    gaps: int
    time_s: float
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IdleCause:
        return cls(str(d["cause"]), str(d["category"]), int(d["gaps"]), float(d["time_s"]), str(d.get("detail", "")))


def _merged(calls: Sequence[HostCall]) -> tuple[list[float], list[float], list[str]]:
    """The calls' intervals merged (starts, ends, the first call's name and op): a gap is checked by bisection."""
    starts: list[float] = []
    ends: list[float] = []
    names: list[str] = []
    for c in sorted(calls, key=lambda c: c.ts):
        if starts and c.ts <= ends[-1]:
            ends[-1] = max(ends[-1], c.end)
            if c.op in ITEM_OPS:
                names[-1] = ".item()"
        else:
            starts.append(c.ts)
            ends.append(c.end)
            names.append(".item()" if c.op in ITEM_OPS else c.name)
    return starts, ends, names


def _covered(merged: tuple[list[float], list[float], list[str]], lo: float, hi: float) -> tuple[float, str]:
    """How much of [lo, hi] the merged calls cover, and the first one's name."""
    starts, ends, names = merged
    j = bisect.bisect_right(starts, hi) - 1
    total, first = 0.0, ""
    while j >= 0 and ends[j] > lo:
        if starts[j] < hi:
            total += min(ends[j], hi) - max(starts[j], lo)
            first = names[j]
        j -= 1
    return total, first


def idle_causes(trace: Trace) -> list[IdleCause]:
    """Every gap of the device's timeline with one cause, summed by cause, largest first. A trace of counter ranges
    has none: its ranges tile the profiler's window (the floats' rounding leaves gaps of 1e-15 s between them)."""
    if trace.range_times:
        return []
    acts = trace.kernels
    syncs = _merged([c for c in trace.host_calls if c.kind == "sync"])
    copies = _merged([c for c in trace.host_calls if c.kind == "copy"])
    found: dict[str, list] = {}
    any_sync, any_copy = bool(syncs[0]), bool(copies[0])
    for lo, hi, nxt_i in gaps(acts):
        dur = hi - lo
        launch = acts[nxt_i].launch_ts
        if launch is not None and launch > lo:  # launched after the device went idle: what held the CPU
            synced, name = _covered(syncs, lo, hi) if any_sync else (0.0, "")
            if synced > 0:
                key, cat, detail = "host sync", "host wait", name
            elif any_copy and _covered(copies, lo, hi)[0] >= 0.5 * dur:
                key, cat, detail = "memcpy (host side)", "host wait", "a copy call held the CPU"
            else:
                oi = trace.kernel_op[nxt_i]  # an op joined from a graph's capture ran then, not now: no op held the CPU
                name = trace.ops[oi].name if oi is not None and trace.ops[oi].origin != "capture" else "(no op)"
                key, cat, detail = (f"CPU: {name}", "host wait",
                                    "the next kernel was launched after the device went idle")
        elif round(dur * 1e9) < KERNEL_WAIT_NS:  # in whole ns (a trace's finest tick): 30.000 µs is not under 30
            key, cat, detail = ("launch overhead", "kernel wait",
                                f"the next kernel was queued: gaps under {KERNEL_WAIT_NS / 1e3:.3g} µs between "
                                "kernels back to back")
        else:
            key, cat, detail = "queued, waiting", "other", "the next kernel was queued: another stream or an event"
        e = found.get(key)
        if e is None:
            e = found[key] = [cat, 0, 0.0, detail]
        e[1] += 1
        e[2] += dur
    rows = [IdleCause(k, cat, n, t, d) for k, (cat, n, t, d) in found.items()]
    rows.sort(key=lambda r: -r.time_s)
    cpu = [r for r in rows if r.cause.startswith("CPU: ")]
    if len(cpu) > TOP_CAUSES:
        rest = cpu[TOP_CAUSES:]
        rows = [r for r in rows if r not in rest]
        rows.append(IdleCause("CPU: other ops", "host wait", sum(r.gaps for r in rest), sum(r.time_s for r in rest),
                              f"{len(rest)} more ops"))
        rows.sort(key=lambda r: -r.time_s)
    return rows


@dataclass(frozen=True)
class StepSplit:
    """One profiler step (ProfilerStep#N): its CPU time, its activities' window, busy and idle."""

    name: str
    cpu_s: float  # the step's own duration on the CPU
    span_s: float  # first to last activity launched in the step (the CPU step on a CPU trace)
    busy_s: float
    kernels: int

    @property
    def idle_s(self) -> float:
        return max(0.0, self.span_s - self.busy_s)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "idle_s": self.idle_s}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepSplit:
        return cls(str(d["name"]), float(d["cpu_s"]), float(d["span_s"]), float(d["busy_s"]), int(d["kernels"]))


def step_splits(trace: Trace) -> list[StepSplit]:
    """Per profiler step: on a GPU trace the activities launched during the step, by their launch time, so that
    identical steps get equal counts: an activity with no launch in the trace (launched before the window, run
    during the sync that opens its first step) belongs to no step. A trace that records no launch at all splits
    by the activities' start. A step is [start, end): a launch where one step ends and the next begins is the
    next one's, counted once. On a CPU trace: the top-level ops inside each step."""
    out: list[StepSplit] = []
    names = trace.step_names or tuple(f"step {i}" for i in range(len(trace.steps)))
    if trace.on_device:
        launched = any(k.launch_ts is not None for k in trace.kernels)
        keyed = sorted((k.launch_ts if launched else k.ts, i) for i, k in enumerate(trace.kernels)
                       if k.launch_ts is not None or not launched)
        at: list[float] = [t for t, _ in keyed]  # type: ignore[misc]  # launch_ts where it is not None
        for (lo, hi), name in zip(trace.steps, names):
            mine = [trace.kernels[i] for _, i in keyed[bisect.bisect_left(at, lo):bisect.bisect_left(at, hi)]]
            if mine:
                span = max(k.end for k in mine) - min(k.ts for k in mine)
                busy = union_length((k.ts, k.end) for k in mine)
            else:
                span = busy = 0.0
            out.append(StepSplit(name, hi - lo, span, busy, sum(1 for k in mine if k.cat == "kernel")))
        return out
    tops = [o for o in trace.ops if o.parent is None]
    for (lo, hi), name in zip(trace.steps, names):
        busy = union_length((max(o.ts, lo), min(o.end, hi)) for o in tops if o.end > lo and o.ts < hi)
        out.append(StepSplit(name, hi - lo, hi - lo, busy, 0))
    return out
