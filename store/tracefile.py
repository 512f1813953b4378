"""Reading a trace file (.json or .json.gz) for `rooftop.models.trace.read`: the I/O and its errors, in one line.

The file's text is streamed, never held whole: it is read (gunzipped) 64 KiB
at a time, the traceEvents array is cut between two of its events, and each
piece is decoded by msgspec straight into the typed events of
`rooftop.models.trace.read` (only the fields rooftop reads; the rest is skipped
without building Python objects), which the reader consumes before the next
piece is read. That is what keeps a multi-million-event trace within a fraction
of `json.load`'s time and memory. A file that is not strict JSON of that shape
(`NaN` or `Infinity` where a number belongs, a cut file, another top level) is
read again whole, as before: leniently, so the bad events are skipped and
counted, or refused in one line saying what is wrong and where.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, cast

import msgspec
from rooftop.models.counters import RANGE_CAT
from rooftop.models.trace.read import Event, EmptyTrace, EventChunks, Trace, TraceDoc, TraceError, parse_trace

_DECODER = msgspec.json.Decoder(TraceDoc | list[msgspec.Raw])
MAX_DEPTH = "the JSON nests arrays or objects too deeply to be a trace (over about 1000 levels)"
CHUNK = 1 << 16  # the decompressed text read and decoded at a time: 64 KiB, about 200 events (in the caches)
HELD = 1 << 26  # text held while no cut between events is found (a 64 MiB event, or text that is not strict JSON)
CUTS = 16  # cut points tried from a piece's end before more text is read


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


# -- the stream -------------------------------------------------------------------------------------


class Unstreamable(Exception):
    """The text is not strict JSON of a trace's shape where the stream cuts it: the file is to be read whole
    (leniently, or refused with the exact problem and where it is)."""


class _EventsDoc(TraceDoc, gc=False):
    """The last piece of the text, framed as a top level again: its events and the fields after them."""

    traceEvents: list[Event] | None = None  # type: ignore[assignment]  # decoded whole here, Raw in the head


_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\n\r]*:[ \t\n\r]*\[')
_SPACE = re.compile(rb"[ \t\n\r]*")
_COMMA = re.compile(rb"[ \t\n\r]*,")
_HEAD = msgspec.json.Decoder(TraceDoc)
_LAST = msgspec.json.Decoder(_EventsDoc)
_EVENTS = msgspec.json.Decoder(list[Event])
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_DOC_FRAME = b'{"traceEvents":['
_RANGE_BYTES = RANGE_CAT.encode()


def event_stream(f: BinaryIO, chunk: int = CHUNK) -> EventChunks:
    """The events of the trace text `f` yields (a binary file, read `chunk` bytes at a time), decoded a piece at
    a time as they are consumed, and its top-level fields. Raises Unstreamable (now, or as the pieces are
    consumed) where the text is not strict JSON of a trace's shape."""
    buf = f.read(chunk)
    if buf[:3] == BOM:
        buf = buf[3:]
    at = _SPACE.match(buf).end()  # type: ignore[union-attr]  # [ \t\n\r]* matches anywhere
    if buf[at:at + 1] == b"[":  # the bare event list
        return EventChunks(_pieces(f, buf[at + 1:], None, chunk), {})
    if buf[at:at + 1] != b"{":
        raise Unstreamable
    while (key := _EVENTS_KEY.search(buf)) is None:  # the fields before the events are held
        more = f.read(chunk)
        if not more or len(buf) > HELD:
            raise Unstreamable
        buf += more
    try:  # the fields before the events, with an empty event list: valid only where the key is the top level's
        head = _HEAD.decode(buf[:key.end()] + b"]}")
    except (msgspec.DecodeError, RecursionError):
        raise Unstreamable from None
    if head.traceEvents != []:
        raise Unstreamable
    meta = head.fields()
    return EventChunks(_pieces(f, buf[key.end():], meta, chunk), meta)


def _pieces(f: BinaryIO, body: bytes, meta: dict | None, chunk: int) -> Iterator[list]:
    """The events of `body` (the text after the event list's `[`) and what `f` still holds, a piece of about
    `chunk` bytes at a time; the fields after the events go into `meta` once the text ends (None: the text is
    the bare event list)."""
    ended = False
    while True:
        while not ended and len(body) < chunk:
            more = f.read(chunk)
            ended = not more
            body += more
        if ended:
            yield _last(body, meta)
            return
        cut = _cut(body)
        if cut is None:  # no cut between events yet: an event longer than the piece, or text that is not JSON
            if len(body) > HELD:
                raise Unstreamable
            more = f.read(chunk)
            ended = not more
            body += more
            continue
        body = body[cut[1]:]
        yield cut[0]
        cut = None  # consumed: freed before the next piece is decoded


def _cut(body: bytes) -> tuple[list, int] | None:
    """The events of `body` up to the last point between two of them, and where the rest begins; None where no
    cut is found. A cut is tried after a `}` that a comma follows: it is one between events when the text up to
    it decodes as a list (inside an event, or inside a string, it leaves a bracket open)."""
    end = len(body)
    for _ in range(CUTS):
        j = body.rfind(b"}", 0, end)
        while j >= 0 and (comma := _COMMA.match(body, j + 1)) is None:
            j = body.rfind(b"}", 0, j)
        if j < 0:
            return None
        events = _events(b"".join((b"[", memoryview(body)[:j + 1], b"]")))
        if events is not None:
            return events, comma.end()  # type: ignore[union-attr]  # j >= 0: the loop stopped on a match
        end = j
    return None


def _events(text: bytes) -> list | None:
    """A JSON list of events, typed; raw where one of them is not an event object (the reader counts it), or
    where the piece holds counter ranges (their counters are args no typed event keeps: the reader reads them
    again from the raw event); None where the text is not strict JSON."""
    if _RANGE_BYTES not in text:
        try:
            return _EVENTS.decode(text)
        except msgspec.ValidationError:
            pass
        except (msgspec.DecodeError, RecursionError):
            return None
    try:
        return _RAWS.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None


def _last(body: bytes, meta: dict | None) -> list:
    """The last piece: its events, and the top-level fields after them put into `meta`."""
    if meta is None:
        events = _events(b"[" + body)
        if events is None:
            raise Unstreamable
        return events
    text = _DOC_FRAME + body
    try:  # raw events where the piece holds counter ranges, as in _events
        doc = _LAST.decode(text) if _RANGE_BYTES not in body else _HEAD.decode(text)
    except msgspec.ValidationError:
        try:
            doc = _HEAD.decode(text)
        except (msgspec.DecodeError, RecursionError):
            raise Unstreamable from None
    except (msgspec.DecodeError, RecursionError):
        raise Unstreamable from None
    meta.update((k, v) for k, v in doc.fields().items() if v is not None)
    return doc.traceEvents or []


ReadProgress = Callable[[int, int], None]  # (bytes of the file read so far, the file's size): on each read


class _Counted:
    """A file on disk read through, its bytes counted for a progress display: the file's own bytes (a .gz
    file's compressed ones), so the count ends at the size `stat` gives whatever the text inflates to."""

    def __init__(self, f: BinaryIO, size: int, progress: ReadProgress) -> None:
        self.f, self.size, self.done, self.progress = f, size, 0, progress

    def read(self, n: int = -1) -> bytes:
        got = self.f.read(n)
        self.done += len(got)
        self.progress(self.done, self.size)
        return got


@contextmanager
def _opened(p: Path, progress: ReadProgress | None) -> Iterator[BinaryIO]:
    """The file's text (gunzipped where it is gzip), its bytes counted into `progress` where one is given; the
    file is closed after (GzipFile closes only what it opened itself)."""
    with p.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
        f.seek(0)
        raw = cast(BinaryIO, _Counted(f, os.fstat(f.fileno()).st_size, progress)) if progress else f
        if not gz:
            yield raw
            return
        with gzip.GzipFile(fileobj=raw, mode="rb") as g:
            yield cast(BinaryIO, g)


def stream_trace(f: BinaryIO, chunk: int = CHUNK) -> Trace:
    """The trace in the text `f` yields, read a piece at a time; Unstreamable where it is not strict JSON of a
    trace's shape (`load_trace` then reads the file whole)."""
    return parse_trace(event_stream(f, chunk))


def load_trace(path: str | Path, progress: ReadProgress | None = None) -> Trace:
    """The trace in `path`; TraceError naming the file and what is wrong with it. `progress` is told the bytes
    read as the file is read (a file that is not strict JSON is read again whole, and told so once)."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: no such file (give a torch.profiler Chrome trace, .json or .json.gz)")
    try:
        try:
            with _opened(p, progress) as f:
                trace = stream_trace(f, CHUNK)
        except Unstreamable:  # not strict JSON of a trace's shape: read whole, leniently, or refused in a line
            buf = read_bytes(p)
            if progress:  # read whole: all of it at once
                size = p.stat().st_size
                progress(size, size)
            doc = decode(buf)
            del buf
            trace = parse_trace(doc)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{p}: a truncated or damaged gzip file ({exc})") from None
    except OSError as exc:
        raise TraceError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    except TraceError as exc:
        raise TraceError(f"{p}: {exc}") from None
    except RecursionError:
        raise TraceError(f"{p}: {MAX_DEPTH}") from None
    if not trace.kernels and not trace.ops:
        raise EmptyTrace(f"{p}: the trace holds no kernels and no CPU ops (was the program using torch, and "
                         "the profiler recording CPU and CUDA activities?)")
    return trace
