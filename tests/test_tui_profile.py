"""The Profile tab over a real store: the kept profiles, one's op groups by time share and its split."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from rooftop.models.catalog import lookup_device
from rooftop.models.program.workload import Workload, build_workload
from rooftop.store.workloads import save_profile
from rooftop.store.runs import Store
from rooftop.store.tracefile import load_trace
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.app.widgets import FitTable

QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"


def keep(tmp_path: Path, trace: Path, device: str) -> Workload:
    """The trace placed on `device`, kept in the store at tmp_path / r.db."""
    work = build_workload(load_trace(trace), lookup_device(device))
    with Store.open(tmp_path / "r.db") as store:
        save_profile(store, work, source=trace.name, backend="trace")
    return work


async def profile_tab(pilot) -> None:
    await pilot.press("7")
    await pilot.pause()


def make(tmp_path: Path):
    return create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", export_dir=tmp_path))


async def test_profile_tab_lists_op_groups_by_share(tmp_path: Path) -> None:
    work = build_workload(load_trace(QWEN), lookup_device("h200"))
    with Store.open(tmp_path / "r.db") as store:
        save_profile(store, work, source="decode.trace.json.gz", backend="trace")
        rid = store.begin_run({"name": "Test CPU"}, "quick", "cpu")  # a measurement: not listed here
        store.finish_run(rid, "complete")
    app = make(tmp_path)
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        assert app.query_one("#prof-runs", FitTable).row_count == 1
        ops = app.query_one("#prof-ops", FitTable)
        # idle time, the overlap of streams and the memset are rows of their own beside the op groups
        assert ops.row_count == len(work.groups) + 1 + (work.overlap_s > 0) + len(work.transfers)
        first = [str(c) for c in ops.get_row_at(0)]
        assert first[0] == "91.0%" and "idle time" in first
        second = " ".join(str(c) for c in ops.get_row_at(1))
        assert "mm bf16 8×3584 · 3584×18944" in second and "memory" in second
        split = str(app.query_one("#prof-split", Static).render())
        assert "on the roofs of h200" in split and "largest share: idle time" in split


async def test_profile_tab_without_profiles_says_how_to_make_one(tmp_path: Path) -> None:
    app = make(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        status = str(app.query_one("#prof-status", Static).render())
        assert "no profiles kept yet" in status and "rooftop profile" in status


async def test_profile_tab_at_80x24_keeps_share_time_op_and_roof(tmp_path: Path) -> None:
    keep(tmp_path, QWEN, "h200")
    app = make(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await profile_tab(pilot)
        shown = app.query_one("#prof-ops", FitTable).shown
        assert {"share", "time", "op", "roof"} <= set(shown)


async def test_roofline_tab_draws_the_newest_profile_on_its_device(tmp_path: Path) -> None:
    from rooftop.tui.app.widgets import RooflinePlot

    work = build_workload(load_trace(QWEN), lookup_device("h200"))
    with Store.open(tmp_path / "r.db") as store:
        rid = save_profile(store, work, source="decode.trace.json.gz", backend="trace")
    for device, drawn in (("h200", True), ("h100", False)):
        app = create_app(AppConfig(device=device, sampler=None, db_path=tmp_path / "r.db", export_dir=tmp_path,
                                   initial_tab="roofline"))
        async with app.run_test(size=(110, 32)) as pilot:
            await pilot.pause()
            labels = [s.label for s in app.query_one("#rl-plot", RooflinePlot).series]
            assert (f"{rid[:8]} profile" in labels) is drawn


async def test_profile_tab_shows_memcpy_overlap_idle_causes_kernels_and_flags(tmp_path: Path) -> None:
    """A 4-stream A100 rank (2023): its memcpy / memset rows, the overlap of streams, the idle time by cause,
    the top kernels, the steps and the flags (GEMMs above h100's fp32 roof: that roof is low for them)."""
    keep(tmp_path, Path(__file__).parent / "data" / "real-traces" / "trace_filter_sampled_rank-0.json.gz", "h100")
    app = make(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await profile_tab(pilot)
        rows = [" ".join(str(c) for c in r) for r in
                (app.query_one("#prof-ops", FitTable).get_row_at(i)
                 for i in range(app.query_one("#prof-ops", FitTable).row_count))]
        assert any("overlap" in r for r in rows)
        assert any("memcpy DtoD" in r and "dram" in r for r in rows) and any("memset" in r for r in rows)
        shares = [float(r.split("%")[0]) for r in rows if "%" in r.split()[0]]
        assert sum(shares) <= 100.5  # printed to a tenth of a percent
        more = str(app.query_one("#prof-more", Static).render())
        assert "idle time by cause" in more and "top kernels" in more and "ProfilerStep#551" in more
        assert "flag:" in more and "roof is low" in more


async def test_profile_list_shows_more_rows_when_the_screen_allows(tmp_path: Path) -> None:
    """At 80×24 nine kept profiles: the list shows 7 of them (it showed 3), the op groups still 7 rows under it;
    on a taller screen more again."""
    from tui_helpers import screen_lines

    work = build_workload(load_trace(QWEN), lookup_device("h200"))
    with Store.open(tmp_path / "r.db") as store:
        shorts = [store.run(save_profile(store, work, source="step.json", backend="trace")).short_id for _ in range(9)]
    app = make(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await profile_tab(pilot)
        lines = screen_lines(app)
        listed = [s for s in shorts if any(f"  {s}  " in line for line in lines)]
        ops = [line for line in lines if " memory " in line]
        assert len(listed) == 7 and len(ops) >= 6, "\n".join(lines)
        await pilot.resize_terminal(80, 40)
        await pilot.pause()
        assert len([s for s in shorts if any(f"  {s}  " in line for line in screen_lines(app))]) == 9
