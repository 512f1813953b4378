"""Kernels launched before the trace's window, matched to their twins in its first profiler step.

torch.profiler's window opens on a sync: the kernels the warm-up step queued run during it, in the window, but
their launches (and the ops that made them) were recorded before it began. A program's steps repeat, so those
kernels are the tail of the step before the first one recorded: where they are, name for name in launch order,
the tail of the first recorded step's kernels (that step's order repeated, where more than a step's worth was
queued), each one's twin is the kernel at the same place in that step, and its op is the twin's op, with the
same shapes assumed. Where they are not, they have no twins (and are grouped by kernel family).

Pure: over `rooftop.models.trace.read` activities.
"""

from __future__ import annotations

from .read import Trace


def twins(trace: Trace) -> dict[int, int]:
    """Each kernel launched before the window (its index in `trace.kernels`) → its twin in the first profiler
    step; {} where the trace has no step, no such kernel, or they are not the step's tail name for name."""
    if not trace.before_window or not trace.steps:
        return {}
    kernels = trace.kernels
    early = [i for i in trace.before_window if kernels[i].cat == "kernel"]
    # launch order: by correlation where every one has it (the runtime numbers its calls in order), else by start
    if all(kernels[i].correlation is not None for i in early):
        early.sort(key=lambda i: kernels[i].correlation)  # type: ignore[arg-type, return-value]  # all set
    else:
        early.sort(key=lambda i: kernels[i].ts)
    lo, hi = trace.steps[0]
    step = sorted((i for i, k in enumerate(kernels)
                   if k.cat == "kernel" and k.launch_ts is not None and lo <= k.launch_ts <= hi),
                  key=lambda i: (kernels[i].launch_ts, kernels[i].correlation or 0))
    m, n = len(early), len(step)
    if not m or not n:
        return {}
    pairs = {early[m - 1 - j]: step[(n - 1 - j) % n] for j in range(m)}
    if any(kernels[a].name != kernels[b].name for a, b in pairs.items()):
        return {}
    return pairs
