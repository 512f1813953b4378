"""A collectives sweep as text: per collective its sizes, times, algbw and busbw, and the α-β fit."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Group
from rich.padding import Padding
from rich.table import Table

from rooftop.models.comm import comm_points, fit_points
from rooftop.models.units import fmt_bandwidth, fmt_bytes, fmt_time
from rooftop.tui.render.layout import hanging
from rooftop.tui.render.text import printable


def comm_json(points: Any, fits: Any) -> dict[str, Any]:
    """The points and α-β fits as `rooftop comm --json` gives them (and `rooftop show --json` for a comm run)."""
    return {"points": [p.to_dict() for p in points], "fits": {k: (v.to_dict() if v else None) for k, v in fits.items()}}


def fit_note(fit: Any, bus: float) -> str:
    """One collective's α-β fit and S* in words, or why there is none."""
    if fit is None:
        return "fewer than two sizes measured"
    if not math.isfinite(fit.beta):
        return f"α = {fmt_time(fit.alpha_s)}; the time did not grow with size (β unbounded)"
    return (f"α = {fmt_time(fit.alpha_s)}, β = {fmt_bandwidth(fit.beta)} (bus {fmt_bandwidth(fit.beta * bus)}), "
            f"S* = α·β = {fmt_bytes(fit.crossover_bytes)}: latency-bound below, bandwidth-bound above "
            f"(fit error {fit.rel_rms:.0%} rms)")


def comm_report(points: Any, fits: Any, backend: str) -> Any:
    """Per collective: size, time, p10–p90, algbw, busbw, then its α-β fit as a note that wraps under itself."""
    parts: list[Any] = []
    for coll, fit in fits.items():
        rows = [p for p in points if p.collective == coll]
        bus = rows[0].to_dict()["bus_factor"]
        t = Table(title=f"{printable(coll, 40)} ({printable(backend, 16)}, {rows[0].world} ranks; busbw = algbw × {bus:.3g})",
                  title_justify="left")
        for h in ("size", "time", "p10–p90", "algbw", "busbw"):
            t.add_column(h, justify="right")
        for p in rows:
            if p.time_s is None:
                t.add_row(fmt_bytes(p.size_bytes), "skipped", printable(p.skipped, 40), "", "")
                continue
            t.add_row(fmt_bytes(p.size_bytes), fmt_time(p.time_s), f"{fmt_time(p.p10_s)}–{fmt_time(p.p90_s)}",
                      fmt_bandwidth(p.algbw), fmt_bandwidth(p.busbw))
        parts += [t, Padding(hanging([("α-β fit:", fit_note(fit, bus))]), (0, 0, 1, 2))]
    return Group(*parts)


def fit_lines(samples: Any) -> list[str]:
    """One line per collective of a comm run: its α-β fit and S*, or why there is none (the History tab's)."""
    points = comm_points(samples)
    out = []
    for coll, fit in fit_points(points).items():
        world = next(p.world for p in points if p.collective == coll)
        if fit is None:
            out.append(f"{coll} ×{world}: fewer than two sizes measured, no α-β fit")
        elif not math.isfinite(fit.beta):
            out.append(f"{coll} ×{world}: α = {fmt_time(fit.alpha_s)}, β unbounded (time did not grow with size)")
        else:
            out.append(f"{coll} ×{world}: α = {fmt_time(fit.alpha_s)}, β = {fmt_bandwidth(fit.beta)}, "
                       f"S* = {fmt_bytes(fit.crossover_bytes)}")
    return out
