"""A measured time on any op the language can write is answered: a zero-FLOP op (all-gather, p2p) sits
at I = 0 where the roof is 0, so its fraction of roof is its bandwidth's, never a division by zero."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rooftop.models.analysis import analyze
from rooftop.models.catalog import lookup_device
from rooftop.models.profile import NoRoof
from rooftop.models.spec import SpecError, parse_spec
from rooftop.tui.cli import main
from rooftop.tui.whatif import WhatIf
from test_tui import app, text_of
from textual.widgets import Input, Static

H100_DS = lookup_device("h100-sxm-ds")  # the datasheet profile has link levels (nvlink, pcie)


def test_an_allgather_with_a_measured_time_has_its_bandwidth_fraction() -> None:
    a = analyze(parse_spec("allgather 16M bf16 world=8"), H100_DS, 0.2e-3)
    assert a.flops == 0
    assert a.measured is not None
    assert a.measured.fraction_of_roof == pytest.approx(a.bytes / 0.2e-3 / H100_DS.B("nvlink"))
    assert 0.3 < a.measured.fraction_of_roof < 0.35  # 28 MiB in 200 µs over 450 GB/s
    assert any("bandwidth ceiling" in w for w in a.warnings)


def test_a_p2p_with_a_measured_time_is_answered() -> None:
    a = analyze(parse_spec("p2p 1M fp32 level=pcie"), H100_DS, 1e-3)
    assert a.measured is not None and math.isfinite(a.measured.fraction_of_roof)


def test_the_op_command_answers_a_measured_allgather(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["op", "allgather 16M bf16 world=8", "-d", "h100-sxm-ds", "--measured-ms", "0.2", "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    assert d["measured"]["fraction_of_roof"] == pytest.approx(28 * 2**20 / 0.2e-3 / 450e9, rel=1e-3)
    assert main(["op", "allgather", "16M", "bf16", "world=8", "-d", "h100-sxm-ds", "--measured-ms", "0.2"]) == 0
    assert "of roof" in capsys.readouterr().out


async def test_whatif_answers_a_measured_allgather() -> None:
    a = app(initial_tab="whatif", device="h100-sxm-ds")
    async with a.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        w = a.query_one(WhatIf)
        a.query_one("#measured", Input).value = "0.2"
        await pilot.pause()
        w.set_spec("allgather 16M bf16 world=8")
        await pilot.pause()
        assert w.analysis is not None and w.analysis.measured is not None
        assert "measured 200 µs" in text_of(a.query_one("#analysis", Static))
        assert a.is_running


# -- every op the language writes, with any measured time ---------------------------------------------------

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
COUNT = st.integers(1, 2**20).map(str)
SPECS = st.one_of(
    st.builds(lambda m, n, k, d: f"gemm {m} {n} {k} {d}", COUNT, COUNT, COUNT, st.sampled_from(DTYPES)),
    st.builds(lambda n, k, d: f"gemv {n} {k} {d}", COUNT, COUNT, st.sampled_from(DTYPES)),
    st.builds(lambda b, h, t, mode, d: f"attn b={b} h={h} t={t} {mode} {d}", COUNT, st.sampled_from(["8", "32"]),
              COUNT, st.sampled_from(["flash", "naive", "decode"]), st.sampled_from(("fp16", "bf16", "fp32"))),
    st.builds(lambda n, d, f: f"ew {n} {d} flops={f}", COUNT, st.sampled_from(DTYPES), st.sampled_from(["0.5", "2"])),
    st.builds(lambda r, d: f"fma {r} {d}", COUNT, st.sampled_from(("fp64", "fp32", "fp16", "bf16"))),
    st.builds(lambda r, c, d: f"norm {r} {c} {d}", COUNT, COUNT, st.sampled_from(DTYPES)),
    st.builds(lambda r, c, d: f"softmax {r} {c} {d}", COUNT, COUNT, st.sampled_from(DTYPES)),
    st.builds(lambda c, n, d, w, lv: f"{c} {n} {d} world={w} level={lv}",
              st.sampled_from(["allreduce", "allgather", "reducescatter", "p2p"]), COUNT, st.sampled_from(DTYPES),
              st.integers(2, 64), st.sampled_from(["nvlink", "pcie"])),
)
MEASURED_MS = st.floats(min_value=1e-9, max_value=1e9, allow_nan=False, allow_infinity=False)


def _all_finite(obj: Any) -> bool:
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(_all_finite(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_all_finite(v) for v in obj)
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=SPECS, ms=MEASURED_MS, device=st.sampled_from(["h100-sxm-ds", "h100", "mi300x-ds"]))
@example(spec="allgather 16777216 bf16 world=8 level=nvlink", ms=0.2, device="h100-sxm-ds")
@example(spec="p2p 1 fp32 world=2 level=pcie", ms=1e-9, device="h100-sxm-ds")
def test_any_spec_with_any_measured_time_is_analysed_to_finite_json(spec: str, ms: float, device: str) -> None:
    try:
        op = parse_spec(spec)
        a = analyze(op, lookup_device(device), ms / 1e3)
    except (SpecError, NoRoof):
        return  # refused with its one line (a path or link the device lacks): not a crash
    d = a.to_dict()
    assert _all_finite(d), d
    json.dumps(d, allow_nan=False)
    assert a.measured is not None and a.measured.fraction_of_roof >= 0
