"""--out through the real command line: `profile`, `llm` and `show` write .html, .svg and .png, beside --json; a
bad path is one line and exit 2 with no file and no temporary file left; a kept profile's report from `show` is the
one `profile` wrote; a job's communication roofline carries its collectives as points (real traces, a real store)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from inprocess import run_main
from share_pages import Page
from test_services_values import measured_db
from test_store_readonly import without_override
from rooftop.models.plotdata import collective_points
from rooftop.store.runs import Store

DATA = Path(__file__).parent / "data"
RANKS = [str(DATA / "real-traces" / f"trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
NS = "{http://www.w3.org/2000/svg}"
PNG = b"\x89PNG\r\n\x1a\n"
WROTE = re.compile(r"^wrote (\S+) \((\d+) kB\)$", re.MULTILINE)


def svg_titles(svg: str) -> list[str]:
    """Every <title> of an SVG document (the chart's own first, then one per point)."""
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{NS}title")]


def svgs_of(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, re.S)


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> tuple[Path, dict, Path]:
    """The 2-rank job profiled once with --json and --out: the folder, the JSON document, the store."""
    tmp = tmp_path_factory.mktemp("job")
    db = tmp / "db.sqlite"
    r = run_main("profile", "--trace", *RANKS, "-d", "h100", "--json", "--out", str(tmp / "job.html"), "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert WROTE.search(r.stderr).group(1) == str(tmp / "job.html")  # stderr says where; stdout is the JSON alone
    return tmp, json.loads(r.stdout), db


def test_profile_out_with_json_writes_the_report_of_the_json(job) -> None:
    tmp, doc, _ = job
    page = (tmp / "job.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and Page(page).fetching == []
    assert f"kept as run {doc['run_id'][:8]}" in page
    assert sorted(p.name for p in tmp.iterdir() if not p.name.startswith("db.sqlite")) == ["job.html"]  # no temp


def test_show_writes_the_report_profile_wrote(job) -> None:
    tmp, doc, db = job
    r = run_main("show", doc["run_id"][:8], "--out", str(tmp / "show.html"), "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert "GPU program on the roofs of h100" in r.stdout  # the terminal report, as without --out
    made, shown = Page((tmp / "job.html").read_text()), Page((tmp / "show.html").read_text())
    assert [(t.section, t.headers, [[c for c, _ in row] for row in t.rows]) for t in shown.tables] == \
           [(t.section, t.headers, [[c for c, _ in row] for row in t.rows]) for t in made.tables]
    assert len(shown.tables) >= 4  # ranks, collectives, op groups, idle causes at least


def test_a_jobs_comm_chart_has_its_collectives_as_points(job) -> None:
    tmp, doc, _ = job
    charts = svgs_of((tmp / "job.html").read_text())
    assert len(charts) == 2
    titles = svg_titles(charts[1])
    assert titles[0].startswith("collectives on the communication roofline")
    want = [s.label for s in collective_points(doc["collectives"])]
    assert want and all(any(t.startswith(w + "\n") for t in titles) for w in want)
    unroofed = {c["link"] for c in doc["collectives"] if c.get("link_bandwidth") is None}
    assert unroofed == {"net"} and "No roof is known for net on this device" in (tmp / "job.html").read_text()
    op_titles = svg_titles(charts[0])
    assert not op_titles[0].startswith("GPU program on the roofs")  # in the page the title is the page's alone


@pytest.mark.parametrize("ext", ["svg", "png", "html"])
def test_show_of_a_kept_profile_writes_each_format(job, ext: str) -> None:
    tmp, doc, db = job
    out = tmp / f"show-json.{ext}"
    r = run_main("show", doc["run_id"][:8], "--json", "--out", str(out), "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["id"] == doc["run_id"]
    data = out.read_bytes()
    if ext == "png":
        assert data.startswith(PNG) and 20_000 < len(data) < 2_000_000
    elif ext == "svg":
        titles = svg_titles(data.decode())
        assert titles[0].startswith("GPU program on the roofs of h100: op groups on the roofline")
        assert any("I = " in t for t in titles[1:])
    else:
        assert b"<title>GPU program on the roofs of h100</title>" in data


@pytest.mark.parametrize("ext", ["svg", "png", "html"])
def test_llm_writes_each_format(tmp_path: Path, ext: str) -> None:
    out = tmp_path / f"step.{ext}"
    r = run_main("llm", "qwen2.5-7b", "-d", "h200", "--batch", "1,8", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["steps"]) == 2 and WROTE.search(r.stderr)
    data = out.read_bytes()
    if ext == "png":
        assert data.startswith(PNG)
    elif ext == "svg":
        assert any(t.startswith("attention") for t in svg_titles(data.decode()))
    else:
        assert len(Page(data.decode()).tables[0].rows) == 2  # the bound table: one row per batch


def test_show_of_a_measurement_writes_its_report(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    rid = measured_db(db)  # a complete measured run: two bandwidth points under its ceilings
    r = run_main("show", rid[:8], "--out", str(tmp_path / "m.html"), "--db", str(db))
    assert r.returncode == 0, r.stderr
    page = Page((tmp_path / "m.html").read_text())
    ceilings = next(t for t in page.tables if "case (conditions)" in t.headers)
    assert [c for c, _ in ceilings.column("case (conditions)")] == ["read_reduce:134217728", "4096x4096x4096"]
    charts = svgs_of((tmp_path / "m.html").read_text())
    assert svg_titles(charts[0])[0].startswith("measured roofline: Test GPU")
    r = run_main("show", rid[:8], "--out", str(tmp_path / "m.svg"), "--db", str(db))
    assert r.returncode == 0 and svg_titles((tmp_path / "m.svg").read_text())[0].startswith("measured roofline")


def test_show_of_a_comm_run_is_refused_naming_what_it_writes(tmp_path: Path) -> None:
    from tui_helpers import gloo_sweep

    db = tmp_path / "db.sqlite"
    with Store.open(db) as store:
        cid = gloo_sweep(store)
    r = run_main("show", cid[:8], "--out", str(tmp_path / "c.html"), "--db", str(db))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "is a comm run; --out writes a kept profile or a measurement" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("db.sqlite")) == []


BAD = [("x.txt", "'.txt' is not a format rooftop writes; use .svg, .png or .html"),
       ("x", "no extension is not a format rooftop writes"),
       ("missing/x.html", "does not exist; create it or choose another")]


@pytest.mark.parametrize("name,says", BAD)
@pytest.mark.parametrize("command", [["profile", "--trace", RANKS[0], "-d", "h100", "--no-save"],
                                     ["llm", "qwen2.5-7b", "-d", "h200"], ["show", "abcd1234"]])
def test_a_bad_out_is_one_line_and_no_file(tmp_path: Path, command: list[str], name: str, says: str) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    r = run_main(*command, "--out", str(folder / name), "--db", str(tmp_path / "none.sqlite"))
    assert r.returncode == 2 and r.stdout == ""  # said before the work: `show` of a run not there says the path
    assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
    assert list(folder.iterdir()) == [] and not (tmp_path / "none.sqlite").exists()


@pytest.mark.parametrize("command", [["llm", "qwen2.5-7b", "-d", "h200"], ["show", "abcd1234"]])
def test_a_read_only_folder_is_one_line_and_no_file(tmp_path: Path, command: list[str]) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        r = subprocess.run([*without_override(), sys.executable, "-m", "rooftop.tui.cli", *command, "--out",
                            str(folder / "r.html"), "--db", str(tmp_path / "none.sqlite")],
                           capture_output=True, text=True, timeout=120)
    finally:
        folder.chmod(0o755)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().endswith(f"the folder {folder} is read-only; choose a folder you can write to")
    assert r.stderr.count("\n") == 1 and list(folder.iterdir()) == []
