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
