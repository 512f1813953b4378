"""Measuring from the app: samples stream into the Live tab, cancel keeps them, failures are shown."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textual.widgets import Static, TabbedContent

from probe_fixtures import tiny_sizes
from rooftop.models.units import KiB
from rooftop.store.runs import Store
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.app.panes.live import MeasurePanel
from rooftop.tui.app.widgets import RooflinePlot

SIZE = (110, 36)


def tiny_plan(parts: str = "launch,bandwidth,gemm,fma", sets: int = 2):
    def make():
        from rooftop.probes.backend import select_backend
        from rooftop.probes.plan import build_plan

        sizes = tiny_sizes()
        sizes = dataclasses.replace(sizes, working_sets=tuple(4 * KiB * (i + 1) for i in range(sets)))
        return build_plan(select_backend("cpu"), "quick", parts, sizes=sizes)

    return make


async def wait_for(pilot, cond, timeout: float = 30.0) -> None:
    from textual.css.query import NoMatches

    for _ in range(int(timeout / 0.05)):
        try:
            if cond():
                return
        except NoMatches:  # a tab not mounted yet (tabs mount lazily after the first frame)
            pass
        await pilot.pause(0.05)
    raise AssertionError("timed out waiting for the app")


def make(tmp_path: Path, **kw):
    kw.setdefault("plan", tiny_plan())
    return create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", **kw))


async def test_m_measures_streams_samples_and_stores_the_run(tmp_path: Path) -> None:
    app = make(tmp_path, initial_tab="live")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("m")
        panel = app.query_one(MeasurePanel)
        await wait_for(pilot, lambda: "complete" in str(app.query_one("#ms-status", Static).render()))
        assert len(panel.samples) >= 8
        assert app.query_one("#ms-bw", RooflinePlot).series  # the bandwidth curve grew
        await pilot.press("v")  # GEMM throughput against n and M
        assert app.query_one(MeasurePanel).curve == "gemm"
        assert any("n×n×n" in s.label for s in app.query_one("#ms-bw", RooflinePlot).series)
        await pilot.press("v")  # the FMA sweep against R
        assert [s.label for s in app.query_one("#ms-bw", RooflinePlot).series] == ["fma fp32"]
        assert app.query_one("#ms-bw", RooflinePlot).series[0].xs == (1.0, 4.0)
        assert any(s.kind == "point" for s in app.query_one("#ms-roof", RooflinePlot).series)
        assert "F fp32-matmul" in str(app.query_one("#ms-ceilings", Static).render())
        assert "local" in app.profiles  # the new measured profile is a device everywhere
        await pilot.press("2")
        await pilot.pause()
        assert "local" in [v for _, v in app.query_one("#rl-device")._options]
        assert app.query_one("#rl-device").value == "local"  # the Roofline tab shows the new measurement…
        assert app.query_one("#rl-overlay").value == "h100"  # …over what it showed before
    with Store.open(tmp_path / "r.db") as store:
        (run,) = store.runs()
        assert run.status == "complete" and run.samples == len(panel.samples)


def gated_plan(make, after: int, gate):
    """`make`'s plan whose step `after` waits for `gate`: the run is still going when the test cancels it,
    on any machine speed (the test waits on an event, not a clock)."""

    def build():
        plan = make()
        steps = list(plan.steps)
        held = steps[after]

        def run():
            assert gate.wait(30), "the test never opened the gate"
            return held.run()

        steps[after] = dataclasses.replace(held, run=run)
        return dataclasses.replace(plan, steps=tuple(steps))

    return build


async def test_cancel_keeps_what_was_measured_and_keys_work_meanwhile(tmp_path: Path) -> None:
    import threading

    gate = threading.Event()
    plan = gated_plan(tiny_plan("bandwidth", sets=20), after=2, gate=gate)
    app = make(tmp_path, initial_tab="live", plan=plan)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("m")
        panel = app.query_one(MeasurePanel)
        await wait_for(pilot, lambda: len(panel.samples) >= 2)  # the third step is held at the gate
        await pilot.press("3")  # the UI answers while the sweep runs
        assert app.query_one(TabbedContent).active == "whatif"
        await pilot.press("c")
        gate.set()  # the step held at the gate sees the cancel between its samples
        await wait_for(pilot, lambda: "cancelled" in str(app.query_one("#ms-status", Static).render()))
        kept = len(panel.samples)
        assert kept == 2  # the two before the gate; the point in progress at the cancel is dropped
    with Store.open(tmp_path / "r.db") as store:
        (run,) = store.runs()
        assert run.status == "cancelled" and run.samples == kept


async def test_autostart_measures_a_machine_with_no_profile(tmp_path: Path) -> None:
    app = make(tmp_path, autostart=True, plan=tiny_plan("launch"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "live")
        await wait_for(pilot, lambda: "complete" in str(app.query_one("#ms-status", Static).render()))
        assert app.run_view.result.status == "complete" and app.run_view.samples


async def test_a_plan_that_cannot_start_is_reported_and_the_app_goes_on(tmp_path: Path) -> None:
    from rooftop.probes.backend import BackendError

    def broken():
        raise BackendError("--device cuda:3: no such GPU (this machine has none)")

    app = make(tmp_path, initial_tab="live", plan=broken)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("m")
        await wait_for(pilot, lambda: "failed" in str(app.query_one("#ms-status", Static).render()))
        assert "no such GPU" in str(app.query_one("#ms-status", Static).render())
        await pilot.press("3")
        assert app.query_one(TabbedContent).active == "whatif"


async def test_a_cancel_before_the_first_point_leaves_no_empty_run(tmp_path: Path) -> None:
    import threading

    quick = tiny_plan("bandwidth", sets=50)
    loaded = threading.Event()  # the plan is "loading torch" until the test has pressed c (no race with load)

    def slow_to_start():  # as loading torch is on a real first measurement
        loaded.wait(30)
        return quick()

    app = make(tmp_path, initial_tab="live", plan=slow_to_start)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("m")
        await pilot.pause()
        assert "starting the measurement" in str(app.query_one("#ms-status", Static).render())
        await pilot.press("c")
        loaded.set()
        await wait_for(pilot, lambda: "cancelled" in str(app.query_one("#ms-status", Static).render()))
        assert "not kept in the store" in str(app.query_one("#ms-status", Static).render())
    with Store.open(tmp_path / "r.db") as store:
        assert store.runs() == []


async def test_no_measuring_at_start_once_this_machine_has_a_kept_run(tmp_path: Path) -> None:
    from rooftop.models.sample import Sample, TimeStats

    with Store.open(tmp_path / "r.db") as store:  # cancelled after a few points, before any ceiling
        rid = store.begin_run({"name": "this box", "index": 0}, "quick", "cpu")
        store.add_sample(rid, Sample("read_reduce", "fp32", {"n": 1024}, 0.0, 4096.0, 4096.0,
                                     stats=TimeStats(1e-6, 1e-6, 1e-6, 1e-6, 0.01, 7, 10)))
        store.finish_run(rid, "cancelled")
    app = make(tmp_path, autostart=True, plan=tiny_plan("launch"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        assert not app.measuring and app.run_view.result is None
        assert any("partial" in str(n.message) for n in app._notifications)


async def test_quitting_mid_measurement_keeps_what_was_measured(tmp_path: Path) -> None:
    app = make(tmp_path, initial_tab="live", plan=tiny_plan("bandwidth", sets=300))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("m")
        panel = app.query_one(MeasurePanel)
        await wait_for(pilot, lambda: len(panel.samples) >= 2)
        await pilot.press("q")
    with Store.open(tmp_path / "r.db") as store:
        (run,) = store.runs()
        assert run.status == "cancelled" and run.samples >= 2


async def test_a_finished_run_shows_no_time_left(tmp_path: Path) -> None:
    app = make(tmp_path, initial_tab="live", plan=tiny_plan("launch"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("m")
        await wait_for(pilot, lambda: "complete" in str(app.query_one("#ms-status", Static).render()))
        assert not app.query_one("#ms-progress #eta").display


def test_live_ceilings_give_write_beside_b_and_say_which_ran_capped() -> None:
    from rooftop.models.calibrate import calibrate
    from rooftop.models.units import MiB
    from rooftop.tui.app.panes.live import ceilings_text

    from test_calibrate import GPU, stream
    from test_conditions import h200_run, ran

    text = ceilings_text(calibrate(h200_run() + [ran(stream("write", 512 * MiB, 4580), 1980.0)], GPU)).plain
    assert f"B dram 4363 GB/s [read_reduce:{512 * MiB}]; write 4580 GB/s [write:{512 * MiB}]; F " in text
    assert text.splitlines()[-1].startswith("tf32-tc measured power-capped and thermally capped (700 W)")


async def test_a_store_that_cannot_keep_a_run_starts_no_measurement_and_says_why(tmp_path: Path) -> None:
    """The app measured 109 points by itself into a store that could not keep one: it now starts none, says why
    on the Live tab (m still measures, the run said not kept, as any run the store refuses)."""
    bad = tmp_path / "not-a-db"
    bad.write_text("plain text")
    app = create_app(AppConfig(device="h100", sampler=None, db_path=bad, autostart=True, plan=tiny_plan("launch")))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "live")
        await pilot.pause(0.3)
        status = str(app.query_one("#ms-status", Static).render())
        assert not app.measuring and app.run_view.result is None, status
        assert "none started by itself: the store cannot keep a run" in status and "not an SQLite database" in status
        assert "press m to measure anyway (not kept)" in status
    assert bad.read_text() == "plain text"


async def test_on_a_full_disk_the_app_reads_the_store_and_starts_no_measurement(tmp_path: Path) -> None:
    from helpers.disks import fill, small_disk

    with small_disk(tmp_path, "1m") as mnt:
        Store.open(mnt / "r.db").close()
        fill(mnt)
        app = create_app(AppConfig(device="h100", sampler=None, db_path=mnt / "r.db", autostart=True,
                                   plan=tiny_plan("launch")))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "live")
            await pilot.pause(0.3)
            status = str(app.query_one("#ms-status", Static).render())
            assert not app.measuring and app.run_view.result is None, status
            assert "the store cannot keep a run (it has no room to write: disk full (" in status, status
