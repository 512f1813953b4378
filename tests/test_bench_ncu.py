"""Benchmark (marked `bench`; `pytest -m bench -s tests/test_bench_ncu.py`): `rooftop profile --ncu` on
exports of 10k and 40k kernels built from the real H200 export (1,317 columns a row), wall time and peak
RSS of each, and the ratio (target: linear, about 4× for 4× the kernels; the 100k-kernel export took
34.5 s when every kernel was a table row). Prints figures, asserts no times."""

from __future__ import annotations

import csv
import io
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench
NCU = Path(__file__).parent / "data" / "ncu-raw.csv"


def export(n: int, path: Path) -> Path:
    rs = list(csv.reader(io.StringIO(NCU.read_text())))
    head = next(i for i, r in enumerate(rs) if r and r[0] == "ID")
    data = rs[head + 2:]
    with path.open("w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerows(rs[: head + 2])
        w.writerows([str(k), *data[k % len(data)][1:]] for k in range(n))
    return path


def run(path: Path) -> tuple[float, float]:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "profile", "--ncu", str(path), "-d", "h200"],
                   check=True, capture_output=True)
    return time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def test_ncu_export_scales_linearly(tmp_path: Path) -> None:
    small = run(export(10_000, tmp_path / "10k.csv"))
    large = run(export(40_000, tmp_path / "40k.csv"))
    print(f"\n10k kernels: {small[0]:.2f} s; 40k kernels: {large[0]:.2f} s ({large[0] / small[0]:.2f}× for 4×); "
          f"peak RSS of the children so far {large[1]:.0f} MiB")
    assert small[0] > 0 and large[0] > 0
