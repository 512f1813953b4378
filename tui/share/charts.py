"""The charts a command shares, built from what it already has: devices and their series, a measurement.

The title names what is drawn; the line under it names each device, where its roofs came from (measured,
reference, datasheet, imported) and when, so a chart pasted into a document still says what it shows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from rooftop.models.plotdata import (
    PLOT_PATHS, Series, bandwidth_curves, fma_curves, gemm_curves, intensity_span, link_slopes, roof_series,
)
from rooftop.models.profile import DeviceProfile
from rooftop.models.safetext import clean
from rooftop.models.units import fmt_when
from rooftop.tui.render.measure_report import point_series
from rooftop.tui.share.figure import Chart


def roofs_subtitle(devices: Sequence[DeviceProfile], dates: Mapping[str, float] | None = None,
                   now: float | None = None) -> str:
    """"local = NVIDIA H200, measured 2026-11-30 · h100 = NVIDIA H100 SXM, reference · drawn 2026-12-02":
    each device, its roofs' source and (for a stored run) the day it was measured; then the day drawn."""
    dates = dates or {}
    parts = []
    for d in devices:
        when = dates.get(d.id)
        name = f"{d.id} = {d.name}" if d.name and d.name != d.id else d.id
        parts.append(clean(f"{name}, {d.source}" + (f" {fmt_when(when, '%Y-%m-%d')}" if when else "")))
    return " · ".join([*parts, f"drawn {fmt_when(time.time() if now is None else now, '%Y-%m-%d')}"])


def roofline_chart(devices: Sequence[DeviceProfile], series: list[Series], title: str,
                   dates: Mapping[str, float] | None = None) -> Chart:
    """The roofline of `devices` (roofs, slopes, points as the command drew them) with its device line."""
    return Chart("roofline", series, title, roofs_subtitle(devices, dates))


def profile_chart(device: DeviceProfile, points: list[Series], links: Mapping[str, float], title: str,
                  when: float | None = None) -> Chart:
    """A kept profile's roofline: the device's usual roofs, a slope per level and per link its job crossed,
    and its op groups (and collectives) as points."""
    span = intensity_span([device], [x for s in points for x in s.xs])
    paths = [p for p in PLOT_PATHS if p in device.peak] or device.paths()[:1]
    series = roof_series(device, paths, device.levels(), span) + link_slopes(device, links, span, paths) + points
    return Chart("roofline", series, title, roofs_subtitle([device], {device.id: when} if when else None))


def measure_charts(cal: Any, samples: list[Any], when: float | None = None) -> list[Chart]:
    """A measurement's charts (models.calibrate Calibration and its samples): the measured roofline with the
    GEMM and FMA points first (what .svg and .png write), then the bandwidth, GEMM and FMA curves it has."""
    prof = cal.profile
    line = roofs_subtitle([prof], {prof.id: when} if when else None)
    charts = []
    if prof.peak and prof.bandwidth:
        points = point_series(samples)
        span = intensity_span([prof], [x for s in points for x in s.xs], lo=0.01)
        charts.append(Chart("roofline", roof_series(prof, prof.paths(), prof.levels(), span) + points,
                            f"measured roofline: {prof.name}", line))
    for kind, curves, what in (("bandwidth", bandwidth_curves(samples), "bandwidth against working set"),
                               ("gemm", gemm_curves(samples), "GEMM throughput against size"),
                               ("fma", fma_curves(samples), "FMA sweep: throughput against R")):
        if curves:
            charts.append(Chart(kind, curves, f"{what}: {prof.name}", line))
    return charts
