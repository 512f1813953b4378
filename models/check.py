"""`rooftop check`: a health and regression gate, as a CI job or a node-admission script wants it.

A run's ceilings against a baseline's, each within a tolerance (5% by default): a bandwidth or a
peak may not fall below (1 − tolerance) × the baseline's, the launch floor may not rise above
(1 + tolerance) × it. Across a fleet each member is also held to its peers' median by the fleet's
straggler rule (models.fleet.peer_comparisons: the same rule, and threshold, as the fleet report's),
and a member that gave no result fails the gate by name. Every result names the ceiling and both
figures, so the line that fails says what to look at; what was not compared is said, never skipped
silently (a ceiling one side lacks, a baseline of another device model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .devicefamily import same_model
from .errors import BadInput
from .fleet import (FleetReport, ceiling_order, ceiling_values, fmt_ceiling, higher_is_better, peer_comparisons,
                    peer_rule, short_of)
from .profile import DeviceProfile

DEFAULT_TOLERANCE = 0.05


class CheckError(BadInput, ValueError):
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
    against: str  # "baseline h100" or "peers' median"
    tolerance: float
    peer_ratio: float | None = None  # against the peers' median: the straggler rule's ratio (not the tolerance)

    @property
    def ratio(self) -> float:
        return self.value / self.reference if self.reference else float("inf")

    @property
    def holds(self) -> bool:
        if self.peer_ratio is not None:
            return not short_of(self.ceiling, self.value, self.reference, self.peer_ratio)
        if higher_is_better(self.ceiling):
            return self.value >= (1 - self.tolerance) * self.reference
        return self.value <= (1 + self.tolerance) * self.reference

    @property
    def rule(self) -> str:
        if self.peer_ratio is not None:
            return f"the straggler rule: {peer_rule(self.peer_ratio)}"
        return f"within {self.tolerance * 100:g}% of the baseline"

    def text(self) -> str:
        verdict = "holds" if self.holds else "SHORT"
        return (f"{self.subject}: {self.ceiling} {fmt_ceiling(self.ceiling, self.value)} vs "
                f"{fmt_ceiling(self.ceiling, self.reference)} ({self.against}, {self.ratio:.2f}×): {verdict}")

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "ceiling": self.ceiling, "value": self.value, "reference": self.reference,
                "against": self.against, "ratio": self.ratio, "tolerance": self.tolerance, "holds": self.holds,
                "rule": self.rule, "text": self.text()}


def compare(subject: str, values: Mapping[str, float], reference: Mapping[str, float], against: str,
            tolerance: float) -> list[Result]:
    """Every ceiling the two have in common, in report order (`unchecked` says which are not)."""
    return [Result(subject, c, values[c], reference[c], against, tolerance)
            for c in ceiling_order(values) if reference.get(c, 0) > 0]


def check_profile(subject: str, profile: DeviceProfile, baseline: DeviceProfile,
                  tolerance: float = DEFAULT_TOLERANCE) -> list[Result]:
    return compare(subject, ceiling_values(profile), ceiling_values(baseline), f"baseline {baseline.id}", tolerance)


def check_fleet(fleet: FleetReport, baseline: DeviceProfile | None,
                tolerance: float = DEFAULT_TOLERANCE) -> list[Result]:
    """Each member against the baseline (where given, within the tolerance) and, by the fleet's straggler
    rule, against its peers' median (`peer_comparisons`, as the fleet report flags stragglers)."""
    peers: dict[int, list[Result]] = {}
    for g in fleet.groups:
        for c in peer_comparisons(g.members, fleet.ratio):
            peers.setdefault(id(c.member), []).append(Result(c.member.label, c.ceiling, c.value, c.peers_median,
                                                             "peers' median", tolerance, c.ratio))
    out = []
    for m in fleet.members:
        if m.profile is None:
            continue
        if baseline is not None:
            out += compare(m.label, ceiling_values(m.profile), ceiling_values(baseline), f"baseline {baseline.id}",
                           tolerance)
        out += peers.get(id(m), [])
    return out


def fleet_notes(fleet: FleetReport, baseline: DeviceProfile | None) -> tuple[list[str], list[str]]:
    """What a fleet's check must say besides its results: (the members that gave no result, each a failure
    by name; notes: the rule the peers' median is held to, members not compared, baseline mismatches)."""
    lost = [f"{m.label}: no result ({m.error or m.status}): the gate fails on it" for m in fleet.members
            if m.profile is None]
    notes = []
    if any(len([m for m in g.members if m.comparable]) > 1 for g in fleet.groups):
        notes.append(f"each member is held to {peer_rule(fleet.ratio)} (the fleet report's straggler rule)"
                     + ("; the tolerance applies to the baseline" if baseline is not None else ""))
    for m in fleet.members:
        if m.profile is not None and not m.comparable:
            notes.append(f"{m.label} is {m.status}: only what it measured is checked"
                         + (" against the baseline" if baseline is not None else "")
                         + ", not against its peers")
    if baseline is not None:
        notes += model_notes([g.model for g in fleet.groups if any(m.profile is not None for m in g.members)],
                             baseline)
        told: dict[str, list[str]] = {}  # each line once, with the members it is true of
        measured = [m for m in fleet.members if m.profile is not None]
        for m in measured:
            for line in unchecked(m.profile, baseline):  # type: ignore[arg-type]
                told.setdefault(line, []).append(f"rank {m.rank}")
        notes += [f"{'every member' if len(who) == len(measured) else ', '.join(who)}: {line}"
                  for line, who in told.items()]
    return lost, notes


def model_notes(models: Sequence[str], baseline: DeviceProfile) -> list[str]:
    """A line for each device model that is not the baseline's: still compared (is this device at least as fast
    as that one?), but a shortfall may be the model's, not a fault."""
    return [f"the baseline {baseline.id} is {baseline.name}, this is {m}: another device model; compared as asked, "
            "so a shortfall may be the model's, not a fault" for m in models if m and not same_model(m, baseline.name)]


def unchecked(profile: DeviceProfile, baseline: DeviceProfile) -> list[str]:
    """What was not compared, in words: the run's ceilings the baseline lacks, and the baseline's it did not
    measure (told, not failed: a run of `--only launch` is no regression)."""
    mine, theirs = ceiling_values(profile), {k: v for k, v in ceiling_values(baseline).items() if v > 0}
    out = []
    if absent := [c for c in ceiling_order(mine) if c not in theirs]:
        out.append(f"not in the baseline {baseline.id}, so not checked: {', '.join(absent)}")
    if missing := missing_ceilings(profile, baseline):
        out.append(f"not measured in this run, so not checked: {', '.join(missing)}")
    return out


@dataclass(frozen=True)
class Verdict:
    results: tuple[Result, ...]
    notes: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()  # a fleet's members that gave no result, one line each: each fails the gate

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if not r.holds]

    @property
    def ok(self) -> bool:
        return not self.failures and not self.lost

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "results": [r.to_dict() for r in self.results],
                "failures": [r.to_dict() for r in self.failures], "lost": list(self.lost), "notes": list(self.notes)}


def verdict(results: Sequence[Result], notes: Sequence[str] = (), lost: Sequence[str] = (),
            nothing: str = "") -> Verdict:
    """The gate's answer; CheckError when there was nothing to compare and nobody lost (that is bad input, not
    a pass), worded by `nothing` when the caller knows why."""
    if not results and not lost:
        raise CheckError(nothing or "the run and its baseline have no ceiling in common to compare; measure the "
                         "same kinds of ceiling (e.g. the same --only) or choose another baseline")
    return Verdict(tuple(results), tuple(notes), tuple(lost))


def missing_ceilings(profile: DeviceProfile, baseline: DeviceProfile) -> list[str]:
    """The baseline's ceilings the run did not measure: told, not failed (a run of `--only launch` is no regression)."""
    have = ceiling_values(profile)
    return [c for c in ceiling_order(ceiling_values(baseline)) if c not in have]
