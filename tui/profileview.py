"""A stored profile run in the app: its step split and heaviest ops as text, and the roofs it was placed on.

The History tab shows a run of plan "profile" with these instead of ceilings
(a profile has none): the numbers come from the run as stored, nothing is
recomputed here.
"""

from __future__ import annotations

from typing import Any, Sequence

from rich.text import Text

from rooftop.models.catalog import UnknownDevice, lookup_device
from rooftop.models.profile import DeviceProfile
from rooftop.models.units import fmt_time
from rooftop.store.runs import Run
from rooftop.tui.profile_cmd import clean

TOP_OPS = 5


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "n/a"


def profile_device(run: Run, extra: dict[str, DeviceProfile] | None = None) -> DeviceProfile | None:
    """The device whose roofs the profile was placed on, when the catalog (or `extra`) still has it."""
    dev = (run.device.get("profile") or {}).get("device")
    if not dev:
        return None
    try:
        return lookup_device(str(dev), extra)
    except UnknownDevice:
        return None


def profile_detail(run: Run, samples: Sequence[Any]) -> Text:
    """The step split, MFU and the heaviest op groups of a stored profile."""
    s = run.device.get("profile") or {}
    span, busy, idle = s.get("span_s") or 0.0, s.get("device_busy_s") or 0.0, s.get("idle_s") or 0.0
    what = "kernels" if s.get("on_device") else "ops"
    text = Text()
    text.append(f"profile on the roofs of {s.get('device', '?')}: span {fmt_time(span)}, {what} busy "
                f"{fmt_time(busy)}, idle {fmt_time(idle)} ({_pct(idle / span if span else None)})\n")
    mfu = s.get("mfu")
    low = " (above 100%: the roof is low)" if isinstance(mfu, (int, float)) and mfu > 1 else ""
    text.append(f"MFU {_pct(mfu)}{low} · bandwidth {_pct(s.get('bandwidth_utilisation'))}; largest share: "
                f"{'idle time' if s.get('largest_share') == 'idle' else clean(str(s.get('largest_share', '?')))}\n")
    groups = [x.conditions.get("profile", {}) for x in samples]
    groups = sorted((g for g in groups if g), key=lambda g: -(g.get("time_s") or 0.0))
    for g in groups[:TOP_OPS]:
        roof = g.get("fraction_of_roof")
        text.append(f"  {clean(str(g.get('op', '?')))} {clean(str(g.get('dtype', '')))} ×{g.get('calls', 0)}: {fmt_time(g.get('time_s') or 0)}"
                    f" ({_pct((g.get('time_s') or 0) / span if span else None)}), {g.get('regime', '')}"
                    + (f", {_pct(roof)} of roof" if isinstance(roof, (int, float)) else "") + "\n")
    text.append("W and Q estimated from shapes; times measured\n", style="dim")
    return text


def sample_label(sample: Any) -> str:
    """A stored op group as `rooftop profile` lists it (op dtype shapes), for `rooftop show`."""
    from rooftop.models.workload import OpGroup
    from rooftop.tui.profile_cmd import op_label

    g = sample.conditions.get("profile") or {}
    return op_label(OpGroup(op=str(g.get("op", "?")), shapes=list(g.get("shapes") or []),
                            dtype=str(g.get("dtype", "")), model="", path="", counting=""))


def latest_profile_points(db_path: Any, device_id: str) -> list:
    """The op groups of the newest kept profile placed on `device_id`, as points for its roofline ([] if none)."""
    import sqlite3

    from rooftop.models.plotdata import sample_series
    from rooftop.store.db import StoreError
    from rooftop.store.runs import Store

    try:
        store = Store.open_existing(db_path)
        if store is None:
            return []
        with store:
            runs = [r for r in store.runs() if r.plan == "profile" and r.status == "complete"
                    and (r.device.get("profile") or {}).get("device") == device_id]
            if not runs:
                return []
            run = max(runs, key=lambda r: r.started_at)
            return sample_series(store.samples(run.id), run.label)
    except (StoreError, sqlite3.DatabaseError, OSError):
        return []
