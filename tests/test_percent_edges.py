"""A fraction far out of range is printed by one rule: `--measured-ms 1e-300` printed `of roof inf%`, and an
overcounted shape a 13-digit MFU (`f"{1e98:.1f}"` is a hundred digits). From 10⁴% a percentage is a power of ten
(1.7e+301%), past any float >1e+308%; a ratio from a million ×1.2e+30."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rooftop.models.units import fmt_percent, fmt_ratio
from rooftop.tui.cli import main

QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
LONG_NUMBER = re.compile(r"\d{8,}")  # eight digits in a row: no percentage, share or ratio prints that many


@pytest.mark.parametrize(("fraction", "decimals", "text"), [
    (0.82, 1, "82.0%"), (0.000021, 1, "0.0021%"), (0.0, 1, "0%"), (12.345, 1, "1234.5%"), (99.99, 1, "9999.0%"),
    (100.0, 1, "1.0e+04%"), (1.7e299, 1, "1.7e+301%"), (1e308, 1, "1.0e+310%"), (math.inf, 1, ">1e+308%"),
    (-math.inf, 1, "<-1e+308%"), (math.nan, 1, "n/a"), (None, 1, ""), (1.5, 0, "150%"), (0.004, 0, "0.4%"),
    (4.6e299, 0, "4.6e+301%"),
])
def test_one_rule_for_a_percentage(fraction: float | None, decimals: int, text: str) -> None:
    assert fmt_percent(fraction, decimals) == text


def test_a_percent_the_run_does_not_hold_is_blank_or_said_one_way() -> None:
    # `rooftop show` of a job said "—" for a collective with no fraction of its link, "n/a" for a rank with no MFU.
    from rooftop.tui.render.job import collective_rows, rank_rows

    assert fmt_percent(None) == "" and fmt_percent(None, none="n/a") == "n/a" and fmt_percent(0.5, none="n/a") == "50.0%"
    job = {"ranks": [{"rank": 0, "mfu": None}], "collectives": [
        {"op": "allreduce", "bytes": None, "calls": 1, "time_s": 9e-6, "link": "nvlink", "fraction_of_link": None}]}
    assert rank_rows(job)[0][-1] == "n/a" and collective_rows(job)[0]["of link"] == "n/a"


@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0, 1]))
def test_every_float_is_a_short_percentage_never_inf(x: float, decimals: int) -> None:
    text = fmt_percent(x, decimals)
    assert "inf" not in text and len(text) <= 10, text
    if math.isfinite(x) and abs(x) < 100:  # in range: the figure read back is the fraction, to its last place
        assert float(text.rstrip("%")) == pytest.approx(100 * x, abs=0.5 * 10.0 ** -decimals, rel=0.05)
    elif math.isfinite(x):  # out of range: its power of ten still says how far out
        assert float(text.rstrip("%")) == pytest.approx(100 * x, rel=0.05)


@given(st.floats(min_value=1e-3, max_value=1e308))
def test_a_ratio_is_never_dozens_of_digits(x: float) -> None:
    assert not LONG_NUMBER.search(fmt_ratio(x).replace(",", "")), fmt_ratio(x)


def test_a_ratio_from_a_million_is_a_power_of_ten() -> None:
    assert fmt_ratio(605_000) == "×605,000" and fmt_ratio(1e30) == "×1.0e+30" and fmt_ratio(1.39) == "×1.39"


def test_op_measured_in_1e_300_ms_is_above_the_roof_not_inf(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["op", "gemm", "4096", "4096", "4096", "bf16", "-d", "h100", "--measured-ms", "1e-300"]) == 0
    out = capsys.readouterr().out
    assert "inf%" not in out
    (roof,) = [line for line in out.splitlines() if line.strip().startswith("of roof")]
    assert roof.split()[-1] == ">1e+308%"
    assert "above the roof: by >1e+308%" in out


def test_op_measured_far_below_a_launch_keeps_a_short_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """1e-290 ms: the fraction is finite (1.1e+288), printed as its power of ten, not 290 digits."""
    assert main(["op", "gemv", "4096", "4096", "bf16", "-d", "h100", "--measured-ms", "1e-290"]) == 0
    out = capsys.readouterr().out
    (roof,) = [line for line in out.splitlines() if line.strip().startswith("of roof")]
    assert roof.split()[-1] == "1.1e+290%", roof
    assert not LONG_NUMBER.search(out)


def test_llm_measured_in_1e_300_ms_explains_a_short_figure(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["llm", "qwen2.5-7b", "-d", "h100", "--batch", "1", "--measured-ms", "1e-300"]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.split()[:2] == ["1", "128"]]  # batch 1, context 128
    assert "e+30" in row and not LONG_NUMBER.search(row), row


@pytest.fixture
def overcounted(tmp_path: Path) -> Path:
    """The decode trace with one GEMM's recorded K set to 10²⁰: its FLOPs put MFU at 4.6e+12%."""
    doc = json.loads(gzip.decompress(QWEN.read_bytes()))
    op = next(e for e in doc["traceEvents"] if e.get("name") == "aten::mm" and e.get("cat") == "cpu_op")
    op["args"]["Input Dims"] = [[8, 10**20], [10**20, 3584]]
    path = tmp_path / "overcounted.json"
    path.write_text(json.dumps(doc))
    return path


def test_an_overcounted_mfu_is_a_power_of_ten_not_13_digits(overcounted: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # nothing cut: every figure on its line whole
    assert main(["profile", str(overcounted), "-d", "h200", "--top", "200", "--no-save"]) == 0
    out = capsys.readouterr().out
    mfu, left = [line for line in out.splitlines() if line.startswith("MFU ")]
    assert mfu.startswith("MFU 0.2% of bf16-tc"), mfu  # the overcounted GEMM left out, and said so
    assert left.startswith("MFU and bandwidth leave out 1 op group") and "mm at 1.4e+18% of its roof" in left, left
    row = next(line for line in out.splitlines() if "mm bf16 8×1000" in line)
    assert row.split()[-2:] == ["1.4e+18%", "!"], row
    flags = [line for line in out.splitlines() if line.startswith("flag:")]
    assert any("ran at 4.6e+12% of the bf16-tc" in f for f in flags), flags
    assert any("(up to 1.4e+18% of it: aten::mm)" in f for f in flags), flags
    assert not any(re.search(r"\d{8,}%", line) for line in out.splitlines())


def test_a_kept_profile_gives_the_same_short_mfu_in_history_and_the_profile_tab(
        overcounted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rooftop.store.runs import Store
    from rooftop.tui.app.panes.profile import split_text
    from rooftop.tui.render.profile import profile_detail

    db = tmp_path / "p.db"
    assert main(["profile", str(overcounted), "-d", "h200", "--json", "--db", str(db)]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    with Store.open(db) as store:
        run = store.run(run_id)
        detail = profile_detail(run, store.samples(run_id)).plain
    assert "MFU 0.2% ·" in detail and "mm at 1.4e+18% of its roof" in detail and not LONG_NUMBER.search(detail)
    split = split_text(run).plain
    assert "MFU 0.2% ·" in split and "mm at 1.4e+18% of its roof" in split and not LONG_NUMBER.search(split)
