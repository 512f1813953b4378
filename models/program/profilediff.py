"""Two profiles of a program side by side: the same op groups' time before and after, and the split.

Pure: takes the op groups (`OpGroup`, as a stored profile reads them back: `store.workloads.stored_groups`) and
pairs them by (op, input shapes, dtype, owner).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .workload import OpGroup

SPLIT_KEYS = ("span_s", "device_busy_s", "idle_s", "bound_s", "mfu", "bandwidth_utilisation")


@dataclass(frozen=True)
class GroupDiff:
    """One op group in profile A, in B, or in both."""

    a: OpGroup | None  # None: the group is not in profile A
    b: OpGroup | None

    @property
    def group(self) -> OpGroup:
        """The group as A has it, else as B has it: what names the row."""
        g = self.a or self.b
        assert g is not None, "a GroupDiff pairs at least one op group"
        return g

    @property
    def op(self) -> str:
        return self.group.op

    @property
    def shapes(self) -> list:
        return list(self.group.shapes)

    @property
    def dtype(self) -> str:
        return self.group.dtype

    @property
    def owner(self) -> str:
        """Who owns the group's kernels (workload.OWNERS): a graph's replayed op is a row of its own."""
        return self.group.owner or "op"

    @property
    def time_a_s(self) -> float | None:
        return self.a.time_s if self.a else None

    @property
    def time_b_s(self) -> float | None:
        return self.b.time_s if self.b else None

    @property
    def calls_a(self) -> int:
        return self.a.calls if self.a else 0

    @property
    def calls_b(self) -> int:
        return self.b.calls if self.b else 0

    @property
    def ratio(self) -> float | None:
        """time B / time A, where both have the group."""
        if self.time_a_s and self.time_b_s is not None:
            return self.time_b_s / self.time_a_s
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "shapes": self.shapes, "dtype": self.dtype, "time_a_s": self.time_a_s,
                "time_b_s": self.time_b_s, "calls_a": self.calls_a,
                "calls_b": self.calls_b, "ratio": self.ratio, "owner": self.owner}


def _key(g: OpGroup) -> tuple[str, str, str, str]:
    return g.op, json.dumps(g.shapes), g.dtype, g.owner or "op"


def diff_groups(a: Sequence[OpGroup], b: Sequence[OpGroup]) -> list[GroupDiff]:
    """Every group of either profile, paired where both have it, the largest time (of the two) first."""
    ia = {_key(g): g for g in a}  # of two groups with one key, the last
    ib = {_key(g): g for g in b}
    out = [GroupDiff(ia.get(k), ib.get(k)) for k in dict.fromkeys([*ia, *ib])]
    out.sort(key=lambda d: -max(d.time_a_s or 0.0, d.time_b_s or 0.0))
    return out


def diff_split(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The step split of both profiles, key by key (span, busy, idle, bound, MFU, bandwidth utilisation)."""
    return {k: (a.get(k), b.get(k)) for k in SPLIT_KEYS}
