"""Two profiles of a program side by side: the same op groups' time before and after, and the split.

Pure: takes the op groups as their JSON form (`OpGroup.to_dict`, as a stored
profile keeps them) and pairs them by (op, input shapes, dtype, owner).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

SPLIT_KEYS = ("span_s", "device_busy_s", "idle_s", "bound_s", "mfu", "bandwidth_utilisation")


@dataclass(frozen=True)
class GroupDiff:
    op: str
    shapes: list
    dtype: str
    time_a_s: float | None  # None: the group is not in profile A
    time_b_s: float | None
    calls_a: int = 0
    calls_b: int = 0
    owner: str = "op"  # who owns the group's kernels (workload.OWNERS): a graph's replayed op is a row of its own

    @property
    def ratio(self) -> float | None:
        """time B / time A, where both have the group."""
        if self.time_a_s and self.time_b_s is not None:
            return self.time_b_s / self.time_a_s
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "shapes": self.shapes, "dtype": self.dtype, "time_a_s": self.time_a_s,
                "time_b_s": self.time_b_s, "calls_a": self.calls_a, "calls_b": self.calls_b, "ratio": self.ratio, "owner": self.owner}


def _key(g: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return str(g.get("op", "")), json.dumps(g.get("shapes", [])), str(g.get("dtype", "")), str(g.get("owner") or "op")


def diff_groups(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> list[GroupDiff]:
    """Every group of either profile, paired where both have it, the largest time (of the two) first."""
    ia = {_key(g): g for g in a}
    ib = {_key(g): g for g in b}
    out = []
    for k in list(dict.fromkeys([*ia, *ib])):
        ga, gb = ia.get(k), ib.get(k)
        src = ga or gb or {}
        out.append(GroupDiff(
            op=k[0], shapes=list(src.get("shapes", [])), dtype=k[2],
            time_a_s=float(ga["time_s"]) if ga else None, time_b_s=float(gb["time_s"]) if gb else None,
            calls_a=int(ga.get("calls", 0)) if ga else 0, calls_b=int(gb.get("calls", 0)) if gb else 0,
            owner=k[3],
        ))
    out.sort(key=lambda d: -max(d.time_a_s or 0.0, d.time_b_s or 0.0))
    return out


def diff_split(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The step split of both profiles, key by key (span, busy, idle, bound, MFU, bandwidth utilisation)."""
    return {k: (a.get(k), b.get(k)) for k in SPLIT_KEYS}
