"""CPU thread counts: a CPU's ceilings scale with the threads torch measured with.

The app measures with one core left to the UI, `rooftop measure` by the load it finds, so two
runs of one machine can have measured different things; the app says which, wherever it shows
a CPU run or compares two. A CPU profile keeps its thread count in `sm_count` (probes: the
backend's `units`).
"""

from __future__ import annotations

from rooftop.models.profile import DeviceProfile
from rooftop.models.units import fmt_count


def cpu_threads(profile: DeviceProfile) -> int | None:
    """The threads a measured CPU profile was taken with; None for a GPU or when not recorded."""
    if profile.kind != "cpu" or profile.source not in ("measured", "imported"):
        return None
    return profile.sm_count if isinstance(profile.sm_count, int) and profile.sm_count > 0 else None


def threads_note(a: DeviceProfile, b: DeviceProfile) -> str:
    """One line when two CPU profiles were measured with different thread counts, else ''."""
    ta, tb = cpu_threads(a), cpu_threads(b)
    if ta is None or tb is None or ta == tb:
        return ""
    return (f"{a.id} was measured with {fmt_count(ta, 'thread')}, {b.id} with {fmt_count(tb, 'thread')}: "
            "a CPU's ceilings scale with its threads, so these are not like for like")
