"""--out on plot, op, compare and measure: the real commands, in process (tests/inprocess.py), writing real
files; a bad --out is one line and exit 2 before any work, with no file and no temporary left behind."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from inprocess import run_main
from rooftop.models.calibrate import calibrate
from rooftop.models.catalog import lookup_device
from rooftop.tui.share.charts import measure_charts, roofs_subtitle
from rooftop.tui.share.figure import chart_svg_inline
from test_calibrate import GPU
from test_conditions import h200_run

NS = "{http://www.w3.org/2000/svg}"
DATA = Path(__file__).parent / "data"


def svg_texts(path: Path) -> list[str]:
    return [t.text or "" for t in ET.parse(path).getroot().iter(f"{NS}text")]


def imported_h200(tmp_path: Path) -> Path:
    """A store holding the measured H200 profile as the run `node7`, measured 2026-11-30."""
    prof = json.loads((DATA / "h200-measured-2026-11-30.profile.json").read_text())
    run = {"id": "0123456789abcdef0123456789a00000", "name": "node7", "device_key": "GPU-h200-node7",
           "host": "node7", "device": {"name": prof["name"], "kind": "gpu"}, "backend": "cuda:0", "versions": {},
           "plan": "quick", "started_at": 1796040000.0, "ended_at": 1796040060.0, "status": "complete",
           "profile": prof, "samples": [], "telemetry": []}
    doc = tmp_path / "node7.json"
    doc.write_text(json.dumps({"format": "rooftop-runs", "format_version": 1, "runs": [run]}))
    db = tmp_path / "s.db"
    assert run_main("import", str(doc), "--db", str(db)).returncode == 0
    return db


def test_plot_out_svg_of_a_measured_run_against_a_reference(tmp_path: Path) -> None:
    db = imported_h200(tmp_path)
    out = tmp_path / "roof.svg"
    r = run_main("plot", "-d", "node7", "-d", "h100", "--op", "gemm 1 8192 8192 bf16", "--db", str(db),
                 "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "roofline: node7 (imported) vs h100 (reference)" in r.stdout  # the terminal chart is still printed
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("wrote ")]
    assert line == f"wrote {out} ({round(out.stat().st_size / 1000)} kB)"
    words = svg_texts(out)
    assert "roofline: node7 (imported) vs h100 (reference)" in words
    sub = next(w for w in words if w.startswith("node7 = NVIDIA H200, imported 2026-11-"))
    assert "h100 = NVIDIA H100 80GB HBM3, reference" in sub and "drawn " in sub
    assert any(w.startswith("node7 l2 1820 GB/s") for w in words) and "GEMV 1×8192×8192 bf16" in words


def test_op_out_png_and_json_stays_on_stdout(tmp_path: Path) -> None:
    out = tmp_path / "op.png"
    r = run_main("op", "gemm", "1", "8192", "8192", "bf16", "--device", "h100", "--device", "h200",
                 "--measured-ms", "0.1", "--json", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert [a["device"]["id"] if isinstance(a["device"], dict) else a["device"] for a in json.loads(r.stdout)]
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and 30_000 < len(png) < 1_000_000


def test_compare_out_overlays_the_memory_roofs(tmp_path: Path) -> None:
    out = tmp_path / "cmp.svg"
    assert run_main("compare", "h100", "mi300x-ds", "--out", str(out)).returncode == 0
    words = svg_texts(out)
    assert any(w.startswith("h100 dram") for w in words) and any(w.startswith("mi300x-ds dram") for w in words)
    assert not any(w.startswith("mi300x-ds pcie") for w in words)  # a link's slope would stretch the axes
    assert "rooflines compared: h100 (reference) vs mi300x-ds (datasheet)" in words


@pytest.mark.parametrize("cmd", [
    ["plot", "-d", "h100"], ["op", "gemm", "1", "8192", "8192"], ["compare", "h100", "h200"],
    ["measure", "--device", "cpu", "--no-save"],  # refused before torch is asked for a device
])
@pytest.mark.parametrize("name,says", [
    ("c.pdf", "'.pdf' is not a format rooftop writes; use .svg, .png or .html"),
    ("no/such/c.svg", "does not exist"),
    ("c.jpeg", "'.jpeg' is not a format rooftop writes"),
])
def test_a_bad_out_is_one_line_exit_2_and_no_file(tmp_path: Path, cmd: list[str], name: str, says: str) -> None:
    r = run_main(*cmd, "--out", str(tmp_path / name), "--db", str(tmp_path / "none.db"))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("cmd,section", [
    (["plot", "-d", "h100", "-d", "h200", "--op", "gemm 1 8192 8192 bf16"], "Roofs"),
    (["op", "gemm", "1", "8192", "8192", "bf16", "-d", "h100"], "Ops"),
    (["compare", "h100", "h200"], "Crossovers"),
])
def test_html_out_is_the_report_with_the_chart_inline(tmp_path: Path, cmd: list[str], section: str) -> None:
    from share_pages import Page

    out = tmp_path / "r.html"
    r = run_main(*cmd, "--out", str(out), "--db", str(tmp_path / "none.db"))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    page = Page(text)
    assert page.fetching == [] and "svg" in page.tags and "title" in page.tags
    assert f"<h2>{section}</h2>" in text and page.tables
    assert "rooftop " + cmd[0] in page.text()  # the command that made it
    assert text.count("<svg") == 1 and "arithmetic intensity I (FLOP/byte)" in text


def test_a_read_only_folder_is_refused_by_the_command(tmp_path: Path) -> None:
    import subprocess
    import sys

    from test_store_readonly import without_override

    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        r = subprocess.run([*without_override(), sys.executable, "-m", "rooftop.tui.cli", "plot", "-d", "h100",
                            "--out", str(folder / "c.svg")], capture_output=True, text=True, timeout=120)
    finally:
        folder.chmod(0o755)
    assert r.returncode == 2 and r.stdout == "" and not list(folder.iterdir())
    assert r.stderr == f"rooftop plot: error: --out {folder / 'c.svg'}: the folder {folder} is read-only; " \
                       "choose a folder you can write to\n"


def test_measure_charts_roofline_first_then_the_curves() -> None:
    samples = h200_run()
    charts = measure_charts(calibrate(samples, GPU), samples, when=1796040000.0)
    assert [c.kind for c in charts] == ["roofline", "bandwidth", "gemm"]  # the run swept no FMA
    assert charts[0].title == "measured roofline: NVIDIA H200"
    assert all(c.subtitle.startswith("local = NVIDIA H200, measured 2026-11-") for c in charts)
    assert [p for s in charts[0].series if s.kind == "point" for p in s.xs], "the GEMM points are on the roofline"
    words = [t.text or "" for t in ET.fromstring(chart_svg_inline(charts[1])).iter(f"{NS}text")]
    assert "working set (bytes)" in words and "bandwidth (GB/s)" in words and {"100M", "1G"} <= set(words)


def test_measure_out_with_nothing_to_chart_says_so_after_the_report(tmp_path: Path) -> None:
    out = tmp_path / "m.svg"
    r = run_main("measure", "--only", "launch", "--device", "cpu", "--no-save", "--no-plot", "--out", str(out))
    assert r.returncode == 2 and "launch" in r.stdout  # the report is printed first: nothing measured is lost
    assert r.stderr.splitlines()[-1] == f"rooftop measure: error: --out {out}: nothing to draw: no roof, point " \
                                        "or curve to chart; no file written"
    assert not list(tmp_path.iterdir())


def test_the_device_line_names_source_and_date() -> None:
    line = roofs_subtitle([lookup_device("h100", {}), lookup_device("h200-ds", {})], now=1796040000.0)
    assert line.startswith("h100 = NVIDIA H100 80GB HBM3, reference · h200-ds = ")
    assert ", datasheet · drawn 2026-11-" in line


def test_help_explains_out() -> None:
    for cmd in ("plot", "op", "compare", "measure"):
        text = " ".join(run_main(cmd, "--help").stdout.split())
        assert "--out FILE write the result to FILE too" in text and ".html the report" in text
        assert ".svg or .png the" in text and "rooftop[share]" in text
