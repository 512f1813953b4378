"""Live with every GPU of a server at once: eight fake GPUs at 80×24, one whole row each, one selected."""

from __future__ import annotations

import re
from pathlib import Path

from fake_nvml import FakeNVML
from rooftop.probes.telemetry import GpuSnapshot, Sampler
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.render.gpu_rows import HEADER, gpu_row, gpu_rows
from test_tui_measure import wait_for
from tui_helpers import screen_lines

SMALL = (80, 24)


def eight() -> Sampler:
    return Sampler(interval=0.05, nvml=FakeNVML(names=["NVIDIA H200"] * 8), cpu=False)


async def test_eight_gpus_at_80x24_each_row_whole_and_one_selected(tmp_path: Path) -> None:
    app = create_app(AppConfig(sampler=eight, db_path=tmp_path / "r.db", initial_tab="live", device="h200"))
    async with app.run_test(size=SMALL) as pilot:
        await wait_for(pilot, lambda: any(line.lstrip(" >").startswith("gpu7 ") for line in screen_lines(app)))
        lines = screen_lines(app)
        rows = [line for line in lines if re.match(r"\s*>?gpu\d+ ", line) and "%" in line]
        assert [r.lstrip(" >").split()[0] for r in rows] == [f"gpu{i}" for i in range(8)], "\n".join(lines)
        for r in rows:  # nothing cut at the right edge: the last column, the throttle mark, is there whole
            assert r.rstrip().endswith("! PWR") and "650/700" in r and "1980" in r, r
        assert any(HEADER.split()[0] in line and "throttle" in line for line in lines)
        assert any(line.lstrip().startswith(">gpu0 ") for line in lines)  # the first is selected by default
        assert any("gpu0 NVIDIA H200" in line for line in lines)  # its sparklines

        table = app.query_one("#gpu-rows")
        await pilot.click("#gpu-rows", offset=(2, 4))  # the header, then gpu0…: row 4 is gpu3
        await wait_for(pilot, lambda: any("gpu3 NVIDIA H200" in line for line in screen_lines(app)))
        assert any(line.lstrip().startswith(">gpu3 ") for line in screen_lines(app))
        table.focus()
        await pilot.press("down")
        await wait_for(pilot, lambda: any("gpu4 NVIDIA H200" in line for line in screen_lines(app)))
        await pilot.press("up", "up")
        await wait_for(pilot, lambda: any("gpu2 NVIDIA H200" in line for line in screen_lines(app)))


async def test_one_gpu_has_no_table(tmp_path: Path) -> None:
    one = lambda: Sampler(interval=0.05, nvml=FakeNVML(), cpu=False)  # noqa: E731
    app = create_app(AppConfig(sampler=one, db_path=tmp_path / "r.db", initial_tab="live", device="h200"))
    async with app.run_test(size=SMALL) as pilot:
        await wait_for(pilot, lambda: any("gpu0 NVIDIA H200" in line for line in screen_lines(app)))
        assert not app.query_one("#gpu-rows").display


def test_rows_fit_their_width_and_mark_throttling() -> None:
    hot = GpuSnapshot(index=12, name="NVIDIA H200", gpu_util_pct=100, sm_clock_mhz=1755, power_w=699.6,
                      power_limit_w=700, temperature_c=88, dram_bandwidth=4.2e12, dram_fraction_of_roof=0.917,
                      tensor_active=0.51, clock_events=("power cap", "sw thermal", "hw slowdown"))
    row = gpu_row(hot)
    assert len(row) <= 80 and row.endswith("! PWR,THRM,SLOW")
    assert "4,200" in row and "92%" in row and "51%" in row and "700/700" in row and "1755" in row
    assert gpu_row(GpuSnapshot(index=3, name="x", lost=True)).startswith("gpu3 LOST")
    assert all(len(line) <= 60 for line in gpu_rows([hot] * 8, width=60, selected=12))
    idle = GpuSnapshot(index=0, name="NVIDIA H200")
    assert "N/A" in gpu_row(idle) and "!" not in gpu_row(idle)


def test_watch_eight_gpus_one_row_each_within_80x24(monkeypatch, capsys, tmp_path) -> None:
    import sys

    from rooftop.tui.cli import main

    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(names=["NVIDIA H200"] * 8))
    assert main(["--db", str(tmp_path / "r.db"), "watch", "--interval", "0.05", "--count", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [x for x in lines if re.match(r"gpu\d+ ", x)]
    assert [r.split()[0] for r in rows] == [f"gpu{i}" for i in range(8)] * 2
    assert all(len(x) <= 80 for x in lines) and len(lines) <= 2 * 12  # a tick's block: time, header, 8 rows, CPU
    assert all(r.endswith("! PWR") for r in rows)
    assert main(["--db", str(tmp_path / "r.db"), "watch", "--interval", "0.05", "--count", "1", "--detail"]) == 0
    detail = capsys.readouterr().out
    assert "throttle: power cap" in detail and not re.search(r"^gpu\d+ ", detail, re.M)


async def test_history_shows_a_fleet_run_by_its_members(tmp_path: Path) -> None:
    from rooftop.store.fleets import save_fleet
    from rooftop.store.runs import Store
    from test_store_fleets import payload

    db = tmp_path / "r.db"
    with Store.open(db) as store:
        fid = save_fleet(store, [payload(0, "node0", 4.6e12, "GPU-a"), payload(1, "node0", 3.6e12, "GPU-b")],
                         "all-gpus", "quick")
    app = create_app(AppConfig(sampler=None, db_path=db, initial_tab="history", device="h200"))
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        app.query_one("#history-pane").show_run(fid)
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "rank 0 node0 cuda:0: complete; B dram 4600 GB/s" in text, text
        assert "! rank 1 (node0 cuda:1): B dram 3600 GB/s is below 0.9×" in text
        assert "no ceilings" not in text
