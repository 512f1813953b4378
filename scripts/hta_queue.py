"""Holistic Trace Analysis's queue length of the test traces, kept as tests/data/hta-queue.json.

rooftop's launch-queue depth (rooftop.models.trace.launchqueue) is checked against the figures this script writes,
so the default suite needs no HTA. Re-run it in HTA's venv (see scripts/hta_idle.py for how to make one):

    /tmp/hta/bin/python scripts/hta_queue.py record > tests/data/hta-queue.json

and rooftop's figures beside HTA's, as a table (in rooftop's venv; HTA not needed):

    python3 scripts/hta_queue.py table

HTA reads the whole trace as rooftop does (its last profiler step kept, no kernel dropped, times not rounded:
scripts/hta_idle.py's loading). Per rank and stream, from `TraceCounters.get_queue_length_time_series` (+1 at
a launch call's start, −1 at its activity's start, cumulated in time order): the launches it counted, the
series' max and its mean over the change points (`get_queue_length_summary`: pandas' describe), and the time
at or above that max and at or above 1024 (`get_time_spent_blocked_on_full_queue`, one stream at a time: it
keeps one stream per rank where given several).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hta_idle  # a script beside this one
from hta_idle import DATA, US, _load, _version

CAP = 1024


def figures(path: Path) -> dict:
    """HTA's queue length per stream of the trace's first rank (times in seconds)."""
    import hta
    from hta.analyzers.trace_counters import TraceCounters

    t = _load(path, whole=True)
    rank = t.get_ranks()[0]
    out: dict = {"hta": getattr(hta, "__version__", "") or _version(), "streams": {}}
    series = TraceCounters.get_queue_length_time_series(t, [rank])
    if rank not in series:
        return out
    ql = series[rank]
    for stream in sorted(ql.stream.unique()):
        one = ql[ql.stream == stream]
        top = int(one.queue_length.max())

        def held(level: int) -> float:
            got = TraceCounters.get_time_spent_blocked_on_full_queue(t, {rank: one.copy()}, level)
            return float(got["duration_at_max_queue_length"].sum()) * US if len(got) else 0.0

        out["streams"][str(int(stream))] = {
            "launches": len(one) // 2, "max": top, "mean_of_changes": float(one.queue_length.mean()),
            "at_max_s": held(top), "at_1024_s": held(CAP),
        }
    return out


def table() -> int:
    from rooftop.models.trace.launchqueue import launch_queue
    from rooftop.store.tracefile import load_trace

    doc = json.loads((DATA / "hta-queue.json").read_text())
    print("| trace | stream | launches HTA / rooftop | max HTA (start) / rooftop (end) | "
          "rooftop time-weighted mean | HTA mean of changes |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, f in doc["traces"].items():
        q = launch_queue(load_trace(DATA / name))
        mine = {str(s.stream): s for s in q.streams} if q else {}
        for stream, h in f["streams"].items():
            s = mine.get(stream)
            print(f"| {Path(name).name} | {stream} | {h['launches']} / {s.launches if s else '-'} | "
                  f"{h['max']} / {s.max if s else '-'} | {f'{s.mean:.2f}' if s else '-'} | "
                  f"{h['mean_of_changes']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(hta_idle.main(sys.argv[1:], functools.partial(hta_idle.record, figures_of=figures, head={"cap": CAP}),
                           table, "hta-queue.json"))
