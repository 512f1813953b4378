"""A trace's raw events read without rooftop's reader, for checking what the reader makes of them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def raw_events(path: Path) -> list[dict]:
    """The trace's events as json decodes them (a gzip file, an object with traceEvents or a bare list)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def union(intervals: list[tuple[float, float]]) -> float:
    """The length the intervals cover, overlaps counted once."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total
