"""LLM: a model's prefill or decode step on the roofline; move batch and context, watch the points move."""

from __future__ import annotations

import shlex

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Input, Label, Select, Static

from rooftop.models.llm.step import (
    ModelError, Phase, StepBound, arch_lines, builtin_models, compute_bound_batch, llm_doc, step_bound,
)
from rooftop.store.hfconfig import load_arch
from rooftop.models.plotdata import llm_step_series
from rooftop.models.profile import DeviceProfile, NoRoof
from rooftop.models.spec import SpecError, parse_count
from rooftop.models.units import fmt_number, fmt_time
from rooftop.tui.app.export import export_tab, file_stem
from rooftop.tui.app.widgets import ErrorLine, RooflinePlot, TextField, device_options, refresh_select, watch_app
from rooftop.tui.share.charts import roofline_chart
from rooftop.tui.share.figure import chart_svg_inline
from rooftop.tui.share.html import rooftop_version
from rooftop.tui.share.out import Shared
from rooftop.tui.share.reports import llm_report

BATCH = Binding.Group("batch ÷2 ×2")
CONTEXT = Binding.Group("ctx ÷2 ×2")


class Llm(Widget):
    """The LLM tab."""

    can_focus = True  # the app focuses the pane when its tab is shown, so its keys work before any Tab

    BINDINGS = [
        # each pair one footer item ("[ ] batch ÷2 ×2"): four items and the app's keys overran 80 columns
        Binding("left_square_bracket", "scale('batch', 0.5)", "batch ÷2", group=BATCH),
        Binding("right_square_bracket", "scale('batch', 2)", "batch ×2", group=BATCH),
        Binding("comma", "scale('context', 0.5)", "ctx ÷2", group=CONTEXT),
        Binding("full_stop", "scale('context', 2)", "ctx ×2", group=CONTEXT),
        Binding("pagedown", "page(1)", "Scroll", show=False),  # the pane scrolls under 90 columns
        Binding("pageup", "page(-1)", "Scroll", show=False),
    ]

    def __init__(self, profiles: dict[str, DeviceProfile], device: str, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.profiles = profiles
        self.device_id = device
        self.step: StepBound | None = None

    def compose(self) -> ComposeResult:
        models = [(m, m) for m in builtin_models()]
        # Beside each other when wide; under 90 columns one scrolling column, the chart below the
        # whole op table (at 80×24 the table's last rows and the chart were cut off, with no scrolling).
        with VerticalScroll(id="llm-body", can_focus=False):
            with Vertical(id="llm-left"):
                with Horizontal(classes="row"):
                    yield Select(models, value="qwen2.5-7b", allow_blank=False, compact=True, id="llm-model")
                    yield Select([("decode", "decode"), ("prefill", "prefill")], value="decode", allow_blank=False,
                                 compact=True, id="llm-phase")
                    yield Select(device_options(self.profiles), value=self.device_id, allow_blank=False,
                                 compact=True, id="llm-device")
                with Horizontal(classes="row"):
                    yield Label("batch ")
                    yield TextField("1", compact=True, id="llm-batch")
                    yield Label(" prompt/ctx ")
                    yield TextField("128", compact=True, id="llm-context")
                    config = TextField("", placeholder="config.json", compact=True, id="llm-config")
                    config.tooltip = "a Hugging Face config.json (optional): the model to use instead of the list's"
                    yield Label(" ")
                    yield config
                yield ErrorLine(id="llm-error")
                yield Static("", id="llm-summary")
                yield DataTable(id="llm-ops", cursor_type="row", zebra_stripes=True)
            yield RooflinePlot(id="llm-plot")

    def on_mount(self) -> None:
        self.query_one("#llm-ops", DataTable).add_columns("op", "×", "I", "regime", "T each", "share")
        self.recompute()
        self._ready = True  # the Changed events of mounting itself are not edits
        watch_app(self, profiles=self.set_profiles)

    _ready = False

    @on(Select.Changed)
    @on(Input.Changed)
    def _changed(self) -> None:
        if self._ready:
            self.recompute()

    def _inputs(self) -> tuple[str, str, str, int, int]:
        model = self.query_one("#llm-config", Input).value.strip() or str(self.query_one("#llm-model", Select).value)
        try:
            batch = parse_count(self.query_one("#llm-batch", Input).value, "batch")
            ctx = parse_count(self.query_one("#llm-context", Input).value, "context")
        except SpecError as exc:
            raise ModelError(str(exc)) from None
        return (model, str(self.query_one("#llm-phase", Select).value), str(self.query_one("#llm-device", Select).value),
                batch, ctx)

    def recompute(self) -> None:
        err = self.query_one("#llm-error", ErrorLine)
        try:
            model, phase, device, batch, ctx = self._inputs()
            arch = load_arch(model)
            dev = self.profiles[device]
            ph = Phase(phase, batch, prompt=ctx, context=ctx)
            step = step_bound(arch, ph, dev)
            flip = compute_bound_batch(arch, dev, ctx, linear_only=True) if phase == "decode" else None
        except (ModelError, NoRoof) as exc:
            err.show(exc)
            return
        err.show(None)
        self.step = step
        s = Text(f"{arch.name} {phase} on {dev.id}: {arch.params / 1e9:.2f} B params, {arch.weights_label}\n", style="bold")
        s.append(f"read per step: weights {step.weights_read_bytes / 2**30:.2f} GiB + KV "
                 f"{step.kv_bytes / 2**30:.3g} GiB\n")
        s.append(f"bound: Q/B {fmt_time(step.bytes_bound_s)}, ΣT {fmt_time(step.lower_bound_s)}, T ≥ "
                 f"{fmt_time(step.time_bound_s)} ({step.binds}) → ")
        s.append(f"≤ {fmt_number(step.tokens_per_s)} tokens/s\n", style="bold")
        if flip:
            s.append(f"linear layers compute-bound from batch ≈ {flip}\n", style="dim")
        s.append("".join(f"{line}\n" for line in arch_lines(arch)), style="dim")
        s.append(step.memory.describe(dev.id), style="bold red" if step.memory.fits is False else "dim")
        self.query_one("#llm-summary", Static).update(s)
        table = self.query_one("#llm-ops", DataTable)
        table.clear()
        total = step.lower_bound_s
        for lo, a in step.ops:
            table.add_row(lo.name, f"{lo.count:.4g}", f"{a.intensity:.3g}", a.regime, fmt_time(a.time_lower_bound),
                          f"{100 * a.time_lower_bound * lo.count / total:.1f}%")
        self._draw(step)

    def _draw(self, step: StepBound) -> None:
        series = llm_step_series(step)
        self.query_one("#llm-plot", RooflinePlot).show(series, f"{step.arch.name} {step.phase.kind}, batch {step.phase.batch}")

    def export_file(self, svg: bool) -> None:
        """e: the step on show as the report `rooftop llm --out FILE.html` writes; E: its chart as SVG, with the
        device's source under its title (app/export.py)."""
        plot = self.query_one("#llm-plot", RooflinePlot)
        dev = self.profiles.get(str(self.query_one("#llm-device", Select).value))
        if dev is None or not plot.series:
            self.notify("nothing to export yet: choose a model and a device", severity="warning", timeout=4)
            return
        chart, step = roofline_chart([dev], plot.series, plot.title), self.step
        try:
            model, phase, device, batch, ctx = self._inputs()
        except ModelError:
            step = None  # the fields were edited since: the chart on show still goes, as SVG

        def report() -> str:  # the report `rooftop llm MODEL --out FILE.html` writes, of the step on show
            assert step is not None  # report is offered only with a step (html=None otherwise)
            doc = llm_doc(step.arch, step.device, [step])
            same = ["rooftop", "llm", model, "-d", device, "--phase", phase, "--batch", str(batch),
                    "--prompt" if phase == "prefill" else "--context", str(ctx)]  # what the CLI would write
            return llm_report(doc, [chart_svg_inline(chart)], version=rooftop_version(), command=shlex.join(same))

        export_tab(self, file_stem("llm", plot.title, dev.id), lambda: Shared([chart], report if step else None), svg)

    def set_profiles(self, profiles: dict[str, DeviceProfile]) -> None:
        if profiles is self.profiles:
            return
        self.profiles = profiles
        refresh_select(self.query_one("#llm-device", Select), list(profiles))
        self.recompute()

    def action_page(self, direction: int) -> None:
        body = self.query_one("#llm-body", VerticalScroll)
        body.scroll_page_down() if direction > 0 else body.scroll_page_up()

    def action_scale(self, field: str, factor: float) -> None:
        inp = self.query_one("#llm-batch" if field == "batch" else "#llm-context", Input)
        try:
            value = parse_count(inp.value, field)
        except SpecError:
            value = 1
        inp.value = str(max(1, round(value * factor)))
