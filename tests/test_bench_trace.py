"""Benchmark (run with `-m bench`): `rooftop profile --trace` on a trace of over a million events, against a
plain `json.load` of the same file in the same run.

The trace is a real one (the H200 decode step) replayed end to end until it holds ≥ 1 M events, each copy
shifted in time and given its own ids, so the links stay one to one. Each command runs in its own
subprocess under a wrapper that reports the child's wall time and peak RSS (`RUSAGE_CHILDREN`). Printed:
both times, both peaks, and the ratios (the target: ≤ 0.5× of json.load's time and ≤ 0.5× of its peak RSS).
No assertion on time or memory.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
EVENTS = int(os.environ.get("ROOFTOP_BENCH_EVENTS", "1000000"))
WRAP = ("import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "print(r.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def replayed(path: Path, events: int) -> int:
    """Write the decode trace replayed until it holds ≥ `events` events; returns how many it holds."""
    doc = json.loads(gzip.decompress(QWEN.read_bytes()))
    base = doc["traceEvents"]
    times = [e["ts"] + e.get("dur", 0) for e in base if isinstance(e.get("ts"), (int, float))]
    period = max(times) - min(times) + 1000.0
    ids = [e["args"][k] for e in base for k in ("External id", "correlation")
           if isinstance(e.get("args"), dict) and isinstance(e["args"].get(k), int)]
    stride = max(ids + [e["id"] for e in base if isinstance(e.get("id"), int)]) + 1
    out: list[dict] = []
    copy = 0
    while len(out) < events:
        for e in base:
            if e.get("ph") == "M" and copy:
                continue
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = e2["ts"] + copy * period
            if isinstance(e2.get("id"), int):
                e2["id"] = e2["id"] + copy * stride
            if isinstance(e2.get("args"), dict):
                a = dict(e2["args"])
                for k in ("External id", "correlation"):
                    if isinstance(a.get(k), int):
                        a[k] = a[k] + copy * stride
                e2["args"] = a
            out.append(e2)
        copy += 1
    doc["traceEvents"] = out
    path.write_text(json.dumps(doc))
    return len(out)


def _measure(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one command, in a wrapper process of its own."""
    r = subprocess.run([sys.executable, "-c", WRAP, *argv], capture_output=True, text=True, timeout=3600, check=False,
                       env={**os.environ, "NO_COLOR": "1"})
    rc, wall, rss_kib = r.stdout.split()
    assert rc == "0", r.stderr
    return float(wall), float(rss_kib) / 1024


@pytest.mark.bench
def test_a_million_event_trace_against_json_load(tmp_path):
    path = tmp_path / "replayed.trace.json"
    n = replayed(path, EVENTS)
    size = path.stat().st_size / 2**20
    jl_t, jl_rss = _measure([sys.executable, "-c", f"import json; json.load(open({str(path)!r}))"])
    rt_t, rt_rss = _measure([sys.executable, "-m", "rooftop.tui.cli", "profile", "--trace", str(path), "-d", "h200",
                             "--json", "--no-save"])
    print(f"\n{n} events ({size:.0f} MiB): json.load {jl_t:.2f} s, {jl_rss:.0f} MiB peak; "
          f"rooftop profile --trace {rt_t:.2f} s, {rt_rss:.0f} MiB peak; "
          f"ratio time {rt_t / jl_t:.2f}, peak RSS {rt_rss / jl_rss:.2f} (target ≤ 0.5 both)")
    r = subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "profile", "--trace", str(path), "-d", "h200",
                        "--json", "--no-save"], capture_output=True, text=True, timeout=3600, check=True)
    doc = json.loads(r.stdout)  # what was timed is the whole report: every kernel of every copy
    copies = -(-n // 19212)
    assert doc["summary"]["kernels"] == 2620 * copies
