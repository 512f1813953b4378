"""The roofline chart: plotext inside Textual, with a legend whose swatches have their lines' colours."""


from __future__ import annotations

import dataclasses

from plotext import colorize  # ANSI as the chart's own, so a legend swatch has its line's colour
from rich.console import Group
from rich.text import Text
from textual.app import RenderResult
from textual_plotext import PlotextPlot

from rooftop.models.plotdata import Series
from rooftop.models.safetext import safe_text
from rooftop.tui.render.chart import draw_bandwidth, draw_fma, draw_gemm, draw_roofline, legend_lines


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
        self._kind = kind
        self._series: list[Series] = []
        self._title = ""
        self._legend: bool | str = True  # False: the tab's side legend has it all; "points": its lines

    @property
    def series(self) -> list[Series]:
        return list(self._series)

    @property
    def title(self) -> str:
        return self._title

    @property
    def kind(self) -> str:
        """Which axes it draws (a key of DRAWERS: roofline, bandwidth, gemm, fma), as a shared chart's kind."""
        return self._kind

    def show(self, series: list[Series], title: str = "", kind: str | None = None, legend: bool | str = True) -> None:
        """Draw `series`; legend=False when the tab shows the legend itself, "points" when a side legend
        has the lines and the points go below the chart (the Roofline tab: they fit there at 80×24)."""
        if kind is not None:
            self._draw, self._kind = DRAWERS[kind], kind
        self._series = [dataclasses.replace(s, label=safe_text(s.label)) for s in series]  # labels name devices
        self._title = safe_text(title)
        self._legend = legend
        self.refresh()

    def render(self) -> RenderResult:
        """The chart, and its legend below it: plotext's own covers the chart's upper left (where the
        slopes rise) and is left out when it has more entries than rows."""
        self.plt.clear_figure()
        if not self._series:
            self.plt.title(self._title or "no data yet")
            return super().render()
        self._draw(self.plt, self._series, self._title, legend=False)
        width, height = self.size

        legend = legend_lines(self._series, width, colorize, lines_too=self._legend is True) if self._legend else []
        legend = legend[: max(0, height - 8)]  # the chart keeps 8 rows at least
        chart_rows = height - len(legend)
        self.plt.plotsize(width, chart_rows)
        self.plt._set_size(width, chart_rows)  # as PlotextPlot.render does, for plotext's resizing
        self.plt.theme(self._get_plotext_theme_name(self.app.theme))
        chart = Text.from_ansi(self.plt.build().rstrip("\n"))
        return Group(chart, *(Text.from_ansi(line, overflow="ellipsis", no_wrap=True) for line in legend))
