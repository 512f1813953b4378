"""The communication roofline's formulas (nccl-tests' busbw factors) and the α-β fit on synthetic times."""

import math

import pytest

from rooftop.models.comm import (
    COLLECTIVES, AlphaBeta, algbw, bus_factor, busbw, comm_regime, comm_time_bound, fit_alpha_beta, reduce_flops,
    wire_bytes,
)


@pytest.mark.parametrize("world", [1, 2, 4, 8, 64])
def test_bus_factors_are_nccl_tests(world):
    n = world
    assert bus_factor("allreduce", n) == pytest.approx(2 * (n - 1) / n)
    assert bus_factor("allgather", n) == pytest.approx((n - 1) / n)
    assert bus_factor("reducescatter", n) == pytest.approx((n - 1) / n)
    assert bus_factor("broadcast", n) == 1.0
    assert bus_factor("sendrecv", n) == 1.0


def test_algbw_busbw_and_wire_bytes():
    assert algbw(1e9, 0.5) == 2e9
    # all-reduce of 1 GB in 10 ms on 8 ranks: algbw 100 GB/s, busbw 175 GB/s
    assert busbw("allreduce", 8, 1e9, 0.01) == pytest.approx(175e9)
    assert busbw("allgather", 4, 1e9, 0.01) == pytest.approx(75e9)
    assert wire_bytes("allreduce", 8, 32 * 2**20) == pytest.approx(2 * 7 / 8 * 32 * 2**20)
    assert reduce_flops("allreduce", 4, 1000) == 750
    assert reduce_flops("allgather", 4, 1000) == 0


def test_bad_collective_and_world():
    with pytest.raises(ValueError, match="choose one of"):
        bus_factor("alltoallv", 4)
    with pytest.raises(ValueError, match="at least 1"):
        bus_factor("allreduce", 0)
    assert set(COLLECTIVES) == {"allreduce", "allgather", "reducescatter", "broadcast", "sendrecv"}


SIZES = [8 * 4**i for i in range(13)]  # 8 B … 128 MiB


def test_fit_recovers_alpha_beta_exactly():
    alpha, beta = 20e-6, 50e9
    fit = fit_alpha_beta(SIZES, [alpha + s / beta for s in SIZES])
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-9)
    assert fit.beta == pytest.approx(beta, rel=1e-9)
    assert fit.crossover_bytes == pytest.approx(alpha * beta, rel=1e-9)  # 1 MB
    assert fit.rel_rms < 1e-9
    assert fit.regime(1e3) == "latency" and fit.regime(1e7) == "bandwidth"


def test_fit_in_relative_error_keeps_small_messages():
    """±10 % noise on every point: an absolute-error fit would let the 128 MiB points set α; this one does not."""
    alpha, beta = 5e-6, 10e9
    noise = [1.1 if i % 2 else 0.9 for i in range(len(SIZES))]
    times = [(alpha + s / beta) * f for s, f in zip(SIZES, noise)]
    fit = fit_alpha_beta(SIZES, times)
    assert fit.alpha_s == pytest.approx(alpha, rel=0.15)
    assert fit.beta == pytest.approx(beta, rel=0.15)
    # the unweighted fit would miss α by orders of magnitude: check we are not doing that
    n = len(SIZES)
    sx, sy = sum(SIZES), sum(times)
    sxx, sxy = sum(s * s for s in SIZES), sum(s * t for s, t in zip(SIZES, times))
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    assert abs((sy - slope * sx) / n - alpha) > 10 * abs(fit.alpha_s - alpha)


def test_fit_clamps_to_non_negative():
    # times that fall with size (noise on a flat latency) give β = ∞ and α the level
    fit = fit_alpha_beta([8, 64, 512], [3e-6, 2.9e-6, 2.8e-6])
    assert fit.alpha_s == pytest.approx(2.9e-6, rel=0.05) and math.isinf(fit.beta)
    assert math.isinf(fit.crossover_bytes) and fit.to_dict()["beta"] is None
    # pure bandwidth: α = 0
    fit = fit_alpha_beta([1e6, 1e7], [1e-4, 1e-3])
    assert fit.alpha_s == 0 and fit.beta == pytest.approx(1e10)
    with pytest.raises(ValueError, match="two sizes"):
        fit_alpha_beta([8], [1e-6])


def test_time_bound_and_regime():
    assert comm_time_bound(1e9, 1e11, 1e-5) == pytest.approx(1e-2 + 1e-5)
    assert comm_regime(1e3, 1e11, 1e-5) == "latency"
    assert comm_regime(1e9, 1e11, 1e-5) == "bandwidth"
    assert AlphaBeta(1e-5, 1e10, 3, 0.0).time(1e10) == pytest.approx(1 + 1e-5)
