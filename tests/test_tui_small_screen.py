"""The app at 80×24 and over a restart: nothing cut off, keys that stay alive, runs that say
what they measured (a CPU's thread count), glyphs that mean one thing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textual.containers import VerticalScroll
from textual.widgets import DataTable, Input, Static

from rooftop.models.catalog import catalog
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.sample import Sample, TimeStats
from rooftop.store.runs import Store
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.render.chart import FAMILY_MARKERS, point_markers
from rooftop.tui.app.panes.compare import Compare
from rooftop.tui.app.panes.live import MeasurePanel
from rooftop.tui.app.panes.whatif import WhatIf
from rooftop.tui.app.widgets import RooflinePlot
from test_tui_measure import tiny_plan, wait_for
from tui_helpers import assert_visible, screen_lines

SMALL = (80, 24)


def app_on(db: Path, **kw):
    kw.setdefault("device", "h100")
    return create_app(AppConfig(sampler=None, db_path=db, **kw))


def stats(t: float) -> TimeStats:
    return TimeStats(median_s=t, p10_s=t * 0.98, p90_s=t * 1.02, min_s=t * 0.97, iqr_ratio=0.02, repeats=7, calls=10)


def measured_here(db: Path, profile: DeviceProfile, backend: str = "cuda:0") -> str:
    """A complete run of this machine, with `profile` as its ceilings."""
    samples = [Sample("triad", "fp32", {"n": 2**24}, flops=2 * 2**24, bytes=12 * 2**24, footprint_bytes=12 * 2**24,
                      stats=stats(0.001), path="fp32-fma"),
               Sample("gemm", "bf16", {"m": 4096, "n": 4096, "k": 4096}, flops=2 * 4096**3, bytes=6 * 4096**2,
                      stats=stats(0.0002), path="bf16-tc")]
    with Store.open(db) as store:
        rid = store.begin_run({"name": profile.name, "index": 0, "units": profile.sm_count}, "quick", backend)
        for s in samples:
            store.add_sample(rid, s)
        store.set_ceilings(rid, profile)
        store.finish_run(rid, "complete")
    return rid


def gpu_profile() -> DeviceProfile:
    """Every ceiling of a reference H100, as if measured here: a full Live ceilings line."""
    ref = catalog()["h100"]
    return dataclasses.replace(
        ref, id="local", source="measured",
        bandwidth={k: Ceiling(c.value, "measured", f"read_reduce:{k}:268435456") for k, c in ref.bandwidth.items()},
        peak={k: Ceiling(c.value, "measured", f"gemm:{k}:8192x8192x8192") for k, c in ref.peak.items()})


def cpu_profile(threads: int, scale: float = 1.0) -> DeviceProfile:
    return DeviceProfile(id="local", name="Test CPU", source="measured", kind="cpu", sm_count=threads,
                         bandwidth={"dram": Ceiling(20e9 * scale, "measured", "read_reduce:268435456")},
                         peak={"fp32-matmul": Ceiling(100e9 * scale, "measured", "1024x1024x1024")})


# -- keys ------------------------------------------------------------------------------

async def test_esc_out_of_a_whatif_field_keeps_the_tabs_keys_alive(tmp_path: Path) -> None:
    app = app_on(tmp_path / "r.db", initial_tab="whatif")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        app.query_one("#spec", Input).focus()
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("right_square_bracket", "right_square_bracket")  # M ×2 twice, no Tab or other tab first
        await pilot.pause()
        assert app.query_one(WhatIf).analysis.op.m == 4
        app.query_one("#f-m", Input).focus()  # a field of the form, too
        await pilot.press("escape", "p")
        await pilot.pause()
        assert len(app.pinned) == 1


async def test_keys_that_come_together_each_act_on_the_op_before_them(tmp_path: Path) -> None:
    """`]` `]` `p` typed at once (one terminal read: no Changed handled between them) give M = 4, and pin it."""
    app = app_on(tmp_path / "r.db", initial_tab="whatif")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        whatif = app.query_one(WhatIf)
        whatif.action_batch(2)
        whatif.action_batch(2)
        whatif.action_pin()
        await pilot.pause()
        assert whatif.analysis.op.m == 4
        assert [op.m for op in app.pinned] == [4]


async def test_a_bad_spec_dims_the_last_good_analysis(tmp_path: Path) -> None:
    app = app_on(tmp_path / "r.db", initial_tab="whatif")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        shown = app.query_one("#analysis", Static)
        assert not [s for s in shown.render().spans if "dim" in str(s.style)]
        app.query_one("#spec", Input).focus()
        await pilot.press("end", "x")
        await pilot.pause()
        content = shown.render()
        assert content.plain.startswith("last valid op — the spec above is not read")
        assert any(s.start == 0 and s.end >= len(content.plain.rstrip()) and "dim" in str(s.style)
                   for s in content.spans)  # all of it, dimmed
        assert "(last valid op)" in app.query_one("#whatif-plot", RooflinePlot)._title
        await pilot.press("backspace")  # valid again: bright again
        await pilot.pause()
        assert not shown.render().plain.startswith("last valid op")
        assert not [s for s in shown.render().spans if "dim" in str(s.style)]


# -- 80×24 -----------------------------------------------------------------------------

async def test_after_a_restart_live_shows_this_machines_last_run_and_its_ceilings_fit(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    rid = measured_here(db, gpu_profile())
    app = app_on(db, initial_tab="live")
    async with app.run_test(size=SMALL) as pilot:
        await wait_for(pilot, lambda: "last run of this machine" in str(app.query_one("#ms-status").render()))
        await pilot.pause(MeasurePanel.REDRAW_S + 0.2)
        assert any(s.kind == "point" for s in app.query_one("#ms-roof", RooflinePlot).series)
        ceilings = str(app.query_one("#ms-ceilings", Static).render())
        assert ceilings.startswith(f"ceilings: GB/s {', '.join(f'{lv} ' for lv in gpu_profile().bandwidth)}"[:-1])
        scroll = app.query_one("#ms-ceilings-scroll", VerticalScroll)
        assert scroll.max_scroll_y == 0, ceilings  # the whole line on screen, nothing to scroll to
        assert_visible(app, f"last run of this machine: {rid[:8]}, complete, 2 points")
        assert "no data yet" not in "\n".join(screen_lines(app))


def cpu_run_profile() -> DeviceProfile:
    """This 2-core VM's quick CPU run (1 thread): three levels, write, eight roofs, as the Live tab got it."""
    gf = {"fp64-fma": 1.16, "fp64-matmul": 16.06, "fp32-fma": 6.207, "fp32-matmul": 33.84, "fp16-fma": 2.31,
          "fp16-matmul": 0.9491, "bf16-matmul": 0.8982, "int8-matmul": 1.461}
    return DeviceProfile(
        id="local", name="AMD EPYC 7763 64-Core Processor", source="measured", kind="cpu", sm_count=1,
        bandwidth={"dram": Ceiling(16.82e9, "measured", "triad:4294967296"),
                   "llc": Ceiling(42.40e9, "measured", "copy:8388608"), "l2": Ceiling(61.3e9, "measured", "copy:262144")},
        peak={k: Ceiling(v * 1e9, "measured", "gemm:512x512x512") for k, v in gf.items()},
        extra={"write_bandwidth": 3.823e9, "write_case": "write:1073741824"})


async def test_live_ceilings_of_a_cpu_run_fit_80x24_whole(tmp_path: Path) -> None:
    """Every roof of a CPU run with unstable points left out: packed into the 3 rows the tab has, each roof
    whole or counted, never cut off below (the fourth row of 'ceilings: B dram 16.82 GB/s; …' was)."""
    db = tmp_path / "r.db"
    prof = cpu_run_profile()
    measured_here(db, prof, backend="cpu")
    with Store.open(db) as store:  # 69 unstable points, as that run had
        rid = store.runs()[-1].id
        for i in range(69):
            store.add_sample(rid, Sample("gemm", "int8", {"m": 256 + i, "n": 256, "k": 256}, flops=2 * 256**3,
                                         bytes=3 * 256**2, stats=dataclasses.replace(stats(1e-3), iqr_ratio=0.3),
                                         path="int8-matmul"))
    app = app_on(db, initial_tab="live")
    async with app.run_test(size=SMALL) as pilot:
        await wait_for(pilot, lambda: "last run of this machine" in str(app.query_one("#ms-status").render()))
        await pilot.pause(MeasurePanel.REDRAW_S + 0.2)
        await wait_for(pilot, lambda: "ceilings: " in str(app.query_one("#ms-ceilings", Static).render()))
        ceilings = str(app.query_one("#ms-ceilings", Static).render())
        assert app.query_one("#ms-ceilings-scroll", VerticalScroll).max_scroll_y == 0, ceilings
        assert_visible(app, "ceilings: GB/s dram 16.8, llc 42.4, l2 61.3, write 3.82; TFLOP/s fp64-fma",
                       "(69 unstable left out)")
        shown = [p for p in prof.peak if f"{p} " in ceilings]
        more = int(ceilings.split(" more")[0].rsplit("+", 1)[1]) if " more" in ceilings else 0
        assert len(shown) + more == len(prof.peak) and len(shown) >= 6, ceilings  # each roof shown or counted
        assert_visible(app, *(f"{p} " for p in shown))


async def test_live_shows_the_last_measurement_not_a_later_profile_or_comm_run(tmp_path: Path) -> None:
    """A profiled trace or a collectives sweep kept after the measurement is not 'this machine's last run'."""
    from rooftop.store import comms, workloads

    db = tmp_path / "r.db"
    rid = measured_here(db, gpu_profile())
    with Store.open(db) as store:
        for plan, backend in ((workloads.PLAN, "trace"), (comms.PLAN, "gloo")):
            other = store.begin_run({"name": "other", "index": 0, "units": 1}, plan, backend)
            store.finish_run(other, "complete")
    app = app_on(db, initial_tab="live")
    async with app.run_test(size=SMALL) as pilot:
        await wait_for(pilot, lambda: "last run of this machine" in str(app.query_one("#ms-status").render()))
        assert_visible(app, f"last run of this machine: {rid[:8]}, complete, 2 points")


def test_a_profile_or_comm_run_alone_is_no_measurement_of_this_machine(tmp_path: Path) -> None:
    """Profiling a trace first must not stop the app measuring this machine at start."""
    from rooftop.store import comms, workloads

    db = tmp_path / "r.db"
    with Store.open(db) as store:
        for plan, backend in ((workloads.PLAN, "trace"), (comms.PLAN, "gloo")):
            store.finish_run(store.begin_run({"name": "other", "index": 0, "units": 1}, plan, backend), "complete")
    assert not app_on(db).measured_here


async def test_roofline_legend_shows_the_overlay_and_the_points_at_80x24(tmp_path: Path) -> None:
    app = app_on(tmp_path / "r.db", device="h100")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        app.query_one("#rl-overlay").value = "b300"
        for spec in ("gemm 4096 4096 4096 bf16", "attn b=8 h=32 kv=8 d=128 t=8192 decode bf16"):
            await pilot.press("3")
            await pilot.pause()
            app.query_one(WhatIf).set_spec(spec)
            await pilot.pause()
            await pilot.press("p")
        await pilot.press("2")
        await pilot.pause(0.3)
        legend = app.query_one("#rl-legend", Static)
        assert legend.parent.max_scroll_y == 0, str(legend.render())  # the side legend whole
        assert_visible(app, "b300", "h100")
        markers = point_markers(app.query_one("#rl-plot", RooflinePlot).series)
        for label, glyph in markers.items():
            assert any(f"{glyph} {label}"[:40] in line for line in screen_lines(app)), label  # below the chart


async def test_llm_tab_scrolls_to_its_last_rows_and_chart_at_80x24(tmp_path: Path) -> None:
    app = app_on(tmp_path / "r.db", initial_tab="llm")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause(0.3)
        table = app.query_one("#llm-ops", DataTable)
        last = str(table.get_row_at(table.row_count - 1)[0])
        assert last not in "\n".join(screen_lines(app))  # below the screen at first…
        await pilot.press("pagedown", "pagedown", "pagedown")
        await pilot.pause(0.3)
        assert_visible(app, last, "I, FLOP/byte (log-log)")  # …and reached: the table's end, the chart's axis
        plot = app.query_one("#llm-plot", RooflinePlot)
        assert plot.region.height >= 10 and plot.region.bottom <= SMALL[1] - 1


async def test_first_launch_notes_are_short(tmp_path: Path) -> None:
    """A toast covers the chart's lower right while it lasts: a few seconds at most."""
    app = create_app(AppConfig(sampler=None, db_path=tmp_path / "r.db", autostart=True, plan=tiny_plan("launch")))
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause(0.3)
        notes = list(app._notifications)
        assert notes and all(n.timeout <= 3 for n in notes), [(n.message, n.timeout) for n in notes]
        await wait_for(pilot, lambda: not app.measuring)


# -- glyphs ----------------------------------------------------------------------------

def test_a_family_has_one_glyph_in_every_run_and_chart() -> None:
    from rooftop.models.plotdata import Series

    def pts(*labels: str) -> list[Series]:
        return [Series(lb, (1.0,), (1.0,), "point") for lb in labels]

    one = point_markers(pts("local triad", "local unstable", "local gemm"))
    other = point_markers(pts("lab unstable", "lab fma", "GEMV 1×8192×8192 bf16", "lab triad"))
    assert one["local triad"] == other["lab triad"] == FAMILY_MARKERS["triad"]
    assert one["local unstable"] == other["lab unstable"] == FAMILY_MARKERS["unstable"]
    assert other["GEMV 1×8192×8192 bf16"] not in FAMILY_MARKERS.values()  # an op never looks like a family
    assert point_markers(pts("gemm bf16", "fma fp32")) == {"gemm bf16": "▲", "fma fp32": "■"}  # by dtype too


# -- CPU threads -----------------------------------------------------------------------

async def test_a_cpu_run_says_its_threads_and_compare_says_when_they_differ(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    measured_here(db, cpu_profile(threads=64), backend="cpu")  # as on a bigger, quiet machine
    app = app_on(db, device="local", initial_tab="live", plan=tiny_plan("bandwidth,gemm"))
    async with app.run_test(size=(110, 36)) as pilot:
        await wait_for(pilot, lambda: "last run of this machine" in str(app.query_one("#ms-status").render()))
        assert "64 threads" in str(app.query_one("#ms-status").render())
        await pilot.press("m")
        await wait_for(pilot, lambda: "complete" in str(app.query_one("#ms-status").render()))
        # what the tiny plan's backend measured with: torch's threads, fewer when some CPUs were busy at its start
        threads = app.run_view.result.calibration.profile.sm_count
        assert isinstance(threads, int) and threads >= 1
        assert f", {threads} thread" in str(app.query_one("#ms-status").render())
        earlier = [p for p in app.profiles.values() if p.kind == "cpu" and p.sm_count == 64 and p.id != "local"]
        assert earlier, list(app.profiles)
        await pilot.press("4")
        await pilot.pause()
        compare = app.query_one(Compare)
        compare.query_one("#cmp-a").value = "local"
        compare.query_one("#cmp-b").value = earlier[0].id
        await pilot.pause()
        # the CLI's note for the same fact (one note: rooftop compare says it in these words)
        note = f"CPU profiles measured with different thread counts (local {threads}, {earlier[0].id} 64)"
        assert note in str(app.query_one("#cmp-threads", Static).render())
        await pilot.press("5")  # History says each CPU run's threads
        await pilot.pause()
        app.query_one("#hist-table", DataTable).move_cursor(row=1)  # the earlier run (newest first)
        await pilot.pause()
        assert "(cpu, 64 threads, quick, complete)" in str(app.query_one("#hist-detail", Static).render())
        await pilot.press("2")  # overlaid on the Roofline tab: said there too
        await pilot.pause()
        app.query_one("#rl-device").value = "local"
        app.query_one("#rl-overlay").value = earlier[0].id
        await pilot.pause()
        assert f"(local {threads}, {earlier[0].id} 64)" in str(app.query_one("#rl-legend", Static).render())


def cells(app, widget) -> list:
    """The Rich styles of the cells on a widget's first row, as drawn on the screen."""
    region = widget.region
    strip = app.screen._compositor.render_strips()[region.y]
    out, x = [], 0
    for seg in strip:
        for _ in seg.text:
            if region.x <= x < region.right:
                out.append(seg.style)
            x += 1
    return out


async def test_a_focused_select_stands_out(tmp_path: Path) -> None:
    """A compact Select has no border to light up: focused, its face takes the accent and its value goes bold
    and underlined (what shows without colour too); it was a 5% tint."""
    from textual.widgets import Select

    app = app_on(tmp_path / "r.db", initial_tab="whatif")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        kind = app.query_one("#kind", Select)
        before = cells(app, kind)
        kind.focus()
        await pilot.pause()
        after = cells(app, kind)
        label = [s for s, ch in zip(after, "gemm") if ch != " "]
        assert all(s.bold and s.underline for s in label), after
        assert not any(s.underline for s in before)
        was, now = before[0].bgcolor.get_truecolor(), after[0].bgcolor.get_truecolor()
        assert sum(abs(a - b) for a, b in zip(was, now)) > 60, (was, now)  # a clear change, not a 5% tint
