"""Benchmark (run with `-m bench`): `rooftop profile --trace` on a trace of over a million events, against a
plain `json.load` of the same file in the same run, as .json and as .json.gz.

The trace is a real one (the H200 decode step) replayed end to end until it holds ≥ 1 M events, each copy
shifted in time and given its own ids, so the links stay one to one. Each command runs in a process of its own
under a wrapper that reports the command's wall time and peak RSS (`RUSAGE_CHILDREN` of the wrapper: the
largest resident set of the one child it waited for), so both sides pay the same interpreter start and are
measured the same way. `json.load` reads the file as text (`gzip.open(…, "rt")` for the .gz), as a user's
script would; `rooftop` runs from compiled bytecode (a cache of its own, warmed by a first run), as an installed
one does, whatever PYTHONDONTWRITEBYTECODE says. The two run back to back, ROOFTOP_BENCH_RUNS times (3), so
each pair sees the same load on the machine; printed: each pair's times, peaks and ratios, then the median
and range of the ratios and the load average (the targets: ≤ 0.25× json.load's time, ≤ 0.3× its peak RSS).
No assertion on time or memory.

Beside them, the floor of any reader written in Python (`FLOOR`, run once per pair): the CLI's imports, the
file decoded by msgspec into the reader's own typed `Event`, and one tuple kept per complete event, nothing
more. What is left between that floor and the target is all the Python the op tree, the links, the placing
and the critical path may take.
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
EVENTS = int(os.environ.get("ROOFTOP_BENCH_EVENTS", "1000000"))
RUNS = int(os.environ.get("ROOFTOP_BENCH_RUNS", "3"))
WRAP = ("import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "print(r.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")

FLOOR = ("import sys, msgspec\n"
         "import rooftop.tui.cli\n"
         "from rooftop.models.trace.read import Event\n"
         "class Doc(msgspec.Struct):\n"
         "    traceEvents: list[Event]\n"
         "with open(sys.argv[1], 'rb') as f:\n"
         "    raw = f.read()\n"
         "if sys.argv[1].endswith('.gz'):\n"
         "    import gzip\n"
         "    raw = gzip.decompress(raw)\n"
         "rows = [(e.ts, e.dur, e.name, e.args) for e in msgspec.json.decode(raw, type=Doc).traceEvents "
         "if e.ph == 'X']\n")


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
    text = json.dumps(doc).encode()
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text, 6))
    else:
        path.write_bytes(text)
    return len(out)


def _measure(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one command, in a wrapper process of its own."""
    r = subprocess.run([sys.executable, "-c", WRAP, *argv], capture_output=True, text=True, timeout=3600, check=False,
                       env=env)
    rc, wall, rss_kib = r.stdout.split()
    assert rc == "0", r.stderr
    return float(wall), float(rss_kib) / 1024


def _spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f} (range {min(xs):.3f}–{max(xs):.3f})"


@pytest.mark.bench
@pytest.mark.parametrize("suffix", [".json", ".json.gz"], ids=["json", "gz"])
def test_a_million_event_trace_against_json_load(tmp_path, suffix):
    path = tmp_path / f"replayed.trace{suffix}"
    n = replayed(path, EVENTS)
    size = path.stat().st_size / 2**20
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(NO_COLOR="1", PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"), ROOFTOP_HOME=str(tmp_path / "home"))
    opener = "gzip.open" if suffix == ".json.gz" else "open"
    load = [sys.executable, "-c", f"import gzip, json; json.load({opener}({str(path)!r}, 'rt'))"]
    profile = [sys.executable, "-m", "rooftop.tui.cli", "profile", "--trace", str(path), "-d", "h200", "--json",
               "--no-save"]
    report = tmp_path / "report.html"  # the warm-up run writes the HTML report too (the timed runs do not)
    r = subprocess.run([*profile, "--out", str(report)], capture_output=True, text=True, timeout=3600, check=True,
                       env=env)  # warms the cache
    doc = json.loads(r.stdout)  # what is timed is the whole report: every kernel of every copy
    copies = -(-n // 19212)
    assert doc["summary"]["kernels"] == 2620 * copies
    html_mib = report.stat().st_size / 2**20
    print(f"\nthe HTML report (--out {report.name}): {html_mib:.2f} MiB, {len(doc['ops']):,} op groups "
          f"(target < 5 MB)")
    assert report.stat().st_size < 5e6
    times, peaks, floors = [], [], []
    floor = [sys.executable, "-c", FLOOR, str(path)]
    print(f"\n{n} events, {path.name} ({size:.0f} MiB), load average {os.getloadavg()[0]:.2f} at the start")
    for k in range(RUNS):
        jl_t, jl_rss = _measure(load, env)
        rt_t, rt_rss = _measure(profile, env)
        fl_t, _ = _measure(floor, env)
        times.append(rt_t / jl_t)
        peaks.append(rt_rss / jl_rss)
        floors.append(fl_t / jl_t)
        print(f"  run {k + 1}: json.load {jl_t:.2f} s, {jl_rss:.0f} MiB peak; rooftop profile --trace {rt_t:.2f} s, "
              f"{rt_rss:.0f} MiB peak; ratio time {times[-1]:.3f}, peak RSS {peaks[-1]:.3f}; the Python floor {fl_t:.2f} s "
              f"({floors[-1]:.3f})")
    print(f"  ratio time {_spread(times)}; peak RSS {_spread(peaks)} (targets ≤ 0.25 and ≤ 0.3); "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    print(f"  the floor of a reader in Python (imports, typed decode, a tuple per event): ratio time {_spread(floors)}")
