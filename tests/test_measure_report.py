"""The `rooftop measure` report: ceilings, sweep tables, skipped reasons, the plot."""

from __future__ import annotations

import io

from rich.console import Console

from rooftop.models.calibrate import calibrate
from rooftop.models.sample import Sample
from rooftop.models.units import KiB, MiB
from rooftop.tui.commands.measure import _measure_plot
from rooftop.tui.render.measure_report import measure_report, point_series

from test_calibrate import CPU, GPU, fma, gemm, stats, stream
from test_conditions import h200_run, ran


def samples() -> list[Sample]:
    out = [stream(f, ws, gb) for f, ws, gb in (
        ("read_reduce", 4 * KiB, 1.0), ("copy", 4 * KiB, 1.5), ("read_reduce", 4 * MiB, 55.0),
        ("copy", 4 * MiB, 60.0, ), ("read_reduce", 256 * MiB, 19.0), ("copy", 256 * MiB, 16.0))]
    out += [gemm("fp32", 512, 512, 512, 0.08, "fp32-matmul"), gemm("fp64", 512, 512, 512, 0.04, "fp64-tc", iqr=0.4)]
    out += [fma("fp32", r, 1 << 24, 0.002 * r ** 0.5, method="torch-chain") for r in (1, 4, 16)]
    out.append(Sample("gemm", "tf32", {"m": 64, "n": 64, "k": 64}, 1.0, 1.0, skipped="TF32 is a tensor-core mode"))
    out.append(Sample("gemm", "bf16", {"m": 1024, "n": 1024, "k": 1024}, 1.0, 1.0,
                      skipped="predicted 1.7 s per call, over the 0.5 s budget"))
    out.append(Sample("gemm", "bf16", {"m": 2048, "n": 2048, "k": 2048}, 1.0, 1.0,
                      skipped="bf16 1024x1024x1024 was already over the 0.5 s per-call budget"))
    out.append(Sample("launch", "fp32", {"n": 1}, 1.0, 8.0, 4.0, stats=stats(5e-6)))
    return out


def render(renderable) -> str:
    buf = io.StringIO()
    Console(file=buf, width=120, no_color=True).print(renderable)
    return buf.getvalue()


def test_report_shows_ceilings_sweeps_and_reasons():
    ss = samples()
    cal = calibrate(ss, CPU)
    text = render(measure_report(cal, ss, ["bandwidth = algorithmic bytes / time, each array counted once"]))
    assert "B dram" in text and "19.00 GB/s" in text and f"read_reduce:{256 * MiB}" in text
    assert "B l2" in text and "60.00 GB/s" in text
    assert "F fp32-matmul" in text and "F fp32-fma" in text and "launch" in text
    assert "bandwidth sweep" in text and "256 MiB" in text and "4.00 KiB" in text
    assert "FMA sweep" in text
    assert "1 unstable point (iqr" in text and "fp64 512x512x512" in text
    assert "1× TF32 is a tensor-core mode" in text
    assert "2× over the plan's per-call time budget" in text
    assert "each array counted once" in text and "not the cores' FMA peak" in text


def test_plot_draws_roofs_and_points():
    ss = samples()
    cal = calibrate(ss, CPU)
    labels = [s.label for s in point_series(ss)]
    assert labels == ["gemm fp32", "gemm fp64", "fma fp32"]  # every measured point, unstable ones too
    plot = _measure_plot(cal, ss, 100, 25)
    assert "measured roofline" in plot and "fp32-matmul" in plot


def test_report_shows_write_beside_b_and_the_capped_ceilings_in_one_line():
    ss = h200_run() + [ran(stream("write", 512 * MiB, 4580), 1980.0)]
    lines = render(measure_report(calibrate(ss, GPU), ss, [])).splitlines()
    b_dram = [line for line in lines if line.startswith("B dram")]
    assert len(b_dram) == 1 and "4363 GB/s" in b_dram[0] and "read_reduce" in b_dram[0]
    write = [line for line in lines if line.startswith("write ")]
    assert len(write) == 1 and "4580 GB/s" in write[0] and f"write:{512 * MiB}" in write[0]
    at = lines.index(write[0])
    assert lines[at - 1].startswith("B ") and lines[at + 1].startswith("F ")  # beside B, not one of them
    capped = " ".join(line for line in lines if "capped" in line or "GHz" in line)
    assert capped == ("tf32-tc measured power-capped and thermally capped (700 W) at 1.41 GHz SM (max 1.98 GHz); "
                      "bf16-tc, fp8-tc measured power-capped (700 W) at 1.63–1.75 GHz SM (max 1.98 GHz)")
