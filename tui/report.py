"""Text reports for the command line: analyses and the device catalog (rich)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from rooftop.models.analysis import Analysis
from rooftop.models.paths import PATHS
from rooftop.models.profile import SOURCES, DeviceProfile
from rooftop.models.units import (
    fmt_bandwidth,
    fmt_bytes,
    fmt_flops,
    fmt_flops_rate,
    fmt_intensity,
    fmt_time,
)

SOURCE_TAG = {"measured": "measured", "reference": "ref", "datasheet": "datasheet", "imported": "imported", "typical": "typical"}


def device_heading(p: DeviceProfile) -> str:
    return f"{p.id} ({SOURCE_TAG.get(p.source, p.source)})"


def analysis_table(rows: list[Analysis]) -> Group:
    """One op on one or more devices, the devices side by side."""
    first = rows[0]
    head = Text.assemble(
        (first.op.describe(), "bold"),
        f"   W {fmt_flops(first.flops)}   Q {fmt_bytes(first.bytes)}   I {fmt_intensity(first.intensity)}",
    )
    terms = ", ".join(f"{name} {fmt_bytes(v)}" for name, v in first.cost.terms)
    how = Text(f"{first.cost.counting}  [{terms}]", style="dim")
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("")
    for a in rows:
        t.add_column(device_heading(a.device), justify="right")

    def row(label: str, fn) -> None:  # noqa: ANN001 - a small local formatter
        t.add_row(label, *[fn(a) for a in rows])

    row("path", lambda a: a.path)
    row("F", lambda a: f"{fmt_flops_rate(a.peak)} ({SOURCE_TAG.get(a.device.peak[a.path].source, '')})")
    row(f"B ({first.level})", lambda a: f"{fmt_bandwidth(a.bandwidth)} ({SOURCE_TAG.get(a.device.bandwidth[a.level].source, '')})")
    row("ridge I*", lambda a: fmt_intensity(a.ridge))
    row("regime", lambda a: f"{a.regime}-bound")
    row("T ≥", lambda a: fmt_time(a.time_lower_bound))
    row("  Q/B, W/F", lambda a: f"{fmt_time(a.time_memory)}, {fmt_time(a.time_compute)}")
    row("P", lambda a: f"{fmt_flops_rate(a.attainable)} ({100 * a.attainable / a.peak:.3g}% of F)")
    if any(a.measured for a in rows):
        row("measured t", lambda a: fmt_time(a.measured.time_s) if a.measured else "")
        row("  achieved", lambda a: f"{fmt_flops_rate(a.measured.achieved_flops)}, {fmt_bandwidth(a.measured.achieved_bandwidth)}" if a.measured else "")
        row("  of roof", lambda a: f"{100 * a.measured.fraction_of_roof:.1f}%" if a.measured else "")
    notes = Table.grid(padding=(0, 1))  # a hanging indent: marker column, then the wrapped text
    notes.add_column(no_wrap=True)
    notes.add_column()
    for a in rows:
        prefix = f"{a.device.id}: " if len(rows) > 1 else ""
        for line in a.advice:
            notes.add_row(" →", Text(prefix + line))
        for line in a.warnings:
            notes.add_row(Text(" !", style="yellow"), Text(prefix + line, style="yellow"))
    return Group(head, how, t, notes)


def devices_table(profiles: list[DeviceProfile]) -> Table:
    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("id", "left"), ("name", "left"), ("source", "left"), ("B dram", "right"),
                      ("bf16/fp16 TC", "right"), ("fp32 FMA", "right"), ("fp64", "right"), ("I* bf16", "right")):
        t.add_column(col, justify=just)
    for p in profiles:
        half = next((k for k in ("bf16-tc", "fp16-tc") if k in p.peak), None)
        fp64 = next((k for k in ("fp64-tc", "fp64-fma") if k in p.peak), None)
        t.add_row(
            p.id,
            p.name,
            p.source,
            fmt_bandwidth(p.B("dram")) if "dram" in p.bandwidth else "",
            fmt_flops_rate(p.F(half)) if half else "",
            fmt_flops_rate(p.F("fp32-fma")) if "fp32-fma" in p.peak else "",
            fmt_flops_rate(p.F(fp64)) if fp64 else "",
            f"{p.ridge(half):.3g}" if half and "dram" in p.bandwidth else "",
        )
    return t


def profile_detail(p: DeviceProfile) -> Group:
    """Every roof and slope of one device with its provenance."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    for col in ("roof", "value", "ridge (dram)", "source", "case"):
        t.add_column(col)
    for level in p.levels():
        c = p.bandwidth[level]
        t.add_row(f"B {level}", fmt_bandwidth(c.value), "", c.source, c.case)
    for path in p.paths():
        c = p.peak[path]
        ridge = fmt_intensity(p.ridge(path)) if "dram" in p.bandwidth else ""
        t.add_row(f"F {path}", fmt_flops_rate(c.value), ridge, c.source, c.case)
    facts = [f"{p.name} — {SOURCES.get(p.source, p.source)}"]
    if p.memory_bytes:
        facts.append(f"memory {fmt_bytes(p.memory_bytes)}")
    if p.l2_bytes:
        facts.append(f"L2 {fmt_bytes(p.l2_bytes)}")
    if p.sm_count:
        facts.append(f"{p.sm_count} SMs/CUs")
    if p.power_limit_w:
        facts.append(f"{p.power_limit_w:g} W")
    return Group(Text(p.id, style="bold"), Text(", ".join(facts)), t)


def path_legend() -> str:
    return "; ".join(f"{k}: {v.label}" for k, v in PATHS.items())


def make_console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


# -- the store: runs, samples, comparisons -------------------------------------------


def _when(t: float | None) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else ""


def _duration(run) -> str:  # noqa: ANN001 - a rooftop.store.runs.Run
    return fmt_time(run.ended_at - run.started_at) if run.ended_at and run.ended_at >= run.started_at else ""


def runs_table(runs: list) -> Table:
    """Every run in the store, oldest first."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    t.add_column("run", no_wrap=True)
    t.add_column("name", no_wrap=True)
    for col, just in (("status", "left"), ("device", "left"), ("host", "left"), ("backend/plan", "left"),
                      ("started", "left"), ("samples", "right"), ("profile", "left")):
        t.add_column(col, justify=just)
    style = {"complete": "green", "running": "cyan", "interrupted": "yellow", "failed": "red", "cancelled": "dim"}
    for r in runs:
        t.add_row(
            r.short_id, r.name or "", Text(r.status, style=style.get(r.status, "")), r.device_name,
            "imported" if r.imported_from else r.host, f"{r.backend}/{r.plan}",
            _when(r.started_at), str(r.samples), "yes" if r.has_ceilings else "",
        )
    return t


def run_facts(run) -> Table:  # noqa: ANN001 - a rooftop.store.runs.Run
    """The run's header: who, where, with what, when, how it ended."""
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    t.add_row("run", f"{run.id}" + (f"  ({run.name})" if run.name else ""))
    t.add_row("status", run.status)
    t.add_row("device", f"{run.device_name}  [{run.device_key}]")
    t.add_row("host", run.host or "")
    t.add_row("backend / plan", f"{run.backend} / {run.plan}")
    t.add_row("versions", ", ".join(f"{k} {v}" for k, v in sorted(run.versions.items())))
    t.add_row("started", _when(run.started_at) + (f", took {_duration(run)}" if _duration(run) else ""))
    if run.imported_from:
        t.add_row("imported from", run.imported_from)
    t.add_row("samples", str(run.samples))
    return t


def samples_table(samples: list) -> Table:
    """Sample points: W, Q, I, time and achieved rates; unstable and skipped points marked."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("#", "right"), ("family", "left"), ("dtype", "left"), ("cache", "left"), ("shape", "left"),
                      ("W", "right"), ("Q", "right"), ("I", "right"), ("median", "right"), ("B achieved", "right"),
                      ("F achieved", "right"), ("iqr", "right"), ("note", "left")):
        t.add_column(col, justify=just)
    for i, s in enumerate(samples):
        shape = " ".join(f"{k}={v}" for k, v in s.shape.items())
        if s.stats is None:
            t.add_row(str(i), s.family, s.dtype, s.cache, shape, fmt_flops(s.flops), fmt_bytes(s.bytes),
                      fmt_intensity(s.intensity), "", "", "", "", Text(f"skipped: {s.skipped}", style="yellow"))
            continue
        note = Text("unstable", style="yellow") if not s.stable else Text("")
        t.add_row(
            str(i), s.family, s.dtype, s.cache, shape, fmt_flops(s.flops), fmt_bytes(s.bytes),
            fmt_intensity(s.intensity), fmt_time(s.stats.median_s),
            fmt_bandwidth(s.bandwidth) if s.bandwidth else "", fmt_flops_rate(s.flop_rate) if s.flop_rate else "",
            f"{s.stats.iqr_ratio:.3f}", note,
        )
    return t


def compare_tables(profiles: list[DeviceProfile], pairs: list) -> Group:
    """Profiles side by side (B per level, F per path, ridges), then where each pair's roofs cross."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    t.add_column("")
    for p in profiles:
        t.add_column(device_heading(p), justify="right")
    levels = list(dict.fromkeys(lv for p in profiles for lv in p.levels()))
    paths = sorted({k for p in profiles for k in p.peak}, key=lambda k: list(PATHS).index(k) if k in PATHS else 99)
    for lv in levels:
        t.add_row(f"B {lv}", *[fmt_bandwidth(p.B(lv)) if lv in p.bandwidth else "" for p in profiles])
    for path in paths:
        t.add_row(f"F {path}", *[fmt_flops_rate(p.F(path)) if path in p.peak else "" for p in profiles])
    for path in paths:
        t.add_row(f"I* {path}", *[
            fmt_intensity(p.ridge(path)) if path in p.peak and "dram" in p.bandwidth else "" for p in profiles
        ])
    x = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("pair", "left"), ("path", "left"), ("crossover I", "right"), ("below it", "left"),
                      ("above it", "left")):
        x.add_column(col, justify=just)
    for a, b, c in pairs:
        cx = c.crossover
        if cx.intensity is None:  # one roof is at least as high everywhere: no crossover
            x.add_row(f"{a.id} vs {b.id}", c.path, "none", f"{cx.higher_above} at least as high everywhere", "")
        else:
            x.add_row(f"{a.id} vs {b.id}", c.path, fmt_intensity(cx.intensity),
                      f"{cx.higher_below} higher", f"{cx.higher_above} higher")
    legend = Text("B: dram bandwidth per level; F: peak per compute path; I* = F/B (dram). "
                  "Below the crossover intensity the bandwidth-richer roof is higher, above it the "
                  "compute-richer one (seed 000 §3).", style="dim")
    return Group(t, Text(""), x, legend)
