"""Benchmark (run with `-m bench`): the critical path's graph and path for one window of 25 k, 50 k, 100 k and 1 M
events, and the whole analysis with its what-ifs re-timed.

The trace is the H200 decode step replayed end to end (tests/test_bench_trace.py's `replayed`: each copy shifted in
time and given its own ids) until it holds the events asked for; it has no profiler steps, so its window is the whole
trace. Timed in this process, after the trace is read and its workload built (reading is test_bench_trace's): the
graph (build_graph) and the path (each window's last point back along its binding edges, classed), then the whole
critical_path() call. Printed: events, points, edges, seconds, and µs per event (flat when the work is linear in
events). The target: ≤ 2 s for the graph and path of a 100 k-event window. No assertion on time.
"""

from __future__ import annotations

import math
import os
import time

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.program.critpath import _step, critical_path, windows_of
from rooftop.models.program.depgraph import build_graph
from rooftop.models.program.retime import last_points, window_starts
from rooftop.models.program.workload import build_workload

from test_bench_trace import replayed

SIZES = tuple(int(x) for x in os.environ.get("ROOFTOP_BENCH_CRITPATH", "25000,50000,100000,1000000").split(","))


@pytest.mark.bench
def test_the_graph_and_path_of_a_window_against_its_events(tmp_path):
    from rooftop.store.tracefile import load_trace

    dev = lookup_device("h200")
    rows = []
    for size in SIZES:
        path = tmp_path / f"replayed-{size}.trace.json"
        n = replayed(path, size)
        trace = load_trace(path)
        path.unlink()
        work = build_workload(trace, dev)
        _, names, spans = windows_of(trace)
        t0 = time.perf_counter()
        g = build_graph([trace], [spans])
        t1 = time.perf_counter()
        groups = work.group_by_key()
        starts = window_starts(g)
        steps = [_step(g, trace, work, groups, names[w], starts[w], p) for w, p in enumerate(last_points(g))]
        t2 = time.perf_counter()
        cp = critical_path(trace, work)
        t3 = time.perf_counter()
        assert cp.graph and steps[0] is not None and math.isclose(steps[0].length_s, cp.length_s)
        rows.append((n, g.points, len(g.in_kind), t1 - t0, t2 - t1, t3 - t2, len(cp.what_if)))
        del trace, work, g, cp
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    print(f"{'events':>9} {'points':>8} {'edges':>8} {'graph s':>8} {'path s':>7} {'graph+path':>10} "
          f"{'µs/event':>8} {'whole s':>8} {'what-ifs':>8}")
    for n, pts, edges, tg, tp, tw, k in rows:
        print(f"{n:>9} {pts:>8} {edges:>8} {tg:>8.3f} {tp:>7.3f} {tg + tp:>10.3f} {(tg + tp) / n * 1e6:>8.2f} "
              f"{tw:>8.3f} {k:>8}")
    print("target: graph + path ≤ 2 s for the 100 k-event window, µs/event flat (linear)")
