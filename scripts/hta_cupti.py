"""Holistic Trace Analysis's per-op CUPTI counters of the range-profiler test trace, kept as tests/data/hta-cupti.json.

rooftop pairs each `cuda_profiler_range` event with its kernel launch and op as HTA does; the default suite
checks its counted W per op group against the figures this script writes, so it needs no HTA. Re-run it in a
venv of its own (HTA pins jupyterlab; it is not needed):

    python3 -m venv /tmp/hta && /tmp/hta/bin/pip install "pandas<3" numpy networkx plotly pydot psutil pyyaml ijson
    /tmp/hta/bin/pip install --no-deps HolisticTraceAnalysis==0.5.0
    /tmp/hta/bin/python scripts/hta_cupti.py > tests/data/hta-cupti.json

HTA's `get_cupti_counter_data_with_operators` gives each range its launch's op stack; W per range is HTA's own
weighting of the FP instruction counters (`CUDA_SASS_INSTRUCTION_COUNTER_FLOPS`: an FMA 2 FLOP, the rest 1),
summed by the bottom-level op (the innermost, which owns the kernel in rooftop too).
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
TRACE = "real-traces/more/cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz"  # relative to tests/data


def figures(path: Path) -> dict:
    from importlib.metadata import version

    from hta.analyzers.cupti_counter_analysis import CUDA_SASS_INSTRUCTION_COUNTER_FLOPS
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory(prefix="hta-cupti-") as folder:  # HTA reads a folder of one job's ranks
        (Path(folder) / path.name).symlink_to(path.resolve())
        df = TraceAnalysis(trace_dir=folder).get_cupti_counter_data_with_operators(ranks=[0])[0]
    df["flops"] = sum(df[k] * w for k, w in CUDA_SASS_INSTRUCTION_COUNTER_FLOPS.items())
    ops = {op: {"kernels": int(len(g)), "flops": float(g["flops"].sum())} for op, g in df.groupby("bottom_level_op")}
    return {"hta": version("HolisticTraceAnalysis"), "trace": TRACE, "ranges": int(len(df)), "ops": ops}


def main() -> int:
    logging.disable(logging.WARNING)
    json.dump(figures(DATA / TRACE), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
