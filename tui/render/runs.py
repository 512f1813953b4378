"""The store's runs as text: the list, one run's facts, its samples."""

from __future__ import annotations

from typing import Mapping

from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from rooftop.models.safetext import safe_text
from rooftop.models.sample import CACHE_PROBES, DATA_MOVING
from rooftop.models.units import (
    fmt_bandwidth,
    fmt_flops_rate,
    fmt_time,
    fmt_when,
)
from rooftop.store.runs import Run
from rooftop.tui.render.layout import NBSP, Prose
from rooftop.tui.render.profile import sample_label


def _when(t: float | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    return fmt_when(t, fmt) if t else ""


def _duration(run: Run) -> str:
    """How long the run took; empty when unknown (imports carry no end time: it equals the start)."""
    return fmt_time(run.ended_at - run.started_at) if run.ended_at and run.ended_at > run.started_at else ""


def runs_table(runs: list) -> Table:
    """Every run in the store, oldest first, in 80 columns: the host and the year are in `rooftop show`."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    cols: tuple[tuple[str, JustifyMethod], ...] = (
        ("run", "left"), ("name", "left"), ("status", "left"), ("device", "left"), ("source", "left"),
        ("started", "left"), ("points", "right"), ("roofs", "left"))
    for col, just in cols:
        t.add_column(col, justify=just, no_wrap=col not in ("name", "device"), overflow="fold")
    style = {"complete": "green", "running": "cyan", "interrupted": "yellow", "failed": "red", "cancelled": "dim"}
    by_id = {r.id: r for r in runs}
    members = fleet_members(runs)  # member id → (fleet id, rank): listed under their fleet run
    for r in runs:
        if members.get(r.id, ("",))[0] in by_id:
            continue
        rows = [(r, r.name or "")] + [(by_id[m], by_id[m].name or f"rank{NBSP}{rank}") for m, (f, rank) in members.items()
                                      if f == r.id and m in by_id]
        for run, name in rows:
            t.add_row(
                safe_text(run.short_id), Prose(safe_text(name), hyphens=True),
                Text(safe_text(run.status), style=style.get(run.status, "")), Prose(safe_text(run.device_name)),
                "imported" if run.imported_from else safe_text(f"{run.backend} {run.plan}"),
                _when(run.started_at, "%m-%d %H:%M"), str(run.samples), "yes" if run.has_ceilings else "",
            )
    return t


def fleet_members(runs: list) -> dict[str, tuple[str, int]]:
    """The members of the fleet runs among `runs`: member run id → (fleet run id, rank)."""
    out: dict[str, tuple[str, int]] = {}
    for r in runs:
        fleet = r.device.get("fleet") if r.plan == "fleet" and isinstance(r.device, dict) else None
        for m in (fleet or {}).get("members") or []:
            if isinstance(m, dict) and isinstance(m.get("run_id"), str):
                out[m["run_id"]] = (r.id, int(m.get("rank") or 0))
    return out


def run_facts(run: Run) -> Table:
    """The run's header: who, where, with what, when, how it ended."""
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    rows = [("run", f"{run.id}" + (f"  ({run.name})" if run.name else "")), ("status", run.status),
            ("device", f"{run.device_name}  [{run.device_key}]"), ("host", run.host or ""),
            ("backend / plan", f"{run.backend} / {run.plan}"),
            ("versions", ", ".join(f"{k} {v}" for k, v in sorted(run.versions.items(), key=str))),
            ("started", _when(run.started_at) + (f", took {_duration(run)}" if _duration(run) else ""))]
    rows += [("imported from", run.imported_from)] if run.imported_from else []
    for label, value in [*rows, ("samples", str(run.samples))]:
        t.add_row(label, safe_text(value))
    return t


def sample_groups_table(groups: list) -> Table:
    """A run's samples counted per kernel family and dtype (store.Store.sample_groups), skipped and unstable
    among them: the whole run at a glance when its table is paged."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    cols: tuple[tuple[str, JustifyMethod], ...] = (("kernel", "left"), ("samples", "right"), ("skipped", "right"),
                                                   ("unstable", "right"))
    for col, just in cols:
        t.add_column(col, justify=just, no_wrap=col != "kernel")
    for g in groups:
        t.add_row(safe_text(f"{g.family} {g.dtype}".strip()), f"{g.count:,}", f"{g.skipped:,}" if g.skipped else "",
                  f"{g.unstable:,}" if g.unstable else "")
    return t


def samples_table(samples: list, start: int = 0) -> Table:
    """Sample points, one line each: the kernel, I, median time, what it achieved; unstable and skipped marked.

    W and Q are in `rooftop export` (JSON); here the line has to fit 80 columns. `start` numbers the first
    row (a page of a longer run).
    """
    moving = DATA_MOVING + CACHE_PROBES  # their figure is GB/s (the cache probes' one add is no FLOP roof)
    t = Table(header_style="bold", box=None, pad_edge=False)
    cols: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"), ("kernel", "left"), ("I", "right"), ("median", "right"), ("achieved", "right"),
        ("iqr", "right"), ("note", "left"))
    for col, just in cols:
        t.add_column(col, justify=just, no_wrap=col != "note" and col != "kernel")
    for i, s in enumerate(samples, start=start):
        kernel = safe_text(f"{s.family} {s.dtype} {s.shape_text}" + (" cold" if s.cache == "cold" else ""))
        if s.family == "profile":  # an op group of a profiled program: named as the profile names it
            kernel = safe_text(sample_label(s))
        intensity = f"{s.intensity:.3g}" if s.flops else "—"
        if s.stats is None:
            t.add_row(str(i), kernel, intensity, "", "", "", Text(safe_text(f"skipped: {s.skipped}"), style="yellow"))
            continue
        by_bytes = s.family in moving
        if s.family == "profile":  # as `rooftop profile` gives it: FLOP/s where compute-bound, else B/s
            group = s.conditions.get("profile")
            by_bytes = not (s.flops > 0 and isinstance(group, Mapping) and group.get("regime") == "compute")
        rate = s.bandwidth if by_bytes else s.flop_rate
        shown = (fmt_bandwidth(rate) if by_bytes else fmt_flops_rate(rate)) if rate else ""
        note = Text("unstable", style="yellow") if not s.stable else Text("")
        t.add_row(str(i), kernel, intensity, fmt_time(s.stats.median_s), shown, f"{s.stats.iqr_ratio:.2f}", note)
    return t
