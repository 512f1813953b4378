"""A GPU's SM count from its kernels, where a trace names no device.

CUPTI records, for each kernel, its launch grid and "blocks per SM": the grid's blocks divided by the device's
SM count. So grid blocks ÷ blocks per SM is the SM count, exact up to the figure's rounding, in every kernel.
A 2023 A100 trace with no deviceProperties says 108 (2400 blocks at 22.222221 per SM) in all its kernels,
which tells an A100 from every other GPU of the catalog. The count is taken only where nearly all the
kernels read agree on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

SAMPLES = 256  # kernels read for it: the first ones that give a grid and blocks per SM
AGREE = 0.9  # the share of them that must give the same count
MAX_UNITS = 4096  # no GPU has more SMs (or CUs): a larger quotient is a malformed record


def grid_blocks(grid: Any) -> int | None:
    """The blocks of a launch grid recorded as [x, y, z] (positive integers), or None."""
    if not isinstance(grid, Sequence) or isinstance(grid, (str, bytes)) or not 1 <= len(grid) <= 3:
        return None
    n = 1
    for g in grid:
        if not isinstance(g, int) or isinstance(g, bool) or g <= 0:
            return None
        n *= g
    return n


def units_of(samples: Iterable[tuple[Any, Any]]) -> int | None:
    """The SM count the kernels' (grid, blocks per SM) pairs agree on, or None where too few give one or they
    disagree (a record that is not CUPTI's, or several devices)."""
    counts: Counter[int] = Counter()
    for grid, per_sm in samples:
        blocks = grid_blocks(grid)
        if blocks is None or not isinstance(per_sm, (int, float)) or isinstance(per_sm, bool) or not per_sm > 0:
            continue
        units = round(blocks / per_sm)
        if 0 < units <= MAX_UNITS and abs(blocks / per_sm - units) <= 0.01 * units:
            counts[units] += 1
    if not counts:
        return None
    units, n = counts.most_common(1)[0]
    return units if n >= AGREE * sum(counts.values()) else None
