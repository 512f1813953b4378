"""The roofline itself: pure functions of W, Q, F and B (seed 000 §1–3).

T ≥ max(W/F, Q/B); I = W/Q; I* = F/B; P = min(F, B·I).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

ABOVE_ROOF = 1.10  # a point more than 10% above its roof is flagged (reference protocol): a measured rate, a
# program's op, a step faster than its bound. Above it by less is measurement noise; by more, the roof was measured
# under other conditions (L2 residency, fewer threads) or the op's cost model overcounts.


def beats(time_s: float, bound_s: float) -> bool:
    """A time more than ABOVE_ROOF faster than its bound (a step under ΣT, a claim above tok/s≤): no run can
    have it — the roofs, the model or the figure is wrong."""
    return time_s * ABOVE_ROOF < bound_s


# Which roof binds an op: the bandwidth slope below the ridge, the compute roof at or above it.
Regime = Literal["memory", "compute"]


def intensity(flops: float, nbytes: float) -> float:
    """I = W/Q in FLOP/byte."""
    return flops / nbytes if nbytes > 0 else math.inf


def ridge(peak: float, bandwidth: float) -> float:
    """I* = F/B: left of it memory-bound, right of it compute-bound."""
    return peak / bandwidth


def attainable(i: float, peak: float, bandwidth: float) -> float:
    """P(I) = min(F, B·I): the roof's height at intensity I."""
    return min(peak, bandwidth * i)


def fraction_of_roof(flops: float, nbytes: float, seconds: float, peak: float, bandwidth: float) -> float:
    """A measured point's share of its roof: (W/t) / P(I). An op that does no arithmetic (a gather, a
    p2p send) sits at I = 0 where P is 0: its share is its bandwidth's, (Q/t) / B."""
    if flops > 0:
        return (flops / seconds) / attainable(intensity(flops, nbytes), peak, bandwidth)
    return (nbytes / seconds) / bandwidth


def time_bound(flops: float, nbytes: float, peak: float, bandwidth: float) -> float:
    """T = max(W/F, Q/B): the time no kernel doing this work can beat."""
    return max(flops / peak, nbytes / bandwidth)


def regime(i: float, peak: float, bandwidth: float) -> Regime:
    """'memory' below the ridge, 'compute' at or above it."""
    return "memory" if i < ridge(peak, bandwidth) else "compute"


def gemm_intensity(m: float, n: float, k: float, size: float, out_size: float | None = None) -> float:
    """I of a GEMM: 2MNK / (sizeof·(MK + KN) + sizeof_out·MN)."""
    so = size if out_size is None else out_size
    return 2 * m * n * k / (size * (m * k + k * n) + so * m * n)


def gemm_ridge_m(n: float, k: float, size: float, ridge_i: float, out_size: float | None = None) -> float | None:
    """The M (tokens per batch) at which a GEMM with weights K×N reaches the ridge.

    Solves 2MNK = I*·(s·MK + s·KN + s_out·MN) for M. None when no M reaches it:
    I(M) tends to 2NK/(s·K + s_out·N) as M grows, and that may sit below I*.
    """
    so = size if out_size is None else out_size
    denom = 2 * n * k - ridge_i * (size * k + so * n)
    if denom <= 0:
        return None
    return ridge_i * size * k * n / denom


@dataclass(frozen=True)
class Crossover:
    """Where two roofs cross, and which is higher on each side (seed 000 §3: H100 vs H200)."""

    intensity: float | None  # None: one roof is at least as high everywhere
    higher_below: str  # the id higher at small I (on the slopes)
    higher_above: str  # the id higher at large I (on the flats)


def crossover(a: str, fa: float, ba: float, b: str, fb: float, bb: float) -> Crossover:
    """The intensity where min(Fa, Ba·I) and min(Fb, Bb·I) cross.

    The device with more bandwidth wins at small I, the one with more compute
    at large I; if one has both, its roof is never below the other.
    """
    if ba == bb or fa == fb:  # equal on one side: the other decides everywhere
        top = a if (fa, ba) >= (fb, bb) else b
        return Crossover(None, top, top)
    low = a if ba > bb else b
    high = a if fa > fb else b
    if low == high:
        return Crossover(None, low, high)
    # The bandwidth-rich roof has gone flat at its F while the other is still on its slope.
    f_low, b_other = (fa, bb) if low == a else (fb, ba)
    return Crossover(f_low / b_other, low, high)


def first_at_least(pred: Callable[[int], bool], limit: int = 1 << 24) -> int | None:
    """The smallest n ≥ 1 with pred(n) true, for a pred that stays true once true (doubling, then bisection).

    None when pred is still false at `limit`. Finds the batch where a step flips to compute-bound.
    """
    lo, hi = 0, 1
    while not pred(hi):
        if hi >= limit:
            return None
        lo, hi = hi, min(hi * 2, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if pred(mid) else (mid, hi)
    return hi
