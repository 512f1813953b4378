"""The History and Profile tabs read the store off the UI thread (real app under Pilot, real SQLite, real traces).

Every SQL statement the store runs is recorded with the thread that ran it (SQLite's own trace callback on each
connection `rooftop.store.db.connect` opens): opening both tabs and moving through their rows runs none on the
thread of the app's event loop.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from inprocess import run_main
from tui_helpers import gloo_sweep, printed
from rooftop.store import db
from rooftop.store.runs import Store
from rooftop.tui.app import AppConfig, create_app

REAL = Path(__file__).parent / "data" / "real-traces"
RANK0, RANK1 = REAL / "trace_filter_sampled_rank-0.json.gz", REAL / "trace_filter_sampled_rank-1.json.gz"


def job_and_comm_db(path: Path) -> None:
    """A store holding a kept two-rank job (`rooftop profile --trace` of two ranks) and a comm sweep."""
    out = run_main("profile", "--trace", str(RANK0), str(RANK1), "-d", "a100-80g-ds", "--db", str(path))
    assert out.returncode == 0, out.stderr
    with Store.open(path) as store:
        gloo_sweep(store)


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, str]]:
    """(ran on the main thread, SQL) of every statement of every store opened from now on."""
    seen: list[tuple[bool, str]] = []
    connect = db.connect

    def traced(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: seen.append((threading.current_thread() is threading.main_thread(), sql)))
        return conn

    monkeypatch.setattr(db, "connect", traced)
    return seen


async def settle(pilot: object) -> None:
    """Until the reads the last key asked for have come back and been drawn."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def test_history_and_profile_tabs_read_the_store_in_workers(tmp_path: Path, statements: list) -> None:
    db_file = tmp_path / "r.db"
    job_and_comm_db(db_file)
    app = create_app(AppConfig(device="h100", sampler=None, db_path=db_file, export_dir=tmp_path))
    async with app.run_test(size=(110, 40)) as pilot:
        await settle(pilot)
        statements.clear()  # what the app read as it started (the profiles on offer) is not these tabs'
        await pilot.press("5")
        await settle(pilot)
        table = app.query_one("#hist-table", DataTable)
        assert table.row_count == 2
        detail = app.query_one("#hist-detail", Static)
        assert "allreduce ×4: α = 20.0 µs" in printed(detail.content)  # the comm run: newest, on show first
        table.focus()
        await pilot.press("down")
        await settle(pilot)
        assert "profile on the roofs of a100-80g-ds" in printed(detail.content)  # the kept job
        await pilot.press("7")
        await settle(pilot)
        assert app.query_one("#prof-runs", DataTable).row_count == 1
        assert "2 ranks of 128 (nccl)" in printed(app.query_one("#prof-job", Static).content)
        assert app.query_one("#prof-ops", DataTable).row_count > 2
    on_ui = [sql for main, sql in statements if main]
    assert not on_ui, f"{len(on_ui)} statements on the UI thread, the first: {on_ui[:3]}"
    assert any("FROM samples" in sql for main, sql in statements if not main)  # read, in the workers
