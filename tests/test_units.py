"""The formatters every view shares: numbers must keep their meaning when small."""

from __future__ import annotations

from rooftop.models.units import fmt_count, fmt_number


def test_fmt_number_keeps_small_rates_visible() -> None:
    assert fmt_number(0.1223) == "0.122"  # a CPU decode step: was "0" when rounded to an integer
    assert fmt_number(12.345) == "12.3"
    assert fmt_number(1727.4) == "1,727"
    assert fmt_number(0) == "0"


def test_fmt_count_says_one_thing_in_the_singular() -> None:
    assert fmt_count(1, "run") == "1 run"
    assert fmt_count(0, "run") == "0 runs"
    assert fmt_count(3, "sample") == "3 samples"
