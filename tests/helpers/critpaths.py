"""Critical paths made by hand over a real workload's op groups, for the tests of what the report, the store and
the Profile tab show of one (the path itself is found and tested in models/program/critpath.py's tests)."""

from __future__ import annotations

from rooftop.models.program.critpath import SPLIT_KEYS, CriticalPath, FixFirst, PathOp, StepPath, WhatIf
from rooftop.models.program.workload import Workload
from rooftop.tui.render.profile import op_label

ADVICE = "memory-bound: I = 7.98 < I* = 206 — cut bytes or raise I"


def made_path(work: Workload, graph: bool = True, why_not: str = "") -> CriticalPath:
    """Two steps whose path is mostly CPU, through the workload's op groups: each of its five largest saves
    1, 2, … ms less than the one before; what-ifs for no launch gaps and every op at its roof."""
    groups = work.groups[:8]
    ops = tuple(PathOp(key=(g.op,), label=op_label(g), time_s=g.time_s * 0.9, kernels=g.kernels) for g in groups)
    device = sum(p.time_s for p in ops)
    split = dict.fromkeys(SPLIT_KEYS, 0.0) | {"cpu": 0.120, "device": device, "launch": 0.004, "kernel_gap": 0.001}
    length = sum(split.values())
    steps = (StepPath("ProfilerStep#2", 0.0, length / 2, length / 2, {k: v / 2 for k, v in split.items()}, ops),
             StepPath("ProfilerStep#3", length / 2, length, length / 2, {k: v / 2 for k, v in split.items()}, ops))
    fix = tuple(FixFirst(key=(g.op,), label=op_label(g), saving_s=(5 - i) * 1e-3, regime=g.regime,
                         fraction_of_roof=g.fraction_of_roof, advice=f"{ADVICE} ({i + 1})")
                for i, g in enumerate(groups[:5]))
    what = (WhatIf("every op at its roof", length - 0.009, 0.009, graph),
            WhatIf("no launch gaps", length - 0.004, 0.004, graph),
            *(WhatIf(f"op:{f.label}", length - f.saving_s, f.saving_s, graph) for f in fix))
    return CriticalPath(window="ProfilerStep#2–#3 (2 steps)", steps=steps, length_s=length, split=split, ops=ops,
                        what_if=what, fix_first=fix if graph else (), graph=graph, why_not=why_not)
