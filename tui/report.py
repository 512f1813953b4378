"""Text reports for the command line: analyses and the device catalog (rich)."""

from __future__ import annotations

import re
import sys
from typing import IO, TYPE_CHECKING, Any, Iterator, Sequence

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from rooftop.models.analysis import Analysis
from rooftop.models.calibrate import write_figure
from rooftop.models.conditions import capped_line
from rooftop.models.paths import PATHS
from rooftop.models.profile import SOURCES, DeviceProfile
from rooftop.models.safetext import safe_text
from rooftop.models.units import (
    fmt_bandwidth,
    fmt_bytes,
    fmt_count,
    fmt_flops,
    fmt_flops_rate,
    fmt_intensity,
    fmt_ratio,
    fmt_time,
    fmt_when,
)

if TYPE_CHECKING:  # the sampler's types, for annotations only (report.py loads no probes)
    from rooftop.probes.telemetry import GpuSnapshot, Snapshot

NBSP = "\xa0"  # joins what a line must not split; printed as an ordinary space
# Spaces that only look like spaces: between a number and its unit (256 MiB, 87.1 µs, 1 FLOP/elem; not the
# 16 of bf16), around a relation (I = 4.00, T ≥ 1 ms) and inside a reference (seed 000 §6).
GLUE = re.compile(
    r"(?<![\w.])\d[\d.,]* (?=(?:[kMGTP]?FLOP|[KMGT]i?B|B|[nµm]?s|W|[MG]Hz)(?:/\w+)?(?!\w))"
    r"| (?=[=≈≥≤<>] )|(?<= [=≈≥≤<>]) "
    r"|(?<=\bseed) (?=\d)|(?<=\d) (?=§)"
)
WORD = re.compile(r"[^ ]+ *| +")  # a break may follow a run of ordinary spaces
WORD_OR_HYPHEN = re.compile(r"[^ -]+-+(?=[^ -])|[^ ]+ *| +")  # … or a '-' inside a name


def glued(text: str | Text) -> Text:
    """The text with its value–unit pairs (GLUE) joined by no-break spaces; styles kept."""
    t = Text(text) if isinstance(text, str) else text
    plain = GLUE.sub(lambda m: m.group().replace(" ", NBSP), t.plain)  # as long as before: spans still fit
    return Text(plain, style=t.style, spans=list(t.spans), end=t.end)


def break_offsets(plain: str, width: int, hyphens: bool = False) -> list[int]:
    """Where to break one line of text to fit `width` cells: after ordinary spaces, never at a
    no-break space; after a '-' too with `hyphens`; inside a word only when it is wider than the line."""
    offsets: list[int] = []
    col = 0
    for m in (WORD_OR_HYPHEN if hyphens else WORD).finditer(plain):
        word, start = m.group(), m.start()
        seen = cell_len(word.rstrip(" "))
        if col and col + seen > width:
            offsets.append(start)
            col = 0
        if seen > width:
            pieces = chop_cells(word, width)
            for piece in pieces[:-1]:
                start += len(piece)
                offsets.append(start)
            col = cell_len(pieces[-1])
        else:
            col += cell_len(word)
    return offsets


class Prose:
    """Text that wraps between items only: a value keeps its unit, a name breaks at its '-'.

    Rich wraps at any whitespace (a no-break space too), so "I = 1.000 FLOP/B" could end
    a line with "I" and a printed report would read "1.000 FLOP/B" as the next item. This
    wraps at ordinary spaces (GLUE marks the others) and prints the glue as spaces. In a
    grid column it gives a hanging indent.
    """

    def __init__(self, text: str | Text, style: str = "", hyphens: bool = False) -> None:
        """`style` is for a str (a Text brings its own); `hyphens` lets a name break after a '-'."""
        self.text = glued(Text(text, style=style) if isinstance(text, str) else text)
        self.hyphens = hyphens

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        width = max(options.max_width, 1)
        for para in self.text.split("\n", allow_blank=True):
            for line in para.divide(break_offsets(para.plain, width, self.hyphens)):
                line.rstrip()
                yield Text(line.plain.replace(NBSP, " "), style=line.style, spans=list(line.spans), no_wrap=True)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.text.plain
        words = [cell_len(m.group().rstrip(" ")) for m in (WORD_OR_HYPHEN if self.hyphens else WORD).finditer(plain)]
        widest = max((cell_len(line) for line in plain.split("\n")), default=0)
        return Measurement(min(max(words, default=0), widest), widest).clamp(max_width=options.max_width)


def hanging(rows: Sequence[tuple[str | Text, str | Text]]) -> Table:
    """Marked items (a marker, then text that wraps under itself): a grid of two columns."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for marker, text in rows:
        grid.add_row(marker, Prose(text))
    return grid


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
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("")
    for a in rows:
        t.add_column(device_heading(a.device), justify="right")

    def row(label: str, fn) -> None:  # noqa: ANN001 - a small local formatter
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
        row("  of roof", lambda a: f"{100 * a.measured.fraction_of_roof:.1f}%" if a.measured else "")
    notes: list[tuple[str | Text, str | Text]] = []
    for a in rows:
        prefix = f"{a.device.id}: " if len(rows) > 1 else ""
        notes += [(" →", safe_text(prefix + line)) for line in a.advice]  # advice may name the device
        notes.append((" ·", Text(safe_text(prefix + a.launch_note()), style="dim")))
        if a.device.threads:
            notes.append((" ·", Text(safe_text(f"{prefix}{a.device.id} is a CPU profile measured with "
                                               f"{fmt_count(a.device.threads, 'thread')}"), style="dim")))
        notes += [(Text(" !", style="yellow"), Text(safe_text(prefix + line), style="yellow")) for line in a.warnings]
    parts = [Prose(head), Prose(how), t, hanging(notes)]
    if len(rows) > 1:
        parts.append(comparison_line(rows))
    return Group(*parts)


def comparison_line(rows: list[Analysis]) -> Table:
    """Which device is faster for this op, and where the first two devices' roofs cross."""
    from rooftop.models.compare import compare_path

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
    for col, just in (("id", "left"), ("source", "left"), ("B GB/s", "right"), ("16-bit TF/s", "right"),
                      ("fp64 TF/s", "right"), ("I* 16-bit", "right"), ("name", "left")):
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


def profile_detail(p: DeviceProfile) -> Group:
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
    if p.sm_count:
        facts.append(f"measured with {fmt_count(p.sm_count, 'thread')}" if cpu else f"{p.sm_count} SMs/CUs")
    if p.power_limit_w:
        facts.append(f"{p.power_limit_w:g} W")
    flagged = [Prose(safe_text(f"B {lv} {fmt_bandwidth(float(f['value']))} ({f['case']}) left out: {f['why']}"),
                     style="yellow")
               for lv, f in dict(p.extra.get("flagged") or {}).items()
               if isinstance(f, dict) and isinstance(f.get("value"), (int, float))]
    capped = capped_line(p)
    return Group(Text(safe_text(p.id), style="bold"), Prose(", ".join(facts)), t, *flagged,
                 *([Prose(safe_text(capped), style="yellow")] if capped else []))


def path_legend() -> str:
    return "; ".join(f"{k}: {v.label}" for k, v in PATHS.items())


class TrimmedLines:
    """A text file that drops the spaces at the end of each line written to it.

    Rich pads every table cell and wrapped line to its width; on a terminal that is
    invisible, in a file it is noise (and `diff` shows it). Spaces are held back
    until the line goes on, so only those at a line's end are lost.
    """

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.held = ""

    @property
    def encoding(self) -> str:
        return getattr(self.out, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        lines = (self.held + text).split("\n")
        last = lines.pop()
        body = last.rstrip(" ")
        self.held = last[len(body):]
        self.out.write("".join(line.rstrip(" ") + "\n" for line in lines) + body)
        return len(text)

    def flush(self) -> None:
        self.out.flush()


def trimmed(text: str) -> str:
    """The text without spaces at its lines' ends (a chart pads every row to its width)."""
    return "\n".join(line.rstrip(" ") for line in text.split("\n"))


def make_console(stderr: bool = False) -> Console:
    """A console for the reports; piped or redirected, its lines carry no trailing spaces."""
    out = sys.stderr if stderr else sys.stdout
    tty = getattr(out, "isatty", lambda: False)()
    # no markup, no emoji codes: a stored name like "[/bold]" or ":x:" is printed as it is
    return Console(file=None if tty else TrimmedLines(out), stderr=stderr, highlight=False, soft_wrap=False,
                   markup=False, emoji=False)


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


def printable(text: str, limit: int = 24) -> str:
    """A name from outside (a process's, read from /proc) made safe for a terminal: control and other
    non-printing characters become '?', and it is cut to `limit` characters."""
    import unicodedata

    clean = "".join("?" if unicodedata.category(ch).startswith("C") else ch for ch in str(text))
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def roof_label(source: str | None) -> str:
    """Whose B a live bandwidth is divided by: this machine's measurement, or a reference profile's."""
    return "B measured" if source == "local" else f"B {source} ref."


def dram_text(g: "GpuSnapshot") -> str | None:
    """'DRAM 3,900 GB/s = 90% of B measured': the live DRAM bandwidth against its roof; None without GPM."""
    if g.dram_bandwidth is None:
        return None
    text = f"DRAM {g.dram_bandwidth / 1e9:,.0f} GB/s"
    if g.dram_fraction_of_roof is not None:
        text += f" = {100 * g.dram_fraction_of_roof:.0f}% of {roof_label(g.dram_roof_source)}"
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
    import time as _time

    stamp = _time.strftime("%H:%M:%S", _time.localtime(s.time))
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


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _gib3(n: float) -> str:
    """GiB in at most six columns, without an exponent: 0.0068, 0.0625, 4.29, 1,100."""
    g = n / 2**30
    return f"{g:,.0f}" if g >= 100 else f"{g:.3g}" if g >= 0.01 else f"{g:.2g}"


def llm_steps_table(steps: list) -> Group:
    """One row per batch × context: the bytes a step must read, its bounds (roofline, launch), tokens/s,
    measured share; then the launch floor and whether it all fits in memory. With tp × pp > 1 every
    figure is one rank's (the heading says so) and tok/s counts the pass through all pp stages."""
    s0 = steps[0]
    a = s0.arch
    kvd = s0.phase.kv_dtype or a.dtype
    moe = f", MoE {a.experts} experts top-{a.experts_per_token}" if a.experts else ""
    split = f"; per rank of TP {s0.tp} × PP {s0.pp}" if s0.ranks > 1 else ""
    head = Text.assemble(
        (f"{a.name} {s0.phase.kind}", "bold"),
        f" on {device_heading(s0.device)} — {a.params / 1e9:.2f} B params, {a.dtype} weights "
        f"{_gib(a.weights_bytes)} (input embedding {_gib(a.embedding_bytes)}), KV {kvd}{moe}{split}",
    )
    t = Table(header_style="bold", box=None, pad_edge=False, padding=(0, 1), collapse_padding=True)
    measured = any(s.measured_s for s in steps)
    cols = ["batch", "prompt" if s0.phase.kind == "prefill" else "ctx", "wts GiB", "KV GiB", "Q/B ms",
            "ΣT ms", "launch", "tok/s≤"]
    cols += ["meas ms", "expl.", "rest ms"] if measured else ["W/F ms"]
    for c in cols:
        t.add_column(c, justify="right", no_wrap=True, min_width=len(c))

    def ms(x: float) -> str:
        return f"{x * 1e3:,.0f}" if abs(x) >= 1 else f"{x * 1e3:.3g}"

    for s in steps:
        floor = s.launch_floor_s
        row = [str(s.phase.batch), str(s.phase.kv_len), f"{s.weights_read_bytes / 2**30:.2f}", _gib3(s.kv_bytes),
               ms(s.bytes_bound_s), ms(s.lower_bound_s),
               (ms(floor) + ("*" if s.binds == "launch" else "")) if floor is not None else "—",
               f"{s.tokens_per_s:,.0f}"]
        if measured:
            row += [ms(s.measured_s) if s.measured_s else "", f"{100 * s.explained:.0f}%" if s.measured_s else "",
                    ms(s.measured_s - s.lower_bound_s) if s.measured_s else ""]
        else:
            row.append(ms(s.compute_s))
        t.add_row(*row, style="red" if s.memory.fits is False else "")
    rank = "one rank's " if s0.ranks > 1 else ""
    notes = Prose(
        f"wts = {rank}weights read per step (all but the input embedding table); KV = {rank}cache read per step "
        "(decode) or written (prefill); Q/B = the step's bytes over B; ΣT = the sum of each op's max(W/F, Q/B); "
        "launch = the eager launch floor (kernels × launch overhead), * where it binds: T ≥ max(ΣT, launch); "
        f"tok/s≤ = tokens per step / {'(PP × T)' if s0.pp > 1 else 'T'}; held = what device memory must hold: "
        "all weights and the batch's KV cache (activations not counted); "
        "expl. = ΣT / measured; rest = measured − ΣT: kernel launch and CPU overhead, or kernels below "
        "their roof.", style="dim")
    return Group(Prose(head), t, notes, hanging(llm_step_notes(steps)))


def llm_step_notes(steps: list) -> list[tuple[str | Text, str | Text]]:
    """The launch floor (it scales with the kernels, the same at every batch) and the memory fit:
    each step that does not fit, else the largest that does."""
    from rooftop.models.llm import arch_lines, launch_line, rank_line

    s0 = steps[0]
    out: list[tuple[str | Text, str | Text]] = [(" ·", line) for line in arch_lines(s0.arch)]
    out.append((" ·", launch_line(s0)))
    if s0.ranks > 1:
        out.append((" ·", rank_line(s0)))
    over = [s for s in steps if s.memory.fits is False]
    if s0.memory.weights_fit is False:  # then nothing fits: say it once, with the smallest KV cache
        least = min(steps, key=lambda s: s.memory.needed_bytes)
        return out + [(Text(" !", style="red"), Text(least.memory.describe(least.device.id), style="red"))]
    for s in over:
        where = f"batch {s.phase.batch}, {'prompt' if s.phase.kind == 'prefill' else 'ctx'} {s.phase.kv_len}: "
        out.append((Text(" !", style="red"), Text(where + s.memory.describe(s.device.id), style="red")))
    if not over:
        big = max(steps, key=lambda s: s.memory.needed_bytes)
        out.append((" ·", big.memory.describe(big.device.id)))
    return out


def _times(count: float) -> str:
    """An op's multiplicity: whole where it is whole, else to three figures (expected MoE experts)."""
    return str(round(count)) if abs(count - round(count)) < 1e-9 else f"{count:.4g}"


def llm_ops_table(step) -> Group:  # noqa: ANN001 - a StepBound
    total = step.lower_bound_s
    t = Table(header_style="bold", box=None, pad_edge=False)
    for c, j in (("op", "left"), ("shape", "left"), ("×", "right"), ("I", "right"), ("regime", "left"),
                 ("T each", "right"), ("T total", "right"), ("share", "right")):
        t.add_column(c, justify=j)
    for lo, a in step.ops:
        t.add_row(lo.name, a.op.describe(), _times(lo.count), f"{a.intensity:.3g}", a.regime,
                  fmt_time(a.time_lower_bound), fmt_time(a.time_lower_bound * lo.count),
                  f"{100 * a.time_lower_bound * lo.count / total:.1f}%")
    title = Prose(f"per-step ops at batch {step.phase.batch} (path {step.ops[1][1].path}; ridge "
                 f"{step.ops[1][1].ridge:.3g} FLOP/B)", style="bold")
    by_note: dict[str, list[str]] = {}
    for lo, _ in step.ops:
        if lo.note:
            by_note.setdefault(lo.note, []).append(lo.name)
    notes = [Prose(f"× for {', '.join(names)}: {note}", style="dim") for note, names in by_note.items()]
    launch = step.launch_s
    tiny = sum(1 for _, a in step.ops if launch is not None and a.time_lower_bound < launch)
    if tiny:
        notes.append(Prose(f"{fmt_count(tiny, 'op kind')} {'is' if tiny == 1 else 'are'} bounded below one kernel "
                           f"launch ({fmt_time(launch)} on {step.device.id}): at this size launch overhead, not the "
                           f"roofline, sets {'its' if tiny == 1 else 'their'} time (CUDA graphs cut it).", style="yellow"))
    return Group(title, t, *notes)


def amdahl_table(split) -> Group:  # noqa: ANN001 - an Amdahl
    t = Table(header_style="bold", box=None, pad_edge=False)
    for c in ("part", "before", "after", "saved"):
        t.add_column(c, justify="left" if c == "part" else "right")
    for name, before in split.before.items():
        after = split.after[name]
        t.add_row(name, f"{before:.3g} ms", f"{after:.3g} ms", f"{before - after:.3g} ms")
    t.add_row("total", f"{split.total_before:.3g} ms", f"{split.total_after:.3g} ms",
              f"{split.total_before - split.total_after:.3g} ms", style="bold")
    return Group(Prose(f"end to end: {fmt_ratio(split.speedup)} (Amdahl's law: the parts not sped up keep "
                      "their time)", style="bold"), t)


# -- the store: runs, samples, comparisons -------------------------------------------


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
            from rooftop.tui.profileview import sample_label

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


def compare_tables(profiles: list[DeviceProfile], pairs: list) -> Group:
    """Profiles side by side (B per level, F per path, ridges), then where each pair's roofs cross."""
    t = Table(header_style="bold", box=None, pad_edge=False)
    t.add_column("")
    for p in profiles:
        t.add_column(device_heading(p), justify="right")
    levels = list(dict.fromkeys(lv for p in profiles for lv in p.levels()))
    paths = sorted({k for p in profiles for k in p.peak}, key=lambda k: list(PATHS).index(k) if k in PATHS else 99)
    for lv in levels:
        t.add_row(safe_text(f"B {lv}"), *[fmt_bandwidth(p.B(lv)) if lv in p.bandwidth else "" for p in profiles])
    for path in paths:
        t.add_row(safe_text(f"F {path}"), *[fmt_flops_rate(p.F(path)) if path in p.peak else "" for p in profiles])
    for path in paths:
        t.add_row(safe_text(f"I* {path}"), *[
            fmt_intensity(p.ridge(path)) if path in p.peak and "dram" in p.bandwidth else "" for p in profiles
        ])
    x = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("pair", "left"), ("path", "left"), ("crossover I", "right"), ("below it", "left"),
                      ("above it", "left")):
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
    from rooftop.models.compare import thread_note

    threads = thread_note(profiles)
    return Group(t, Text(""), x, legend, *([Prose(threads, style="yellow")] if threads else []))


def parallel_table(dims: Sequence[Any], device: Any, step: Any) -> Any:
    """Each parallel dimension's communication per step: I_comm and, per link, whether it is comm-bound."""
    from rooftop.models.comm import COLLECTIVES
    from rooftop.models.ops import LINK_LEVELS

    links = [lv for lv in LINK_LEVELS if lv in device.bandwidth]
    ph = step.phase
    t = Table(title=f"communication per step, one rank ({ph.kind}, batch {ph.batch}, {ph.tokens} tokens): "
                    f"comm-bound on a link when I_comm < its ridge F/B", title_justify="left", box=None,
              header_style="bold", pad_edge=False)
    for h in ("dim", "collective", "Q_comm", "I_comm", *[f"{lv} ({fmt_bandwidth(device.B(lv))})" for lv in links]):
        t.add_column(h, justify="left" if h in ("dim", "collective") else "right")
    for d in dims:
        verdicts = {v["level"]: v for v in d.on_links(device)}
        what = f"{d.calls}× {COLLECTIVES[d.collective].split(' (')[0]} of {fmt_bytes(d.message_bytes)}"
        t.add_row(f"{d.dim.upper()}×{d.degree}", what, fmt_bytes(d.wire_bytes), fmt_intensity(d.intensity),
                  *[f"{fmt_time(verdicts[lv]['comm_s'])} " + ("comm-bound" if verdicts[lv]["comm_bound"] else "ok")
                    for lv in links])
        for x in d.extra:  # in the Q_comm above: the transfers beside the layers' collectives
            t.add_row("", f"+ {x.name} {COLLECTIVES[x.collective].split(' (')[0]} {fmt_bytes(x.message_bytes)}",
                      f"({fmt_bytes(x.wire_bytes)})", "", *["" for _ in links], style="dim")
    parts: list[Any] = [t]
    if not links:
        parts.append(Prose(f"{device.id} has no link levels (nvlink, pcie, net): pick a profile with them, "
                           "e.g. -d h100-sxm-ds, to see where each dimension turns comm-bound"))
    else:
        parts.append(Prose(f"the rank computes {fmt_time(dims[0].compute_s)} per step (Σ W/F over its share); "
                           f"ridges: " + ", ".join(f"{lv} {fmt_intensity(dims[0].link_ridge(device.B(lv)))}"
                                                   for lv in links)))
    return Group(*parts)
