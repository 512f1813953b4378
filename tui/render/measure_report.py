"""Text reports for `rooftop measure`: ceilings, the bandwidth and FMA sweeps, the roofline points."""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable

from rich.console import Group, JustifyMethod
from rich.table import Table
from rich.text import Text

from rooftop.models.calibrate import Calibration, label_of, write_figure
from rooftop.models.conditions import capped_line
from rooftop.models.plotdata import Series, sample_series
from rooftop.models.sample import DATA_MOVING, Sample
from rooftop.models.units import fmt_bandwidth, fmt_bytes, fmt_count, fmt_flops_rate, fmt_time
from rooftop.tui.render.layout import Prose, hanging


def kept_words(run_id: str | None, store_error: str, kept: int, measured: int) -> str:
    """Where a measurement's points are, said as it is: saved as a run; kept in part (the store failed
    after some points were committed: they are a run, marked interrupted by the next rooftop with room to
    write); or not kept at all."""
    if run_id and not store_error:
        return f"saved as run {run_id[:8]}"
    if run_id and kept:
        return (f"kept in part as run {run_id[:8]}: {kept} of {fmt_count(measured, 'point')} (the next rooftop "
                "that can write the store marks it interrupted)")
    return "not kept in the store"


def _stability(stable: bool) -> Text:
    return Text("yes") if stable else Text("no", style="yellow")


def titled(title: str, table: Table) -> Group:
    """A table under its title, the title on a line of its own: as a Rich table title it would
    wrap to the table's width ("FMA sweep / (GFLOP/s, and / GB/s moved)")."""
    return Group(Prose(title, style="bold"), table)


def ceilings_table(cal: Calibration) -> Group:
    """Every measured ceiling: value, the case that produced it, stability; write bandwidth beside B;
    then, in one line, the ceilings measured while the GPU was capped and at what SM clock."""
    p = cal.profile
    t = Table(header_style="bold", box=None, pad_edge=False)
    cols: tuple[tuple[str, JustifyMethod], ...] = (("ceiling", "left"), ("value", "right"), ("case", "left"),
                                                   ("stable", "left"))
    for col, just in cols:
        t.add_column(col, justify=just, overflow="fold")  # cases are long names: wrap, never cut
    for level in p.levels():
        c = p.bandwidth[level]
        t.add_row(f"B {level}", fmt_bandwidth(c.value), c.case, _stability(c.stable))
    write = write_figure(p)
    if write:  # a memset: beside B, never B
        t.add_row("write", fmt_bandwidth(write.value), Text(write.case), _stability(write.stable))
    for path in p.paths():
        c = p.peak[path]
        t.add_row(f"F {path}", fmt_flops_rate(c.value), c.case, _stability(c.stable))
    if p.launch_overhead:
        c = p.launch_overhead
        t.add_row("launch", fmt_time(c.value), c.case, _stability(c.stable))
    if "launch_graph_s" in p.extra:
        t.add_row("launch (graph)", fmt_time(float(p.extra["launch_graph_s"])), "per kernel in a CUDA graph", "")
    capped = capped_line(p)
    how = f"measured with {fmt_count(p.threads, 'thread')}" if p.threads else "measured"
    return Group(titled(f"ceilings of {p.name} ({how})", t), *([Prose(capped, style="yellow")] if capped else []))


def _cell(s: Sample, value: float | None, fmt: Callable[[float], str]) -> Text:
    if s.skipped:
        return Text("skipped", style="dim")
    text = Text(fmt(value) if value else "n/a")
    if not s.stable:
        text.append("~", style="yellow")
    return text


def bandwidth_table(samples: list[Sample]) -> Group | None:
    """GB/s per kernel (columns) and working set (rows): the launch, cache and DRAM regions."""
    rows: dict[float, dict[str, Sample]] = {}
    for s in samples:
        if s.family in DATA_MOVING:
            ws = float(s.conditions.get("working_set", s.footprint_bytes))
            # one row per nominal size: triad's three arrays round 16 KiB down to 16380 bytes
            rows.setdefault(2 ** round(math.log2(max(ws, 1.0)), 1), {})[s.family] = s
    if not rows:
        return None
    fams = [f for f in DATA_MOVING if any(f in r for r in rows.values())]
    t = Table(header_style="bold", box=None, pad_edge=False)
    t.add_column("working set", justify="right")
    for f in fams:
        t.add_column(f, justify="right")
    for ws in sorted(rows):
        t.add_row(fmt_bytes(ws), *[
            _cell(rows[ws][f], rows[ws][f].bandwidth, lambda v: f"{v / 1e9:.3g}") if f in rows[ws] else Text("")
            for f in fams
        ])
    return titled("bandwidth sweep (GB/s; ~ = unstable)", t)


def fma_table(samples: list[Sample]) -> Group | None:
    """GFLOP/s per FMA count R and dtype: the slope, then the plateau."""
    rows: dict[int, dict[str, Sample]] = {}
    for s in samples:
        if s.family == "fma":
            rows.setdefault(int(s.shape.get("reps", 0)), {})[s.dtype] = s
    if not rows:
        return None
    dtypes = list(dict.fromkeys(s.dtype for s in samples if s.family == "fma"))
    t = Table(header_style="bold", box=None, pad_edge=False)
    t.add_column("R", justify="right")
    for d in dtypes:
        t.add_column(d, justify="right")
    for r in sorted(rows):
        cells = []
        for d in dtypes:
            got = rows[r].get(d)
            if got is None:
                cells.append(Text(""))
            elif got.skipped:
                cells.append(Text("skipped", style="dim"))
            else:
                gbs = (got.bandwidth or 0) / 1e9  # _cell formats at once: the lambda reads this point's
                cells.append(_cell(got, got.flop_rate, lambda v: f"{v / 1e9:.4g} ({gbs:.3g} GB/s)"))
        t.add_row(str(r), *cells)
    return titled("FMA sweep (GFLOP/s, and GB/s moved)", t)


def reason_kind(reason: str) -> str:
    """Group the per-call budget skips (each names its own figures) under one line."""
    if "budget" in reason:
        return "over the plan's per-call time budget (measured or predicted from a smaller size)"
    return reason


def skipped_summary(cal: Calibration) -> Group | None:
    """How many points were skipped, one line per reason; a long reason wraps under itself."""
    if not cal.skipped:
        return None
    reasons = Counter(reason_kind(s.skipped) for s in cal.skipped)
    rows = [(Text(f"  {n}×", style="dim"), Text(reason, style="dim")) for reason, n in reasons.most_common()]
    return Group(Text(f"{fmt_count(len(cal.skipped), 'point')} skipped:", style="dim"), hanging(rows))


def measure_report(cal: Calibration, samples: list[Sample], notes: list[str]) -> Group:
    """Ceilings, the sweeps, then what to be wary of and the plan's notes (wrapped under their indent)."""
    parts: list = [ceilings_table(cal)]
    for table in (bandwidth_table(samples), fma_table(samples)):
        if table is not None:
            parts += [Text(""), table]
    if cal.unstable:
        parts += [Text(""), Prose(
            f"{fmt_count(len(cal.unstable), 'unstable point')} (iqr/median > 0.10) left out: "
            + ", ".join(label_of(s) for s in cal.unstable[:12]) + (" …" if len(cal.unstable) > 12 else ""),
            style="yellow",
        )]
    if cal.above_roof:
        parts.append(Prose(
            "points > 10% above the measured roofline (cache residency?): "
            + ", ".join(label_of(s) for s in cal.above_roof), style="yellow",
        ))
    skipped = skipped_summary(cal)
    if skipped is not None:
        parts.append(skipped)
    parts += [Text("notes:", style="bold"), hanging([(" •", n) for n in list(notes) + list(cal.notes)])]
    return Group(*parts)


def point_series(samples: list[Sample]) -> list[Series]:
    """Measured warm GEMM and FMA points per (family, dtype), at (I, FLOP/s)."""
    return sample_series(samples, "", by_dtype=True, families=("gemm", "fma"), warm_only=True, split_unstable=False)
