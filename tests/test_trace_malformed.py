"""Malformed traces (the failing cases of a fuzz run) never crash `rooftop profile --trace`: each exits 2 with
one line saying what is wrong, or the bad event is skipped (or its shapes dropped) with one counted warning."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from rooftop.tui.cli import main

MI250 = Path(__file__).parent / "data" / "real-traces" / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def _doc() -> dict:
    return json.loads(gzip.decompress(MI250.read_bytes()))


def _run(capsys, path: Path) -> tuple[int, dict | None, str]:
    rc = main(["profile", "--trace", str(path), "--json", "--no-save", "-d", "mi210"])
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    return rc, (json.loads(cap.out) if rc == 0 else None), cap.err


def _first(doc: dict, cat: str) -> dict:
    return next(e for e in doc["traceEvents"] if e.get("cat") == cat)


def _one_warning(doc: dict, words: str) -> str:
    [w] = [n for n in doc["notes"] if words in n]
    assert w.startswith("1 event ")
    return w


def test_infinity_as_an_external_id_is_counted_and_not_linked(tmp_path, capsys):
    doc = _doc()
    k = _first(doc, "kernel")
    k["args"]["External id"] = float("inf")
    p = tmp_path / "inf.json"
    p.write_text(json.dumps(doc))  # Python writes Infinity: not JSON, but what a fuzzer (and json.dump) makes
    assert "Infinity" in p.read_text()
    rc, out, _ = _run(capsys, p)
    assert rc == 0
    assert "External id that is not an integer" in _one_warning(out, "External id")
    assert out["summary"]["kernels"] == 14  # the kernel stays: linked through its launch's correlation


@pytest.mark.parametrize("dims", [[["a"]], [[[[1, 2]]]], [[-3, 4]], [[True]]],
                         ids=["text", "nested-list", "negative", "bool"])
def test_bad_input_dims_drop_the_shapes_and_keep_the_time(tmp_path, capsys, dims):
    doc = _doc()
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm")
    op["args"]["Input Dims"] = dims
    p = tmp_path / "dims.json"
    p.write_text(json.dumps(doc))
    rc, out, _ = _run(capsys, p)
    assert rc == 0
    w = _one_warning(out, "shapes")
    assert "aten::addmm" in w and "time kept" in w
    assert out["summary"]["kernels"] == 14


def test_json_nested_2000_deep_is_refused_in_one_line(tmp_path, capsys):
    doc = _doc()
    text = json.dumps(doc)
    deep = "[" * 2000 + "]" * 2000
    p = tmp_path / "deep.json"
    p.write_text(text.replace('"Ev Idx": 0', f'"Ev Idx": 0, "deep": {deep}', 1))
    rc, _, err = _run(capsys, p)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "nests" in err and "deep.json" in err


@pytest.mark.parametrize("what", ["negative", "nan", "text"])
def test_bad_times_skip_the_event_with_one_counted_warning(tmp_path, capsys, what):
    doc = _doc()
    k = _first(doc, "kernel")
    k["dur"] = {"negative": -5.0, "nan": float("nan"), "text": "soon"}[what]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    rc, out, _ = _run(capsys, p)
    assert rc == 0
    w = _one_warning(out, "skipped: a time")
    assert "event" in w and k["name"][:20] in w
    assert out["summary"]["kernels"] == 13


def test_an_event_that_is_not_an_object_is_skipped_and_counted(tmp_path, capsys):
    doc = _doc()
    doc["traceEvents"].insert(3, 42)
    doc["traceEvents"][5]["args"] = "no args"
    p = tmp_path / "odd.json"
    p.write_text(json.dumps(doc))
    rc, out, _ = _run(capsys, p)
    assert rc == 0
    [w] = [n for n in out["notes"] if "not a JSON object" in n]
    assert w.startswith("2 events ")


def test_a_trace_with_no_kernels_but_gpu_calls_is_busy_0_not_its_cpu_time(tmp_path, capsys):
    doc = _doc()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    p = tmp_path / "nokernels.json"
    p.write_text(json.dumps(doc))
    rc, out, _ = _run(capsys, p)
    assert rc == 0
    s = out["summary"]
    assert s["on_device"] and s["kernels"] == 0 and s["device_busy_s"] == 0
    assert any("records no kernels" in n for n in out["notes"])


QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"


def _qwen() -> dict:
    return json.loads(gzip.decompress(QWEN.read_bytes()))


def _h200(capsys, path: Path) -> dict:
    assert main(["profile", "--trace", str(path), "--json", "--no-save", "-d", "h200"]) == 0
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    return json.loads(cap.out)


def _device_span_s(events: list[dict]) -> float:
    dev = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return (max(e["ts"] + e["dur"] for e in dev) - min(e["ts"] for e in dev)) * 1e-6


@pytest.mark.parametrize("scale", [1000, 1e-3], ids=["years-after", "years-before"])
def test_one_kernel_with_a_wrong_timestamp_is_skipped_not_the_span(tmp_path, capsys, scale):
    doc = _qwen()
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[5]["ts"] *= scale
    p = tmp_path / "far.json"
    p.write_text(json.dumps(doc))
    out = _h200(capsys, p)
    rest = [e for e in doc["traceEvents"] if e is not kernels[5]]
    assert out["summary"]["span_s"] == pytest.approx(_device_span_s(rest))
    assert out["summary"]["kernels"] == len(kernels) - 1
    w = _one_warning(out, "far outside the rest")
    assert kernels[5]["name"][:20] in w


def test_a_long_gap_the_cpu_recorded_is_kept(tmp_path, capsys):
    doc = _qwen()
    ev = doc["traceEvents"]
    mid = sorted(e["ts"] for e in ev if e.get("cat") == "kernel")[1000]
    for e in ev:
        if isinstance(e.get("ts"), (int, float)) and e["ts"] > mid:
            e["ts"] += 2e9  # 2000 s later: far beyond 100× the trace's span
    top = min((e for e in ev if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    top["dur"] = mid - top["ts"] + 2e9 + 1  # an op the CPU was in all along: a stall, not a wrong stamp
    p = tmp_path / "stall.json"
    p.write_text(json.dumps(doc))
    out = _h200(capsys, p)
    assert out["summary"]["kernels"] == sum(e.get("cat") == "kernel" for e in ev)
    assert out["summary"]["span_s"] == pytest.approx(_device_span_s(ev)) and out["summary"]["span_s"] > 2000
    assert not [n for n in out["notes"] if "far outside" in n]


def test_events_recorded_twice_count_once(tmp_path, capsys):
    doc = _doc()
    _, once, _ = _run(capsys, MI250)
    doc["traceEvents"] = doc["traceEvents"] + json.loads(json.dumps(doc["traceEvents"]))
    p = tmp_path / "doubled.json"
    p.write_text(json.dumps(doc))
    _, twice, _ = _run(capsys, p)
    [note] = twice.pop("notes")
    assert "an exact copy of another event (recorded twice" in note
    n = sum(e.get("cat") in ("kernel", "cpu_op", "gpu_memcpy", "gpu_memset") for e in doc["traceEvents"]) // 2
    assert note.startswith(f"{n} events ")
    assert once.pop("notes") == [] and twice == once  # every op group, time and rate as in the trace recorded once


@pytest.mark.parametrize("cat", [[], {"a": 1}], ids=["list", "object"])
def test_a_flow_event_whose_category_is_not_text_is_skipped(tmp_path, capsys, cat):
    doc = _doc()
    flow = next(e for e in doc["traceEvents"] if e.get("ph") in ("s", "f"))
    flow["cat"] = cat  # was a crash: a list or object cannot be looked up among the flow categories
    p = tmp_path / "cat.json"
    p.write_text(json.dumps(doc))
    rc, out, _ = _run(capsys, p)
    assert rc == 0 and out["summary"]["kernels"] == 14
