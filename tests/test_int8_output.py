"""An int8 GEMM writes its int32 accumulator (as torch._int_mm does, which the probe times); a kernel that
requantises says out=int8."""

from __future__ import annotations

import json

import pytest
from rooftop.models.analysis import analyze
from rooftop.models.catalog import lookup_device
from rooftop.models.spec import SpecError, parse_spec
from rooftop.probes.gemm import OUT_SIZE
from rooftop.tui.cli import main


def test_an_int8_gemm_writes_int32_by_default() -> None:
    op = parse_spec("gemm 16384 16384 256 int8")
    c = op.cost()
    assert op.out_dtype == "int32"
    assert c.bytes == 16384 * 256 + 256 * 16384 + 4 * 16384 * 16384  # 1.082 GB, not 276.8 MB
    assert c.bytes == pytest.approx(1.082e9, rel=1e-3)
    assert dict(c.terms)["Y (M×N, int32)"] == 4 * 16384 * 16384


def test_the_op_model_counts_the_output_the_probe_times() -> None:
    assert OUT_SIZE["int8"] == 4  # the probe's own count of torch._int_mm's output
    op = parse_spec("gemm 32 64 64 int8")
    assert op.cost().bytes == 32 * 64 + 64 * 64 + OUT_SIZE["int8"] * 32 * 64


def test_out_int8_is_for_a_requantising_kernel() -> None:
    op = parse_spec("gemm 16384 16384 256 int8 out=int8")
    assert op.cost().bytes == 16384 * 256 * 2 + 16384 * 16384
    assert parse_spec(op.spec()) == op  # the canonical spec keeps out=int8
    assert parse_spec("gemm 8 8 8 int8 out=int32").cost().bytes == parse_spec("gemm 8 8 8 int8").cost().bytes


def test_int32_is_an_output_only_dtype() -> None:
    with pytest.raises(SpecError, match="out 'int64' is not allowed; choose one of: .*int32"):
        parse_spec("gemm 8 8 8 int8 out=int64")
    with pytest.raises(SpecError):
        parse_spec("gemm 8 8 8 int32")  # no GEMM computes in int32


def test_on_an_h100_the_int8_gemm_takes_at_least_323_us(capsys: pytest.CaptureFixture[str]) -> None:
    a = analyze(parse_spec("gemm 16384 16384 256 int8"), lookup_device("h100-sxm-ds"))
    assert a.time_lower_bound >= 323e-6
    assert main(["op", "gemm 16384 16384 256 int8", "-d", "h100-sxm-ds", "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    assert d["bytes"] == pytest.approx(1.082e9, rel=1e-3) and d["time_lower_bound_s"] >= 323e-6
