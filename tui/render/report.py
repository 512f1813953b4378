"""Text reports for the command line: analyses, the device catalog and a device's card, comparisons (rich).
Their layout (prose that wraps, hanging notes, trimmed lines, the console) is render/layout's."""

from __future__ import annotations

from typing import Any, Callable

from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text

from rooftop.models.analysis import Analysis
from rooftop.models.calibrate import write_figure
from rooftop.models.compare import compare_path, thread_note
from rooftop.models.conditions import capped_line
from rooftop.models.paths import PATHS, distinct_paths, path_sort_key
from rooftop.models.profile import SOURCES, DeviceProfile
from rooftop.models.safetext import safe_text
from rooftop.models.units import (
    fmt_bandwidth,
    fmt_bytes,
    fmt_count,
    fmt_flops,
    fmt_flops_rate,
    fmt_intensity,
    fmt_percent,
    fmt_ratio,
    fmt_time,
)
from rooftop.tui.render.layout import NBSP, Prose, hanging

# Layout names that commands/ (make_console, trimmed, Prose) and render/profile.py (Prose) still import from
# here: they move to render/layout with those files' next change.
from rooftop.tui.render.layout import make_console as make_console
from rooftop.tui.render.layout import trimmed as trimmed

SOURCE_TAG = {"measured": "measured", "reference": "ref", "datasheet": "datasheet", "imported": "imported", "typical": "typical"}


def device_heading(p: DeviceProfile) -> str:
    return safe_text(f"{p.id} ({SOURCE_TAG.get(p.source, p.source)})")


def analysis_table(rows: list[Analysis]) -> Group:
    """One op on one or more devices, the devices side by side."""
    first = rows[0]
    figures = (f"{name} {value}".replace(" ", NBSP) for name, value in (
        ("W", fmt_flops(first.flops)), ("Q", fmt_bytes(first.bytes)), ("I", fmt_intensity(first.intensity))))
    head = Text.assemble((first.op.describe(), "bold"), "   " + "   ".join(figures))
    terms = ", ".join(f"{name} {fmt_bytes(v)}" for name, v in first.cost.terms)
    how = Text(f"{first.cost.counting}  [{terms}]", style="dim")
    notes: list[tuple[str | Text, str | Text]] = []
    for a in rows:
        prefix = f"{a.device.id}: " if len(rows) > 1 else ""
        notes += [(" →", safe_text(prefix + line)) for line in a.advice]  # advice may name the device
        notes.append((" ·", Text(safe_text(prefix + a.launch_note()), style="dim")))
        if a.device.threads:
            notes.append((" ·", Text(safe_text(f"{prefix}{a.device.id} is a CPU profile measured with "
                                               f"{fmt_count(a.device.threads, 'thread')}"), style="dim")))
        notes += [(Text(" !", style="yellow"), Text(safe_text(prefix + line), style="yellow")) for line in a.warnings]
    parts: list[RenderableType] = [Prose(head), Prose(how), SideBySide(rows, _devices_table), hanging(notes)]
    if len(rows) > 1:
        parts.append(comparison_line(rows))
    return Group(*parts)


class SideBySide:
    """Devices side by side in as many tables as the width needs: five at 80 columns folded their figures
    mid-word (`802.4 TFLOP/` over `s`, `compute-boun` over `d`); each table takes the devices that fit."""

    LABEL = 12  # the row labels' column
    CELL = 15  # a device's column: its longest word ("compute-bound", "1741 TFLOP/s") and a space

    def __init__(self, rows: list[Any], build: Any) -> None:
        self.rows, self.build = rows, build

    def __rich_console__(self, console: Any, options: Any) -> Any:
        fit = max(1, (options.max_width - self.LABEL) // self.CELL)
        tables = -(-len(self.rows) // fit)
        per = -(-len(self.rows) // tables)  # balanced: 3 and 2 rather than 4 and 1
        for i in range(0, len(self.rows), per):
            if i:
                yield Text("")
            yield self.build(self.rows[i:i + per])


def _devices_table(rows: list[Analysis]) -> Table:
    first = rows[0]
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("")
    for a in rows:
        t.add_column(device_heading(a.device), justify="right")

    def row(label: str, fn: Callable[[Analysis], str]) -> None:
        t.add_row(label, *[Prose(fn(a)) for a in rows])

    row("path", lambda a: a.path)
    row("F", lambda a: f"{fmt_flops_rate(a.peak)} ({SOURCE_TAG.get(a.device.peak[a.path].source, '')})")
    row(f"B ({first.level})", lambda a: f"{fmt_bandwidth(a.bandwidth)} ({SOURCE_TAG.get(a.device.bandwidth[a.level].source, '')})")
    row("ridge I*", lambda a: fmt_intensity(a.ridge))
    row("regime", lambda a: f"{a.regime}-bound")
    row("T ≥", lambda a: fmt_time(a.time_bound) + (" (launch)" if a.launch_binds else ""))
    row("  Q/B, W/F", lambda a: f"{fmt_time(a.time_memory)}, {fmt_time(a.time_compute)}")
    if first.is_collective:
        row("  α (in Q/B)", lambda a: fmt_time(a.alpha_s))
    row("  launch", lambda a: fmt_time(a.launch_overhead) if a.launch_overhead is not None else "not measured")
    row("P", lambda a: f"{fmt_flops_rate(a.attainable)} ({100 * a.attainable / a.peak:.3g}% of F)")
    if any(a.measured for a in rows):
        row("measured t", lambda a: fmt_time(a.measured.time_s) if a.measured else "")
        row("  achieved", lambda a: f"{fmt_flops_rate(a.measured.achieved_flops)}, {fmt_bandwidth(a.measured.achieved_bandwidth)}" if a.measured else "")
        row("  of roof", lambda a: fmt_percent(a.measured.fraction_of_roof) if a.measured else "")
    return t


def comparison_line(rows: list[Analysis]) -> Table:
    """Which device is faster for this op, and where the first two devices' roofs cross."""
    best = min(rows, key=lambda a: a.time_lower_bound)
    others = [a for a in rows if a is not best]
    ratio = min(a.time_lower_bound for a in others) / best.time_lower_bound
    msg = f"fastest bound: {safe_text(best.device.id)} ({fmt_time(best.time_lower_bound)}, {fmt_ratio(ratio)} ahead)"
    a, b = rows[0], rows[1]
    if a.path == b.path and a.level == b.level:
        x = compare_path(a.device, b.device, a.path, a.level).crossover
        if x.intensity is None:
            msg += f"; on {a.path} {safe_text(x.higher_below)}'s roof is never lower than the other's"
        else:
            side = x.higher_below if a.intensity < x.intensity else x.higher_above
            msg += (f"; {a.path} roofs cross at I = {x.intensity:.3g}: {safe_text(x.higher_below)} higher below, "
                    f"{safe_text(x.higher_above)} above — this op (I = {a.intensity:.3g}) favours {safe_text(side)}")
    return hanging([(" =", Text(msg, style="bold"))])


def devices_table(profiles: list[DeviceProfile]) -> Table:
    """The catalog at a glance; units in the headers keep it within 80 columns."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    widths = {"id": 12, "source": 9}
    cols: tuple[tuple[str, JustifyMethod], ...] = (
        ("id", "left"), ("source", "left"), ("B GB/s", "right"), ("16-bit TF/s", "right"), ("fp64 TF/s", "right"),
        ("I* 16-bit", "right"), ("name", "left"))
    for col, just in cols:
        if col == "name":  # the one column Rich may narrow (a no_wrap column is never); its cells end in "…"
            t.add_column(col, overflow="ellipsis", ratio=1)
        else:
            t.add_column(col, justify=just, no_wrap=True, min_width=widths.get(col, len(col)))
    for p in profiles:
        half = next((k for k in ("bf16-tc", "fp16-tc") if k in p.peak), None)
        fp64 = next((k for k in ("fp64-tc", "fp64-fma") if k in p.peak), None)
        dram = "dram" in p.bandwidth
        t.add_row(
            safe_text(p.id),
            safe_text(p.source),
            f"{p.B('dram') / 1e9:.0f}" if dram else "",
            f"{p.F(half) / 1e12:.4g}" if half else "",
            f"{p.F(fp64) / 1e12:.3g}" if fp64 else "",
            f"{p.ridge(half):.3g}" if half and dram else "",
            Text(safe_text(p.name), no_wrap=True, overflow="ellipsis"),
        )
    return t


def device_detail(p: DeviceProfile) -> Group:
    """Every roof and slope of one device with its provenance."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    for col in ("roof", "value", "ridge (dram)", "source", "case"):
        t.add_column(col)
    for level in p.levels():
        c = p.bandwidth[level]
        t.add_row(*map(safe_text, (f"B {level}", fmt_bandwidth(c.value), "", c.source, c.case)))
    write = write_figure(p)
    if write:  # a memset's rate: beside B, never B
        t.add_row(*map(safe_text, ("write", fmt_bandwidth(write.value), "", write.source, write.case)))
    for path in p.paths():
        c = p.peak[path]
        ridge = fmt_intensity(p.ridge(path)) if "dram" in p.bandwidth else ""
        t.add_row(*map(safe_text, (f"F {path}", fmt_flops_rate(c.value), ridge, c.source, c.case)))
    facts = [safe_text(f"{p.name} — {SOURCES.get(p.source, p.source)}")]
    if p.memory_bytes:
        facts.append(f"memory {fmt_bytes(p.memory_bytes)}")
    cpu = p.kind == "cpu"
    if p.l2_bytes:  # on a CPU the last-level cache (the `llc` level): the L3 on most CPUs
        facts.append(f"{'last-level cache (the llc level)' if cpu else 'L2'} {fmt_bytes(p.l2_bytes)}")
    if p.threads:
        facts.append(f"measured with {fmt_count(p.threads, 'thread')}")
    elif p.sm_count and not cpu:
        facts.append(f"{p.sm_count} SMs/CUs")
    if p.power_limit_w:
        facts.append(f"{p.power_limit_w:g} W")
    clock = p.extra.get("clock_hz")
    if isinstance(clock, (int, float)) and clock > 0:
        facts.append(f"boost clock {clock / 1e6:.0f} MHz")
    url = p.extra.get("url")
    where = [Prose(safe_text(f"document: {url}"), style="dim")] if isinstance(url, str) and url else []
    flagged = [Prose(safe_text(f"B {lv} {fmt_bandwidth(float(f['value']))} ({f['case']}) left out: {f['why']}"),
                     style="yellow")
               for lv, f in dict(p.extra.get("flagged") or {}).items()
               if isinstance(f, dict) and isinstance(f.get("value"), (int, float))]
    capped = capped_line(p)
    return Group(Text(safe_text(p.id), style="bold"), Prose(", ".join(facts)), *where, t, *flagged,
                 *([Prose(safe_text(capped), style="yellow")] if capped else []))


profile_detail = device_detail  # the old name, still imported by commands/analyse.py and commands/store.py (render/
# profile.profile_detail is a program's profile): those imports move to device_detail with their next change


def path_legend() -> str:
    return "; ".join(f"{k}: {v.label}" for k, v in PATHS.items())


def compare_tables(profiles: list[DeviceProfile], pairs: list) -> Group:
    """Profiles side by side (B per level, F per path, ridges), then where each pair's roofs cross."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    t.add_column("")
    for p in profiles:
        t.add_column(device_heading(p), justify="right")
    levels = list(dict.fromkeys(lv for p in profiles for lv in p.levels()))
    paths = sorted(distinct_paths(k for p in profiles for k in p.peak), key=path_sort_key)  # bf16-matmul = bf16-tc
    for lv in levels:
        t.add_row(safe_text(f"B {lv}"), *[fmt_bandwidth(p.B(lv)) if lv in p.bandwidth else "" for p in profiles])
    for path in paths:
        t.add_row(safe_text(f"F {path}"), *[fmt_flops_rate(p.F(path)) if path in p.peak else "" for p in profiles])
    for path in paths:
        t.add_row(safe_text(f"I* {path}"), *[
            fmt_intensity(p.ridge(path)) if path in p.peak and "dram" in p.bandwidth else "" for p in profiles
        ])
    x = Table(header_style="bold", box=None, pad_edge=False)
    x_cols: tuple[tuple[str, JustifyMethod], ...] = (
        ("pair", "left"), ("path", "left"), ("crossover I", "right"), ("below it", "left"), ("above it", "left"))
    for col, just in x_cols:
        x.add_column(col, justify=just)
    for a, b, c in pairs:
        cx = c.crossover
        if cx.intensity is None:  # one roof is at least as high everywhere: no crossover
            x.add_row(*map(safe_text, (f"{a.id} vs {b.id}", c.path, "none",
                                       f"{cx.higher_above} at least as high everywhere", "")))
        else:
            x.add_row(*map(safe_text, (f"{a.id} vs {b.id}", c.path, fmt_intensity(cx.intensity),
                                       f"{cx.higher_below} higher", f"{cx.higher_above} higher")))
    legend = Prose("B: dram bandwidth per level; F: peak per compute path; I* = F/B (dram). "
                  "Below the crossover intensity the bandwidth-richer roof is higher, above it the "
                  "compute-richer one.", style="dim")

    threads = thread_note(profiles)
    crossings: Table | Prose = x
    if not pairs:  # an empty pair table, unexplained, read as a fault
        lacking = [p.id for p in profiles if "dram" not in p.bandwidth]
        why = (f"{', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no DRAM bandwidth"
               if lacking else "the profiles share no compute path")
        crossings = Prose(safe_text(f"no crossovers: {why}, so no pair of roofs can be set against each other"),
                          style="yellow")
    return Group(t, Text(""), crossings, legend, *([Prose(threads, style="yellow")] if threads else []))


