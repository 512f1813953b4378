"""The HTML report of a real trace in a real browser: Debian's headless Chromium loads it from a file with no
network, its sortable-table script runs with no console error, and the screenshot shows the chart and the table.

One page, one browser start (a few seconds): the screenshot and the DOM after the script ran come from the same
load. Skipped, saying why, where /usr/bin/chromium is absent (.ci/run installs it)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from inprocess import run_main
from share_pages import Page

CHROMIUM = Path("/usr/bin/chromium")
QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
WIDTH, HEIGHT = 1280, 1800
# what Chromium's log says of a page's console: console.error / an uncaught exception / a load that failed
CONSOLE = re.compile(r":CONSOLE\(?\d*\)?[:\]]|Uncaught|net::ERR_", re.IGNORECASE)

pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason="headless Chromium is not installed (/usr/bin/chromium: "
                                "`apt-get install chromium`; .ci/run installs it)")


def load(page: Path, shot: Path, profile: Path) -> tuple[str, str]:
    """Chromium's DOM after the page's scripts ran, and its log, for one load of `page` (its screenshot to `shot`)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--hide-scrollbars",
             f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", "--dump-dom"]
    r = subprocess.run([str(CHROMIUM), *flags, page.as_uri()], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HOME": str(profile)})
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, r.stderr


def band(img, top: int, bottom: int) -> tuple[float, int]:
    """The grey level's variance over rows top..bottom, and how many of its pixels are strongly coloured (a
    chart's lines and points; text and rules are grey)."""
    from PIL import ImageStat

    part = img.crop((0, top, img.width, bottom))
    var = ImageStat.Stat(part.convert("L")).var[0]
    colour = sum(1 for r, g, b in part.getdata() if max(r, g, b) - min(r, g, b) > 60)
    return var, colour


def test_report_in_chromium(tmp_path) -> None:
    from PIL import Image

    out = tmp_path / "report.html"
    r = run_main("profile", "--trace", str(QWEN), "-d", "h200", "--no-save", "--db", str(tmp_path / "db.sqlite"),
                 "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert Page(out.read_text()).fetching == []
    shot = tmp_path / "shot.png"
    dom, log = load(out, shot, tmp_path / "chromium")
    errors = [line for line in log.splitlines() if CONSOLE.search(line)]
    assert errors == [], errors  # no console message, no uncaught error, nothing it tried to fetch
    assert 'data-sortable="ready"' in dom  # the page's script ran to its end
    seen = Page(dom)
    assert seen.tags.count("svg") >= 1 and len(seen.table("ops").rows) > 5
    img = Image.open(shot).convert("RGB")
    assert img.size == (WIDTH, HEIGHT)
    upper, lower = band(img, 0, HEIGHT // 2), band(img, HEIGHT // 2, HEIGHT)
    assert upper[0] > 100 and lower[0] > 100  # neither half blank: the headline and chart above, the table below
    assert upper[1] > 500  # the chart's coloured roofs and points are drawn in the upper half
    keep = os.environ.get("ROOFTOP_SCREENSHOT")  # where to keep the screenshot (the notes' copy)
    if keep:
        Path(keep).write_bytes(shot.read_bytes())
