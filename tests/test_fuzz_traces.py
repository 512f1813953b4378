"""A fuzzer of traces: a real Kineto trace (MI250, 220 events) with hostile values put into its events' fields.
`rooftop profile --trace` must answer (exit 0, with no NaN or infinity in its JSON and no negative time), or
refuse in one line (exit 2): never a traceback or an internal error (exit 1)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from inprocess import run_main

MI250 = Path(__file__).parent / "data" / "real-traces" / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
DOC = json.loads(gzip.decompress(MI250.read_bytes()))
CATS = ("cpu_op", "kernel", "cuda_runtime", "gpu_memcpy", "ac2g", "user_annotation", None)
FIELDS = ("ts", "dur", "name", "ph", "pid", "tid", "id", "args/Input Dims", "args/Input type", "args/External id",
          "args/correlation", "args/Concrete Inputs", "args/device", "args/stream", "args/bytes")
HOSTILE = st.one_of(
    st.sampled_from([None, True, "", "a", "\x1b]0;x\x07", [], {}, [[]], [["a"]], [[-1, 4]], [[2**70]], [[[1, 2]]],
                     0, -1, -1e9, 2**63, 2**70, 1e308, -1e308, float("inf"), float("-inf"), float("nan")]),
    st.integers(min_value=-2**64, max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(min_value=-5, max_value=1 << 40), max_size=4).map(lambda x: [x]),
)


def _events(cat: str | None) -> list[int]:
    return [i for i, e in enumerate(DOC["traceEvents"]) if e.get("cat") == cat]


def _put(doc: dict, cat: str | None, nth: int, field: str, value: object) -> None:
    idx = _events(cat)
    e = doc["traceEvents"][idx[nth % len(idx)]]
    if field.startswith("args/"):
        args = e.setdefault("args", {})
        if isinstance(args, dict):
            args[field[5:]] = value
    else:
        e[field] = value


def _no_nonsense(x: object) -> bool:
    """No NaN or infinity anywhere, and no negative time (a key ending in _s)."""
    if isinstance(x, dict):
        return all(_no_nonsense(v) and not (k.endswith("_s") and isinstance(v, (int, float)) and v < 0)
                   for k, v in x.items())
    if isinstance(x, list):
        return all(_no_nonsense(v) for v in x)
    return not (isinstance(x, float) and not math.isfinite(x))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(CATS), st.integers(0, 80), st.sampled_from(FIELDS), HOSTILE),
                      min_size=1, max_size=3))
@example(edits=[("kernel", 0, "dur", -300.0)])  # negative durations once printed as -67% and -300 µs
@example(edits=[("kernel", 0, "dur", float("nan"))])  # NaN times once printed nan%
@example(edits=[("cpu_op", 3, "args/Input Dims", [[-3, 4]])])  # negative dims once gave I inf
@example(edits=[("kernel", 1, "args/External id", float("inf"))])  # Infinity as an id: OverflowError
@example(edits=[("cpu_op", 5, "args/Input Dims", [[2**70]])])  # a dim past 64 bits
def test_hostile_trace_values_answer_or_exit_2_in_one_line(tmp_path_factory, edits) -> None:
    doc = json.loads(json.dumps(DOC))
    for cat, nth, field, value in edits:
        _put(doc, cat, nth, field, value)
    p = tmp_path_factory.mktemp("fuzz") / "trace.json"
    p.write_text(json.dumps(doc))  # Python writes NaN / Infinity for non-finite floats, as a fuzzer's file has
    out = run_main("profile", "--trace", str(p), "--json", "--no-save", "-d", "mi210")
    assert "Traceback" not in out.stderr and out.returncode in (0, 2), (edits, out.returncode, out.stderr[-500:])
    if out.returncode == 2:
        lines = [x for x in out.stderr.splitlines() if x.startswith("rooftop")]
        assert lines and lines[-1].startswith("rooftop profile: error:"), out.stderr
        return
    doc_out = json.loads(out.stdout)
    assert _no_nonsense(doc_out), edits
