"""The memory hierarchy: which samples stand for each cache level, and the physical checks on the result.

Levels, from main memory up (the names of models.paths.LEVELS):
- GPU: `dram` (HBM), `l2` (the shared L2), `l1` (L1/shared, all SMs together).
  l2 from the `l2_read` probe (and torch stream kernels) at working sets
  ≤ L2/2; l1 from the `l1_read` probe.
- CPU: `dram`, `llc` (the last-level cache, L3 on most CPUs), `l2` (the
  private per-core caches below it, all cores together), from the torch
  bandwidth sweep: llc for working sets above the private caches and ≤ LLC/2,
  l2 for working sets ≤ half the private caches.
Checks (a figure that fails one is a defect of its probe, never a ceiling):
- an l1 above SMs × 128 B × the maximum SM clock is above what the L1 can
  deliver: the loads were served from registers;
- a level slower than the level under it (l2 < dram, l1 < l2): its probe did
  not reach the level (launch-bound, or the data was not resident).
Pure: no torch, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from .hardware import Hardware
from .profile import Ceiling
from .sample import DATA_MOVING, Sample
from .units import fmt_bandwidth

L1_BYTES_PER_CLOCK = 128  # per SM per clock: the L1 load limit of NVIDIA SMs (Volta to Hopper)

# From main memory up: each level must be at least as fast as the one before it.
ORDER = {"gpu": ("dram", "l2", "l1"), "cpu": ("dram", "llc", "l2")}


@dataclass(frozen=True)
class Flag:
    """A measured level left out of the ceilings, and why."""

    level: str
    value: float  # bytes/s
    case: str
    why: str

    def text(self) -> str:
        return f"B {self.level} {fmt_bandwidth(self.value)} ({self.case}) left out: {self.why}"

    def to_dict(self) -> dict[str, object]:
        return {"value": self.value, "case": self.case, "why": self.why}


def candidates(samples: Iterable[Sample], hw: Hardware) -> dict[str, list[Sample]]:
    """The measured warm samples that may stand for each cache level of this device."""
    out: dict[str, list[Sample]] = {}
    llc = hw.l2_bytes or 0.0
    for s in samples:
        ws = s.footprint_bytes
        if hw.kind == "gpu":
            if s.family == "l1_read":
                out.setdefault("l1", []).append(s)
            elif (s.family == "l2_read" or s.family in DATA_MOVING) and llc and 0 < ws <= llc / 2:
                out.setdefault("l2", []).append(s)
        elif s.family in DATA_MOVING:
            private = hw.private_cache_bytes or 0.0
            if llc and private < ws <= llc / 2:
                out.setdefault("llc", []).append(s)
            elif private and 0 < ws <= private / 2:
                out.setdefault("l2", []).append(s)
    return out


def l1_limit(hw: Hardware) -> float | None:
    """SMs × 128 B × max SM clock in bytes/s; None when the SM count or the clock is unknown."""
    if hw.kind != "gpu" or not hw.units or not hw.max_clock_hz:
        return None
    return hw.units * L1_BYTES_PER_CLOCK * hw.max_clock_hz


def check(bandwidth: Mapping[str, Ceiling], hw: Hardware) -> tuple[dict[str, Ceiling], list[Flag]]:
    """The levels that pass the physical checks, and a Flag for each one that does not."""
    kept = dict(bandwidth)
    flags: list[Flag] = []
    limit = l1_limit(hw)
    l1 = kept.get("l1")
    if l1 is not None and limit is not None and l1.value > limit:
        flags.append(Flag("l1", l1.value, l1.case, (
            f"above the L1's limit of {hw.units} SMs × {L1_BYTES_PER_CLOCK} B × "
            f"{hw.max_clock_hz / 1e9:.2f} GHz = "  # type: ignore[operator]  # a limit needs the clock
            f"{fmt_bandwidth(limit)}: the probe's loads were kept in registers, not read from the L1"
        )))
        del kept["l1"]
    under: tuple[str, Ceiling] | None = None
    for level in ORDER.get(hw.kind, ()):
        c = kept.get(level)
        if c is None:
            continue
        if under is not None and c.value < under[1].value:
            flags.append(Flag(level, c.value, c.case, (
                f"slower than B {under[0]} ({fmt_bandwidth(under[1].value)}) under it: a cache cannot be slower "
                "than the memory it caches, so its probe did not reach the level (launch-bound, or not resident)"
            )))
            del kept[level]
            continue
        under = (level, c)
    return kept, flags
