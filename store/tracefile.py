"""Reading a trace file (.json or .json.gz) for `rooftop.models.trace`: the I/O and its errors, in one line.

The file is decoded by msgspec straight into the typed events of
`rooftop.models.trace` (only the fields rooftop reads; the rest is skipped
without building Python objects), which is what keeps a multi-million-event
trace within a fraction of `json.load`'s time and memory. A file that is not
strict JSON of that shape (an event that is not an object, `NaN` or
`Infinity` where a number belongs) is read again leniently, event by event,
so the bad events are skipped and counted instead of failing the whole file.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import msgspec
from rooftop.models.trace import EmptyTrace, Trace, TraceDoc, TraceError, parse_trace

_DECODER = msgspec.json.Decoder(TraceDoc | list[msgspec.Raw])
MAX_DEPTH = "the JSON nests arrays or objects too deeply to be a trace (over about 1000 levels)"


def read_bytes(p: Path) -> bytes:
    """The file's bytes, gunzipped where it is gzip."""
    with p.open("rb", buffering=0) as f:  # unbuffered: the bytes are read once, into one object
        head = f.read(2)
        f.seek(0)
        if head != b"\x1f\x8b":
            return f.readall()
    with gzip.open(p, "rb") as g:
        return g.read()


BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, as some Windows editors write one


def decode(buf: bytes | memoryview) -> TraceDoc | object:
    """The trace's events, typed; plain JSON (lenient: NaN, Infinity) where the strict typed decode refuses it.
    A leading byte-order mark is skipped."""
    if buf[:3] == BOM:
        buf = memoryview(buf)[3:]  # a view: a large trace is not copied
    try:
        doc = _DECODER.decode(buf)
        return TraceDoc(traceEvents=doc) if isinstance(doc, list) else doc
    except RecursionError:
        raise TraceError(MAX_DEPTH) from None
    except msgspec.ValidationError:
        pass  # valid JSON of another shape (traceEvents is not a list): the reader says what it is
    except msgspec.DecodeError:
        pass  # not strict JSON: try Python's reader, which takes NaN and Infinity
    try:
        return msgspec.json.decode(buf)
    except RecursionError:
        raise TraceError(MAX_DEPTH) from None
    except msgspec.DecodeError:
        pass
    try:
        text = bytes(buf).decode("utf-8")
    except UnicodeDecodeError:
        raise TraceError("not a trace (not UTF-8 text; expected Chrome trace JSON, .json or .json.gz)") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise TraceError(MAX_DEPTH) from None
    except json.JSONDecodeError as exc:
        raise TraceError(json_problem(exc, text)) from None


def json_problem(exc: json.JSONDecodeError, text: str) -> str:
    """What is wrong with the JSON, in a line: a file that ends mid-value looks truncated (cut while it was
    written or copied); otherwise the parser's words and where."""
    if exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()):
        return (f"looks truncated: the JSON ends mid-way (at line {exc.lineno}, column {exc.colno}); "
                "was the file cut while it was written or copied?")
    where = f"line {exc.lineno}, column {exc.colno}"
    said = f"{exc.msg} {where}" if exc.msg.endswith(" at") else f"{exc.msg} at {where}"
    return f"not a trace (not JSON: {said}); expected a Chrome trace, .json or .json.gz"


def load_trace(path: str | Path) -> Trace:
    """The trace in `path`; TraceError naming the file and what is wrong with it."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: no such file (give a torch.profiler Chrome trace, .json or .json.gz)")
    try:
        buf = read_bytes(p)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{p}: a truncated or damaged gzip file ({exc})") from None
    except OSError as exc:
        raise TraceError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    try:
        doc = decode(buf)
        del buf
        trace = parse_trace(doc)
    except TraceError as exc:
        raise TraceError(f"{p}: {exc}") from None
    except RecursionError:
        raise TraceError(f"{p}: {MAX_DEPTH}") from None
    if not trace.kernels and not trace.ops:
        raise EmptyTrace(f"{p}: the trace holds no kernels and no CPU ops (was the program using torch, and "
                         "the profiler recording CPU and CUDA activities?)")
    return trace
