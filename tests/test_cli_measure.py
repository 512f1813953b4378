"""`rooftop measure` end to end (in a subprocess, and by main(argv) where only its output is asserted), and the import
layering it must keep."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from inprocess import run_main


def rooftop(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rooftop.tui.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "100", "NO_COLOR": "1"})  # ROOFTOP_HOME: the tests' own store


def test_measure_launch_json():
    out = rooftop("measure", "--only", "launch", "--device", "cpu", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) >= {"profile", "samples", "device_info", "notes"}
    assert doc["device_info"]["kind"] == "cpu"
    assert doc["profile"]["source"] == "measured"
    assert doc["profile"]["launch_overhead"] > 0
    [s] = doc["samples"]
    assert s["family"] == "launch" and s["stats"]["repeats"] == 7
    assert {"dtype", "shape", "flops", "bytes"} <= set(s)
    assert "launch x.add_" not in out.stdout  # the progress bar went to stderr
    assert "measure: 1 point in " in out.stderr and " 1 point on " in out.stderr  # one point, said in the singular


def test_measure_report_prints_ceilings():
    out = run_main("measure", "--only", "launch", "--device", "cpu", "--no-plot")
    assert out.returncode == 0, out.stderr
    assert "ceilings of" in out.stdout and "launch" in out.stdout and "notes:" in out.stdout
    # piped: no line carries Rich's padding, none is wider than the terminal, stderr has no progress residue
    assert [line for line in out.stdout.splitlines() if line != line.rstrip()] == []
    assert max(len(line) for line in out.stdout.splitlines()) <= 100
    assert "" not in out.stderr.splitlines()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--only", "gemm,nvlink"), "choose from bandwidth, cache, gemm, fma, launch"),
        (("--device", "tpu"), "expected cpu, cuda or cuda:N"),
        (("--plan", "huge"), "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    out = run_main("measure", *args)
    assert out.returncode == 2
    assert needle in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_layering_no_torch_or_textual_at_import():
    code = (
        "import importlib, pkgutil, sys, rooftop.probes as p, rooftop.models.calibrate, rooftop.tui.cli\n"
        "for m in pkgutil.walk_packages(p.__path__, 'rooftop.probes.'):\n"
        "    importlib.import_module(m.name)\n"
        "print([m for m in ('torch', 'textual') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_help_lists_measure():
    out = rooftop("--help")
    assert out.returncode == 0 and "measure" in out.stdout


def test_measured_roofline_piped_has_no_escape_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from rooftop.models.catalog import lookup_device
    from rooftop.tui.commands.measure import _measure_plot

    monkeypatch.delenv("NO_COLOR", raising=False)  # stdout is captured, not a terminal: that alone must do
    chart = _measure_plot(SimpleNamespace(profile=lookup_device("h100")), [], 80, 20)
    assert "bf16-tc" in chart and "\x1b[" not in chart
    assert max(len(line) for line in chart.splitlines()) <= 80


def test_plot_size_is_checked() -> None:
    out = run_main("measure", "--width", "5", "--only", "launch")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "10 to 1000" in out.stderr


def test_ctrl_c_before_the_measurement_starts_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from rooftop.tui.commands import measure as measure_cmd
    from rooftop.tui.cli import main

    def interrupted(args):  # as Ctrl-C while torch is being imported
        raise KeyboardInterrupt

    monkeypatch.setattr(measure_cmd, "cmd_measure", interrupted)
    assert main(["measure", "--no-save"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "rooftop measure: interrupted" and "Traceback" not in err
