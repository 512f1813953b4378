"""The communication roofline's math: algbw, busbw, the α-β model and its fit.

A collective moving a message of S bytes in t seconds has algbw = S/t. nccl-tests
(NVIDIA/nccl-tests, doc/PERFORMANCE.md) scales it to busbw, the bandwidth each
rank's link really carried, so that one figure compares across collectives and
world sizes: busbw = algbw · factor, with factor 2(n−1)/n for all-reduce,
(n−1)/n for all-gather and reduce-scatter (S is the whole, gathered buffer) and
for all-to-all (S is one rank's send buffer, 1/n of it its own), 1 for broadcast
and send/recv. The α-β model t = α + S/β (Hockney) adds the
latency floor α that no bandwidth removes; the two roofs meet at S* = α·β:
below S* a message is latency-bound, above it bandwidth-bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

# The collectives, by the names the CLI, the store and the op language use.
COLLECTIVES: dict[str, str] = {
    "allreduce": "all-reduce",
    "allgather": "all-gather",
    "reducescatter": "reduce-scatter",
    "broadcast": "broadcast",
    "sendrecv": "send/recv (each rank to the next, as nccl-tests' sendrecv)",
}
# Collectives rooftop costs and reads from traces but does not measure: each one's name on screen.
COLLECTIVE_NAMES: dict[str, str] = {**COLLECTIVES, "alltoall": "all-to-all (each rank to every other)"}

# Host↔device copies (one GPU, `rooftop comm --backend nccl`): the PCIe host link, one direction each.
COPIES: dict[str, str] = {
    "h2d_pinned": "host to device, pinned host memory",
    "h2d_pageable": "host to device, pageable host memory",
    "d2h_pinned": "device to host, pinned host memory",
    "d2h_pageable": "device to host, pageable host memory",
}

_FACTORS: dict[str, Callable[[int], float]] = {
    **{c: (lambda n: 1.0) for c in COPIES},
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
    "alltoall": lambda n: (n - 1) / n,  # the share of each rank's message bound for the others
}


def bus_factor(collective: str, world: int) -> float:
    """busbw / algbw for a collective over `world` ranks, as nccl-tests defines it."""
    if collective not in _FACTORS:
        raise ValueError(f"unknown collective {collective!r}; choose one of: {', '.join(COLLECTIVES)}")
    if world < 1:
        raise ValueError(f"world must be at least 1, got {world}")
    return _FACTORS[collective](world)


def algbw(size_bytes: float, time_s: float) -> float:
    """algbw = S/t in bytes/s."""
    return size_bytes / time_s if time_s > 0 else math.inf


def busbw(collective: str, world: int, size_bytes: float, time_s: float) -> float:
    """busbw = algbw · factor in bytes/s."""
    return algbw(size_bytes, time_s) * bus_factor(collective, world)


def wire_bytes(collective: str, world: int, size_bytes: float) -> float:
    """Bytes each rank sends over its link for a message of S bytes: S · factor (a ring's traffic)."""
    return size_bytes * bus_factor(collective, world)


def reduce_flops(collective: str, world: int, elements: float) -> float:
    """Additions each rank does: (n−1)/n of the elements for all-reduce and reduce-scatter, none otherwise."""
    if collective in ("allreduce", "reducescatter"):
        return elements * (world - 1) / world
    return 0.0


@dataclass(frozen=True)
class AlphaBeta:
    """t = α + S/β fitted over a size sweep; `rel_rms` is the fit's relative RMS error."""

    alpha_s: float  # latency floor, seconds
    beta: float  # bytes/s of S (math.inf when the times did not grow with size)
    points: int
    rel_rms: float

    @property
    def crossover_bytes(self) -> float:
        """S* = α·β: where the latency roof meets the bandwidth roof."""
        return self.alpha_s * self.beta if math.isfinite(self.beta) else math.inf

    def time(self, size_bytes: float) -> float:
        return self.alpha_s + (size_bytes / self.beta if self.beta > 0 else math.inf)

    def regime(self, size_bytes: float) -> str:
        """'latency' below S*, 'bandwidth' at or above it."""
        return "latency" if size_bytes < self.crossover_bytes else "bandwidth"

    def to_dict(self) -> dict[str, float | int | None]:
        finite = math.isfinite(self.beta)
        return {"alpha_s": self.alpha_s, "beta": self.beta if finite else None,
                "crossover_bytes": self.crossover_bytes if finite else None,
                "points": self.points, "rel_rms": self.rel_rms}


def fit_alpha_beta(sizes: Sequence[float], times: Sequence[float]) -> AlphaBeta:
    """Least squares of t = α + S·x (x = 1/β) in relative error, with α ≥ 0 and x ≥ 0.

    Relative error, Σ((α + S·x − t)/t)², so that an 8 B message counts as much as
    a 256 MiB one: in absolute error the large messages would set α too.
    """
    pts = [(float(s), float(t)) for s, t in zip(sizes, times) if t > 0 and s >= 0 and math.isfinite(t)]
    if len(pts) < 2:
        raise ValueError("an α-β fit needs at least two sizes with a time")
    # rows a_i = (1/t_i, S_i/t_i), target 1: normal equations of the 2×2 problem
    a11 = sum(1 / t**2 for _, t in pts)
    a12 = sum(s / t**2 for s, t in pts)
    a22 = sum(s * s / t**2 for s, t in pts)
    b1 = sum(1 / t for _, t in pts)
    b2 = sum(s / t for s, t in pts)
    det = a11 * a22 - a12 * a12
    alpha, x = ((b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det) if det > 0 else (-1.0, -1.0)
    if det <= 0 or alpha < 0 or x < 0:  # the constrained optimum lies on an edge: try both, keep the better
        edges = []
        if a22 > 0:
            edges.append((0.0, max(b2 / a22, 0.0)))
        edges.append((max(b1 / a11, 0.0), 0.0))
        alpha, x = min(edges, key=lambda ax: _rel_sq(pts, *ax))
    rms = math.sqrt(_rel_sq(pts, alpha, x) / len(pts))
    return AlphaBeta(alpha_s=alpha, beta=1 / x if x > 0 else math.inf, points=len(pts), rel_rms=rms)


def _rel_sq(pts: Sequence[tuple[float, float]], alpha: float, x: float) -> float:
    return sum(((alpha + s * x - t) / t) ** 2 for s, t in pts)


def comm_time_bound(wire: float, bandwidth: float, alpha_s: float = 0.0) -> float:
    """T ≥ α + bytes on the wire / link bandwidth."""
    return alpha_s + wire / bandwidth


def comm_regime(wire: float, bandwidth: float, alpha_s: float) -> str:
    """'latency' when α exceeds the wire time, else 'bandwidth'."""
    return "latency" if alpha_s > wire / bandwidth else "bandwidth"


@dataclass(frozen=True)
class CommPoint:
    """One measured (collective, size): its time and the two bandwidths nccl-tests prints."""

    collective: str
    world: int
    size_bytes: float
    time_s: float | None  # median; None when skipped
    p10_s: float | None = None
    p90_s: float | None = None
    iqr_ratio: float | None = None
    skipped: str = ""

    @property
    def algbw(self) -> float | None:
        return algbw(self.size_bytes, self.time_s) if self.time_s else None

    @property
    def busbw(self) -> float | None:
        return busbw(self.collective, self.world, self.size_bytes, self.time_s) if self.time_s else None

    def to_dict(self) -> dict[str, object]:
        return {"collective": self.collective, "world": self.world, "size_bytes": self.size_bytes,
                "time_s": self.time_s, "p10_s": self.p10_s, "p90_s": self.p90_s, "iqr_ratio": self.iqr_ratio,
                "algbw": self.algbw, "busbw": self.busbw, "bus_factor": bus_factor(self.collective, self.world),
                "skipped": self.skipped}


def comm_points(samples: Sequence[object]) -> list[CommPoint]:
    """The points of a comm run's Samples (those whose conditions["comm"] names the collective)."""
    out = []
    for s in samples:
        c = getattr(s, "conditions", {}).get("comm")
        if not c:
            continue
        st = getattr(s, "stats", None)
        out.append(CommPoint(str(c["collective"]), int(c["world"]), float(s.bytes),  # type: ignore[attr-defined]
                             st.median_s if st else None, st.p10_s if st else None, st.p90_s if st else None,
                             st.iqr_ratio if st else None, str(getattr(s, "skipped", ""))))
    return out


def fit_points(points: Sequence[CommPoint]) -> dict[str, AlphaBeta | None]:
    """An α-β fit per collective, in sweep order; None where fewer than two sizes have a time."""
    out: dict[str, AlphaBeta | None] = {}
    for coll in dict.fromkeys(p.collective for p in points):
        timed = [p for p in points if p.collective == coll and p.time_s]
        out[coll] = fit_alpha_beta([p.size_bytes for p in timed], [p.time_s for p in timed]) if len(timed) >= 2 else None  # type: ignore[misc]
    return out
