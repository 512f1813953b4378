"""`rooftop watch`'s lines and the app's live telemetry text: utilisation, clocks, DRAM bandwidth, processes."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

from rooftop.models.units import fmt_percent
from rooftop.tui.render.text import printable

if TYPE_CHECKING:  # the sampler's types, for annotations only (render loads no probes)
    from rooftop.probes.telemetry import GpuSnapshot, Snapshot


def _na(v: float | None, fmt: str) -> str:
    return "N/A" if v is None else fmt.format(v)


WATCH_WIDTH = 80  # `rooftop watch` lines fit a terminal that wide; JSON (--json) has every field


def fit_fields(head: str, options: Sequence[Sequence[str]], width: int = WATCH_WIDTH) -> str:
    """`head`, then from each group of options the first that still fits in `width` columns.

    A group is one field said at decreasing length (a core list, else the busiest core),
    so a line keeps what matters most and never wraps.
    """
    line = head
    for group in options:
        fitting = [f for f in group if len(line) + 2 + len(f) <= width]
        if fitting:
            line += "  " + fitting[0]
    return line


def roof_label(source: str | None) -> str:
    """Whose B a live bandwidth is divided by: this machine's measurement, or a reference profile's."""
    return "B measured" if source == "local" else f"B {source} ref."


def dram_text(g: "GpuSnapshot") -> str | None:
    """'DRAM 3,900 GB/s = 90% of B measured': the live DRAM bandwidth against its roof; None without GPM."""
    if g.dram_bandwidth is None:
        return None
    text = f"DRAM {g.dram_bandwidth / 1e9:,.0f} GB/s"
    if g.dram_fraction_of_roof is not None:
        text += f" = {fmt_percent(g.dram_fraction_of_roof, 0)} of {roof_label(g.dram_roof_source)}"
    return text


def gpm_parts(g: "GpuSnapshot") -> list[str]:
    """What the GPU is doing against its roofs (GPM), most telling first: DRAM bandwidth, tensor and SM
    activity; [] without GPM."""
    parts = [dram_text(g)]
    if g.tensor_active is not None:
        parts.append(f"tensor {100 * g.tensor_active:.0f}% active")
    if g.sm_active is not None:
        parts.append(f"SM {100 * g.sm_active:.0f}% active")
    return [p for p in parts if p]


def processes_text(g: "GpuSnapshot", width: int = WATCH_WIDTH) -> str | None:
    """The processes on a GPU in one short line ('procs 4242 python 12.0 GiB, …'), cut to `width`."""
    if not g.processes:
        return None
    items = [f"{p.pid} {printable(p.name) if p.name else '?'}"
             + (f" {p.memory_bytes / 2**30:.1f} GiB" if p.memory_bytes is not None else "") for p in g.processes]
    line = "procs " + items[0]
    for n, item in enumerate(items[1:], 1):
        more = f", +{len(items) - n} more"
        if len(line) + 2 + len(item) + (len(more) if n < len(items) - 1 else 0) > width:
            return line + more
        line += ", " + item
    return line


def telemetry_lines(s: "Snapshot", width: int = WATCH_WIDTH) -> list[str]:
    """One line per GPU (and one for the CPU) of a telemetry snapshot, for `rooftop watch`, each ≤ width.

    Why a GPU part is missing (no NVML) is not repeated here: `rooftop watch` says it once.
    """
    stamp = time.strftime("%H:%M:%S", time.localtime(s.time))
    lines = []
    for g in s.gpus:
        if g.lost:
            lines.append(f"{stamp} gpu{g.index} {g.name}  LOST")
            continue
        gib = 2**30
        # the SM clock leads (it is what a throttled GPU loses); a throttle reason before memory use
        head = (f"{stamp} gpu{g.index} util {_na(g.gpu_util_pct, '{:.0f}%')} mem {_na(g.mem_util_pct, '{:.0f}%')}  "
                f"{_na(g.sm_clock_mhz, '{:.0f}')} MHz  {_na(g.power_w, '{:.0f}')}/{_na(g.power_limit_w, '{:.0f}')} W"
                f"  {_na(g.temperature_c, '{:.0f}')}°C")
        throttle = f"throttle: {', '.join(g.throttling)}" if g.throttling else ""
        line = fit_fields(head, [[throttle]], width) if throttle else head
        rest = [[f"{_na(g.memory_used_bytes and g.memory_used_bytes / gib, '{:.1f}')}"
                 f"/{_na(g.memory_total_bytes and g.memory_total_bytes / gib, '{:.0f}')} GiB"],
                [f"PCIe tx/rx {_na(g.pcie_tx_bytes_s and g.pcie_tx_bytes_s / 1e9, '{:.2f}')}/"
                 f"{_na(g.pcie_rx_bytes_s and g.pcie_rx_bytes_s / 1e9, '{:.2f}')} GB/s"],
                [f"SM clock max {_na(g.sm_clock_max_mhz, '{:.0f}')} MHz"], [f"mem clock {_na(g.mem_clock_mhz, '{:.0f}')} MHz"]]
        lines.append(fit_fields(line, rest, width))
        pad = " " * (len(stamp) + 1)
        if throttle and line == head:  # no room: a throttling GPU is said all the same, on the next line
            lines.append(pad + throttle)
        if g.note:  # NVML did not answer in time: why this GPU's fields are N/A
            lines.append((pad + g.note)[:width])
        gpm = gpm_parts(g)
        if gpm:
            lines.append(fit_fields(pad + gpm[0], [[x] for x in gpm[1:]], width))
        procs = processes_text(g, width - len(pad))
        if procs:
            lines.append(pad + procs)
    if s.cpu is not None:
        c = s.cpu
        head = (f"{stamp} cpu  util {c.util_pct:.0f}%  {_na(c.freq_mhz, '{:.0f}')} MHz  "
                f"mem {c.memory_used_bytes / 2**30:.1f}/{c.memory_total_bytes / 2**30:.0f} GiB  "
                f"load {_na(c.load1, '{:.2f}')}")
        cores = [f"cores {' '.join(f'{x:.0f}' for x in c.per_core_pct)}", f"busiest core {max(c.per_core_pct):.0f}%",
                 f"max {max(c.per_core_pct):.0f}%"] if c.per_core_pct else []
        lines.append(fit_fields(head, [cores], width))
    return lines or [f"{stamp} nothing to sample"]
