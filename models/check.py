"""`rooftop check`: a health and regression gate, as a CI job or a node-admission script wants it.

A run's ceilings against a baseline's, each within a tolerance (5% by default): a bandwidth or a
peak may not fall below (1 − tolerance) × the baseline's, the launch floor may not rise above
(1 + tolerance) × it. Across a fleet each member is also held to its model's median row. Every
result names the ceiling and both figures, so the line that fails says what to look at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .fleet import FleetReport, ceiling_order, ceiling_values, fmt_ceiling, higher_is_better
from .profile import DeviceProfile

DEFAULT_TOLERANCE = 0.05


class CheckError(ValueError):
    """Bad input to a check (a tolerance out of range, nothing in common to compare)."""


def tolerance_problem(tolerance: float) -> str | None:
    """Why a tolerance cannot be used, in words; None when it can (0 ≤ t < 1)."""
    if not (0 <= tolerance < 1):
        return f"--tolerance {tolerance:g}: give a fraction from 0 to below 1 (0.05 allows 5% short of the baseline)"
    return None


@dataclass(frozen=True)
class Result:
    """One ceiling of one subject against one reference."""

    subject: str  # the run, or a fleet member ("rank 1 (node7 cuda:1)")
    ceiling: str  # "B dram", "F bf16-tc", "launch"
    value: float
    reference: float
    against: str  # "baseline h100" or "fleet median"
    tolerance: float

    @property
    def ratio(self) -> float:
        return self.value / self.reference if self.reference else float("inf")

    @property
    def holds(self) -> bool:
        if higher_is_better(self.ceiling):
            return self.value >= (1 - self.tolerance) * self.reference
        return self.value <= (1 + self.tolerance) * self.reference

    def text(self) -> str:
        verdict = "holds" if self.holds else "SHORT"
        return (f"{self.subject}: {self.ceiling} {fmt_ceiling(self.ceiling, self.value)} vs "
                f"{fmt_ceiling(self.ceiling, self.reference)} ({self.against}, {self.ratio:.2f}×): {verdict}")

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "ceiling": self.ceiling, "value": self.value, "reference": self.reference,
                "against": self.against, "ratio": self.ratio, "tolerance": self.tolerance, "holds": self.holds,
                "text": self.text()}


def compare(subject: str, values: Mapping[str, float], reference: Mapping[str, float], against: str,
            tolerance: float) -> list[Result]:
    """Every ceiling the two have in common, in report order."""
    return [Result(subject, c, values[c], reference[c], against, tolerance)
            for c in ceiling_order(values) if c in reference and reference[c] > 0]


def check_profile(subject: str, profile: DeviceProfile, baseline: DeviceProfile,
                  tolerance: float = DEFAULT_TOLERANCE) -> list[Result]:
    return compare(subject, ceiling_values(profile), ceiling_values(baseline), f"baseline {baseline.id}", tolerance)


def check_fleet(fleet: FleetReport, baseline: DeviceProfile | None,
                tolerance: float = DEFAULT_TOLERANCE) -> list[Result]:
    """Each member against the baseline (where given) and against its model's median row."""
    out = []
    for m in fleet.members:
        if m.profile is None:
            continue
        mine = ceiling_values(m.profile)
        if baseline is not None:
            out += compare(m.label, mine, ceiling_values(baseline), f"baseline {baseline.id}", tolerance)
        group = fleet.group_of(m)
        peers = sum(1 for p in group.members if p.profile is not None) if group else 0
        if group is not None and peers > 1:
            out += compare(m.label, mine, group.median, "fleet median", tolerance)
    return out


@dataclass(frozen=True)
class Verdict:
    results: tuple[Result, ...]
    notes: tuple[str, ...] = ()

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if not r.holds]

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "results": [r.to_dict() for r in self.results],
                "failures": [r.to_dict() for r in self.failures], "notes": list(self.notes)}


def verdict(results: Sequence[Result], notes: Sequence[str] = ()) -> Verdict:
    """The gate's answer; CheckError when there was nothing in common to compare (that is bad input, not a pass)."""
    if not results:
        raise CheckError("the run and its baseline have no ceiling in common to compare; measure the same "
                         "kinds of ceiling (e.g. the same --only) or choose another baseline")
    return Verdict(tuple(results), tuple(notes))


def missing_ceilings(profile: DeviceProfile, baseline: DeviceProfile) -> list[str]:
    """The baseline's ceilings the run did not measure: told, not failed (a run of `--only launch` is no regression)."""
    have = ceiling_values(profile)
    return [c for c in ceiling_order(ceiling_values(baseline)) if c not in have]
