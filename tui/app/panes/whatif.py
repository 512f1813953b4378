"""What-if: type or build an op, see its point, regime, bound and advice as you type."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select, Static
from textual.worker import Worker

from rooftop.models.analysis import Analysis, analyze, devices_with_roof, flip_point
from rooftop.models.dtypes import DTYPES
from rooftop.models.ops import BATCH_FIELDS, Attention, Op, batch_value, with_batch
from rooftop.models.plotdata import intensity_span, point_series, roof_series
from rooftop.models.profile import DeviceProfile, NoRoof
from rooftop.models.spec import GRAMMARS, SpecError, parse_spec
from rooftop.models.units import fmt_bandwidth, fmt_bytes, fmt_flops, fmt_flops_rate, fmt_intensity, fmt_percent, fmt_time
from rooftop.tui.app.widgets import ErrorLine, RooflinePlot, TextField, device_options, refresh_select, watch_app

DEFAULT_SPEC = "gemv 8192 8192 bf16"  # a batch-1 decode GEMV: seed 001's starting point
FORM_FIELDS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "batch"),
    "attn": ("b", "h", "kv", "d", "q", "t", "mode"),
    "ew": ("n", "flops", "reads", "writes"),
    "fma": ("r", "n"),
    "norm": ("rows", "cols", "type"),
    "softmax": ("rows", "cols"),
}


def op_field(op: Op, name: str) -> str:
    """The value a form field shows for an op (attention shows its effective kv and q)."""
    if isinstance(op, Attention) and name in ("kv", "q"):
        return str(op.kv_heads if name == "kv" else op.q_len)
    v = getattr(op, name, "")
    return f"{v:g}" if isinstance(v, float) else str(v)


def form_spec(kind: str, values: dict[str, str], dtype: str) -> str:
    """The one-line spec a form describes."""
    parts = [kind] + [f"{k}={v.strip()}" for k, v in values.items() if v.strip()]
    return " ".join(parts + [dtype])


def analysis_text(a: Analysis) -> Text:
    """The analysis in a few lines: the numbers, then advice (→) and warnings (!)."""
    t = Text()
    t.append(f"{a.op.describe()}", style="bold")
    t.append(f"  on {a.device.id} ({a.device.source})\n")
    t.append(f"W {fmt_flops(a.flops)}  Q {fmt_bytes(a.bytes)}  I {fmt_intensity(a.intensity)}  path {a.path}\n")
    t.append(f"F {fmt_flops_rate(a.peak)}  B {fmt_bandwidth(a.bandwidth)}  ridge {fmt_intensity(a.ridge)}\n")
    style = "bold green" if a.regime == "compute" else "bold yellow"  # memory, comm, latency
    t.append(f"{a.regime}-bound", style=style)
    t.append(f"  T ≥ {fmt_time(a.time_lower_bound)}  (Q/B {fmt_time(a.time_memory)}, W/F {fmt_time(a.time_compute)})\n")
    t.append(f"P {fmt_flops_rate(a.attainable)} = {100 * a.attainable / a.peak:.3g}% of F\n")
    if a.measured:
        m = a.measured
        t.append(f"measured {fmt_time(m.time_s)}: {fmt_flops_rate(m.achieved_flops)}, "
                 f"{fmt_bandwidth(m.achieved_bandwidth)} = {fmt_percent(m.fraction_of_roof)} of the roof\n", style="bold")
    for line in a.advice:
        t.append(f"→ {line}\n")
    for line in a.warnings:
        t.append(f"! {line}\n", style="yellow")
    return t


def batch_bar(op: Op, flip: int | None, width: int = 24, top: int = 1 << 15) -> Text:
    """Seed 001's slider: the batch-like value on a log2 scale, with where the regime flips."""
    field = BATCH_FIELDS[type(op)]
    value = batch_value(op)
    steps = int(math.log2(top))
    pos = min(width - 1, round(math.log2(max(1, value)) / steps * (width - 1)))
    cells = ["─"] * width
    if flip is not None and flip <= top:
        cells[min(width - 1, round(math.log2(flip) / steps * (width - 1)))] = "┼"
    cells[pos] = "●"
    t = Text(f"{field} = {value}  1 ")
    t.append("".join(cells))
    t.append(f" {top // 1024}k  ")
    t.append(f"compute-bound from {field} ≈ {flip}" if flip else "memory-bound at any size", style="dim")
    return t


class WhatIf(Widget):
    """The What-if tab."""

    can_focus = True  # the app focuses the pane when its tab is shown, so its keys work before any Tab

    BINDINGS = [
        Binding("left_square_bracket", "batch(0.5)", "M ÷2"),
        Binding("right_square_bracket", "batch(2)", "M ×2"),
        Binding("p", "pin", "Pin/unpin"),
    ]

    @dataclass
    class Changed(Message):
        """The analysed op changed (None while the spec is invalid)."""

        analysis: Analysis | None

    @dataclass
    class Pinned(Message):
        analysis: Analysis

    def __init__(self, profiles: dict[str, DeviceProfile], device: str, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.profiles = profiles
        self.device_id = device
        self.analysis: Analysis | None = None  # the spec's, None while it does not parse
        self.shown: Analysis | None = None  # the one on screen: the last that parsed

    def compose(self) -> ComposeResult:
        with Horizontal(id="whatif-body", classes="beside"):
            with Vertical(id="whatif-left"):
                with Horizontal(classes="row"):
                    yield Select([(k, k) for k in FORM_FIELDS], value="gemm", allow_blank=False, compact=True, id="kind")
                    yield Select([(d, d) for d in DTYPES], value="bf16", allow_blank=False, compact=True, id="dtype")
                    yield Select(device_options(self.profiles), value=self.device_id, allow_blank=False, compact=True,
                                 id="device")
                yield Horizontal(id="fields", classes="row")
                yield TextField(DEFAULT_SPEC, placeholder="op spec, e.g. gemm 1 8192 8192 bf16", compact=True, id="spec")
                with Horizontal(classes="row"):
                    yield Label("measured ms ")
                    yield TextField("", placeholder="optional", compact=True, id="measured")
                    yield Button("M ÷2", id="halve", compact=True)
                    yield Button("M ×2", id="double", compact=True)
                    yield Button("pin", id="pin", compact=True)
                yield ErrorLine(id="spec-error")
                yield Static("", id="batch-bar")
                with VerticalScroll(id="analysis-scroll"):
                    yield Static("", id="analysis")
            yield RooflinePlot(id="whatif-plot", classes="chart-beside")

    def on_mount(self) -> None:
        self.analyse()
        watch_app(self, profiles=self.set_profiles)

    # -- the form ----------------------------------------------------------------
    # The spec line is the source of truth. The form mirrors every valid spec; a
    # user's edit of a form widget (it has focus) rewrites the spec. Programmatic
    # fills never have focus, so they cannot loop back.

    def _fill_form(self, op: Op) -> None:
        kind = op.kind
        if kind not in FORM_FIELDS:  # a collective: written on the spec line only; the form keeps the last op's
            return
        with self.prevent(Select.Changed):
            self.query_one("#kind", Select).value = kind
            self.query_one("#dtype", Select).value = op.dtype
        box = self.query_one("#fields", Horizontal)
        current = [(i.id or "")[2:] for i in box.query(Input).results(Input)]
        if current == list(FORM_FIELDS[kind]):
            with self.prevent(Input.Changed):
                for name in current:
                    field = box.query_one(f"#f-{name}", Input)
                    if not field.has_focus:
                        field.value = op_field(op, name)
            return
        # the function, not a coroutine: a rebuild superseded before it starts is then never created.
        # Worker[None] says which of Textual's kinds of work it is (a function returning a coroutine could be either)
        _: Worker[None] = self.run_worker(partial(self._rebuild_fields, op), exclusive=True, group="whatif-form")

    async def _rebuild_fields(self, op: Op) -> None:
        """New field inputs for another op kind: the old ones must be gone before ids are reused."""
        box = self.query_one("#fields", Horizontal)
        await box.remove_children()
        widgets: list[Widget] = []
        for name in FORM_FIELDS[op.kind]:
            widgets.append(Label(f" {name} "))
            widgets.append(TextField(op_field(op, name), placeholder=name, compact=True, id=f"f-{name}", classes="field"))
        await box.mount_all(widgets)

    def _form_changed(self) -> None:
        kind = str(self.query_one("#kind", Select).value)
        values = {(i.id or "")[2:]: i.value for i in self.query("#fields Input").results(Input)}
        self.set_spec(form_spec(kind, values, str(self.query_one("#dtype", Select).value)))

    @on(Select.Changed, "#kind")
    def _kind_changed(self, event: Select.Changed) -> None:
        if not event.select.has_focus:
            return
        kind = str(event.value)
        example = {"gemm": "gemm 1 8192 8192", "attn": "attn b=1 h=32 kv=8 d=128 t=8192 decode",
                   "ew": "ew n=1e8", "fma": "fma 64", "norm": "norm 4096 4096", "softmax": "softmax 4096 4096"}[kind]
        dtype = str(self.query_one("#dtype", Select).value)
        allowed = GRAMMARS[kind].dtypes
        self.set_spec(f"{example} {dtype if dtype in allowed else allowed[1 if len(allowed) > 1 else 0]}")

    @on(Input.Changed, ".field")
    def _field_changed(self, event: Input.Changed) -> None:
        if event.input.has_focus:
            self._form_changed()

    @on(Select.Changed, "#dtype")
    def _dtype_changed(self, event: Select.Changed) -> None:
        if event.select.has_focus:
            self._form_changed()

    @on(Select.Changed, "#device")
    def _device_changed(self, event: Select.Changed) -> None:
        self.device_id = str(event.value)
        self.analyse()

    @on(Input.Changed, "#spec")
    @on(Input.Changed, "#measured")
    def _spec_changed(self) -> None:
        self.analyse()

    # -- analysis ------------------------------------------------------------------

    def set_spec(self, spec: str) -> None:
        """Type a spec as a user would (tests and other tabs use this), analysed at once: keys that come
        together (`]` `]` `p`) each act on the op before them, not on one whose Changed is still queued."""
        with self.prevent(Input.Changed):
            self.query_one("#spec", Input).value = spec
        self.analyse()

    def analyse(self) -> None:
        if not self.query("#spec") or not self.query("#analysis"):
            return  # still composing (Changed events of the form's own mounting)
        spec = self.query_one("#spec", Input).value
        error = self.query_one("#spec-error", ErrorLine)
        try:
            op = parse_spec(spec)
            measured = self._measured()
            a = analyze(op, self.profiles[self.device_id], measured)
        except (SpecError, NoRoof, ValueError) as exc:
            have = devices_with_roof(op, self.profiles.values()) if isinstance(exc, NoRoof) else []
            error.show(NoRoof(f"{exc}; devices with one: {', '.join(have)}") if have else exc)  # where to ask
            self._stale(True)  # the last good op's analysis stays, dimmed: not the typed spec's
            self.analysis = None
            self.post_message(self.Changed(None))
            return
        error.show(None)
        self.analysis = self.shown = a
        self._fill_form(op)
        self.query_one("#analysis", Static).update(analysis_text(a))
        self.query_one("#batch-bar", Static).update(batch_bar(op, flip_point(op, a.device)))
        self._draw(a)
        self.post_message(self.Changed(a))

    def _stale(self, stale: bool) -> None:
        """Dim what is shown while the spec does not parse: it is the last good op's, not the typed one's."""
        a = self.shown
        if not stale or a is None:
            return
        text = Text("last valid op — the spec above is not read:\n", style="italic")
        text.append_text(analysis_text(a))
        text.stylize("dim")
        self.query_one("#analysis", Static).update(text)
        bar = batch_bar(a.op, flip_point(a.op, a.device))
        bar.stylize("dim")
        self.query_one("#batch-bar", Static).update(bar)
        self._draw(a, stale=True)

    def _measured(self) -> float | None:
        raw = self.query_one("#measured", Input).value.strip()
        if not raw:
            return None
        try:
            ms = float(raw)
        except ValueError:
            raise ValueError(f"measured ms {raw!r} is not a number") from None
        if not (ms > 0 and math.isfinite(ms)):
            raise ValueError(f"measured ms {raw!r}: give a positive, finite time in milliseconds, e.g. 0.05")
        return ms / 1e3

    def _draw(self, a: Analysis, stale: bool = False) -> None:
        dev = a.device
        paths = list(dict.fromkeys([a.path] + [p for p in ("bf16-tc", "fp32-fma") if p in dev.peak]))
        span = intensity_span([dev], [a.intensity])
        series = roof_series(dev, paths, ["dram"], span) + [point_series(a)]
        title = f"{dev.id}: {a.regime}-bound" + (" (last valid op)" if stale else "")
        self.query_one(RooflinePlot).show(series, title)

    def set_profiles(self, profiles: dict[str, DeviceProfile]) -> None:
        if profiles is self.profiles:
            return
        self.profiles = profiles
        refresh_select(self.query_one("#device", Select), list(profiles))
        self.device_id = str(self.query_one("#device", Select).value)
        self.analyse()

    # -- actions ---------------------------------------------------------------------

    def action_batch(self, factor: float) -> None:
        if self.analysis is None:
            self.app.bell()
            return
        op = self.analysis.op
        new = with_batch(op, round(batch_value(op) * factor))
        if new == op:
            self.app.bell()
            return
        self.set_spec(new.spec())

    def action_pin(self) -> None:
        if self.analysis is not None:
            self.post_message(self.Pinned(self.analysis))  # the app pins or unpins it, and says which

    @on(Button.Pressed, "#halve")
    def _halve(self) -> None:
        self.action_batch(0.5)

    @on(Button.Pressed, "#double")
    def _double(self) -> None:
        self.action_batch(2)

    @on(Button.Pressed, "#pin")
    def _pin(self) -> None:
        self.action_pin()

