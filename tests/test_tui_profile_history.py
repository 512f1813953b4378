"""A stored profile in the History tab (real app under Pilot, real store, the real H200 trace)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Static

from rooftop.models.catalog import lookup_device
from rooftop.models.program.workload import build_workload
from rooftop.store.workloads import save_profile
from rooftop.store.runs import Store
from rooftop.store.tracefile import load_trace
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.app.widgets import RooflinePlot

QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"


async def test_history_shows_a_profile_run_on_its_roofs(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    work = build_workload(load_trace(QWEN), lookup_device("h200"))
    with Store.open(db) as store:
        rid = save_profile(store, work, source=str(QWEN), backend="trace")
    app = create_app(AppConfig(device="h100", sampler=None, db_path=db, export_dir=tmp_path, initial_tab="history"))
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        assert app.query_one("#hist-table", DataTable).row_count == 1
        detail = str(app.query_one("#hist-detail", Static).render())
        assert "profile on the roofs of h200" in detail and "largest share: idle time" in detail
        assert "aten::mm bf16 ×112" in detail and "no ceilings" not in detail
        labels = [s.label for s in app.query_one("#hist-plot", RooflinePlot).series]
        assert f"{rid[:8]} profile" in labels  # the op groups as points
        assert any(lb.startswith(f"{rid[:8]} dram") for lb in labels)  # on the h200's roofs
