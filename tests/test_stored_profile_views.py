"""Every view of a kept profile reads it through one typed reader (store.workloads.stored_profile): the Profile tab,
History's detail, `rooftop show` and `rooftop profile --compare` (real trace, real SQLite, the real app under Pilot).

So where `show` finds a kept op group malformed, the tabs say so too, instead of drawing it with defaults of their
own; and a row is labelled from the op group as read back, never from a stand-in built for its label.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from textual.widgets import Static

from helpers.critpaths import made_path
from inprocess import run_main
from rooftop.models.catalog import lookup_device
from rooftop.models.program.profilediff import diff_groups
from rooftop.models.program.workload import Workload, build_workload
from rooftop.store.runs import Store
from rooftop.store.tracefile import load_trace
from rooftop.store.workloads import PLAN, group_sample, profile_device_info, save_profile, stored_groups
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.app.widgets import FitTable
from rooftop.tui.render.profile import op_label, profile_detail
from tui_helpers import printed

ROOT = Path(__file__).parent.parent
QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"


def _work() -> Workload:
    return build_workload(load_trace(QWEN), lookup_device("h200"))


def _cells(table: FitTable) -> list[str]:
    return [str(c) for _, cells in table._rows for c in cells]


async def test_a_malformed_op_group_reads_so_in_the_tabs_as_in_show(tmp_path: Path) -> None:
    """An op group whose calls are not a count (a store written before imports were checked): `show` says the
    profile is malformed; the Profile tab and History said nothing and drew "many" as its calls."""
    work = _work()
    bad = group_sample(work.groups[0])
    record = {**bad.conditions["profile"], "calls": "many"}
    bad = dataclasses.replace(bad, conditions={"profile": record})
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        rid = store.begin_run(profile_device_info(work, "decode.json.gz"), plan=PLAN, backend="trace")
        store.add_samples(rid, [bad, *(group_sample(g) for g in work.groups[1:])])
        store.finish_run(rid, "complete")
        detail = profile_detail(store.run(rid), store.samples(rid)).plain
    shown = run_main("show", rid[:8], "--db", str(db))
    assert shown.returncode == 0 and "the stored profile is malformed" in shown.stderr, shown.stderr
    assert "×many" not in detail
    assert "a stored op group is malformed" in detail and "its op groups are left out" in detail, detail
    app = create_app(AppConfig(device="h100", sampler=None, db_path=db, export_dir=tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        ops = app.query_one("#prof-ops", FitTable)
        assert "many" not in _cells(ops)
        assert [str(r[3]) for _, r in ops._rows] == ["idle time"]  # no op group drawn with defaults
        more = printed(app.query_one("#prof-more", Static).render(), 200)
        assert "this run's op groups are not ones rooftop kept (edited?): the stored profile is malformed" in more
        split = printed(app.query_one("#prof-split", Static).render(), 200)
        assert "on the roofs of h200" in split  # its split is shown still


def test_compare_pairs_the_op_groups_as_read_back(tmp_path: Path) -> None:
    """Two kept profiles of one trace: every op group paired with itself (B / A = 1), labelled as the op table
    labels it, in `--compare`'s report and its --json."""
    work = _work()
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        a, b = (save_profile(store, work, source="decode.json.gz", backend="trace", path=made_path(work))
                for _ in range(2))
        ga, gb = stored_groups(store.samples(a)), stored_groups(store.samples(b))
    diffs = diff_groups(ga, gb)
    assert len(diffs) == len({(g.op, str(g.shapes), g.dtype, g.owner) for g in work.groups})
    assert all((d.ratio == 1.0 or not d.time_a_s) and d.calls_a == d.calls_b == d.group.calls for d in diffs)
    assert diffs[0].to_dict() == {"op": ga[0].op, "shapes": ga[0].shapes, "dtype": ga[0].dtype,
                                  "time_a_s": ga[0].time_s, "time_b_s": gb[0].time_s, "calls_a": ga[0].calls,
                                  "calls_b": gb[0].calls, "ratio": 1.0, "owner": ga[0].owner}
    out = run_main("profile", "--compare", a[:8], b[:8], "--wide", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert f"{op_label(ga[0])} " in out.stdout and "×1.00" in out.stdout, out.stdout


def test_no_view_builds_an_op_group_to_label_a_row() -> None:
    """The views label a kept op group from the one read back (`op_label`): no `OpGroup(…)` is built in tui/."""
    built = [f"{p.relative_to(ROOT)}:{n.lineno}" for p in sorted((ROOT / "tui").rglob("*.py"))
             for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.Call)
             and getattr(n.func, "id", getattr(n.func, "attr", "")) == "OpGroup"]
    assert not built, built
