"""The HTML report: one self-contained file (nothing it names is fetched), every name from a trace escaped, and its
tables the very figures `--json` prints.

The reports are built from the dict `rooftop profile --json` prints for real traces: a tiny hostile one written here
(its op and kernel names carry `<script>`, quotes and bidi characters), the shared 2-rank job, and the Qwen decode."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from helpers.kineto import H100, KinetoTrace
from inprocess import run_main
from share_pages import Page
from rooftop.models.units import fmt_time
from rooftop.tui.render.profile import TOP
from rooftop.tui.share import html, reports

DATA = Path(__file__).parent / "data"
QWEN = DATA / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
RANKS = [DATA / "real-traces" / f"trace_filter_sampled_rank-{r}.json.gz" for r in (0, 1)]
SCRIPT = '<script>alert("pwned")</script>'
BIDI = "\u202e"
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50"><circle cx="10" cy="10" r="3">'
       "<title>mm</title></circle></svg>")


def hostile_trace(path: Path) -> Path:
    """Two steps of a matmul and an op whose name, and its kernel's, carry markup, quotes and bidi overrides."""
    t = KinetoTrace(H100)
    for step in range(2):
        t0 = step * 1000.0
        t.op("ProfilerStep#" + str(step + 1), t0, 900.0, cat="user_annotation")
        mm = t.op("aten::mm", t0 + 10, 40, dims=[[512, 1024], [1024, 2048]], types=["c10::BFloat16"] * 2)
        t.kernel("sm90_xmma_gemm_bf16", t0 + 12, t0 + 30, 200.0, ext=mm)
        bad = t.op(f"my::op{SCRIPT}'\"{BIDI}x", t0 + 300, 40, dims=[[4096]], types=["float"])
        t.kernel(f"kern{SCRIPT}&\"'{BIDI}<b>", t0 + 302, t0 + 320, 100.0, ext=bad)
    return t.write(path / "hostile.json")


def payload(*args: str, db: Path) -> dict:
    r = run_main("profile", "--trace", *args, "--json", "--no-save", "--db", str(db))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[dict, str]:
    tmp = tmp_path_factory.mktemp("hostile")
    doc = payload(str(hostile_trace(tmp)), "-d", "h100", db=tmp / "db.sqlite")
    return doc, reports.profile_report(doc, [SVG], version="9.9", command=f"rooftop profile {SCRIPT}")


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> tuple[dict, str]:
    tmp = tmp_path_factory.mktemp("job")
    doc = payload(*map(str, RANKS), db=tmp / "db.sqlite")
    return doc, reports.profile_report(doc, [SVG, SVG], version="9.9", command="rooftop profile --trace a b")


def test_esc_neutralises_markup_quotes_and_bidi() -> None:
    out = html.esc(f"{SCRIPT}&'\"{BIDI}\u2066\x1b[2J")
    assert "<" not in out and ">" not in out and '"' not in out and "'" not in out
    assert BIDI not in out and "\u2066" not in out and "\x1b" not in out
    assert "\\u202e" in out and "\\x1b" in out and "&amp;" in out and "&lt;script&gt;" in out


def test_table_escapes_cells_and_carries_sort_keys() -> None:
    t = html.table(["name", "time"], [[SCRIPT, html.Cell("1.5 ms", 0.0015, title='a"b')]], numeric_cols=[1])
    page = Page(t)
    assert page.scripts == []
    (tab,) = page.tables
    assert tab.headers == ["name", "time"]
    (name, _), (time, attrs) = tab.rows[0]
    assert name == SCRIPT  # the text a reader sees, not markup
    assert time == "1.5 ms" and float(attrs["data-sort"]) == 0.0015 and attrs["title"] == 'a"b'
    assert attrs["class"] == "num"


def test_report_fetches_nothing_and_runs_one_inline_script(job) -> None:
    _, text = job
    page = Page(text)
    assert page.fetching == []  # no src, no href: it opens with no network
    assert len(page.scripts) == 1 and "data-sortable" in page.scripts[0]
    assert "@import" not in text and not re.search(r"url\(\s*['\"]?(?!#)", text)
    assert page.tags.count("svg") == 2


def test_hostile_names_stay_text(hostile) -> None:
    doc, text = hostile
    names = [o["op"] for o in doc["ops"]] + [k["name"] for k in doc["top_kernels"]]
    assert any(SCRIPT in n for n in names)  # the trace reader kept the markup (it drops the bidi characters)
    page = Page(text)
    assert len(page.scripts) == 1  # only the page's own: no name became a <script>
    assert "b" not in page.tags  # the kernel's <b> stayed text too
    assert BIDI not in text
    ops = page.table("ops")
    label = next(cell for cell, _ in ops.column("op dtype shapes") if "my::op" in cell)
    assert SCRIPT in label and "'\"" in label  # shown as written
    kernels = page.table("kernels")
    # the name is shortened as the terminal's (templates dropped); its whole, markup and all, is the hover text
    assert any(SCRIPT in a.get("title", "") and '&"' in a["title"] for _, a in kernels.column("kernel"))
    assert f"rooftop profile {SCRIPT}" in page.text()  # the command in the footer, as text


def test_op_table_is_the_json(job) -> None:
    doc, text = job
    ops = Page(text).table("ops")
    span = doc["summary"]["span_s"]
    times = {float(a["data-sort"]) for _, a in ops.column("time") if "data-sort" in a}
    shown = doc["ops"][:TOP]
    assert {o["time_s"] for o in shown} <= times
    for o in shown:  # each op group's row: its share of the span, its time, its fraction of the roof
        row = next(r for r in ops.rows if float(r[1][1].get("data-sort", "nan")) == o["time_s"]
                   and float(r[0][1]["data-sort"]) == pytest.approx(o["time_alone_s"] / span))
        assert row[1][0] == fmt_time(o["time_s"])
        f = o["fraction_of_roof"]
        assert (row[7][1].get("data-sort") is None) if f is None else float(row[7][1]["data-sort"]) == f
    assert any(t == "idle time" for t, _ in ops.column("op dtype shapes"))
    left = len(doc["ops"]) - TOP
    assert left > 0 and f"{left:,} more left out" in Page(text).text()


def test_job_tables_are_the_json(job) -> None:
    doc, text = job
    page = Page(text)
    ranks = page.table("job", 0)
    assert [int(float(a["data-sort"])) for _, a in ranks.column("rank")] == [r["rank"] for r in doc["ranks"]]
    assert [float(a["data-sort"]) for _, a in ranks.column("busy")] == [r["busy_s"] for r in doc["ranks"]]
    assert f"straggler: rank {doc['straggler']['rank']}" in page.text()
    colls = page.table("job", 1)
    assert [float(a["data-sort"]) for _, a in colls.column("time")] == [c["time_s"] for c in doc["collectives"]]
    causes = page.table("idle")
    assert [float(a["data-sort"]) for _, a in causes.column("time")] == [c["time_s"] for c in doc["idle_causes"]]
    steps = page.table("steps")
    assert [t for t, _ in steps.column("step")] == [s["name"] for s in doc["steps"][:len(steps.rows)]]


def test_headline_figures_are_the_summary(job) -> None:
    doc, text = job
    s = doc["summary"]
    page_text = Page(text).text()
    for v in (fmt_time(s["span_s"]), fmt_time(s["device_busy_s"]), fmt_time(s["idle_s"])):
        assert v in page_text
    assert "Made by rooftop 9.9" in page_text


def test_small_reports_tables_are_their_json(tmp_path) -> None:
    r = run_main("compare", "h100", "a100", "--json", "--db", str(tmp_path / "db.sqlite"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    page = Page(reports.compare_report(doc, [SVG], version="1", command="rooftop compare h100 a100"))
    assert page.fetching == []
    cross = page.table("", 0) if not any(t.section for t in page.tables) else page.tables[0]
    got = [float(a["data-sort"]) if "data-sort" in a else None for _, a in cross.column("crossover I")]
    want = [p["crossover"] if p["crossover"] and math.isfinite(p["crossover"]) else None for p in doc["pairs"]]
    assert got == want
    roofs = page.tables[1]
    assert {float(a["data-sort"]) for _, a in roofs.column("value")} == \
        set(doc["devices"][0]["peak"].values()) | set(doc["devices"][0]["bandwidth"].values())


def test_llm_report_tables_are_the_json(tmp_path) -> None:
    r = run_main("llm", "qwen2.5-7b", "-d", "h100", "--batch", "1,8", "--json", "--db", str(tmp_path / "d.sqlite"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    page = Page(reports.llm_report(doc, [SVG], version="1", command="rooftop llm qwen2.5-7b"))
    bound, ops = page.tables[0], page.tables[1]
    assert [float(a["data-sort"]) for _, a in bound.column("step bound")] == \
        [s["step_time_bound_s"] for s in doc["steps"]]
    assert [t for t, _ in ops.column("op")] == [o["description"] for o in doc["steps"][0]["ops"]]


def test_benchmark_sized_report_caps_op_groups() -> None:
    """Thousands of op groups (a long trace's) make a report of TOP rows and a line saying how many more."""
    op = {"op": "aten::add", "shapes": [[8, 8]], "dtype": "fp32", "calls": 1, "time_s": 1e-6, "time_alone_s": 1e-6,
          "flops": 64.0, "bytes": 768.0, "intensity": 0.083, "regime": "memory", "fraction_of_roof": 0.5}
    doc = {"summary": {"span_s": 1.0, "idle_s": 0.5, "on_device": True, "kernels": 5000},
           "ops": [dict(op, time_s=1e-6 * (i + 1)) for i in range(5000)]}
    page = Page(reports.profile_report(doc, [], version="1", command="c"))
    assert len(page.table("ops").rows) == TOP + 1  # the op groups and the idle time
    assert f"{5000 - TOP:,} more left out" in page.text()


def test_op_groups_on_the_chart_are_the_json(job) -> None:
    from rooftop.models.plotdata import op_group_series

    doc, _ = job
    series = op_group_series(doc["ops"], TOP)
    placed = [o for o in doc["ops"][:TOP] if (o["intensity"] or 0) > 0 and (o["achieved_flops"] or 0) > 0]
    assert sorted(x for s in series for x in s.ys) == sorted(o["achieved_flops"] for o in placed)
    assert {s.label for s in series} == {f"ops {o['regime']}-bound" for o in placed}
