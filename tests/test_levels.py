"""Every memory level everywhere: the op language, `rooftop plot`, `devices`, `compare`, JSON, the curves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.models.analysis import analyze
from rooftop.models.catalog import catalog
from rooftop.models.plotdata import bandwidth_curves, roof_series
from rooftop.models.profile import Ceiling, DeviceProfile, NoRoof
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.spec import SpecError, parse_spec as parse_op
from rooftop.models.units import MiB
from rooftop.store.runs import Store
from rooftop.tui.cli import main

HIER = DeviceProfile(
    id="local", name="Lab H200", source="measured",
    bandwidth={"dram": Ceiling(4.5e12, "measured", "l2_read:1073741824"),
               "l2": Ceiling(10.9e12, "measured", "l2_read:4194304"),
               "l1": Ceiling(25.9e12, "measured", "l1_read:4325376")},
    peak={"bf16-tc": Ceiling(6.9e14, "measured", "2048x8192x8192")},
    extra={"flagged": {"l1": {"value": 5.79e13, "case": "l1_read:1", "why": "above the L1's limit"}}},
)


@pytest.fixture(autouse=True)
def no_user_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ROOFTOP_DB", raising=False)


def stored(tmp_path: Path) -> str:
    db = str(tmp_path / "r.db")
    with Store.open(db) as s:
        rid = s.begin_run({"name": "Lab H200", "uuid": "GPU-1"}, "quick", "cuda", {"torch": "2.11"})
        s.add_sample(rid, synthetic_sample(0))
        s.set_ceilings(rid, HIER)
        s.finish_run(rid, "complete")
        s.rename(rid, "labh200")
    return db


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_level_l1_in_the_op_language():
    op = parse_op("gemv 8192 8192 bf16 level=l1")
    assert op.level == "l1"
    a = analyze(op, HIER)
    assert a.bandwidth == pytest.approx(25.9e12)  # the L1 slope, not dram's
    with pytest.raises(NoRoof, match="no l1 bandwidth; it has: dram"):
        analyze(op, catalog()["h200"])  # a catalog device without the level lacks it
    with pytest.raises(SpecError, match="dram, llc, l2, l1"):
        parse_op("gemv 8192 8192 level=l3")


def test_every_level_is_a_slope():
    labels = [s.label for s in roof_series(HIER) if s.kind == "slope"]
    assert labels == ["local dram 4500 GB/s", "local l2 10900 GB/s", "local l1 25900 GB/s"]


def test_plot_devices_compare_and_json_show_every_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    db = stored(tmp_path)
    rc, out, _ = cli(capsys, "plot", "-d", "labh200", "--db", db)
    assert rc == 0 and "labh200 l2 10900 GB/s" in out and "labh200 l1 25900 GB/s" in out
    rc, out, _ = cli(capsys, "devices", "labh200", "--db", db)
    flat = " ".join(out.split())
    assert "B l1 25900 GB/s" in flat and "B l1 57900 GB/s (l1_read:1) left out: above the L1's limit" in flat
    rc, out, _ = cli(capsys, "devices", "labh200", "--json", "--db", db)
    d = json.loads(out)[0]
    assert d["bandwidth"] == {"dram": 4.5e12, "l2": 10.9e12, "l1": 25.9e12}
    assert d["extra"]["flagged"]["l1"]["value"] == 5.79e13
    rc, out, _ = cli(capsys, "compare", "labh200", "h200", "--db", db)
    flat = " ".join(out.split())
    assert rc == 0 and "l1" in flat and "25900" in flat
    rc, out, _ = cli(capsys, "op", "gemv 8192 8192 bf16 level=l2", "-d", "labh200", "--json", "--db", db)
    assert rc == 0 and json.loads(out)[0]["bandwidth"] == pytest.approx(10.9e12)


def test_the_sweep_curve_has_the_cache_probes_plateaus():
    def pt(family: str, ws: float, gbps: float) -> Sample:
        t = 4 * 2**30 / (gbps * 1e9)
        return Sample(family, "fp32", {"n": 1}, 2**30, 4 * 2**30, ws,
                      stats=TimeStats(t, t, t, t, 0.01, 7, 10))
    curves = {c.label: c for c in bandwidth_curves([pt("l2_read", 4 * MiB, 10_900), pt("l2_read", 120 * MiB, 5_900),
                                                    pt("l1_read", 4 * MiB, 25_000)])}
    assert set(curves) == {"l2_read", "l1_read"}
    assert curves["l2_read"].xs == (4 * MiB, 120 * MiB) and curves["l2_read"].ys[0] == pytest.approx(10.9e12)


async def test_the_roofline_and_compare_tabs_show_every_level(tmp_path: Path) -> None:
    from textual.widgets import DataTable

    from rooftop.tui.app import AppConfig, create_app
    from rooftop.tui.app.widgets import RooflinePlot

    db = stored(tmp_path)
    a = create_app(AppConfig(device="labh200", sampler=None, db_path=Path(db)))
    async with a.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        slopes = [s.label for s in a.query_one("#rl-plot", RooflinePlot).series if s.kind == "slope"]
        assert slopes == ["labh200 dram 4500 GB/s", "labh200 l2 10900 GB/s", "labh200 l1 25900 GB/s"]
        a.set_focus(None)
        await pilot.press("4")
        a.query_one("#cmp-a").value = "labh200"
        a.query_one("#cmp-b").value = "h200"
        await pilot.pause()
        table = a.query_one("#cmp-table", DataTable)
        names = [table.get_row_at(i)[0] for i in range(table.row_count)]
        assert names[:3] == ["B dram GB/s", "B l2 GB/s", "B l1 GB/s"]  # up the hierarchy


def test_show_gives_a_cache_probes_point_in_gb_per_s(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    t = 4 * 2**30 / 10.9e12
    with Store.open(db) as s:
        rid = s.begin_run({"name": "Lab H200", "uuid": "GPU-1"}, "quick", "cuda", {"torch": "2.11"})
        s.add_sample(rid, Sample("l2_read", "fp32", {"n": 1 << 20, "chunks": 4, "programs": 16384}, 2**30,
                                 4 * 2**30, 4 * MiB, stats=TimeStats(t, t, t, t, 0.01, 7, 10)))
        s.finish_run(rid, "complete")
    rc, out, _ = cli(capsys, "show", rid[:8], "--db", db)
    assert rc == 0 and "l2_read fp32" in out and "10900 GB/s" in out
