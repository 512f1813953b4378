"""The device facts calibration reads (kind, caches, clock): one module, so that `calibrate` and
`hierarchy` both name it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hardware:
    """What calibration needs to know about the device that produced the samples."""

    kind: str  # "gpu" or "cpu"
    name: str
    vendor: str = ""
    memory_bytes: float | None = None
    units: int | None = None  # SMs / CUs, or CPU threads
    l2_bytes: float | None = None  # GPU L2; CPU last-level cache
    private_cache_bytes: float | None = None  # CPU: the cache level below the LLC, all instances
    max_clock_hz: float | None = None  # GPU: the maximum SM clock (the L1's physical limit)
