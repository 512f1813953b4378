"""Every GPU of a server at once: one compact row each, for `rooftop watch` and the Live tab at 80×24.

A row: utilisation, DRAM bandwidth (GB/s, and its % of that GPU's measured B where GPM gives it), tensor
activity, power, SM clock, temperature and a throttle mark. Fixed columns, so eight GPUs read as a table;
every row fits `width` (80 by default), cutting the throttle words before anything else.
"""

from __future__ import annotations

import time
from typing import Any

ROW_WIDTH = 80
SHORT = {"power cap": "PWR", "power brake": "BRK", "sw thermal": "THRM", "hw thermal": "THRM", "hw slowdown": "SLOW"}
COMPACT_FROM = 3  # `rooftop watch` switches to rows from 3 GPUs: their full lines (≈4 each) no longer fit 24 rows


# (title, width): the columns after the GPU's name, right-aligned; the throttle mark follows
COLUMNS = (("util", 4), ("DRAM GB/s", 9), ("%B", 4), ("tensor", 6), ("power W", 9), ("SM MHz", 6), ("°C", 3))
GAP = "  "
HEADER = "gpu " + "".join(GAP + t.rjust(w) for t, w in COLUMNS) + GAP + "throttle"


def _f(v: float | None, fmt: str) -> str:
    return format(v, fmt) if v is not None else "N/A"


def _pct(v: float | None) -> str:
    """A sensor's percent (0–100, not a fraction: units.fmt_percent's rule is for those) in a fixed 4-column
    cell: whole percent, as nvidia-smi, and "N/A" as every unread sensor of the row."""
    return f"{v:.0f}%" if v is not None else "N/A"


def throttle_mark(reasons: tuple[str, ...]) -> str:
    """'!' and the throttle reasons in short (PWR, THRM, SLOW, BRK); '' when it runs free."""
    marks = list(dict.fromkeys(SHORT.get(r, r) for r in reasons))
    return ("! " + ",".join(marks)) if marks else ""


def gpu_row(g: Any, width: int = ROW_WIDTH) -> str:
    """One GPU (a GpuSnapshot) in one row of at most `width` columns."""
    name = f"gpu{g.index}".ljust(4)
    if g.lost:
        return f"{name} LOST ({g.name})"[:width]
    dram = g.dram_bandwidth / 1e9 if g.dram_bandwidth is not None else None
    frac = g.dram_fraction_of_roof * 100 if g.dram_fraction_of_roof is not None else None
    tc = g.tensor_active * 100 if g.tensor_active is not None else None
    cells = (_pct(g.gpu_util_pct),
             _f(dram, ",.0f"), _pct(frac), _pct(tc),
             f"{_f(g.power_w, '.0f')}/{_f(g.power_limit_w, '.0f')}", _f(g.sm_clock_mhz, ".0f"),
             _f(g.temperature_c, ".0f"))
    row = name + "".join(GAP + c.rjust(w) for c, (_, w) in zip(cells, COLUMNS))
    mark = throttle_mark(g.throttling)
    return (row + ("  " + mark if mark else ""))[:width].rstrip()


def gpu_rows(gpus: Any, width: int = ROW_WIDTH, selected: int | None = None) -> list[str]:
    """The header and one row per GPU; the `selected` GPU's row marked with '>' in place of a space."""
    out = [HEADER[:width]]
    for g in gpus:
        row = gpu_row(g, width - 1)
        out.append((">" if g.index == selected else " ") + row if selected is not None else gpu_row(g, width))
    if selected is not None:
        out[0] = (" " + HEADER)[:width]
    return out


def watch_block(snapshot: Any, cpu_lines: list[str], width: int = ROW_WIDTH) -> list[str]:
    """`rooftop watch`'s lines for one tick with many GPUs: the time and the header, a row per GPU, then the
    CPU's line(s) as the detailed view writes them (`cpu_lines`)."""
    stamp = time.strftime("%H:%M:%S", time.localtime(snapshot.time))
    rows = gpu_rows(snapshot.gpus, width)
    return [stamp, *rows, *cpu_lines]
