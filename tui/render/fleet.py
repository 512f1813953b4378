"""A fleet as text: one row per member with its ceilings and conditions, the median row, the flags.

Many ceilings do not fit 80 columns side by side, so the columns come in blocks (each with the
rank column again); GB/s for bandwidth, TFLOP/s for peaks, µs for the launch floor.
"""

from __future__ import annotations

from rich.console import Group, JustifyMethod
from rich.table import Table
from rich.text import Text

from rooftop.models.check import Verdict
from rooftop.models.fleet import FleetReport, ceiling_values, fmt_ceiling, peer_rule
from rooftop.models.safetext import safe_text

COLUMNS_PER_BLOCK = 5


def _figure(ceiling: str, value: float | None) -> str:
    if value is None:
        return "—"
    if ceiling.startswith("B "):
        return f"{value / 1e9:.4g}"
    if ceiling.startswith("F "):
        return f"{value / 1e12:.4g}"
    return f"{value * 1e6:.3g}"


def _unit(ceiling: str) -> str:
    return "GB/s" if ceiling.startswith("B ") else "TFLOP/s" if ceiling.startswith("F ") else "µs"


def _num(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def fleet_tables(report: FleetReport) -> Group:
    """Per model: the members' ceilings in blocks of columns, then their conditions, then the median."""
    parts: list = []
    flagged = {(f.rank, f.ceiling) for f in report.stragglers}
    for g in report.groups:
        parts.append(Text(safe_text(f"{g.model}: {len(g.members)} member{'s' if len(g.members) != 1 else ''}"),
                          style="bold"))
        names = list(g.ceilings)
        for i in range(0, max(1, len(names)), COLUMNS_PER_BLOCK):
            block = names[i:i + COLUMNS_PER_BLOCK]
            t = Table(header_style="bold", box=None, pad_edge=False)
            t.add_column("rank", no_wrap=True)
            t.add_column("host", no_wrap=True, overflow="ellipsis", max_width=14)
            t.add_column("device", no_wrap=True)
            for c in block:
                t.add_column(f"{c}\n{_unit(c)}", justify="right", no_wrap=True)
            for m in g.members:
                vals = ceiling_values(m.profile) if m.profile else {}
                cells = [Text(_figure(c, vals.get(c)) + ("!" if (m.rank, c) in flagged else ""),
                              style="red" if (m.rank, c) in flagged else "") for c in block]
                t.add_row(str(m.rank), safe_text(m.host), safe_text(m.device), *cells)
            t.add_row("median", "", "", *[_figure(c, g.median.get(c)) for c in block], style="bold")
            parts += [t, Text("")]
        t = Table(header_style="bold", box=None, pad_edge=False)
        cols: tuple[tuple[str, JustifyMethod], ...] = (
            ("rank", "left"), ("status", "left"), ("SM MHz", "right"), ("power W", "right"), ("°C", "right"),
            ("throttle", "left"), ("wall s", "right"))
        for col, just in cols:
            t.add_column(col, justify=just, no_wrap=col != "throttle")
        for m in g.members:
            t.add_row(str(m.rank), Text(m.status, style="" if m.status == "complete" else "red"),
                      _num(m.sm_clock_mhz, ".0f"), _num(m.power_w, ".0f"), _num(m.max_temperature_c, ".0f"),
                      safe_text(", ".join(m.throttle)) or "none", _num(m.wall_s, ".1f"))
        parts += [t, Text("")]
    return Group(*parts)


def member_lines(report: FleetReport) -> list[str]:
    """One line per member (for a narrow detail view): its status and main ceilings, in screen units."""
    out = []
    for m in report.members:
        vals = ceiling_values(m.profile) if m.profile else {}
        shown = [k for k in vals if k in ("B dram", "F bf16-tc", "F bf16-matmul", "F fp32-fma", "launch")] or list(vals)[:3]
        figures = ", ".join(f"{k} {fmt_ceiling(k, vals[k])}" for k in shown)
        out.append(safe_text(f"rank {m.rank} {m.host} {m.device}: {m.status}" + (f"; {figures}" if figures else "")))
    return out


def fleet_flag_lines(report: FleetReport) -> list[str]:
    """The flags in words, then the notes; one line that says so when nothing was flagged."""
    lines = [safe_text(f"! {f.text}") for f in report.flags]
    if not report.flags:
        lines.append(f"no straggler: every ceiling is within {peer_rule(report.ratio)}, and no member ran capped")
    return lines + [safe_text(n) for n in report.notes]


def verdict_lines(v: Verdict) -> list[str]:
    """`rooftop check`'s answer: each failing ceiling with both figures, each member without a result, the
    notes, then a summary line."""
    out = [safe_text(r.text()) for r in v.failures] + [safe_text(f"! {x}") for x in v.lost]
    out += [safe_text(n) for n in v.notes]
    held = len(v.results) - len(v.failures)
    out.append(f"{'ok' if v.ok else 'FAILED'}: {held} of {len(v.results)} ceiling checks hold"
               + (f", {len(v.failures)} short" if v.failures else "")
               + (f"; {len(v.lost)} member{'s' if len(v.lost) != 1 else ''} gave no result" if v.lost else ""))
    return out
