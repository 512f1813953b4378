"""Every tab at 80×24, the plain SSH terminal: what matters is on screen whole, nothing cut at an edge.

Each check reads the screen as a user would (tui_helpers.screen_lines) and asks for
whole cells and whole lines, so a column cut in half or a hint pushed off screen fails.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Iterator

import pytest
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from fake_nvml import FakeNVML
from rooftop.models.catalog import catalog
from rooftop.probes.telemetry import Sampler
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.render.chart import decade_label
from rooftop.tui.app.widgets import Col, FitTable
from test_tui_measure import tiny_plan, wait_for
from tui_helpers import assert_visible, fixed_runs_db, screen_lines

SMALL = (80, 24)
TABS = ("live", "roofline", "whatif", "compare", "history", "llm", "profile")


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run start times print in UTC (History shows local time)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def runs_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, utc: None) -> Path:
    """A store of two fixed runs, opened by a relative path (History prints it: the same in every checkout)."""
    monkeypatch.chdir(tmp_path)
    fixed_runs_db(Path("r.db"))
    return Path("r.db")


def make(db: Path, tab: str, **kw: object) -> App:
    kw.setdefault("device", "h100")
    kw.setdefault("sampler", None)
    return create_app(AppConfig(db_path=db, initial_tab=tab, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("tab", TABS)
def test_snapshots_80x24(tab: str, runs_db: Path, snap_compare) -> None:
    assert snap_compare(make(runs_db, tab), terminal_size=SMALL)


async def test_whatif_shows_form_hint_and_analysis_whole(runs_db: Path) -> None:
    app = make(runs_db, "whatif")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert_visible(app, "h100", "measured ms", "M ÷2", "M ×2", "pin", "compute-bound from m ≈ 278",
                       "memory-bound  T ≥ 43.5 µs  (Q/B 43.5 µs, W/F 167 ns)", "P 3.084 TFLOP/s = 0.384% of F")
        assert not app.query_one("#whatif-plot").display  # its room goes to the text; Roofline (2) draws the op


async def test_llm_footer_fits_80_columns_whole(runs_db: Path) -> None:
    """The LLM tab's keys and the app's share the footer: batch and context as one item each, Quit not cut."""
    app = make(runs_db, "llm")
    async with app.run_test(size=SMALL) as pilot:
        for _ in range(200):  # the footer is drawn once the tab's bindings are known: wait for it, not a clock
            await pilot.pause(0.02)
            if "q Quit" in screen_lines(app)[-1]:
                break
        footer = screen_lines(app)[-1]
        for item in ("[ ] batch ÷2 ×2", ", . ctx ÷2 ×2", "m Measure", "? Help", "q Quit", "^p palette"):
            assert item in footer, footer


async def test_history_keeps_status_and_start_of_every_run(runs_db: Path) -> None:
    app = make(runs_db, "history")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert_visible(app, "2 runs in r.db", "c0ffee00", "cancelled", "2026-01-01 10:15",
                       "5ca1ab1e  lab-box", "complete   2026-01-01 09:30", "AMD EPYC 7763 64-Core…")
        table = app.query_one("#hist-table", FitTable)
        assert table.shown == ["run", "name", "device", "status", "started"]  # plan and samples left out, not cut
        assert "c0ffee00 — AMD EPYC 7763 64-Core Processor (cpu, quick, cancelled)" in screen_lines(app)[6]


async def test_compare_leaves_out_columns_instead_of_cutting_them(runs_db: Path) -> None:
    app = make(runs_db, "compare")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert_visible(app, "ratio", "ridges I*", "cross at I", "F fp16-tc TF/s      787.6  755.6  ×0.959  255 / 176    245")
        assert "higher" not in app.query_one("#cmp-table", FitTable).shown
        assert not any("higher" in line for line in screen_lines(app))
        await pilot.resize_terminal(110, 32)
        await pilot.pause()
        assert_visible(app, "higher ↓/↑ I", "h200 / h100")


async def test_compare_ratios_have_three_significant_digits(runs_db: Path) -> None:
    """A roof 604734.88 times lower reads ×605,000, not ×604734.88."""
    h100 = catalog()["h100"]
    slow = dataclasses.replace(h100, id="slow-box", peak={k: dataclasses.replace(c, value=c.value / 604734.88)
                                                          for k, c in h100.peak.items()})
    app = make(runs_db, "compare", device="slow-box", compare_with="h100", profiles={"slow-box": slow})
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert_visible(app, "B dram GB/s", "×1.00", "×605,000")
        assert not any("604734" in line for line in screen_lines(app))


async def test_long_device_ids_show_whole_or_end_in_an_ellipsis(runs_db: Path) -> None:
    long = dataclasses.replace(catalog()["h100"], id="lab-box-h100-sxm5")
    app = make(runs_db, "compare", device="v100-32-pcie", compare_with=long.id, profiles={long.id: long})
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert_visible(app, "compare v100-32-pcie", "with lab-box-h100…", "v100-32-pcie  lab-box-h10…  ratio")
        app.query_one("#cmp-b").focus()
        await pilot.press("enter")  # the open list names every device whole
        await pilot.pause()
        assert_visible(app, "lab-box-h100-sxm5", "mi250x-gcd-ds")  # the long ids beside it in the list too


async def test_llm_table_and_bound_whole(runs_db: Path) -> None:
    app = make(runs_db, "llm")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert_visible(app, "qwen2.5-7b", "decode", "config.json", "≤ 218 tokens/s",
                       "op          ×   I      regime  T each   share", "44.0 µs  26.9%")


async def test_roofline_axis_labels_and_legend_whole(runs_db: Path) -> None:
    app = make(runs_db, "roofline")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert_visible(app, "device h100", "overlay (none)", "TFLOP/s", "I, FLOP/byte (log-log)",
                       "★ GEMV 1×8192×8192 bf16", "roofs in TFLOP/s", "── fp8-tc 1318", "── dram 3085 GB/s")


async def test_roofline_with_an_overlay_still_names_every_line(runs_db: Path) -> None:
    """plotext leaves its legend out when it has more entries than rows: the side legend never does."""
    app = make(runs_db, "roofline")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        app.query_one("#rl-overlay").value = "h200"
        await pilot.pause()
        legend = str(app.query_one("#rl-legend").render())
        for line in ("── h100 dram 3085 GB/s", "── h200 dram 4295 GB/s", "── bf16-tc 802.4", "── fp8-tc 1318"):
            assert line in legend, legend  # each device named on its first line
        assert_visible(app, "roofs in TFLOP/s", "── h100 dram 3085 GB/s", "── h200 dram 4295 GB/s")
        assert app.query_one("#rl-legend-box").max_scroll_y == 0, legend  # both devices whole at 80×24


async def test_live_after_a_measurement_shows_status_charts_and_ceilings(tmp_path: Path) -> None:
    """The busiest Live screen: a GPU's five traces, a finished run, both charts down to their axes, ceilings."""
    sampler = lambda: Sampler(interval=0.05, nvml=FakeNVML(), cpu=False)  # noqa: E731
    app = make(tmp_path / "r.db", "live", sampler=sampler, plan=tiny_plan())
    async with app.run_test(size=SMALL) as pilot:
        await pilot.press("m")
        await wait_for(pilot, lambda: "complete" in "".join(screen_lines(app)))
        await pilot.pause(0.6)  # the charts redraw twice a second
        assert_visible(app, "gpu0 NVIDIA H200", "97 %", "1,980 MHz", "650 W", "71 °C", "12.0 GiB",
                       "complete: ", "bandwidth (v: next)", "measured roofline so far",
                       "working set (log-log)", "I, FLOP/byte (log-log)", "ceilings: ")


async def test_layout_follows_the_terminal_size(runs_db: Path) -> None:
    """Wide: chart beside the text; narrow and short: no chart; narrow and tall: chart below the text."""
    app = make(runs_db, "whatif")
    async with app.run_test(size=(110, 32)) as pilot:
        await pilot.pause()
        left, plot = app.query_one("#whatif-left"), app.query_one("#whatif-plot")
        assert plot.display and plot.region.x >= left.region.right
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not plot.display and left.region.width == 78
        await pilot.resize_terminal(80, 44)
        await pilot.pause()
        assert plot.display and plot.region.y >= left.region.bottom and plot.region.height >= 10


class TableApp(App[None]):
    """One FitTable: roof rows, with a wide column that goes first and a middle one that goes next."""

    def compose(self) -> ComposeResult:
        cols = [Col("name", "name"), Col("value", "value"), Col("note", "note", drop=2),
                Col("device", "device", drop=1, max_width=10)]
        table = FitTable(cols, cursor_type="row")
        table.set_rows((f"r{i}", (f"row {i}", str(i), "a long note " * 2, "NVIDIA H100 80GB HBM3")) for i in range(3))
        yield table


async def test_fit_table_drops_by_priority_and_keeps_the_cursor() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 10)) as pilot:
        table = app.query_one(FitTable)
        assert table.shown == ["name", "value", "note", "device"]
        assert str(table.get_row("r0")[3]) == "NVIDIA H1…"  # ended in an ellipsis at max_width
        table.move_cursor(row=2)
        await pilot.resize_terminal(30, 10)
        await pilot.pause()
        assert table.shown == ["name", "value", "device"]  # the note (drop=2) goes before the device
        assert table.cursor_row == 2
        await pilot.resize_terminal(20, 10)
        await pilot.pause()
        assert table.shown == ["name", "value"]
        assert isinstance(table, DataTable) and table.get_row("r2") == ["row 2", "2"]


def test_decade_labels_stay_short() -> None:
    """Tick labels eat an 80-column chart's width: no 0.000001."""
    assert [decade_label(e) for e in (-6, -4, -3, -1, 0, 2, 3, 6)] == ["1e-6", "1e-4", "0.001", "0.1", "1", "100", "1k", "1M"]
