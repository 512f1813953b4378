"""Holistic Trace Analysis's critical path and queue length on the test traces, kept as tests/data/hta-critpath.json.

rooftop's critical path is checked against HTA's where HTA's path covers nearly all of its window; the default
suite reads the figures this script writes, so it needs no HTA. Re-run it after a trace is added or HTA's rules
change, in a venv of its own (never in the project's dependencies):

    python3 -m venv /work/htavenv && /work/htavenv/bin/pip install HolisticTraceAnalysis==0.5.0 "pandas>=2,<3"
    /work/htavenv/bin/python scripts/hta_critpath.py record > tests/data/hta-critpath.json

Each trace is read twice:
- `windows`: the one compared. HTA reads the whole trace as rooftop does: its last profiler step kept and no
  kernel dropped for want of a CPU launch in the steps (`Trace._filter_irrelevant_gpu_kernels` is skipped), its
  times not rounded to whole µs (HTA_DISABLE_NS_ROUNDING=1). One window per ProfilerStep (HTA's `annotation`
  "ProfilerStep" and the step's position among the events whose name holds it), or the whole trace (annotation
  "") where there are none. HTA then cuts the window its own way: the CPU events that start in the step (dur > 0)
  and the device activities whose launch call starts in it, wherever they run.
- `hta_default`: HTA as a user runs it (last step dropped, times rounded to whole µs), per step, for the record.

Per window: the step's own start/end, the span of the events HTA kept (`span_*`: the longest a path could be),
the path's length and where it starts and ends, its split by HTA's `bound_by` classes, its coverage
(length / span), the ops on it with their time, the edges of the graph by type, the seconds HTA took.
`queue`: HTA's queue length per stream (TraceCounters), on the whole trace as `windows` reads it.
All times in µs on the trace file's own clock.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

from hta_idle import TRACES, _load  # the shared traces; HTA's Trace of one, whole and unrounded or as HTA loads it

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
BOUND_BY = ("cpu_bound", "gpu_compute_bound", "gpu_communication_bound", "gpu_kernel_kernel_overhead",
            "gpu_kernel_launch_overhead")
STEP = "ProfilerStep"
CPU_CATS = ("user_annotation", "cpu_op", "Operator", "python_function")  # a step on the CPU, not its GPU copy
QUEUE_CAP = 1024  # CUDA's default launch queue depth (CUDA_DEVICE_MAX_CONNECTIONS aside)
TOP_OPS = 40  # ops kept per window, by time on the path; the rest summed as `ops_rest_us`
TOP_DROPS = 5  # the path's edges that drop the most time, kept per window with the events at their ends


def _steps(t, rank: int) -> list[tuple[int, str, float, float]]:
    """The CPU ProfilerSteps as HTA indexes them: (instance, name, start, end), aligned µs.

    HTA's instance i is the i-th event (in its frame's order) whose name holds "ProfilerStep", device-side
    step annotations included, so each CPU step is given by its own position in that list."""
    df = t.get_trace(rank)
    sym = t.symbol_table.get_sym_id_map()
    names = t.symbol_table.get_sym_table()
    ids = [v for k, v in sym.items() if STEP in k]
    ann = df[df.name.isin(ids)]
    return [(i, names[n], float(ts), float(ts + dur))
            for i, (n, ts, dur, cat) in enumerate(zip(ann["name"], ann["ts"], ann["dur"], ann["cat"]))
            if names[cat] in CPU_CATS and names[n].startswith(STEP + "#")]


def _path(t, rank: int, annotation: str, instance: int) -> dict:
    """HTA's critical path of one window, as figures."""
    from collections import Counter, defaultdict

    from hta.analyzers.critical_path_analysis import CriticalPathAnalysis

    t0 = time.perf_counter()
    got = CriticalPathAnalysis.critical_path_analysis(t, rank, annotation, instance)
    seconds = time.perf_counter() - t0
    if got is None:
        return {"error": f"HTA found no annotation {annotation!r}", "seconds": round(seconds, 3)}
    g, ok = got
    if not ok:
        return {"error": "HTA's longest path failed (the graph has a cycle)", "seconds": round(seconds, 3)}
    base = t.min_ts
    names = t.symbol_table.get_sym_table()
    df = g.trace_df
    nodes = g.node_list
    span = (min(n.ts for n in nodes), max(n.ts for n in nodes))
    path = g.critical_path_nodes
    split = dict.fromkeys(BOUND_BY, 0.0)
    ops: dict[tuple, list] = defaultdict(lambda: [0.0, 0])
    lost: dict[str, float] = defaultdict(float)  # time the path crosses on an edge that weighs less than it spans
    drops: list = []
    for e in g.critical_path_edges_set:
        ev = g.get_event_attribution_for_edge(e)
        w = float(g.edges[e.begin, e.end]["weight"])  # HTA's own weight (a -1 from rounding already made 0)
        gap = nodes[e.end].ts - nodes[e.begin].ts - w
        if gap > 0:
            lost[_lost_key(g, e)] += gap
            drops.append((gap, e))
        if e.type.value in ("critical_path_dependency", "critical_path_sync_dependency"):
            continue  # weight 0 by HTA's rules
        if e.type.value == "critical_path_kernel_kernel_delay":
            split["gpu_kernel_kernel_overhead"] += w
            continue
        if e.type.value == "critical_path_kernel_launch_delay":
            split["gpu_kernel_launch_overhead"] += w
            continue
        row = df.loc[ev]
        name = names[int(row["name"])]
        from hta.utils.utils import is_comm_kernel

        cls = ("cpu_bound" if row["stream"] < 0 else
               "gpu_communication_bound" if is_comm_kernel(name) else "gpu_compute_bound")
        split[cls] += w
        op = ops[(name, cls, int(row["stream"]))]
        op[0] += w
        op[1] += 1
    length = sum(split.values())
    ranked = sorted(ops.items(), key=lambda kv: -kv[1][0])
    edges = Counter(g.edges[u, v]["object"].type.value.removeprefix("critical_path_") for u, v in g.edges)
    return {
        "seconds": round(seconds, 3),
        "events": int(len(df)),
        "span_start_us": span[0] + base,
        "span_end_us": span[1] + base,
        "length_us": length,
        "coverage": length / (span[1] - span[0]) if span[1] > span[0] else 0.0,
        "lost_us": dict(sorted(lost.items(), key=lambda kv: -kv[1])),
        "lost_largest": [_drop(g, base, gap, e) for gap, e in sorted(drops, key=lambda x: -x[0])[:TOP_DROPS]],
        "path_start_us": nodes[path[0]].ts + base,
        "path_end_us": nodes[path[-1]].ts + base,
        "split_us": split,
        "split_pct": {k: 100 * v / length if length else 0.0 for k, v in split.items()},
        "ops": [{"name": n, "bound_by": c, "stream": s, "time_us": v[0], "edges": v[1]}
                for (n, c, s), v in ranked[:TOP_OPS]],
        "ops_rest_us": sum(v[0] for _, v in ranked[TOP_OPS:]),
        "graph_edges": dict(sorted(edges.items())),
    }


def _drop(g, base: float, gap: float, e) -> dict:
    """One edge on the path that drops time: the events at its two ends, on the file's clock."""
    src, dest = g.node_list[e.begin], g.node_list[e.end]
    df = g.trace_df
    return {"lost_us": gap, "type": e.type.value.removeprefix("critical_path_"),
            "tid": int(df.loc[src.ev_idx, "tid"]), "from": g._get_node_name(src.ev_idx), "from_us": src.ts + base,
            "from_is_start": bool(src.is_start), "to": g._get_node_name(dest.ev_idx), "to_us": dest.ts + base,
            "to_is_start": bool(dest.is_start)}


def _lost_key(g, e) -> str:
    """Why an edge on the path weighs less than the time it spans: its type, and for HTA's zero-weight edge out
    of a blocking call, that call."""
    kind = e.type.value.removeprefix("critical_path_")
    if kind == "operator" and g.node_list[e.begin].is_blocking:
        return "blocking call (" + g._get_node_name(g.node_list[e.begin].ev_idx) + ")"
    return kind


def _windows(t) -> list[dict]:
    """HTA's critical path of each ProfilerStep of the trace (the whole trace where there are none)."""
    rank = t.get_ranks()[0]
    steps = _steps(t, rank)
    targets = [(STEP, i, name, a, b) for i, name, a, b in steps] or [("", 0, "whole trace", None, None)]
    out = []
    for annotation, instance, name, a, b in targets:
        w = {"window": name, "annotation": annotation, "instance": instance,
             "start_us": None if a is None else a + t.min_ts, "end_us": None if b is None else b + t.min_ts}
        try:
            w.update(_path(t, rank, annotation, instance))
            if b is not None and "length_us" in w:
                w["coverage_of_step"] = w["length_us"] / (b - a)
        except Exception as exc:  # HTA's failures are the record
            w["error"] = _why(exc)
        print(f"  {name}: {w.get('length_us', w.get('error'))} {w.get('coverage', '')}", file=sys.stderr)
        out.append(w)
    return out


def _queue(t) -> dict:
    """HTA's queue length per stream: its summary (over the series' change points), and from the same series the
    time-weighted mean, the time at the stream's own maximum and at the cap, in µs."""
    from hta.analyzers.trace_counters import TraceCounters

    rank = t.get_ranks()[0]
    series = TraceCounters._get_queue_length_time_series_for_rank(t, rank)
    if series is None:
        return {}
    out = {}
    for stream, s in series.groupby("stream"):
        s = s.sort_values("ts", kind="stable")
        ql = s["queue_length"].to_numpy(dtype=float)
        ts = s["ts"].to_numpy(dtype=float)
        dur = list(ts[1:] - ts[:-1]) + [0.0]  # a step function: each value holds until the next change
        total = ts[-1] - ts[0]
        top = float(ql.max())

        def at(level: float, ql=ql, dur=dur) -> float:
            return float(sum(d for q, d in zip(ql, dur) if q >= level))

        out[str(int(stream))] = {
            "changes": int(len(s)),
            "mean": float(ql.mean()),  # HTA's get_queue_length_summary "mean": not time-weighted
            "max": top,
            "time_weighted_mean": float(sum(q * d for q, d in zip(ql, dur)) / total) if total > 0 else top,
            "span_us": float(total),
            "at_max_us": at(top),
            f"at_{QUEUE_CAP}_us": at(QUEUE_CAP),
            "start_us": float(ts[0]) + t.min_ts,
        }
    return out


def _why(exc: BaseException) -> str:
    """One line: the exception and the line of HTA's code that raised it."""
    import traceback

    where = traceback.extract_tb(exc.__traceback__)[-1]
    text = f"{exc}".splitlines()[0][:200] if f"{exc}" else ""
    return f"{type(exc).__name__} at {Path(where.filename).name}:{where.lineno} ({where.line}){': ' + text if text else ''}"


def _default(path: Path) -> list[dict] | str:
    """HTA's critical path per step with its own defaults (last step dropped, whole-µs rounding)."""
    try:
        t = _load(path, whole=False)
    except Exception as exc:  # HTA fails to load some traces: the record
        return f"HTA failed to load: {_why(exc)}"
    keep = ("window", "instance", "start_us", "end_us", "span_start_us", "span_end_us", "length_us", "coverage",
            "split_us", "seconds", "error")
    return [{k: w[k] for k in keep if k in w} for w in _windows(t)]


def figures(path: Path) -> dict:
    from importlib.metadata import version

    t0 = time.perf_counter()
    t = _load(path, whole=True)
    load_s = time.perf_counter() - t0
    out = {"hta": version("HolisticTraceAnalysis"), "load_s": round(load_s, 3),
           "events": int(len(t.get_trace(t.get_ranks()[0])))}
    out["windows"] = _windows(t)
    out["queue"] = _queue(t)
    print("  (HTA's defaults)", file=sys.stderr)
    out["hta_default"] = _default(path)
    return out


def options() -> dict:
    """What the compared reading sets, and HTA's critical path switches as this run saw them."""
    import hta.configs.env_options as o

    return {
        "include_last_profiler_step": True,
        "filter_irrelevant_gpu_kernels": False,
        "HTA_DISABLE_NS_ROUNDING": "1",
        "critical_path_add_zero_weight_launch_edges": o.critical_path_add_zero_weight_launch_edges(),
        "critical_path_strict_negative_weight_check": o.critical_path_strict_negative_weight_check(),
        "annotation": STEP,
        "queue_cap": QUEUE_CAP,
        "top_ops": TOP_OPS,
    }


def record(names: list[str]) -> int:
    logging.disable(logging.WARNING)
    doc = {"options": options(), "traces": {}}
    for name in names or TRACES:
        print(name, file=sys.stderr)
        doc["traces"][name] = figures(DATA / name)
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["record"]:
        return record(argv[1:])
    print("usage: hta_critpath.py record [TRACE …] > tests/data/hta-critpath.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
