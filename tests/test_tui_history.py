"""The History tab over a real SQLite store: list, open, rename, delete, export; a broken store."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import DataTable, Input, Static

from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.sample import Sample, TimeStats
from rooftop.store.runs import Store
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.app.panes.history import ConfirmScreen, History, NameScreen
from rooftop.tui.app.widgets import RooflinePlot

SIZE = (110, 36)


def stats(t: float) -> TimeStats:
    return TimeStats(median_s=t, p10_s=t * 0.98, p90_s=t * 1.02, min_s=t * 0.97, iqr_ratio=0.02, repeats=7, calls=10)


def seeded_db(path: Path) -> str:
    with Store.open(path) as store:
        rid = store.begin_run({"name": "Test CPU", "index": 0}, "quick", "cpu")
        store.add_sample(rid, Sample("read_reduce", "fp32", {"n": 2**26}, flops=2**26, bytes=4 * 2**26,
                                     footprint_bytes=4 * 2**26, stats=stats(0.01), path="fp32-fma"))
        store.add_sample(rid, Sample("gemm", "fp32", {"m": 1024, "n": 1024, "k": 1024}, flops=2 * 1024**3,
                                     bytes=12 * 1024**2, stats=stats(0.01), path="fp32-matmul"))
        store.add_sample(rid, Sample("gemm", "fp8", {"m": 64, "n": 64, "k": 64}, flops=1, bytes=1,
                                     skipped="fp8 needs compute capability ≥ 8.9"))
        store.set_ceilings(rid, DeviceProfile(
            id="test-cpu", name="Test CPU", source="measured", kind="cpu",
            bandwidth={"dram": Ceiling(26.8e9, "measured", "read_reduce:268435456")},
            peak={"fp32-matmul": Ceiling(214.7e9, "measured", "1024x1024x1024")}))
        store.finish_run(rid, "complete")
    return rid


def make(tmp_path: Path, **kw):
    kw.setdefault("initial_tab", "history")
    return create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", export_dir=tmp_path, **kw))


async def test_history_lists_opens_and_exports(tmp_path: Path) -> None:
    rid = seeded_db(tmp_path / "r.db")
    app = make(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one("#hist-table", DataTable)
        assert table.row_count == 1
        assert str(table.get_row_at(0)[2]) == "Test CPU"
        detail = str(app.query_one("#hist-detail", Static).render())
        assert "B dram: 26.80 GB/s" in detail and "1024x1024x1024" in detail
        assert "3 samples, 0 unstable, 1 skipped" in detail and "compute capability" in detail
        labels = [s.label for s in app.query_one("#hist-plot", RooflinePlot).series]
        assert any(lb.endswith("gemm") for lb in labels)
        assert f"{rid[:8]} dram 27 GB/s" in labels  # the roofs are named by the run, as its points are
        # the measured profile is a device everywhere else too
        assert "local" in app.profiles or "test-cpu" in str(list(app.profiles))
        table.focus()
        await pilot.press("e")
        await pilot.pause()
        doc = json.loads((tmp_path / f"rooftop-{rid[:8]}.json").read_text())
        assert doc["runs"][0]["id"] == rid and len(doc["runs"][0]["samples"]) == 3


async def test_history_rename_and_delete(tmp_path: Path) -> None:
    rid = seeded_db(tmp_path / "r.db")
    app = make(tmp_path, initial_tab="roofline")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await pilot.pause()
        await pilot.press("r")  # the table has the focus: the tab's keys work at once
        await pilot.pause()
        assert isinstance(app.screen, NameScreen)
        await pilot.press(*"lab-box", "enter")
        await pilot.pause()
        with Store.open(tmp_path / "r.db") as store:
            assert store.run(rid).name == "lab-box"
        assert str(app.query_one("#hist-table", DataTable).get_row_at(0)[1]) == "lab-box"
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
        with Store.open(tmp_path / "r.db") as store:
            assert store.runs() == []
        assert app.query_one("#hist-table", DataTable).row_count == 0


async def test_empty_and_broken_stores_keep_the_app_running(tmp_path: Path) -> None:
    app = make(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "no measurements stored yet" in str(app.query_one("#hist-status", Static).render())
    assert not (tmp_path / "r.db").exists()  # reading never creates the file
    (tmp_path / "r.db").write_text("this is not a database")
    app = make(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "✗" in str(app.query_one("#hist-status", Static).render())
        assert app.query_one(History).run_ids == []
        await pilot.press("3")  # the rest of the app works
        assert app.query_one("#analysis", Static).render()
    assert (tmp_path / "r.db").read_text() == "this is not a database"


async def test_roofline_shows_a_stored_runs_points(tmp_path: Path) -> None:
    seeded_db(tmp_path / "r.db")
    app = create_app(AppConfig(sampler=None, db_path=tmp_path / "r.db"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.device_id == "local"  # this host's latest measurement opens first
        labels = [s.label for s in app.query_one("#rl-plot", RooflinePlot).series]
        assert "local gemm" in labels  # its measured GEMM point
        assert any(lb.startswith("local fp32-matmul") for lb in labels)


async def test_history_shows_a_device_name_with_brackets_as_written(tmp_path: Path) -> None:
    from tui_helpers import screen_lines

    with Store.open(tmp_path / "r.db") as store:
        rid = store.begin_run({"name": "box [bold]7[/bold]", "index": 0}, "quick", "cpu")
        store.finish_run(rid, "complete")
    app = make(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        row = next(line for line in screen_lines(app) if rid[:8] in line)  # the table (above the detail)
        assert "box [bold]7[/bold]" in row


async def test_a_refused_name_is_said_in_the_dialog_and_the_text_kept(tmp_path: Path) -> None:
    """`abc1` reads as a run id, `h100` is a device: the dialog stays open with what was typed."""
    from tui_helpers import assert_visible, screen_lines

    rid = seeded_db(tmp_path / "r.db")
    with Store.open(tmp_path / "r.db") as store:
        other = store.begin_run({"name": "Other CPU", "index": 0}, "quick", "cpu")
        store.finish_run(other, "complete")
        store.rename(other, "taken-name")
    app = make(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.query_one("#hist-table", DataTable)
        table.focus()
        table.move_cursor(row=app.query_one(History).run_ids.index(rid))
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, NameScreen)
        assert_visible(app, "Name the run: a letter, then letters, digits, '.', '_' or '-'.",
                       "Enter saves, Esc cancels.")
        for bad, why in (("abc1", "hex digits only"), ("h100", "already a device id"), ("taken-name", "is taken")):
            box = app.screen.query_one("#new-name", Input)
            box.value = ""
            await pilot.press(*bad, "enter")
            await pilot.pause()
            assert isinstance(app.screen, NameScreen), bad
            assert box.value == bad
            assert any(why in line for line in screen_lines(app)), "\n".join(screen_lines(app))
        box.value = ""
        await pilot.press(*"lab-2", "enter")
        await pilot.pause()
        assert not isinstance(app.screen, NameScreen)
    with Store.open(tmp_path / "r.db") as store:
        assert store.run(rid).name == "lab-2"


async def test_export_never_overwrites_a_file(tmp_path: Path) -> None:
    rid = seeded_db(tmp_path / "r.db")
    first = tmp_path / f"rooftop-{rid[:8]}.json"
    first.write_text("keep me")
    app = make(tmp_path)
    notes: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
        await pilot.pause()
        app.query_one("#hist-table", DataTable).focus()
        await pilot.press("e")
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
    second, third = tmp_path / f"rooftop-{rid[:8]}-2.json", tmp_path / f"rooftop-{rid[:8]}-3.json"
    assert first.read_text() == "keep me"
    assert json.loads(second.read_text())["runs"][0]["id"] == rid
    assert json.loads(third.read_text())["runs"][0]["id"] == rid
    assert [n for n in notes if "exported" in n] == [f"exported to {second}", f"exported to {third}"]


async def test_history_detail_writes_shapes_as_m_n_k(tmp_path: Path) -> None:
    seeded_db(tmp_path / "r.db")
    app = make(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        detail = str(app.query_one("#hist-detail", Static).render())
        assert "skipped gemm fp8 m=64 n=64 k=64: fp8 needs" in detail


async def test_a_store_gone_since_the_list_was_read_is_said_not_raised(tmp_path: Path) -> None:
    seeded_db(tmp_path / "r.db")
    app = make(tmp_path)
    notes: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
        await pilot.pause()
        app.query_one("#hist-table", DataTable).focus()
        (tmp_path / "r.db").unlink()
        await pilot.press("e")
        await pilot.pause()
        assert notes == ["export failed: the database is gone since the list was read; press F5 to reload"]
        await pilot.press("r", *"lab-3", "enter")
        await pilot.pause()
        assert isinstance(app.screen, NameScreen)
        assert "the database is gone" in str(app.screen.query_one("#name-error", Static).render())


async def test_history_shows_a_comm_run_fits(tmp_path: Path) -> None:
    """A `rooftop comm` run: its α-β fit per collective, not "no ceilings: the run did not complete"."""
    from rooftop.probes.comm import CommPlan, point_sample
    from rooftop.store.comms import begin_comm, comm_device_info

    plan = CommPlan("gloo", 4, (8, 2**20))
    with Store.open(tmp_path / "r.db") as store:
        rid = begin_comm(store, comm_device_info("gloo", 4, "Test CPU", "quick"), "gloo")
        for size, t in ((8, 20e-6), (2**20, 20e-6 + 2**20 / 1e9)):
            st = stats(t)
            store.add_sample(rid, point_sample(plan, {"collective": "allreduce", "size": size, "stats": st.__dict__}))
        store.finish_run(rid, "complete")
    app = make(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        detail = str(app.query_one("#hist-detail", Static).render())
        assert "allreduce ×4: α = 20.0 µs, β = 1.0000 GB/s, S* = 19.5 KiB" in detail
        assert "no ceilings" not in detail
