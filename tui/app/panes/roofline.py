"""Roofline: the log-log chart of a device — roofs per path, slopes, ridges, measured points, your ops."""

from __future__ import annotations

from typing import cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Label, Select, SelectionList, Static

from rooftop.models.analysis import Analysis, analyze
from rooftop.models.compare import thread_note
from rooftop.models.plotdata import Series, intensity_span, link_slopes, point_series, roof_series
from rooftop.models.paths import same_path
from rooftop.models.profile import DeviceProfile, NoRoof
from rooftop.tui.app.export import export_tab, file_stem
from rooftop.tui.app.state import LabApp
from rooftop.tui.render.chart import line_colors
from rooftop.tui.app.widgets import RooflinePlot, device_options, refresh_select, watch_app
from rooftop.tui.services.context import latest_profile_points, run_dates
from rooftop.tui.share.charts import roofline_chart
from rooftop.tui.share.out import Shared

NO_OVERLAY = "(none)"
DEFAULT_PATHS = ("fp64-tc", "fp32-fma", "fp32-matmul", "bf16-tc", "fp8-tc")


def side_legend(series: list[Series], devices: list[DeviceProfile], roofless: list[str], here: str) -> Text:
    """The chart's legend beside it: each device's slopes and roofs in the chart's colours (the
    points, with the chart's markers, are listed below the chart, several to a line: beside it they
    pushed the overlay device off an 80×24 screen). plotext's own legend covers the upper left of a
    small chart, and leaves itself out when it has more entries than rows."""
    colors = line_colors(series)
    text = Text("roofs in TFLOP/s\n", style="dim")  # as the y axis: the entries stay one line in 24 columns
    for d in devices:
        mine = [s for s in series if s.kind in ("roof", "slope") and s.label.startswith(f"{d.id} ")]
        for i, s in enumerate(mine):
            text.append("── ", style=colors[s.label])
            if i == 0 and len(devices) > 1:  # an overlay: each device's first line names it (no line of its own)
                text.append(f"{d.id} ", style="bold")
            text.append(s.label.removeprefix(f"{d.id} ").removesuffix(" TFLOP/s") + "\n")
    for what in roofless:
        text.append(f"· {what}: no roof for it on {here}\n", style="yellow")
    if len(devices) == 2 and (note := thread_note(devices)):
        text.append(f"! {note}\n", style="yellow")
    if not any(s.kind == "point" for s in series):
        text.append("pin ops from What-if with p", style="dim")
    return text


class Roofline(Widget):
    """The Roofline tab."""

    def __init__(self, profiles: dict[str, DeviceProfile], device: str, overlay: str | None = None, *,
                 id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.profiles = profiles
        self.device_id = device
        self.overlay_id = overlay if overlay in profiles else None
        self.current: Analysis | None = None
        self.measured: dict[str, list[Series]] = {}  # device id → measured sample points
        self.links: dict[str, dict[str, float]] = {}  # device id → the links a kept job crossed → their B

    def compose(self) -> ComposeResult:
        ids = device_options(self.profiles)
        with Horizontal(classes="row"):
            yield Label("device ")
            yield Select(ids, value=self.device_id, allow_blank=False, compact=True, id="rl-device")
            yield Label(" overlay ")
            overlays: list[tuple[str | Text, str]] = [(NO_OVERLAY, NO_OVERLAY), *ids]
            yield Select(overlays, value=self.overlay_id or NO_OVERLAY, allow_blank=False,
                         compact=True, id="rl-overlay")
        with Horizontal():
            with Vertical(id="rl-side"):
                yield Label("roofs (space toggles)")
                yield SelectionList[str](id="rl-paths")
                with VerticalScroll(id="rl-legend-box"):
                    yield Static("", id="rl-legend")
            yield RooflinePlot(id="rl-plot")

    def on_mount(self) -> None:
        self._reset_paths()
        # The app's state now and as it changes (redraw waits for the end of mounting: is_mounted).
        watch_app(self, profiles=self.set_profiles, device_id=self.select_device, overlay_id=self.select_overlay,
                  current=self.show_op, pinned=lambda _pins: self.redraw())
        self.call_later(self.redraw)

    def _reset_paths(self) -> None:
        dev = self.profiles[self.device_id]
        sel = self.query_one("#rl-paths", SelectionList)
        sel.clear_options()
        sel.add_options([(p, p, any(same_path(p, d) for d in DEFAULT_PATHS)) for p in dev.paths()])

    @on(Select.Changed, "#rl-device")
    def _device(self, event: Select.Changed) -> None:
        self.device_id = str(event.value)
        self._reset_paths()
        self.redraw()

    @on(Select.Changed, "#rl-overlay")
    def _overlay(self, event: Select.Changed) -> None:
        self.overlay_id = None if event.value == NO_OVERLAY else str(event.value)
        self.redraw()

    @on(SelectionList.SelectedChanged, "#rl-paths")
    def _paths(self) -> None:
        self.redraw()

    def show_op(self, analysis: Analysis | None) -> None:
        self.current = analysis
        self.redraw()

    def set_measured(self, device_id: str, points: list[Series]) -> None:
        self.measured[device_id] = points
        self.redraw()

    def set_profiles(self, profiles: dict[str, DeviceProfile]) -> None:
        if profiles is self.profiles:
            return
        self.profiles = profiles
        self.measured.clear()  # a re-measured profile has new points
        self.links.clear()
        refresh_select(self.query_one("#rl-device", Select), list(profiles))
        refresh_select(self.query_one("#rl-overlay", Select), list(profiles), [NO_OVERLAY])
        self.device_id = str(self.query_one("#rl-device", Select).value)
        ov = self.query_one("#rl-overlay", Select).value
        self.overlay_id = None if ov == NO_OVERLAY else str(ov)
        self.redraw()

    def select_device(self, device_id: str) -> None:
        """Show `device_id` (the app's choice: a new measurement); the Select's Changed redraws."""
        select = self.query_one("#rl-device", Select)
        if device_id in self.profiles and select.value != device_id:
            select.value = device_id

    def select_overlay(self, overlay_id: str | None) -> None:
        """Overlay `overlay_id` (what was shown before a new measurement); None leaves the user's choice."""
        select = self.query_one("#rl-overlay", Select)
        if overlay_id in self.profiles and select.value != overlay_id:
            select.value = overlay_id

    def export_file(self, svg: bool) -> None:
        """e / E: the chart on show, with each device's source under its title, to a file (app/export.py)."""
        plot = self.query_one("#rl-plot", RooflinePlot)
        devices = [self.profiles[self.device_id]] + ([self.profiles[self.overlay_id]] if self.overlay_id else [])
        series, title, db = plot.series, "roofline: " + plot.title, cast(LabApp, self.app).config.db_path

        def build() -> Shared:  # in the worker: the store says when a measured device's roofs were measured
            return Shared([roofline_chart(devices, series, title, run_dates(db, devices))])

        export_tab(self, file_stem("roofline", *(d.id for d in devices)), build, svg)

    def redraw(self) -> None:
        if not self.is_mounted:
            return
        dev = self.profiles[self.device_id]
        paths = [str(p) for p in self.query_one("#rl-paths", SelectionList).selected]
        pinned = getattr(self.app, "pinned", [])  # the app keeps them: this tab may mount late
        ops = list(pinned) + ([self.current.op] if self.current else [])
        points: list[Series] = []
        roofless: list[str] = []  # pinned ops this device has no roof for: listed, not silently gone
        for op in dict.fromkeys(ops):
            try:
                points.append(point_series(analyze(op, dev)))
            except NoRoof:
                roofless.append(op.describe())
        if dev.id not in self.measured:  # read once: a stored run's sample points, the newest profile's ops
            lab = cast(LabApp, self.app)  # Textual types it App; it is the RooftopApp
            stored = lab.run_points(dev) if dev.extra.get("run_id") else []
            kept, self.links[dev.id] = latest_profile_points(lab.config.db_path, dev.id)
            self.measured[dev.id] = stored + kept
        points = self.measured.get(dev.id, []) + points
        devices = [dev] + ([self.profiles[self.overlay_id]] if self.overlay_id else [])
        span = intensity_span(devices, [x for p in points for x in p.xs])  # an op that adds nothing has no x
        series: list[Series] = []
        for d in devices:
            shown = [p for p in paths if p in d.peak] or d.paths()[:1]
            series += roof_series(d, shown, d.levels(), span)
            if d is dev:  # a kept job's collectives sit on the slopes of its links: those the chart lacks, drawn
                series += link_slopes(dev, self.links.get(dev.id, {}), span, shown)
        series += points
        title = dev.id + (f" vs {self.overlay_id}" if self.overlay_id else "") + f" ({dev.source})"
        self.query_one("#rl-plot", RooflinePlot).show(series, title, legend="points")
        self.query_one("#rl-legend", Static).update(side_legend(series, devices, roofless, dev.id))
