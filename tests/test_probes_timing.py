"""The timing protocol: statistics, adaptive call count, warm-ups, cold-mode flushes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rooftop.models.sample import TimeStats, percentile
from rooftop.probes.timing import CpuTimer, Protocol, TooSlow, calls_for, measure


@given(st.lists(st.floats(min_value=1e-9, max_value=1.0), min_size=1, max_size=30))
def test_percentiles_match_numpy(xs):
    s = sorted(xs)
    for q in (10, 25, 50, 75, 90):
        assert percentile(s, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-9, abs=1e-15)


def test_time_stats_from_times():
    t = TimeStats.from_times([1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0], calls=40)
    assert t.median_s == 1.0 and t.min_s == 0.9 and t.repeats == 7 and t.calls == 40
    assert t.p10_s < t.median_s < t.p90_s
    assert t.iqr_ratio == pytest.approx((1.025 - 0.975) / 1.0)
    assert t.stable
    assert not TimeStats.from_times([1.0, 2.0, 3.0, 4.0], calls=1).stable
    with pytest.raises(ValueError):
        TimeStats.from_times([], calls=1)


def test_calls_fill_the_window():
    assert calls_for(1e-3, 0.02, 200) == 20
    assert calls_for(1e-6, 0.02, 200) == 200  # capped, as the reference does
    assert calls_for(0.5, 0.02, 200) == 1
    assert calls_for(0.0, 0.02, 200) == 200


class SpyTimer(CpuTimer):
    """The real CPU clock, recording what happened inside and outside timed intervals."""

    def __init__(self):
        self.log: list[str] = []

    def sync(self):
        self.log.append("sync")

    def time_calls(self, fn, calls):
        self.log.append(f"timed:{calls}")
        return super().time_calls(fn, calls)


def test_measure_runs_the_protocol_and_flushes_outside_the_timed_interval():
    calls = []
    timer = SpyTimer()
    proto = Protocol(warmups=5, window_s=1e-3, repeats=7, max_calls=50)
    stats = measure(lambda: calls.append(1) or sum(range(200)), timer, proto,
                    before_sample=lambda: timer.log.append("flush"))
    assert stats.repeats == 7 and 1 <= stats.calls <= 50
    timed = [e for e in timer.log if e.startswith("timed")]
    assert timed[:5] == ["timed:1"] * 5  # the warm-ups
    samples = timer.log[timer.log.index("flush"):]
    assert samples == ["flush", "sync", f"timed:{stats.calls}"] * 7  # flush, then the clock
    assert len(calls) == sum(int(e.split(":")[1]) for e in timed)
    assert stats.min_s <= stats.median_s


def test_slow_kernels_warm_up_less_and_over_budget_raises():
    timer = SpyTimer()
    measure(lambda: sum(range(100)), timer, Protocol(warmups=5, warmup_budget_s=0.0, repeats=3, window_s=0))
    assert timer.log[:2] == ["timed:1", "timed:1"]  # one warm-up, then the samples
    with pytest.raises(TooSlow, match="budget"):
        measure(lambda: sum(range(1000)), SpyTimer(), Protocol(max_call_s=0.0))


def test_budget_predicts_from_the_largest_measured_point():
    import dataclasses

    from rooftop.models.sample import Sample
    from rooftop.probes.steps import Budget

    base = Sample("gemm", "fp32", {"m": 1, "n": 1, "k": 1}, 1.0, 1.0)
    timed = dataclasses.replace(base, stats=TimeStats(0.1, 0.1, 0.1, 0.1, 0.0, 7, 1))
    b = Budget(limit_s=0.5)
    assert b.guard("fp32", 1e9, "1 GFLOP", lambda: timed) is timed
    b.guard("fp32", 1e6, "tiny", lambda: dataclasses.replace(timed, stats=TimeStats(1e-3, 0, 0, 0, 0, 7, 1)))
    b.check("fp32", 4e9)  # 0.4 s predicted from the 1 GFLOP point (not from the tiny one): runs
    with pytest.raises(TooSlow, match="predicted 0.8 s"):
        b.check("fp32", 8e9)
    b.check("fp64", 8e9)  # another key: no prediction

    def too_slow():
        raise TooSlow("one call takes 2 s")

    with pytest.raises(TooSlow):
        b.guard("fp64", 8e9, "fp64 big", too_slow)
    with pytest.raises(TooSlow, match="fp64 big was already over"):
        b.check("fp64", 9e9)
    b.check("fp64", 1e9)  # smaller than the slow one: still allowed


def test_measure_stops_between_samples_when_cancelled():
    import threading

    from rooftop.probes.timing import Cancelled

    stop = threading.Event()
    timer = SpyTimer()
    with pytest.raises(Cancelled):
        measure(lambda: None, timer, Protocol(warmups=1, window_s=0), before_sample=stop.set, cancel=stop)
    assert timer.log.count("sync") == 1  # one flush ran, the next sample was never timed
