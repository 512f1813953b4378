"""Benchmark (run with `-m bench`): a distributed job is read one rank at a time.

Builds a job of many ranks by renumbering a real rank's trace, and prints the wall time and peak RSS of
`rooftop profile --trace DIR` for 2 ranks and for many: streamed, the peak stays that of one trace.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

RANK1 = Path(__file__).parent / "data" / "real-traces" / "trace_filter_sampled_rank-1.json.gz"
MEASURE = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
           "sys.stderr.buffer.write(r.stderr); print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def _job(folder: Path, ranks: int) -> Path:
    folder.mkdir()
    doc = json.loads(gzip.decompress(RANK1.read_bytes()))
    for r in range(ranks):
        doc["distributedInfo"]["rank"] = r
        (folder / f"rank-{r}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
    return folder


def _run(folder: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of `rooftop profile --trace folder`."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "rooftop.tui.cli", "profile",
                          "--trace", str(folder), "-d", "a100-80g-ds", "--json", "--no-save"],
                         capture_output=True, text=True, timeout=1800, check=False, env={**os.environ, "NO_COLOR": "1"})
    wall = time.perf_counter() - t
    code, rss = out.stdout.split()
    assert code == "0", out.stderr
    return wall, int(rss) / 1024


@pytest.mark.bench
def test_many_ranks_read_one_at_a_time(tmp_path):
    many = int(os.environ.get("ROOFTOP_BENCH_RANKS", "64"))
    w2, r2 = _run(_job(tmp_path / "two", 2))
    wn, rn = _run(_job(tmp_path / "many", many))
    print(f"\n2 ranks: {w2:.2f} s, peak RSS {r2:.0f} MiB; {many} ranks: {wn:.2f} s ({(wn - w2) / (many - 2):.2f} s "
          f"per extra rank), peak RSS {rn:.0f} MiB ({rn / r2:.2f}× the 2-rank peak)")
    assert rn < 1.25 * r2, "the peak grew with the ranks: traces are held, not streamed"
