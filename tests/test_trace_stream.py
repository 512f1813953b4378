"""The trace reader streams a file: it never holds the whole decompressed text, and reads what reading it whole
reads (the same Trace, to the last field), whatever the layout: Kineto's, json.dumps', args first with objects
inside, the bare event list, fields after the events, a byte-order mark, an event longer than a piece. Text that
is not strict JSON is read whole, as before (leniently, or refused in one line)."""

from __future__ import annotations

import gc
import gzip
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from rooftop.models.trace.read import TraceError, parse_trace
from rooftop.store import tracefile
from rooftop.store.tracefile import decode, load_trace, read_bytes

DATA = Path(__file__).parent / "data"
QWEN = DATA / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
MI250 = DATA / "real-traces" / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
PIECE = 1 << 12  # the piece the reader is given in these tests: a 4 KiB one, so a small trace is read in many


def _whole(p: Path):  # the file read whole: what the reader did before it streamed
    return parse_trace(decode(read_bytes(p)))


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(tracefile, "CHUNK", PIECE, raising=False)


class Reads:
    """A file of generated trace text, made as it is read (never whole), recording the largest read asked for."""

    def __init__(self, parts: Iterator[bytes]) -> None:
        self.parts, self.held, self.largest, self.size = parts, b"", 0, 0

    def read(self, n: int = -1) -> bytes:
        assert n > 0, "the reader asked for the whole text"
        self.largest = max(self.largest, n)
        while len(self.held) < n and (part := next(self.parts, None)) is not None:
            self.held += part
        out, self.held = self.held[:n], self.held[n:]
        self.size += len(out)
        return out


def _generated(events: int) -> Iterator[bytes]:
    """A trace's text: device properties, one op and its kernel, then `events` events rooftop skips (Python
    functions), then the fields Kineto writes after its events."""
    yield b'{"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200", "numSms": 132}], "traceEvents": [\n'
    yield (b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 50.0, '
           b'"args": {"External id": 7, "Input Dims": [[8, 16], [16, 4]], "Input type": ["float", "float"]}},\n'
           b'{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30.0, "dur": 5.0, '
           b'"args": {"External id": 7, "correlation": 3, "device": 0, "stream": 7}}')
    for i in range(events):
        yield (b',\n{"ph": "X", "cat": "python_function", "name": "f%d", "pid": 1, "tid": 1, "ts": %d.5, '
               b'"dur": 1.0, "args": {"Python id": %d, "Python parent id": {"nested": [1, {"x": 2}]}}}' % (i, i, i))
    yield b'\n], "baseTimeNanoseconds": 1700000000000000000, "traceName": "gen"}\n'


def test_the_reader_never_holds_the_whole_text():
    f = Reads(_generated(20_000))
    tracemalloc.start()
    try:
        trace = tracefile.stream_trace(f, PIECE)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f.size > 500 * PIECE  # 3 MiB of text, in hundreds of pieces
    assert peak < 16 * PIECE, peak  # what it held at most: a few pieces and their events, not the text
    assert f.largest <= PIECE
    assert trace.kernel_count == 1 and [o.name for o in trace.ops] == ["aten::mm"]
    assert trace.device_name == "NVIDIA H200" and trace.wall_base_us == 1.7e15  # fields before and after the events


@pytest.mark.parametrize("gz", [False, True], ids=["json", "gz"])
def test_a_large_file_is_read_in_pieces(tmp_path, small_pieces, gz):
    text = b"".join(_generated(20_000))
    p = tmp_path / ("big.json.gz" if gz else "big.json")
    p.write_bytes(gzip.compress(text, 1) if gz else text)
    tracemalloc.start()
    try:
        trace = load_trace(p)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(text) / 8, (peak, len(text))  # reading it whole held the text and a view of each event
    assert trace == _whole(p)


def _layouts(doc: dict) -> dict[str, bytes]:
    events = doc["traceEvents"]
    args_first = [{"args": {**e["args"], "nested": {"a": {"b": [1, {"c": 2}]}}}, **e} if "args" in e else e
                  for e in events]
    rest = {k: v for k, v in doc.items() if k != "traceEvents"}
    return {
        "compact": json.dumps(doc, separators=(",", ":")).encode(),
        "dumps": json.dumps(doc).encode(),
        "indented": json.dumps(doc, indent=2).encode(),
        "args-first": json.dumps({"traceEvents": args_first, **rest}).encode(),
        "fields-after": json.dumps({"traceEvents": events, **rest}).encode(),
        "bare-list": json.dumps(events).encode(),
        "bom": b"\xef\xbb\xbf" + json.dumps(doc).encode(),
        "long-event": json.dumps({**doc, "traceEvents": [
            {**events[0], "args": {**events[0].get("args", {}), "blob": "x" * (3 * PIECE)}}, *events[1:]]}).encode(),
    }


def test_streamed_as_read_whole_in_every_layout(tmp_path, small_pieces):
    kineto = gzip.decompress(MI250.read_bytes())
    layouts = {"kineto": kineto, "kineto-h200": gzip.decompress(QWEN.read_bytes()), **_layouts(json.loads(kineto))}
    for name, text in layouts.items():
        p = tmp_path / f"{name}.json"
        p.write_bytes(text)
        assert load_trace(p) == _whole(p), name


def test_text_that_is_not_strict_json_is_read_whole_leniently(tmp_path, small_pieces):
    doc = json.loads(gzip.decompress(MI250.read_bytes()))
    k = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"][8]
    k["dur"] = float("nan")  # json.dumps writes NaN: a piece in the middle of the file is not strict JSON
    p = tmp_path / "nan.json"
    p.write_text(json.dumps(doc))
    trace = load_trace(p)
    assert trace == _whole(p)
    assert any("skipped: a time" in w for w in trace.warnings)


@pytest.mark.parametrize("keep", [0.3, 0.999], ids=["early", "near-the-end"])
def test_a_large_cut_file_says_it_looks_truncated(tmp_path, small_pieces, keep):
    text = gzip.decompress(MI250.read_bytes())
    p = tmp_path / "cut.json"
    p.write_bytes(text[: int(len(text) * keep)])
    with pytest.raises(TraceError, match="looks truncated: the JSON ends mid-way"):
        load_trace(p)


def test_a_read_trace_is_left_to_the_oldest_generation():
    trace = load_trace(QWEN)  # its million small objects are not walked again by each young collection
    young = {id(o) for g in (0, 1) for o in gc.get_objects(generation=g)}
    assert trace.ops and trace.kernels
    assert id(trace.ops[0]) not in young and id(trace.kernels[-1]) not in young and id(trace) not in young
