"""The Profile tab's "fix first" panel: a kept profile's critical path and its top op groups by what each saves on
it, on screen at 80×24; ↵ on a row opens that op group (what it is, saves and the advice for it; its row in the op
table under the cursor). A profile kept before there was a path shows as before, with the sums labelled."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from textual.widgets import Static

from helpers.critpaths import ADVICE, made_path
from rooftop.models.catalog import lookup_device
from rooftop.models.program.workload import build_workload
from rooftop.store.runs import Store
from rooftop.store.tracefile import load_trace
from rooftop.store.workloads import save_profile
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.app.panes.profile import group_key
from rooftop.tui.app.widgets import FitTable
from rooftop.tui.cli import main
from rooftop.tui.render.profile import profile_detail
from tui_helpers import printed, screen_lines

QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"


def make(tmp_path: Path):
    return create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", export_dir=tmp_path))


async def test_fix_first_at_80x24_and_enter_opens_the_op_group(tmp_path: Path) -> None:
    work = build_workload(load_trace(QWEN), lookup_device("h200"))
    path = made_path(work)
    with Store.open(tmp_path / "r.db") as store:
        save_profile(store, work, source="decode.json.gz", backend="trace", path=path)
    app = make(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        lines = screen_lines(app)
        screen = "\n".join(lines)
        assert "fix first: each op group at its roof, the path's saving (↵ opens it)" in screen, screen
        assert "summed" not in screen  # the path's what-ifs replace the sums
        assert "critical path 134 ms: CPU 89.5%, device 6.8%, launch 3.0%, gaps 0.7%" in screen
        assert "re-timed: every op at its roof −9.00 ms; no launch gaps −4.00 ms" in screen
        fix = app.query_one("#prof-fix", FitTable)
        assert fix.row_count == 5 and {"saves", "op", "roof"} <= set(fix.shown)
        for f in path.fix_first:  # every row on screen, its saving beside its op group
            assert any(f"{f.saving_s * 1e3:.2f} ms" in line and f.label[:12] in line for line in lines), screen
        fix.focus()
        await pilot.press("down", "enter")
        await pilot.pause()
        opened = app.query_one("#prof-group", Static)
        assert opened.display
        text = printed(opened.render(), 200)
        second = path.fix_first[1]
        assert second.label in text and "at its roof the path is 4.00 ms shorter" in text and f"{ADVICE} (2)" in text
        assert f"×{work.groups[1].calls}" in text
        ops = app.query_one("#prof-ops", FitTable)
        assert ops.coordinate_to_cell_key(ops.cursor_coordinate).row_key.value == group_key(1)
        assert opened.region.height > 0 and opened.region.y < 24  # scrolled into view


async def test_a_profile_kept_before_the_path_shows_the_sums(tmp_path: Path) -> None:
    work = build_workload(load_trace(QWEN), lookup_device("h200"))
    with Store.open(tmp_path / "r.db") as store:
        save_profile(store, work, source="decode.json.gz", backend="trace")
    app = make(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        assert not app.query_one("#prof-fix", FitTable).display
        assert not app.query_one("#prof-path", Static).display
        split = str(app.query_one("#prof-split", Static).render())
        assert "summed — every op at its roof: " in split


def test_history_names_the_path_and_what_to_fix_first(tmp_path: Path) -> None:
    """The History tab's detail of a kept profile: its path in one line, each fix-first row in one."""
    work = build_workload(load_trace(QWEN), lookup_device("h200"))
    path = made_path(work)
    with Store.open(tmp_path / "r.db") as store:
        rid = save_profile(store, work, source="decode.json.gz", backend="trace", path=path)
        detail = profile_detail(store.run(rid), store.samples(rid)).plain
    assert "critical path of ProfilerStep#2–#3 (2 steps): 134 ms — CPU 120 ms (89.5%)" in detail
    first = path.fix_first[0]
    assert f"  fix first: {first.label} saves 5.00 ms on the path (memory, 82.0% of roof)" in detail


async def test_the_real_path_of_a_kept_profile_opens_from_fix_first(tmp_path: Path) -> None:
    """End to end: `rooftop profile --trace` keeps the H100 inference step's real critical path (its fix-first
    rows the roofs' savings re-timed on the graph); the Profile tab shows them at 80×24 and ↵ on the first opens
    its op group, the one the report names first."""
    trace = Path(__file__).parent / "data" / "real-traces" / "more" / "h100-hf-qwen1.5-0.5b-infer-bs16.json.gz"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["profile", "--trace", str(trace), "--json", "--db", str(tmp_path / "r.db")]) == 0
    doc = json.loads(out.getvalue())
    fixes = doc["fix_first"]
    assert doc["critical_path"]["graph"] and len(fixes) == 5
    app = make(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        screen = "\n".join(screen_lines(app))
        fix = app.query_one("#prof-fix", FitTable)
        assert fix.row_count == len(fixes), screen
        assert f"{fixes[0]['saving_s'] * 1e3:.2f} ms" in screen, screen
        fix.focus()
        await pilot.press("enter")
        await pilot.pause()
        opened = app.query_one("#prof-group", Static)
        assert opened.display
        text = printed(opened.render(), 200)
        assert fixes[0]["label"] in text and fixes[0]["advice"][:40] in text.replace("\n", " "), text
