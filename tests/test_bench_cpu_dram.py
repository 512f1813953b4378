"""Benchmark (marked `bench`, run with `pytest -m bench -s tests/test_bench_cpu_dram.py`): the CPU's B dram
from `rooftop measure --only bandwidth` against a plain OpenMP STREAM triad over 3 × 2 GiB compiled here,
run before and after it (target: rooftop's figure within 0.9–1.1× of the triad's). Prints the figures and
whether rooftop called its B an upper estimate; asserts no ratio (a shared VM's DRAM moves from minute to
minute), only that both ran.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

TRIAD_C = textwrap.dedent(
    """
    #include <omp.h>
    #include <stdio.h>
    #include <stdlib.h>
    int main(void) {
        const size_t n = (size_t)1 << 28;  /* 2^28 doubles: 2 GiB an array */
        double *a = malloc(n * 8), *b = malloc(n * 8), *c = malloc(n * 8);
        #pragma omp parallel for
        for (size_t i = 0; i < n; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }
        double best = 0;
        for (int rep = 0; rep < 10; rep++) {
            double t = omp_get_wtime();
            #pragma omp parallel for
            for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
            t = omp_get_wtime() - t;
            double bw = 3.0 * n * 8 / t;
            if (bw > best) best = bw;
        }
        printf("%.6e %f\\n", best, a[n / 2]);
        return 0;
    }
    """
)


def openmp_triad(tmp: Path) -> float:
    src, exe = tmp / "triad.c", tmp / "triad"
    src.write_text(TRIAD_C)
    subprocess.run(["cc", "-O3", "-march=native", "-fopenmp", str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": str(os.cpu_count() or 1)})
    return float(out.stdout.split()[0])


def test_cpu_b_dram_against_a_plain_openmp_triad(tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the OpenMP triad")
    before = openmp_triad(tmp_path)
    out = subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "measure", "--device", "cpu", "--only",
                          "bandwidth", "--json", "--no-save"], capture_output=True, text=True, check=True)
    after = openmp_triad(tmp_path)
    doc = json.loads(out.stdout)
    profile = doc["profile"]
    b = profile["bandwidth"]["dram"]
    triad = (before + after) / 2
    print(f"\nOpenMP triad 3 × 2 GiB: {before / 1e9:.1f} GB/s before, {after / 1e9:.1f} GB/s after")
    print(f"rooftop B dram: {b / 1e9:.1f} GB/s ({profile['ceilings']['bandwidth']['dram']['case']}) = {b / triad:.2f}× "
          f"the triad (target 0.9–1.1×); upper estimate: {bool(profile['extra'].get('dram_upper_estimate'))}")
    print(f"notes: {profile['notes']}")
    assert b > 0 and triad > 0
