"""Benchmark (run with `-m bench`): what `rooftop profile` costs a program of several seconds.

Prints the plain run's wall time, the profiled run's, and their ratio (the target: at most 1.5× for a
program of ≥ 5 s; only the recorded steps run under the profiler). No assertion on time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

MLP = Path(__file__).parent / "data" / "some_mlp.py"


def _wall(argv: list[str]) -> tuple[float, str]:
    """Wall time of a command that must succeed, and its stdout."""
    t = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env={**os.environ, "NO_COLOR": "1"})
    assert out.returncode == 0, out.stderr
    return time.perf_counter() - t, out.stdout


@pytest.mark.bench
def test_profile_overhead_ratio(tmp_path):
    steps = os.environ.get("ROOFTOP_BENCH_STEPS", "400")
    plain, _ = _wall([sys.executable, str(MLP), steps])
    profiled, doc = _wall([sys.executable, "-m", "rooftop.tui.cli", "profile", "-d", "h100", "--steps", "3",
                      "--json", "--db", str(tmp_path / "b.db"), "--", "python", str(MLP), steps])
    print(f"\nsome_mlp.py {steps} steps: plain {plain:.2f} s, under rooftop profile {profiled:.2f} s, "
          f"ratio {profiled / plain:.2f}")
    ops = json.loads(doc)["ops"]  # what was timed is a real profile: the MLP's GEMMs were found
    assert any("mm" in o["op"] and o["flops"] > 0 for o in ops), [o["op"] for o in ops]
