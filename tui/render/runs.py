"""The store's runs as text: the list, one run's facts, its samples."""

from __future__ import annotations


from rich.table import Table
from rich.text import Text

from rooftop.models.safetext import safe_text
from rooftop.models.units import (
    fmt_bandwidth,
    fmt_flops_rate,
    fmt_time,
    fmt_when,
)
from rooftop.tui.render.report import Prose


def _when(t: float | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    return fmt_when(t, fmt) if t else ""


def _duration(run) -> str:  # noqa: ANN001 - a rooftop.store.runs.Run
    """How long the run took; empty when unknown (imports carry no end time: it equals the start)."""
    return fmt_time(run.ended_at - run.started_at) if run.ended_at and run.ended_at > run.started_at else ""


def runs_table(runs: list) -> Table:
    """Every run in the store, oldest first, in 80 columns: the host and the year are in `rooftop show`."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("run", "left"), ("name", "left"), ("status", "left"), ("device", "left"),
                      ("source", "left"), ("started", "left"), ("points", "right"), ("roofs", "left")):
        t.add_column(col, justify=just, no_wrap=col not in ("name", "device"), overflow="fold")
    style = {"complete": "green", "running": "cyan", "interrupted": "yellow", "failed": "red", "cancelled": "dim"}
    for r in runs:
        t.add_row(
            safe_text(r.short_id), Prose(safe_text(r.name or ""), hyphens=True),
            Text(safe_text(r.status), style=style.get(r.status, "")), Prose(safe_text(r.device_name)),
            "imported" if r.imported_from else safe_text(f"{r.backend} {r.plan}"),
            _when(r.started_at, "%m-%d %H:%M"), str(r.samples), "yes" if r.has_ceilings else "",
        )
    return t


def run_facts(run) -> Table:  # noqa: ANN001 - a rooftop.store.runs.Run
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


def samples_table(samples: list) -> Table:
    """Sample points, one line each: the kernel, I, median time, what it achieved; unstable and skipped marked.

    W and Q are in `rooftop export` (JSON); here the line has to fit 80 columns.
    """
    from rooftop.models.sample import CACHE_PROBES, DATA_MOVING

    moving = DATA_MOVING + CACHE_PROBES  # their figure is GB/s (the cache probes' one add is no FLOP roof)
    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("#", "right"), ("kernel", "left"), ("I", "right"), ("median", "right"),
                      ("achieved", "right"), ("iqr", "right"), ("note", "left")):
        t.add_column(col, justify=just, no_wrap=col != "note" and col != "kernel")
    for i, s in enumerate(samples):
        kernel = safe_text(f"{s.family} {s.dtype} {s.shape_text}" + (" cold" if s.cache == "cold" else ""))
        if s.family == "profile":  # an op group of a profiled program: named as the profile names it
            from rooftop.tui.render.profile import sample_label

            kernel = safe_text(sample_label(s))
        intensity = f"{s.intensity:.3g}" if s.flops else "—"
        if s.stats is None:
            t.add_row(str(i), kernel, intensity, "", "", "", Text(safe_text(f"skipped: {s.skipped}"), style="yellow"))
            continue
        by_bytes = s.family in moving
        if s.family == "profile":  # as `rooftop profile` gives it: FLOP/s where compute-bound, else B/s
            by_bytes = not (s.flops > 0 and (s.conditions.get("profile") or {}).get("regime") == "compute")
        rate = s.bandwidth if by_bytes else s.flop_rate
        shown = (fmt_bandwidth(rate) if by_bytes else fmt_flops_rate(rate)) if rate else ""
        note = Text("unstable", style="yellow") if not s.stable else Text("")
        t.add_row(str(i), kernel, intensity, fmt_time(s.stats.median_s), shown, f"{s.stats.iqr_ratio:.2f}", note)
    return t
