"""The command line as a user runs it: reports, JSON, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rooftop.tui.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_op_report_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["op", "gemm", "1", "8192", "8192", "bf16", "--device", "h100", "--device", "h200"], capsys)
    assert rc == 0
    assert "GEMV 1×8192×8192 bf16" in out
    assert "h100 (ref)" in out and "h200 (ref)" in out
    assert "memory-bound" in out
    assert "43.5 µs" in out  # 128 MiB at 3085 GB/s
    assert "31.3 µs" in out  # at 4295 GB/s


def test_op_report_says_which_device_wins_and_where_roofs_cross(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["op", "gemm 8 8192 8192 fp16", "-d", "h100,h200"], capsys)
    assert rc == 0
    flat = " ".join(out.split())
    assert "fastest bound: h200" in flat
    assert "fp16-tc roofs cross at I = 245" in flat
    assert "favours h200" in flat
    rc, out, _ = run(["op", "gemm 8192 8192 8192 fp16", "-d", "h100,h200"], capsys)
    assert "favours h100" in " ".join(out.split())


def test_op_json_per_op_and_device(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["op", "gemm m=4096 n=4096 k=4096 dtype=fp8", "ew n=1e9 fp32", "-d", "h100,h200", "--json"], capsys)
    assert rc == 0
    data = json.loads(out)
    assert [(d["kind"], d["device"]) for d in data] == [("gemm", "h100"), ("gemm", "h200"), ("ew", "h100"), ("ew", "h200")]
    g = data[0]
    assert g["path"] == "fp8-tc" and g["regime"] == "compute"
    assert g["flops"] == 2 * 4096**3
    assert g["time_lower_bound_s"] == pytest.approx(g["flops"] / g["peak_flops"])
    assert data[2]["intensity"] == pytest.approx(0.25)
    assert data[2]["measured"] is None


def test_op_measured_ms(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["op", "attn b=8 h=32 d=128 t=8192 decode", "-d", "h100", "--measured-ms", "0.55", "--json"], capsys)
    assert rc == 0
    m = json.loads(out)[0]["measured"]
    assert m["time_s"] == pytest.approx(0.55e-3)
    assert m["achieved_bandwidth"] == pytest.approx(1.95e12, rel=0.01)


def test_default_device_without_a_gpu_says_what_it_used(no_gpu: None, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["op", "gemv", "4096", "4096"], capsys)
    assert rc == 0
    assert "no known GPU found; using h100" in err
    assert "h100 (ref)" in out


def test_default_device_on_a_gpu_server_is_its_reference(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The same command where NVML names an H200 (a thin fake): the H200's reference, said so."""
    from fake_nvml import FakeNVML

    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(names=["NVIDIA H200"]))
    rc, out, err = run(["op", "gemv", "4096", "4096"], capsys)
    assert rc == 0
    assert "using h200, the reference profile for this machine's" in err
    assert "h200 (ref)" in out and "h100" not in out


@pytest.mark.parametrize(
    "argv,words",
    [
        (["op", "gemm", "0", "8192", "8192"], ["m='0'", "at least 1"]),
        (["op", "gemm", "1", "8192", "8192", "fp9"], ["'fp9'", "bf16"]),
        (["op", "gemm", "1", "8192", "8192", "fp8", "-d", "v100-32"], ["v100-32 has no fp8-tc roof", "fp16-tc"]),
        (["op", "gemm", "16384", "16384", "256", "int8", "-d", "h100"],  # and where to ask instead
         ["h100 has no int8-tc roof", "catalog devices with one: h100-sxm-ds"]),
        (["op", "gemm", "1", "2", "3", "-d", "tpu9"], ["unknown device 'tpu9'", "h100"]),
        (["op", "frob", "1"], ["unknown op 'frob'", "gemm"]),
        (["op", "gemm", "1", "2", "3", "--measured-ms", "-1"], ["positive"]),
        (["op", "gemm", "1", "2", "3", "ew", "5", "--measured-ms", "1,2,3"], ["3 times for 2 ops"]),
        (["op"], ["no op to analyse", "--pinned"]),
        (["nosuch"], ["invalid choice"]),
        (["plot", "-d", "v100-32", "--paths", "fp8-tc"], ["no fp8-tc roof"]),
        (["plot", "--op", "foo 1"], ["unknown op 'foo'"]),  # was the default device's note, then the error
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0]


def test_devices_lists_catalog_with_provenance(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["devices"], capsys)
    assert rc == 0
    for word in ("h100", "b300", "rtx4080", "mi300x-ds", "reference", "datasheet"):
        assert word in out


def test_devices_detail_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["devices", "h100"], capsys)
    assert rc == 0
    assert "read_reduce:134217728" in out and "2048x8192x8192" in out
    rc, out, _ = run(["devices", "--json"], capsys)
    data = {d["id"]: d for d in json.loads(out)}
    assert data["h100"]["peak"]["bf16-tc"] == pytest.approx(802.4239339105992e12)
    assert data["h100"]["ridge"]["bf16-tc"] == pytest.approx(260.1179905217414)
    assert data["b200-ds"]["source"] == "datasheet"


def test_plot_prints_a_log_log_chart_with_decade_ticks(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["plot", "-d", "h100", "--op", "gemm 1 8192 8192 bf16", "--op", "gemm 4096 4096 4096 bf16",
                      "--width", "100", "--height", "30"], capsys)
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) >= 30
    assert "\x1b[" not in out  # not a terminal: no colour codes
    for tick in ("0.1", "1k", "10k", "100"):
        assert tick in out
    assert "h100 bf16-tc" in out
    assert "GEMV 1×8192×8192 bf16: I = 1 FLOP/B on bf16-tc, memory-bound on h100" in out
    assert "GEMM 4096×4096×4096 bf16" in out and "compute-bound" in out


def test_bare_rooftop_checks_its_device_before_opening_the_app(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["--device", "tpu9"], capsys)
    assert rc == 2 and out == ""
    assert "unknown device 'tpu9'" in err and len(err.strip().splitlines()) == 1


def test_module_entry_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "op", "fma 64 fp32", "-d", "h100", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0
    assert json.loads(out.stdout)[0]["path"] == "fp32-fma"


def test_a_piped_plot_is_80_columns_wide(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["plot", "-d", "h100"], capsys)
    assert rc == 0 and max(len(line) for line in out.splitlines()) == 80


def test_the_device_before_the_command_counts(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["-d", "h200", "op", "gemm 1 8192 8192 bf16", "--json"], capsys)
    assert rc == 0 and json.loads(out)[0]["device"] == "h200" and "no --device given" not in err


def test_the_plot_legend_is_below_the_chart_not_over_it(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["plot", "-d", "h100,h200", "--op", "gemm 1 8192 8192 bf16"], capsys)
    lines = out.splitlines()
    bottom = max(i for i, line in enumerate(lines) if line.lstrip().startswith("└"))
    inside, below = "\n".join(lines[:bottom]), "\n".join(lines[bottom:])
    assert rc == 0 and "GB/s" not in inside and "GEMV" not in inside  # the slopes' corner is free
    for label in ("── h100 dram 3085 GB/s", "── h200 dram 4295 GB/s", "── h200 bf16-tc 815 TFLOP/s",
                  "★ GEMV 1×8192×8192 bf16"):
        assert label in below
    assert max(len(line) for line in lines) <= 80


def test_legend_lines_pack_within_the_width_and_paint_only_the_swatch() -> None:
    from rooftop.models.catalog import lookup_device
    from rooftop.models.plotdata import roof_series
    from rooftop.tui.render.chart import legend_lines, line_colors

    series = roof_series(lookup_device("h100"), None, None)
    plain = legend_lines(series, 60)
    assert all(len(line) <= 60 for line in plain) and len(plain) > 1
    painted = legend_lines(series, 60, lambda text, color: f"<{color}>{text}</>")
    first = series[0]
    assert painted[0].startswith(f"<{line_colors(series)[first.label]}>── </>{first.label}")


def test_an_unknown_option_is_told_by_the_command_it_was_given_to(capsys: pytest.CaptureFixture[str]) -> None:
    """It was `rooftop: error: unrecognized arguments: --bogus (see rooftop --help)`, whatever the command."""
    for argv, prog in ((["op", "gemm", "1", "2", "3", "--bogus"], "rooftop op"), (["runs", "--bogus"], "rooftop runs"),
                       (["--bogus"], "rooftop")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err == f"{prog}: error: unrecognized arguments: --bogus (see {prog} --help)\n"
