"""Compare: devices side by side — B, F per path, ridges, crossovers, and the What-if op on each."""

from __future__ import annotations

from rich.text import Text
from textual.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import Label, Select, Static

from rooftop.models.analysis import Analysis, analyze
from rooftop.models.compare import common_paths, compare_path, thread_note
from rooftop.models.paths import distinct_paths, level_sort_key
from rooftop.models.profile import DeviceProfile, NoRoof
from rooftop.models.units import fmt_ratio, fmt_time
from rooftop.models.safetext import safe_text
from rooftop.tui.app.widgets import Col, FitTable, device_options, refresh_select, watch_app


class Compare(Widget):
    """The Compare tab: two devices (any of catalog, measured, imported)."""

    def __init__(self, profiles: dict[str, DeviceProfile], a: str, b: str, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.profiles = profiles
        self.a, self.b = a, b
        self.op_analysis: Analysis | None = None

    def compose(self) -> ComposeResult:
        options = device_options(self.profiles)
        with Horizontal(classes="row"):
            yield Label("compare ")
            yield Select(options, value=self.a, allow_blank=False, compact=True, id="cmp-a")
            yield Label(" with ")
            yield Select(options, value=self.b, allow_blank=False, compact=True, id="cmp-b")
        with VerticalScroll():
            yield Static("", id="cmp-threads")  # two CPU runs of different thread counts: said
            yield Static("", id="cmp-op")
            yield FitTable([], id="cmp-table", zebra_stripes=True, cursor_type="row")

    def on_mount(self) -> None:
        self.refresh_table()
        watch_app(self, profiles=self.set_profiles, current=self.show_op)

    @on(Select.Changed, "#cmp-a")
    @on(Select.Changed, "#cmp-b")
    def _changed(self) -> None:
        self.a = str(self.query_one("#cmp-a", Select).value)
        self.b = str(self.query_one("#cmp-b", Select).value)
        self.refresh_table()

    def set_profiles(self, profiles: dict[str, DeviceProfile]) -> None:
        if profiles is self.profiles:
            return
        self.profiles = profiles
        for sel in ("#cmp-a", "#cmp-b"):
            refresh_select(self.query_one(sel, Select), list(profiles))
        self._changed()

    def show_op(self, analysis: Analysis | None) -> None:
        self.op_analysis = analysis
        self._op_line()

    def refresh_table(self) -> None:
        a, b = self.profiles[self.a], self.profiles[self.b]
        rows = [(None, cells) for cells in roof_rows(a, b)]
        self.query_one("#cmp-table", FitTable).set_rows(rows, compare_columns(a.id, b.id))
        note = thread_note([a, b]) or ""
        threads = self.query_one("#cmp-threads", Static)
        threads.update(Text(note, style="yellow"))
        threads.display = bool(note)
        self._op_line()

    def _op_line(self) -> None:
        out = self.query_one("#cmp-op", Static)
        a = self.op_analysis
        if a is None:
            out.update(Text("type an op in What-if (3) to see which device runs it faster", style="dim"))
            return
        rows = []
        for dev in (self.profiles[self.a], self.profiles[self.b]):
            try:
                rows.append(analyze(a.op, dev))
            except NoRoof as exc:
                out.update(Text(f"{a.op.describe()}: {exc}", style="yellow"))
                return
        fast, slow = sorted(rows, key=lambda r: r.time_lower_bound)
        text = Text(f"{a.op.describe()}: ", style="bold")
        text.append(f"{fast.device.id} is faster — T ≥ {fmt_time(fast.time_lower_bound)} ({fast.regime}-bound) vs "
                    f"{fmt_time(slow.time_lower_bound)} on {slow.device.id} ({slow.regime}-bound), "
                    f"{fmt_ratio(slow.time_lower_bound / fast.time_lower_bound)}")
        out.update(text)


def compare_columns(a: str, b: str) -> list[Col]:
    """The roof table's columns. At 80 columns which device is higher on each side of the
    crossover goes first (the ratios say it), then the ridges (What-if shows each device's)."""
    a, b = (escape(safe_text(x)) for x in (a, b))  # a heading is read as markup; a run's name may hold '['
    return [Col("roof", "roof"), Col("a", a, max_width=12), Col("b", b, max_width=12), Col("ratio", "ratio"),
            Col("ridges", "ridges I*", drop=2), Col("cross", "cross at I", drop=1),
            Col("higher", "higher ↓/↑ I", drop=3)]


def roof_rows(a: DeviceProfile, b: DeviceProfile) -> list[tuple[str, ...]]:
    """One row per memory level, then per compute path (the paths both have first)."""
    rows: list[tuple[str, ...]] = []
    for level in sorted(set(a.bandwidth) | set(b.bandwidth), key=level_sort_key):
        va, vb = a.bandwidth.get(level), b.bandwidth.get(level)
        rows.append((f"B {level} GB/s", _num(va.value / 1e9 if va else None), _num(vb.value / 1e9 if vb else None),
                     _ratio(va.value if va else None, vb.value if vb else None), "", "", ""))
    both = common_paths(a, b)
    for path in sorted(distinct_paths([*a.peak, *b.peak]), key=lambda p: (p not in both, p)):  # bf16-matmul = bf16-tc
        fa, fb = a.peak.get(path), b.peak.get(path)
        ridge = cross = side = ""
        if path in both and "dram" in a.bandwidth and "dram" in b.bandwidth:
            c = compare_path(a, b, path)
            ridge = f"{c.ridges[a.id]:.3g} / {c.ridges[b.id]:.3g}"
            x = c.crossover
            cross = f"{x.intensity:.3g}" if x.intensity is not None else "never"
            side = escape(safe_text(f"{x.higher_below} / {x.higher_above}"))  # a str cell is read as markup
        rows.append((f"F {path} TF/s", _num(fa.value / 1e12 if fa else None), _num(fb.value / 1e12 if fb else None),
                     _ratio(fa.value if fa else None, fb.value if fb else None), ridge, cross, side))
    return rows


def _num(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g}"


def _ratio(a: float | None, b: float | None) -> str:
    return fmt_ratio(b / a) if a and b else ""
