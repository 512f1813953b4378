"""Devices side by side: where their roofs cross, which is higher at a given I."""

from __future__ import annotations

from dataclasses import dataclass

from . import roofline
from .profile import DeviceProfile


@dataclass(frozen=True)
class PathComparison:
    path: str
    level: str
    crossover: roofline.Crossover
    ridges: dict[str, float]  # device id → I*


def common_paths(a: DeviceProfile, b: DeviceProfile) -> list[str]:
    return [p for p in a.paths() if p in b.peak]


def compare_path(a: DeviceProfile, b: DeviceProfile, path: str, level: str = "dram") -> PathComparison:
    """Where a's and b's roofs for `path` cross (H100 and H200 reference roofs cross at I ≈ 245)."""
    x = roofline.crossover(a.id, a.F(path), a.B(level), b.id, b.F(path), b.B(level))
    return PathComparison(path, level, x, {a.id: a.ridge(path, level), b.id: b.ridge(path, level)})


def higher_at(a: DeviceProfile, b: DeviceProfile, path: str, i: float, level: str = "dram") -> str | None:
    """The id whose roof is higher at intensity i; None when they are equal there."""
    pa = roofline.attainable(i, a.F(path), a.B(level))
    pb = roofline.attainable(i, b.F(path), b.B(level))
    if pa == pb:
        return None
    return a.id if pa > pb else b.id


def thread_note(profiles: list[DeviceProfile]) -> str | None:
    """Say when CPU profiles were measured with different thread counts: their ceilings then differ by
    the threads as much as by the hardware, so the comparison is not like with like."""
    cpus = [p for p in profiles if p.threads]
    if len({p.threads for p in cpus}) < 2:
        return None
    said = ", ".join(f"{p.id} {p.threads}" for p in cpus)
    return (f"CPU profiles measured with different thread counts ({said}): their ceilings differ by the "
            "threads, not only the hardware; measure both with the same `rooftop measure --threads N`")
