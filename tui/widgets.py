"""Reusable widgets: the roofline chart and the help screen."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Select
from textual_plotext import PlotextPlot

from rooftop.models.plotdata import Series
from rooftop.tui.chart import draw_bandwidth, draw_fma, draw_gemm, draw_roofline

DRAWERS = {"roofline": draw_roofline, "bandwidth": draw_bandwidth, "gemm": draw_gemm, "fma": draw_fma}


class RooflinePlot(PlotextPlot):
    """A log-log chart (a roofline, or bandwidth against working set): set the series, it redraws.

    plotext state is rebuilt on each render, so a resize never re-logs the data.
    """

    can_focus = True  # so the keys of the tab it sits in ([ ] p) reach it by keyboard

    DEFAULT_CSS = """
    RooflinePlot { min-height: 10; min-width: 30; }
    RooflinePlot:focus { border: round $accent; }
    """

    def __init__(self, *, kind: str = "roofline", id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self._draw = DRAWERS[kind]
        self._series: list[Series] = []
        self._title = ""

    @property
    def series(self) -> list[Series]:
        return list(self._series)

    def show(self, series: list[Series], title: str = "", kind: str | None = None) -> None:
        if kind is not None:
            self._draw = DRAWERS[kind]
        self._series = list(series)
        self._title = title
        self.refresh()

    def render(self):  # noqa: ANN201 - textual's RenderResult
        self.plt.clear_figure()
        if self._series:
            self._draw(self.plt, self._series, self._title)
        else:
            self.plt.title(self._title or "no data yet")
        return super().render()


HELP = """\
# rooftop

A roofline lab: where an op sits on this device's ceilings, what bounds it, what to do about it.

| key | does |
|---|---|
| `1`–`6` | Live · Roofline · What-if · Compare · History · LLM |
| `m` | measure this machine (quick plan) |
| `c` / `Esc` | cancel the running measurement (what was measured is kept) |
| `v` | Live: the next sweep's curve — GB/s vs working set, TFLOP/s vs n or M, FMA sweep vs R |
| `[` / `]` | What-if: halve / double M (or the batch) — watch the point cross the ridge; LLM: the batch |
| `,` / `.` | LLM: halve / double the context |
| `p` | What-if: pin the op to the Roofline tab |
| `r` `d` `e` | History: rename, delete, export the selected run |
| `Tab` | move between fields; `Esc` leaves a text field |
| `?` | this help |
| `q` | quit |

**Op specs** (What-if): `gemm 1 8192 8192 bf16`, `gemv 8192 8192 fp16`,
`attn b=8 h=32 kv=8 d=128 t=8192 decode`, `ew n=1e9 fp32`, `fma 64 fp32`,
`norm 4096 4096 bf16`, `softmax 4096 4096`. Numbers: `8192`, `1e9`, `2^20`, `8k`.

Bytes and FLOPs are algorithmic (each array once; an FMA is 2 FLOP), so
T = max(W/F, Q/B) is a lower bound. Every ceiling says where it came from:
measured here, a published reference measurement, or a datasheet.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 100%; height: 80%; border: round $accent; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        from textual.widgets import Markdown  # markdown-it costs ~40 ms: only when help is asked for

        with VerticalScroll():
            yield Markdown(HELP)


def refresh_select(select: Select, ids: list[str], extra: list[str] = ()) -> None:  # type: ignore[assignment]
    """New options for a device Select, keeping its value when it still exists."""
    keep = select.value
    options = [(i, i) for i in list(extra) + list(ids)]
    with select.prevent(Select.Changed):
        select.set_options(options)
        if keep in [v for _, v in options]:
            select.value = keep
