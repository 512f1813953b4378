"""The shared chart as a file: the SVG parsed as XML (its axes, decade ticks, device names, a <title> on every
point), the PNG by its header and size, from real roofs (the catalog's and a measured H200 profile)."""

from __future__ import annotations

import json
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rooftop.models.analysis import analyze
from rooftop.models.catalog import lookup_device
from rooftop.models.plotdata import Series, bandwidth_curves, intensity_span, point_series, roof_series
from rooftop.models.profile import DeviceProfile
from rooftop.models.spec import parse_specs
from rooftop.tui.render.chart import line_colors
from rooftop.tui.share.figure import HUES, Chart, chart_colors, chart_png, chart_svg, chart_svg_inline
from rooftop.tui.share.files import OutError
from rooftop.tui.share.out import Shared, out_target, write_out

NS = "{http://www.w3.org/2000/svg}"
DATA = Path(__file__).parent / "data"
OPS = ["gemm 1 8192 8192 bf16", "gemm 4096 4096 4096 bf16", "attn b=8 h=32 d=128 t=8192 decode"]


def measured_h200() -> DeviceProfile:
    return DeviceProfile.from_dict(json.loads((DATA / "h200-measured-2026-11-30.profile.json").read_text()))


def roofline(devices: list[DeviceProfile], specs: list[str], measured_s: float | None = None) -> Chart:
    analyses = [analyze(op, devices[0], measured_s) for op in (parse_specs(specs) if specs else [])]
    span = intensity_span(devices, [a.intensity for a in analyses])
    series = [s for d in devices for s in roof_series(d, ["fp32-fma", "bf16-tc", "fp8-tc"], d.levels(), span)]
    return Chart("roofline", series + [point_series(a) for a in analyses],
                 "roofline: " + " vs ".join(d.id for d in devices), "measured 2026-11-30")


@pytest.fixture(scope="module")
def overlay() -> tuple[Chart, ET.Element]:
    chart = roofline([measured_h200(), lookup_device("h100", {})], OPS, measured_s=2e-4)
    return chart, ET.fromstring(chart_svg(chart).encode())


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{NS}text")]


def test_the_svg_has_its_axes_decades_and_both_devices(overlay: tuple[Chart, ET.Element]) -> None:
    chart, root = overlay
    words = texts(root)
    assert "arithmetic intensity I (FLOP/byte)" in words and "performance (TFLOP/s)" in words
    assert {"0.1", "1", "10", "100", "1k"} <= set(words)  # decade ticks as the terminal labels them
    assert "roofline: local vs h100" in words and "measured 2026-11-30" in words
    legend = [w for w in words if w.endswith(("GB/s", "TFLOP/s")) and not w.startswith("performance")]
    assert any(w.startswith("local dram 4581 GB/s") for w in legend)
    assert any(w.startswith("local l2 1820 GB/s") for w in legend)
    assert any(w.startswith("h100 dram") for w in legend) and any(w.startswith("h100 bf16-tc") for w in legend)
    assert root.find(f"{NS}title").text == "roofline: local vs h100 — measured 2026-11-30"


def test_every_point_and_ridge_carries_its_hover(overlay: tuple[Chart, ET.Element]) -> None:
    chart, root = overlay
    tips = [g.find(f"{NS}title").text for g in root.iter(f"{NS}g") if g.get("class") == "rooftop-point"]
    ridges = sum(len(s.xs) for s in chart.series if s.kind == "ridge")
    points = sum(len(s.xs) for s in chart.series if s.kind == "point")
    assert len(tips) == ridges + points == 6 + 3
    gemv = next(t for t in tips if t.startswith("GEMV 1×8192×8192 bf16"))
    # name, I, the achieved rate (W / 0.2 ms), regime and fraction of roof
    assert "I = 1.000 FLOP/B, 0.6711 TFLOP/s" in gemv and "memory-bound on local bf16-tc" in gemv
    assert "15% of roof" in gemv
    assert any(t.startswith("local bf16-tc 700.9 TFLOP/s\nridge I* = 153 FLOP/B") for t in tips)


def test_each_label_is_drawn_once_and_no_two_overlap(overlay: tuple[Chart, ET.Element]) -> None:
    from rooftop.tui.share.figure import _figure

    fig, drawn = _figure(overlay[0])
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text() != "nothing to draw"]
    assert len(boxes) >= 3  # the three ops at least (ridge labels where room is left)
    frame = ax.get_window_extent(renderer)
    for i, a in enumerate(boxes):
        assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1
        assert not any(a.overlaps(b) for b in boxes[i + 1:])
    assert {t.get_text() for t in ax.texts} >= {"GEMV 1×8192×8192 bf16", "GEMM 4096×4096×4096 bf16"}


def test_lines_keep_the_terminal_colours_and_a_path_keeps_its_colour_across_devices() -> None:
    chart = roofline([lookup_device("h100", {}), lookup_device("h200", {})], [])
    terminal, shared = line_colors(chart.series), chart_colors(chart.series)
    first = [s.label for s in chart.series if s.label.startswith("h100") and s.kind != "ridge"]
    assert all(shared[lb] == HUES[terminal[lb]] for lb in first)
    for lb in first:
        other = "h200" + lb[4:].split(" ")[0] + " "
        twin = next(s.label for s in chart.series if s.label.startswith("h200 " + lb.split(" ")[1] + " "))
        assert shared[twin] == shared[lb], (other, twin)


def test_the_png_is_a_png_of_a_sane_size() -> None:
    png = chart_png(roofline([lookup_device("h100", {})], OPS[:1]), dpi=100)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1000, 620) and 20_000 < len(png) < 1_000_000


def test_a_bandwidth_chart_names_sizes_and_gbs(tmp_path: Path) -> None:
    from helpers.store_writer import synthetic_sample

    samples = [synthetic_sample(i) for i in range(6)]
    curves = bandwidth_curves(samples)
    assert curves, "the synthetic samples move data"
    root = ET.fromstring(chart_svg_inline(Chart("bandwidth", curves, "bandwidth: lab")))
    words = texts(root)
    assert "working set (bytes)" in words and "bandwidth (GB/s)" in words
    tips = [g.find(f"{NS}title").text for g in root.iter(f"{NS}g") if g.get("class") == "rooftop-point"]
    assert len(tips) == sum(len(c.xs) for c in curves) and all("working set" in t and "GB/s" in t for t in tips)


def test_nothing_to_draw_is_said_on_the_chart() -> None:
    root = ET.fromstring(chart_svg_inline(Chart("roofline", [Series("op", (), (), "point")], "empty")))
    assert "nothing to draw: no point has a positive x and y" in texts(root)
    with pytest.raises(ValueError, match="not one of roofline, bandwidth, gemm, fma"):
        Chart("pie", [], "x")


def test_names_from_files_are_cleaned_and_stay_text() -> None:
    evil = "<script>alert(1)</script>\u202e\x1b[2J"
    svg = chart_svg(Chart("roofline", [Series(evil, (2.0,), (3e12,), "point", ("a note\u202e",))], evil))
    root = ET.fromstring(svg.encode())
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "\u202e" not in svg and "\x1b" not in svg
    assert "<script>alert(1)</script>[2J" in texts(root)


def test_write_out_writes_the_first_chart_by_the_extension(tmp_path: Path) -> None:
    chart = roofline([lookup_device("h100", {})], OPS[:1])
    svg = write_out(str(tmp_path / "c.svg"), Shared([chart]))
    assert ET.parse(svg).getroot().tag == f"{NS}svg"
    assert write_out(str(tmp_path / "c.png"), Shared([chart])).read_bytes()[:4] == b"\x89PNG"
    assert write_out(str(tmp_path / "r.html"), Shared([chart], html=lambda: "<!doctype html>")).read_text() \
        == "<!doctype html>"
    with pytest.raises(OutError, match="writes a chart, not a report; use .svg or .png"):
        write_out(str(tmp_path / "x.html"), Shared([chart]))
    with pytest.raises(OutError, match="writes a chart, not a report"):
        out_target(str(tmp_path / "x.html"), html=False)
    with pytest.raises(OutError, match="nothing to draw"):
        write_out(str(tmp_path / "x.svg"), Shared([], html=lambda: ""))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.png", "c.svg", "r.html"]
