"""Live: telemetry sparklines, and the running measurement with its curve growing."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from rich.console import Console
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Label, ProgressBar, Sparkline, Static

from rooftop.models.calibrate import Calibration, write_figure
from rooftop.models.conditions import capped_line
from rooftop.models.plotdata import bandwidth_curves, fma_curves, gemm_curves, intensity_span, roof_series, sample_series
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.units import fmt_bandwidth, fmt_count, fmt_flops_rate, fmt_sig
from rooftop.probes.telemetry import CpuSnapshot, GpuSnapshot, Snapshot
from rooftop.store.runs import Run
from rooftop.tui.app.state import RunView
from rooftop.tui.app.widgets import RooflinePlot, watch_app
from rooftop.tui.render.gpu_rows import gpu_rows
from rooftop.tui.render.measure_report import kept_words
from rooftop.tui.render.telemetry import gpm_parts, processes_text

if TYPE_CHECKING:  # types only
    from rooftop.probes.plan import Progress
    from rooftop.tui.services.measure import RunResult

HISTORY = 120  # points per sparkline

# (key, label, unit, how to read it from a snapshot; None: not known this tick)
GPU_TRACES: tuple[tuple[str, str, str, Callable[[GpuSnapshot], float | None]], ...] = (
    ("util", "GPU util", "%", lambda g: g.gpu_util_pct),
    ("sm", "SM clock", "MHz", lambda g: g.sm_clock_mhz),
    ("power", "power", "W", lambda g: g.power_w),
    ("temp", "temp", "°C", lambda g: g.temperature_c),
    ("mem", "memory", "GiB", lambda g: g.memory_used_bytes / 2**30 if g.memory_used_bytes is not None else None),
    ("dram", "DRAM", "GB/s", lambda g: g.dram_bandwidth / 1e9 if g.dram_bandwidth is not None else None),
    ("tensor", "tensor", "%", lambda g: 100 * g.tensor_active if g.tensor_active is not None else None),
)
GPM_TRACES = {"dram", "tensor"}  # shown only for a GPU that offers GPM (Hopper and newer)
CPU_TRACES: tuple[tuple[str, str, str, Callable[[CpuSnapshot], float | None]], ...] = (
    ("util", "CPU util", "%", lambda c: c.util_pct),
    ("sm", "CPU clock", "MHz", lambda c: c.freq_mhz),
    ("mem", "memory", "GiB", lambda c: c.memory_used_bytes / 2**30),
)
VALUE_FORMAT = {"mem": "{:,.1f}"}


class GpuRows(Static, can_focus=True):
    """Every GPU at once, one compact row each (from two GPUs on); ↑/↓ or a click selects the one whose
    sparklines show below."""

    BINDINGS = [("up", "move(-1)", "Previous GPU"), ("down", "move(1)", "Next GPU")]

    @dataclass
    class Selected(Message):
        index: int  # the GPU's index (NVML's numbering)

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__("", id=id)
        self.indices: list[int] = []
        self.selected: int | None = None

    def show(self, gpus: tuple[GpuSnapshot, ...], selected: int | None) -> None:
        self.indices, self.selected = [g.index for g in gpus], selected
        width = max(40, min(self.size.width or 80, 80))
        lines = gpu_rows(gpus, width, selected)
        text = Text("\n".join(lines))
        text.stylize("bold", 0, len(lines[0]))
        self.update(text)

    def action_move(self, step: int) -> None:
        if self.indices:
            at = self.indices.index(self.selected) if self.selected in self.indices else 0
            self.post_message(self.Selected(self.indices[(at + step) % len(self.indices)]))

    def on_click(self, event: events.Click) -> None:
        row = event.y - 1  # the header first
        if 0 <= row < len(self.indices):
            self.post_message(self.Selected(self.indices[row]))


class TelemetryPanel(Widget):
    """Every GPU in a row each (from two GPUs on), and the sparklines of the selected one (the first by
    default; the CPU when there is no GPU)."""

    DEFAULT_CSS = """
    TelemetryPanel { height: auto; }
    TelemetryPanel #traces { height: auto; }
    TelemetryPanel .trace { height: 1; }
    TelemetryPanel .trace Label { width: 11; }
    TelemetryPanel .trace Sparkline { width: 1fr; }
    TelemetryPanel .trace .value { width: 14; text-align: right; }
    TelemetryPanel GpuRows { height: auto; }
    TelemetryPanel GpuRows:focus { background: $boost; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.data: dict[str, deque[float]] = {k: deque(maxlen=HISTORY) for k, *_ in GPU_TRACES}
        self.source = "waiting for the first sample"
        self.selected: int | None = None  # the GPU whose sparklines show; None: the first

    def on_mount(self) -> None:
        sampler = getattr(self.app, "sampler", None)  # mounted late (a lazy tab): fill in what was sampled
        for snap in sampler.history()[-HISTORY:] if sampler is not None else []:
            self.add(snap)
        watch_app(self, init=False, telemetry=self.add)  # then each new snapshot

    def compose(self) -> ComposeResult:
        rows = GpuRows(id="gpu-rows")
        rows.display = False  # until a second GPU reports
        yield rows
        yield Static(self.source, id="tel-source")
        with Vertical(id="traces"):  # a grid of two columns on a short screen (app.tcss)
            for key, label, _, _ in GPU_TRACES:
                with Horizontal(classes="trace", id=f"tr-{key}") as row:
                    row.display = key not in GPM_TRACES  # until a GPU with GPM reports
                    yield Label(label, id=f"lb-{key}")
                    yield Sparkline([], id=f"sp-{key}")
                    yield Static("N/A", classes="value", id=f"val-{key}")
        roofs = Static("", id="tel-roofs")  # DRAM bandwidth and tensor activity against their roofs
        procs = Static("", id="tel-procs")  # the processes on the GPU
        roofs.display = procs.display = False
        yield roofs
        yield procs

    def _show_roofs(self, g: GpuSnapshot | None) -> None:
        """The GPU's live DRAM bandwidth against its measured B, tensor and SM activity, and its processes;
        why they are missing (no GPM on this GPU, NVML not answering); nothing for the CPU."""
        roofs, procs = self.query_one("#tel-roofs", Static), self.query_one("#tel-procs", Static)
        if g is None:
            roofs.display = procs.display = False
            return
        if g.note:
            text = Text(g.note, style="yellow")
        elif gpm_parts(g):
            text = Text("   ".join(gpm_parts(g)), style="bold")
        else:
            text = Text(g.gpm_note or "", style="dim")
        roofs.update(text)
        roofs.display = bool(text.plain)
        line = processes_text(g, width=max(40, self.size.width or 80))
        procs.update(Text(line or "", style="dim"))
        procs.display = bool(line)

    def on_gpu_rows_selected(self, message: GpuRows.Selected) -> None:
        """Another GPU's sparklines: refilled from what the sampler holds of it."""
        if message.index == self.selected:
            return
        self.selected = message.index
        for d in self.data.values():
            d.clear()
        sampler = getattr(self.app, "sampler", None)
        history = sampler.history()[-HISTORY:] if sampler is not None else []
        for snap in history[:-1]:
            self._record(snap)
        if history:
            self.add(history[-1])

    def _gpu(self, s: Snapshot) -> GpuSnapshot:
        return next((g for g in s.gpus if g.index == self.selected), s.gpus[0])

    def _record(self, s: Snapshot) -> None:
        """Only the traces' data (refilling them for a newly selected GPU)."""
        if not s.gpus:
            return
        g = self._gpu(s)
        for key, _, _, read in GPU_TRACES:
            v = read(g)
            if v is not None:
                self.data[key].append(float(v))

    def add(self, s: Snapshot) -> None:
        rows = self.query_one("#gpu-rows", GpuRows)
        rows.display = len(s.gpus) > 1
        if s.gpus:
            g = self._gpu(s)
            if len(s.gpus) > 1:
                rows.show(s.gpus, g.index)
            # no GPM on this GPU (gpm_note): its note says so once, no empty traces
            readings = [(key, label, unit, read(g)) for key, label, unit, read in GPU_TRACES
                        if not (g.gpm_note and key in GPM_TRACES)]
            throttle = f"  throttle: {', '.join(g.throttling)}" if g.throttling else ""
            self.source = f"gpu{g.index} {g.name}{' — LOST' if g.lost else ''}{throttle}"
        elif s.cpu is not None:
            cpu = s.cpu
            readings = [(key, label, unit, read(cpu)) for key, label, unit, read in CPU_TRACES]
            self.source = f"CPU ({len(s.cpu.per_core_pct)} cores) — {s.state}"
        else:
            self.query_one("#tel-source", Static).update(s.state)
            self._show_roofs(None)
            return
        self._show_roofs(self._gpu(s) if s.gpus else None)
        self.query_one("#tel-source", Static).update(Text(self.source, style="bold" if s.gpus else "dim"))
        shown = {k for k, *_ in readings}
        for key, label, unit, v in readings:
            self.query_one(f"#lb-{key}", Label).update(label)
            if v is not None:
                self.data[key].append(float(v))
                self.query_one(f"#sp-{key}", Sparkline).data = list(self.data[key])
            fmt = VALUE_FORMAT.get(key, "{:,.0f}")
            self.query_one(f"#val-{key}", Static).update("N/A" if v is None else f"{fmt.format(v)} {unit}")
        for key, *_ in GPU_TRACES:
            self.query_one(f"#tr-{key}").display = key in shown


class Live(Widget):
    """The Live tab: telemetry above, the measurement below."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("telemetry", classes="section")
            yield TelemetryPanel(id="telemetry")
            yield Label("measurement", classes="section")
            yield MeasurePanel(id="measure")


class MeasurePanel(Widget):
    """The running measurement: progress, the bandwidth curve and the roofline growing, ceilings so far."""

    DEFAULT_CSS = """
    MeasurePanel { height: 1fr; }
    MeasurePanel #ms-status { height: auto; }
    MeasurePanel #ms-progress { height: 1; display: none; }
    MeasurePanel.-running #ms-progress { display: block; }
    MeasurePanel #ms-charts { height: 1fr; }
    MeasurePanel #ms-ceilings-scroll { height: auto; max-height: 8; }
    """

    REDRAW_S = 0.5  # charts redraw at most twice a second: plotext holds the GIL while it draws
    CURVES = ("bandwidth", "gemm", "fma")  # the left chart: GB/s vs working set, TFLOP/s vs n or M, vs R

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.view = RunView()
        self._dirty = False
        self.curve = "bandwidth"

    def show_curve(self, curve: str) -> None:
        """Show this sweep's curve in the left chart (the app's choice: key v)."""
        if curve != self.curve:
            self.curve = curve
            self._dirty = True
            self._redraw()

    @property
    def samples(self) -> list:
        return self.view.samples

    def on_mount(self) -> None:
        self.set_interval(self.REDRAW_S, self._redraw)
        watch_app(self, run_view=self.show_run, curve=self.show_curve)  # mounted late: the run so far

    def compose(self) -> ComposeResult:
        yield Static(Text("no measurement running — press m to measure this machine (quick plan)", style="dim"),
                     id="ms-status")
        yield ProgressBar(id="ms-progress", show_eta=True)
        with Horizontal(id="ms-charts"):
            yield RooflinePlot(kind="bandwidth", id="ms-bw")
            yield RooflinePlot(id="ms-roof")
        with VerticalScroll(id="ms-ceilings-scroll"):
            yield Static("", id="ms-ceilings")

    def show_run(self, view: RunView) -> None:
        """Start showing `view`: a run just started, finished, failed, or one mounted late into."""
        if not (view.plan or view.starting or view.error or view.held):
            return  # no run yet: the panel says how to start one
        self.view = view
        if view.held and not (view.plan or view.starting or view.error):
            self.query_one("#ms-status", Static).update(Text(view.held, style="bold yellow"))
            return
        if view.error and not view.plan:
            self.query_one("#ms-status", Static).update(Text(f"failed: {view.error}", style="bold red"))
            return
        self.set_class(view.stored is None, "-running")
        if view.starting and not view.plan:
            self.query_one("#ms-status", Static).update(Text(
                "starting the measurement: loading torch and sizing the plan — c or Esc cancels", style="bold"))
        elif view.stored is not None:
            self._stored(view, view.stored)
        elif view.result is not None:
            self._finished(view.result)
        elif view.progress is not None:
            self.update_progress(view, view.progress)
        else:
            bar = self.query_one("#ms-progress", ProgressBar)
            bar.update(total=view.points, progress=0)
            self._show_eta(bar, True)
            self.query_one("#ms-status", Static).update(Text(
                f"measuring {view.device}: {view.plan} plan, {view.points} points — c or Esc cancels "
                "(what is measured is kept)", style="bold"))

    @staticmethod
    def _show_eta(bar: ProgressBar, shown: bool) -> None:
        for eta in bar.query("#eta"):
            eta.display = shown

    def update_progress(self, view: RunView, progress: Progress) -> None:
        sample = view.samples[-1]
        self.query_one("#ms-progress", ProgressBar).update(total=progress.total, progress=progress.done)
        note = f" — skipped: {sample.skipped}" if sample.skipped else ("" if sample.stable else " — unstable")
        self.query_one("#ms-status", Static).update(Text(
            f"[{progress.done}/{progress.total}] {progress.label}{note}  ({progress.elapsed_s:.1f} s) — c cancels"))
        self._dirty = True

    def _redraw(self) -> None:
        """The curves and ceilings for the samples so far (coalesced: see REDRAW_S)."""
        calibration = self.view.calibration
        if not self._dirty or calibration is None:
            return
        self._dirty = False
        samples = self.view.samples
        curves = {"bandwidth": (bandwidth_curves, "bandwidth"), "gemm": (gemm_curves, "GEMM vs n, M"),
                  "fma": (fma_curves, "FMA sweep vs R")}
        make, title = curves[self.curve]  # short: the title goes when wider than an 80-column chart
        self.query_one("#ms-bw", RooflinePlot).show(make(samples), f"{title} (v: next)", kind=self.curve)
        prof = calibration.profile
        points = sample_series(samples, "")
        series = []
        if prof.peak and prof.bandwidth:
            span = intensity_span([prof], [x for p in points for x in p.xs], lo=0.01)
            series = roof_series(prof, prof.paths(), prof.levels(), span)
        self.query_one("#ms-roof", RooflinePlot).show(series + points, "measured roofline so far")
        # Under 30 rows the ceilings get 3 rows (app.tcss): packed to fit them whole.
        short = self.screen.has_class("-short")
        self.query_one("#ms-ceilings", Static).update(ceilings_text(
            calibration, cases=not short, width=(self.size.width or self.app.size.width - 2) - 1, lines=3))

    def _stored(self, view: RunView, run: Run) -> None:
        """This machine's last run (`view.stored`), from the store: what the tab shows until m measures again."""
        self._dirty = True
        self._redraw()
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started_at))
        text = Text(f"last run of this machine: {run.label}, {run.status}, "
                    f"{fmt_count(len(view.samples), 'point')}, {started}", style="bold")
        text.append(f"\n{view.device}, {run.plan} plan — m measures again", style="dim")
        self.query_one("#ms-status", Static).update(text)

    def _finished(self, result: RunResult) -> None:
        self.view.calibration = result.calibration
        self._dirty = True
        self._redraw()
        done = len(result.samples)
        bar = self.query_one("#ms-progress", ProgressBar)
        bar.update(total=max(self.view.points, done), progress=done)
        self._show_eta(bar, False)  # the run is over: no time left to estimate
        saved = kept_words(result.run_id, result.store_error, result.kept, done)
        style = {"complete": "bold green", "cancelled": "bold yellow"}.get(result.status, "bold red")
        text = Text(f"{result.status}: {fmt_count(done, 'point')} in {result.wall_s:.1f} s, {saved}",
                    style=style)
        threads = result.calibration.profile.threads
        if threads:
            text.append(f", {fmt_count(threads, 'thread')}", style=style)
        if result.error:
            text.append(f" — {result.error}")
        if result.throttled:
            text.append(f"\n{fmt_count(len(result.throttled), 'point')} taken while throttled", style="yellow")
        self.query_one("#ms-status", Static).update(text)


def ceilings_text(cal: Calibration, cases: bool = True, width: int | None = None, lines: int | None = None) -> Text:
    """The ceilings so far (a Calibration's), each with the case that produced it; write beside B; which
    ran capped. Without `cases` they are packed (each unit once, 3 figures) to fit `lines` rows of `width`
    columns: the roofs that do not fit are counted at the end ("+2 more"), never cut off at the edge."""
    prof = cal.profile
    write = write_figure(prof)
    unstable = f"  ({len(cal.unstable)} unstable left out)" if cal.unstable else ""
    capped = capped_line(prof)
    if not cases:
        return _packed(prof, write, unstable, capped, width, lines)
    t = Text("ceilings: ", style="bold")

    def case(c: Ceiling) -> str:
        return f" [{c.case}]" if c.case else ""

    parts = [f"B {lv} {fmt_bandwidth(prof.bandwidth[lv].value)}{case(prof.bandwidth[lv])}" for lv in prof.levels()]
    if write:
        parts.append(f"write {fmt_bandwidth(write.value)}{case(write)}")
    parts += [f"F {p} {fmt_flops_rate(prof.peak[p].value)}{case(prof.peak[p])}" for p in prof.paths()]
    t.append("; ".join(parts) if parts else "none yet")
    t.append(unstable, style="yellow")
    if capped:
        t.append(f"\n{capped}", style="yellow")
    return t


def _packed(prof: DeviceProfile, write: Ceiling | None, unstable: str, capped: str, width: int | None,
            lines: int | None) -> Text:
    """The short screen's ceilings: `GB/s dram 16.8, llc 42.4; TFLOP/s fp32-matmul 0.0338, …`, dropping
    the last roofs (counted, "+N more") until the whole fits `lines` rows of `width` columns."""
    bw = [f"{lv} {fmt_sig(prof.bandwidth[lv].value / 1e9)}" for lv in prof.levels()]
    if write:
        bw.append(f"write {fmt_sig(write.value / 1e9)}")
    peaks = [f"{p} {fmt_sig(prof.peak[p].value / 1e12)}" for p in prof.paths()]

    def build(keep: int) -> Text:
        groups = ([f"GB/s {', '.join(bw)}"] if bw else []) + ([f"TFLOP/s {', '.join(peaks[:keep])}"] if keep else [])
        t = Text("ceilings: ", style="bold")
        t.append("; ".join(groups) if groups else "none yet")
        if keep < len(peaks):
            t.append(f" +{len(peaks) - keep} more (History: 5)", style="dim")
        t.append(unstable, style="yellow")
        if capped:
            t.append(f"\n{capped}", style="yellow")
        return t

    keep = len(peaks)
    text = build(keep)
    while width and lines and keep > 0 and _rows(text, width) > lines:
        keep -= 1
        text = build(keep)
    return text


def _rows(text: Text, width: int) -> int:
    """How many rows `text` takes wrapped at `width` columns."""
    return len(text.wrap(Console(width=width, color_system=None), width))
