"""`e` and `E` in the app under Pilot: the Roofline and Profile tabs write their chart as SVG, the LLM tab its
report as HTML (E: the chart), into the export folder (History's), under a new name each time, in a worker, and
say where it went."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from pathlib import Path

from rooftop.models.catalog import lookup_device
from rooftop.models.program.workload import build_workload
from rooftop.store.runs import Store
from rooftop.store.tracefile import load_trace
from rooftop.store.workloads import save_profile
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.app.export import file_stem

NS = "{http://www.w3.org/2000/svg}"
QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"


async def wait_for(pilot, folder: Path, n: int, pattern: str = "*.svg") -> list[Path]:
    """The files the export worker wrote (drawing takes a second or two, more on a busy machine)."""
    for _ in range(600):
        found = sorted(folder.glob(pattern))
        if len(found) >= n:
            return found
        await asyncio.sleep(0.1)
        await pilot.pause()
    raise AssertionError(f"no export in {folder}: {list(folder.iterdir())}")


def texts(path: Path) -> list[str]:
    return [t.text or "" for t in ET.parse(path).getroot().iter(f"{NS}text")]


async def test_roofline_tab_e_writes_the_chart_and_says_where(tmp_path: Path) -> None:
    out = tmp_path / "exports"
    out.mkdir()
    app = create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", export_dir=out,
                               initial_tab="roofline"))
    notes: list[str] = []
    async with app.run_test(size=(110, 32)) as pilot:
        await pilot.pause()
        app.overlay_id = "h200"
        await pilot.pause()
        app.notify = lambda message, **_kw: notes.append(str(message))  # type: ignore[method-assign]
        await pilot.press("e")
        (first,) = await wait_for(pilot, out, 1)
        await pilot.press("E")
        files = await wait_for(pilot, out, 2)
        for _ in range(50):  # the worker's message reaches the app after the file is in place
            if any(n.startswith("wrote ") for n in notes[1:]):
                break
            await pilot.pause(0.1)
    assert [f.name for f in files] == ["rooftop-roofline-h100-h200-2.svg", "rooftop-roofline-h100-h200.svg"]
    words = texts(first)
    assert "roofline: h100 vs h200 (reference)" in words and "arithmetic intensity I (FLOP/byte)" in words
    assert any(w.startswith("h100 = NVIDIA H100 80GB HBM3, reference · h200 = NVIDIA H200, reference") for w in words)
    assert f"wrote {first} ({round(first.stat().st_size / 1000)} kB)" in notes
    assert not list(out.glob(".*"))  # no temporary left


async def test_llm_and_profile_tabs_export_their_charts(tmp_path: Path) -> None:
    work = build_workload(load_trace(QWEN), lookup_device("h200"))
    with Store.open(tmp_path / "r.db") as store:
        rid = save_profile(store, work, source="decode.trace.json.gz", backend="trace")
    app = create_app(AppConfig(device="h200", sampler=None, db_path=tmp_path / "r.db", export_dir=tmp_path,
                               initial_tab="llm"))
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        app.query_one("#llm-plot").focus()
        await pilot.press("e")
        (report,) = await wait_for(pilot, tmp_path, 1, "rooftop-llm-*.html")
        await pilot.press("E")
        (llm,) = await wait_for(pilot, tmp_path, 1, "rooftop-llm-*.svg")
        await pilot.press("7")
        await pilot.pause()
        for _ in range(100):  # the profile is read in a worker
            if app.query_one("#prof-runs").row_count and app.query_one("ProfilePane").shown:
                break
            await pilot.pause(0.1)
        app.query_one("#prof-ops").focus()
        await pilot.press("e")
        (prof,) = await wait_for(pilot, tmp_path, 1, "rooftop-profile-*.svg")
    assert prof.name.startswith(file_stem("profile", rid[:8])) and prof.name.endswith("-h200.svg")
    root = ET.parse(prof).getroot()
    tips = [g.find(f"{NS}title").text for g in root.iter(f"{NS}g") if g.get("class") == "rooftop-point"]
    assert any(t.startswith(f"{rid[:8]} profile") for t in tips), tips[:3]
    assert any(w.startswith("h200 = NVIDIA H200, reference") for w in texts(prof))
    llm_tips = [g.find(f"{NS}title").text for g in ET.parse(llm).getroot().iter(f"{NS}g")
                if g.get("class") == "rooftop-point"]
    assert any("gate ×" in t and "-bound on h200" in t for t in llm_tips), llm_tips[:3]
    from share_pages import Page

    page = Page(report.read_text())
    assert page.fetching == [] and "svg" in page.tags and page.tables
    assert "rooftop llm " in page.text() and "-d h200 --phase decode --batch" in page.text()


def test_file_stems_are_safe_names() -> None:
    assert file_stem("roofline", "h100", "my/run ../x") == "rooftop-roofline-h100-my-run-x"
    assert file_stem("llm", "\u202eevil\x1b[2J", "") == "rooftop-llm-evil-2J"
