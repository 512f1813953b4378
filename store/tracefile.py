"""Reading a trace file (.json or .json.gz) for `rooftop.models.trace`: the I/O and its errors, in one line."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

from rooftop.models.trace import EmptyTrace, Trace, TraceError, parse_trace


def load_trace(path: str | Path) -> Trace:
    """The trace in `path`; TraceError naming the file and what is wrong with it."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: no such file (give a torch.profiler Chrome trace, .json or .json.gz)")
    try:
        with p.open("rb") as f:
            head = f.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(p, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{p}: a truncated or damaged gzip file ({exc})") from None
    except UnicodeDecodeError:
        raise TraceError(f"{p}: not a trace (not UTF-8 text; expected Chrome trace JSON, .json or .json.gz)") from None
    except json.JSONDecodeError as exc:
        raise TraceError(f"{p}: not a trace (not JSON: {exc.msg} at line {exc.lineno}); "
                         "expected a Chrome trace, .json or .json.gz") from None
    try:
        trace = parse_trace(data)
    except TraceError as exc:
        raise TraceError(f"{p}: {exc}") from None
    if not trace.kernels and not trace.ops:
        raise EmptyTrace(f"{p}: the trace holds no kernels and no CPU ops (was the program using torch, and "
                         "the profiler recording CPU and CUDA activities?)")
    return trace
