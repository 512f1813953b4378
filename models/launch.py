"""A launch figure for every built-in device: its own measurement, else its family's, else the reference's.

Eager launch overhead is mostly the host's work (the framework's dispatch and the driver's submit), so a
device that was never timed takes its architecture family's measured figure (an H200 takes the H100's)
and, where its family has none, the one reference measurement; either way the ceiling is `typical` and
its case names whose figure it is. Without this the same model's T would swing with whether a launch
happened to be measured (×6 between an H100 and an H200 on a bandwidth ratio of 1.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from .profile import Ceiling, DeviceProfile


def borrowed_launch(profile: DeviceProfile, profiles: Mapping[str, DeviceProfile],
                    families: Mapping[str, str]) -> Ceiling | None:
    """The launch figure `profile` borrows (None when it has its own, or nobody has one)."""
    if profile.launch_overhead is not None:
        return None
    timed = [p for p in profiles.values() if p.launch_overhead is not None and p.launch_overhead.source != "typical"]
    if not timed:
        return None
    family = families.get(profile.id)
    same = [p for p in timed if family and families.get(p.id) == family]
    donor = (same or timed)[0]
    lo = donor.launch_overhead
    assert lo is not None
    whose = (f"{donor.id}'s measured launch overhead ({family}, the same family)" if same
             else f"{donor.id}'s measured launch overhead (the only one; {family or 'this device'} has none)")
    return Ceiling(lo.value, "typical", f"{whose}: not measured on {profile.id}")


def with_launch_figures(profiles: Mapping[str, DeviceProfile], families: Mapping[str, str]) -> dict[str, DeviceProfile]:
    """Every profile with a launch figure: its own, or the one `borrowed_launch` gives it."""
    out = {}
    for pid, p in profiles.items():
        lo = borrowed_launch(p, profiles, families)
        out[pid] = replace(p, launch_overhead=lo) if lo is not None else p
    return out
