"""Holistic Trace Analysis's idle time breakdown of the test traces, kept as tests/data/hta-idle.json.

rooftop's idle causes fall in HTA's three categories (host wait, kernel wait, other); the default suite
checks them against the figures this script writes, so it needs no HTA. Re-run it after a trace is added
or HTA's rules change, in a venv of its own (HTA pins jupyterlab; it is not needed):

    python3 -m venv /tmp/hta && /tmp/hta/bin/pip install "pandas<3" numpy networkx plotly pydot psutil pyyaml
    /tmp/hta/bin/pip install --no-deps HolisticTraceAnalysis==0.5.0
    /tmp/hta/bin/python scripts/hta_idle.py record > tests/data/hta-idle.json

and rooftop's figures beside HTA's, as a table (in rooftop's venv; HTA not needed):

    python3 scripts/hta_idle.py table

Two readings per trace:
- `device`: the one compared. HTA reads the whole trace as rooftop does: its last profiler step kept and
  no kernel dropped for want of a CPU launch in the steps (`Trace._filter_irrelevant_gpu_kernels` is
  skipped), and its times not rounded to whole µs (HTA_DISABLE_NS_ROUNDING=1). HTA splits each stream's
  gaps; rooftop splits the device's (the time no stream ran), so the trace's kernels are first merged into
  one stream of busy intervals, each headed by the activity that began it (by start, then file order, as
  rooftop sorts them), and HTA's own `get_idle_time_breakdown` classifies the gaps between them: host wait
  where that activity's runtime call began after the previous interval ended, kernel wait where the gap is
  under `consecutive_kernel_delay` (30, in the trace's µs), other otherwise.
- `hta_default`: HTA as a user runs it (its last step dropped, times rounded, per stream, summed over the
  streams), for the record: not comparable where a trace has several streams or steps.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
TRACES = (  # relative to tests/data
    "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz",
    "real-traces/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "real-traces/nccl_parser_config_nccl_data.json.gz",
    "real-traces/trace_filter_sampled_rank-0.json.gz",
    "real-traces/trace_filter_sampled_rank-1.json.gz",
    "real-traces/more/cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz",
    "real-traces/more/h100-hf-qwen1.5-0.5b-infer-bs16.json.gz",
    "real-traces/more/v100-resnet50-train-2021-legacy.json.gz",
    "real-traces/more/sglang-qwen3-8b-decode-mi300x.capture.json.gz",
    "real-traces/more/sglang-qwen3-8b-decode-mi300x.replay.json.gz",
    "real-traces/more/vllm-decode-full-mi300x.capture.json.gz",
    "real-traces/more/vllm-decode-full-mi300x.replay.json.gz",
)
KERNEL_CATS = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")  # HTA's
CATEGORIES = ("host_wait", "kernel_wait", "other")
US = 1e-6


def _load(path: Path, whole: bool):
    """An HTA Trace of one file: as HTA loads it, or (`whole`) the whole trace, unrounded."""
    from hta.common.trace import Trace

    if whole:
        os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    else:
        os.environ.pop("HTA_DISABLE_NS_ROUNDING", None)
    skip = Trace._filter_irrelevant_gpu_kernels
    if whole:
        Trace._filter_irrelevant_gpu_kernels = lambda self, include_last_profiler_step=False: None
    with tempfile.TemporaryDirectory(prefix="hta-idle-") as folder:  # HTA reads a folder of one job's ranks
        (Path(folder) / path.name).symlink_to(path.resolve())
        t = Trace(trace_dir=folder)
        try:
            t.load_traces(include_last_profiler_step=whole, use_multiprocessing=False, use_memory_profiling=False)
        finally:
            Trace._filter_irrelevant_gpu_kernels = skip
    return t


def _is_activity(t, df):
    sym = t.symbol_table.get_sym_id_map()
    return df["stream"].ne(-1) & df["cat"].isin([sym.get(c, -1000) for c in KERNEL_CATS])


def _one_stream(t, rank: int) -> tuple[float, float]:
    """The rank's device activities merged into busy intervals on one stream (in place); the span (µs)."""
    import pandas as pd

    df = t.traces[rank]
    act = _is_activity(t, df)
    k = df[act].sort_values(["ts", "index"], kind="stable")
    heads, ends = [], []
    hi = None
    for idx, ts, end in zip(k.index, k["ts"], k["ts"] + k["dur"]):
        if hi is None or ts > hi:
            heads.append(idx)
            ends.append(end)
            hi = end
        elif end > hi:
            hi = ends[-1] = end
    rows = df.loc[heads].copy()
    rows["dur"] = [e - s for s, e in zip(rows["ts"], ends)]
    rows["end"] = ends
    rows["stream"] = 1
    t.traces[rank] = pd.concat([df[~act], rows])
    return (float(k["ts"].min()), float(max(ends))) if heads else (0.0, 0.0)


def _breakdown(t, rank: int) -> dict[str, float]:
    """HTA's idle time breakdown of the rank, summed over its streams, in seconds."""
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis

    df, _ = BreakdownAnalysis.get_idle_time_breakdown(t, 30, rank, None, visualize=False)
    out = dict.fromkeys(CATEGORIES, 0.0)
    for cat, v in zip(df["idle_category"], df["idle_time"]):
        out[cat] += float(v) * US
    return out


def figures(path: Path) -> dict:
    """The trace's device-timeline breakdown by HTA's rules (the compared one) and HTA's own default."""
    import hta

    out: dict = {"hta": getattr(hta, "__version__", "") or _version()}
    t = _load(path, whole=True)
    rank = t.get_ranks()[0]
    if not _is_activity(t, t.traces[rank]).any():
        return {**out, "span_s": 0.0, "device": dict.fromkeys(CATEGORIES, 0.0), "hta_default": None}
    lo, hi = _one_stream(t, rank)
    out["span_s"] = (hi - lo) * US
    out["device"] = _breakdown(t, rank)
    try:
        d = _load(path, whole=False)
        out["hta_default"] = _breakdown(d, d.get_ranks()[0])
    except (KeyError, ValueError, IndexError) as exc:  # HTA's own defaults fail on some traces
        out["hta_default"] = f"HTA failed: {type(exc).__name__}: {exc}"
    return out


def _version() -> str:
    from importlib.metadata import version

    return version("HolisticTraceAnalysis")


def record(names: list[str], figures_of: Callable[[Path], dict] = figures,
           head: dict | None = None) -> int:
    """Each trace's `figures_of` as JSON on stdout, under `head` (the options they were taken with)."""
    logging.disable(logging.WARNING)
    doc = {**(head if head is not None else {"consecutive_kernel_delay_us": 30}), "traces": {}}
    for name in names or TRACES:
        doc["traces"][name] = figures_of(DATA / name)
        print(f"{name}: {doc['traces'][name]}", file=sys.stderr)
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


def rooftop_split(path: Path) -> tuple[float, dict[str, float]]:
    """rooftop's span and idle time by HTA's category (seconds)."""
    from rooftop.models.trace.timeline import idle_causes
    from rooftop.store.tracefile import load_trace

    t = load_trace(path)
    out = dict.fromkeys(CATEGORIES, 0.0)
    for c in idle_causes(t):
        out[c.category.replace(" ", "_")] += c.time_s
    return (t.span_s if t.kernels and not t.range_times else 0.0), out  # HTA's idle time reads no counter range


def table() -> int:
    doc = json.loads((DATA / "hta-idle.json").read_text())
    print("| trace | span ms | HTA host / kernel / other ms | rooftop host / kernel / other ms | worst Δ, % of span |")
    print("|---|---:|---:|---:|---:|")
    for name, f in doc["traces"].items():
        span, mine = rooftop_split(DATA / name)
        theirs = f["device"]
        worst = max(abs(mine[c] - theirs[c]) for c in CATEGORIES) / span if span else 0.0
        ms = " / ".join
        print(f"| {Path(name).name} | {span * 1e3:.3f} | {ms(f'{theirs[c] * 1e3:.3f}' for c in CATEGORIES)} | "
              f"{ms(f'{mine[c] * 1e3:.3f}' for c in CATEGORIES)} | {100 * worst:.3f} |")
    return 0


def main(argv: list[str], record: Callable[[list[str]], int] = record, table: Callable[[], int] = table,
         kept: str = "hta-idle.json") -> int:
    if argv[:1] == ["record"]:
        return record(argv[1:])
    if argv == ["table"]:
        return table()
    script = f"hta_{kept.split('-')[1].split('.')[0]}.py"
    print(f"usage: {script} record [TRACE …] > tests/data/{kept} | {script} table", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
