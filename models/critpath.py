"""The critical path of a step, what-ifs re-timed on it, and the op groups to fix first: the data.

(The path itself is found over the dependency graph of the trace; these are the figures it gives.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SPLIT_KEYS = ("cpu", "device", "launch", "kernel_gap", "other_stream", "peers")


@dataclass(frozen=True)
class PathOp:
    key: tuple  # the op group's key in Workload (what Workload.group_of_kernel gives)
    label: str  # the op group's label as the report names it
    time_s: float  # its device time on the path
    kernels: int  # its activities on the path


@dataclass(frozen=True)
class StepPath:
    window: str  # "ProfilerStep#4", the --window annotation's name, or "whole trace"
    start: float
    end: float  # seconds, the window (trace clock)
    length_s: float  # end − start of the path (== the window's length from its start to its last point)
    split: Mapping[str, float]  # SPLIT_KEYS → seconds; sums to length_s
    ops: tuple[PathOp, ...]  # by time on the path, largest first


@dataclass(frozen=True)
class WhatIf:
    name: str  # "op:<label>", "no launch gaps", "every op at its roof", "communication fully hidden", …
    length_s: float  # the windows' summed length after (≤ before, ≥ 0, never below the roof bounds)
    saving_s: float  # before − after, ≥ 0
    retimed: bool  # True: re-timed on the graph; False: the old sum, labelled as such (no graph)


@dataclass(frozen=True)
class FixFirst:
    key: tuple
    label: str
    saving_s: float
    regime: str
    fraction_of_roof: float | None
    advice: str


@dataclass(frozen=True)
class CriticalPath:
    window: str  # what was analysed: "ProfilerStep#2–#5 (4 steps)", "whole trace", NAME
    steps: tuple[StepPath, ...]
    length_s: float  # summed over steps
    split: Mapping[str, float]  # summed over steps
    ops: tuple[PathOp, ...]  # summed over steps
    what_if: tuple[WhatIf, ...]
    fix_first: tuple[FixFirst, ...]  # top five op groups by saving (> 0), with regime, fraction, advice
    graph: bool  # False: no graph could be built (no launch links, a GPU-only trace)
    why_not: str = ""  # the one-line reason when graph is False (what_if then has retimed=False)
