"""`rooftop profile --trace` on real Kineto traces of other people's GPU jobs (A100, MI250, H200; 2023–2026).

Each property is checked against the raw JSON, computed here independently of rooftop's reader: the kernel
count, busy time as the union of kernel / memcpy / memset intervals, the shares, the attribution of kernels to
ops, the device family, and the GEMM FLOPs as 2·M·N·K over aten::mm / addmm / bmm.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers.rawtrace import union
from rooftop.tui.cli import main

DATA = Path(__file__).parent / "data"
REAL = DATA / "real-traces"
TRACES = sorted(REAL.glob("*.json.gz")) + [DATA / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"]
# the family each trace's own device is placed on; None: the trace names no device
FAMILY = {
    "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz": "mi210",
    "nccl_parser_config_nccl_data.json.gz": "a100",
    "trace_filter_sampled_rank-0.json.gz": "a100",  # no deviceProperties: by its kernels' SM count (108)
    "trace_filter_sampled_rank-1.json.gz": "a100",
    "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz": "h200",
}


def _events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _gemm_flops(events: list[dict]) -> float:
    total = 0
    for e in events:
        dims = (e.get("args") or {}).get("Input Dims")
        if e.get("cat") != "cpu_op" or not dims:
            continue
        if e["name"] == "aten::mm":
            (m, k), (_, n) = dims[0], dims[1]
            total += 2 * m * n * k
        elif e["name"] == "aten::addmm":
            (m, k), (_, n) = dims[1], dims[2]
            total += 2 * m * n * k
        elif e["name"] == "aten::bmm":
            (b, m, k), (_, _, n) = dims[0], dims[1]
            total += 2 * b * m * n * k
    return total


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.name.split(".json")[0])
def report(request, tmp_path_factory):
    import contextlib
    import io

    path = request.param
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["profile", "--trace", str(path), "--json", "--no-save"])
    return path, rc, json.loads(out.getvalue()), err.getvalue()


def test_exit_0_and_the_kernel_count(report):
    path, rc, doc, _ = report
    assert rc == 0
    assert doc["summary"]["kernels"] == sum(1 for e in _events(path) if e.get("cat") == "kernel")


def test_busy_is_the_union_of_kernel_memcpy_and_memset_intervals(report):
    path, _, doc, _ = report
    acts = [(e["ts"], e["ts"] + e["dur"]) for e in _events(path)
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert doc["summary"]["device_busy_s"] == pytest.approx(union(acts) * 1e-6, rel=0.01)
    assert doc["summary"]["span_s"] == pytest.approx((max(e for _, e in acts) - min(s for s, _ in acts)) * 1e-6)


def test_no_share_above_100_and_the_shares_add_up_to_at_most_100(report):
    _, _, doc, _ = report
    shares = [o["share"] for o in doc["ops"]] + [t["share"] for t in doc["transfers"]]
    shares += [doc["overlap"]["share"], doc["summary"]["idle_share"]]
    assert all(0 <= s <= 1 for s in shares)
    assert sum(shares) <= 1 + 1e-9
    assert sum(shares) == pytest.approx(1.0, rel=1e-6)  # every second of the span is in exactly one row


def test_memcpy_and_memset_are_rows_of_their_own_with_their_bytes(report):
    path, _, doc, _ = report
    events = _events(path)
    for cat, row in (("gpu_memcpy", "memcpy"), ("gpu_memset", "memset")):
        mine = [e for e in events if e.get("cat") == cat]
        rows = [t for t in doc["transfers"] if t["cat"] == row]
        assert sum(t["calls"] for t in rows) == len(mine)
        recorded = sum(e["args"].get("bytes", 0) for e in mine)
        if recorded:
            assert sum(t["bytes"] for t in rows) == recorded
    assert all(o["kernels"] >= 0 for o in doc["ops"])
    assert sum(o["kernels"] for o in doc["ops"]) == doc["summary"]["kernels"]


def test_kernels_are_attributed_to_their_ops(report):
    path, _, doc, _ = report
    events = _events(path)
    if not any(e.get("cat") == "cpu_op" for e in events):
        pytest.skip("no cpu_op events")
    kernel_time = sum(e["dur"] for e in events if e.get("cat") == "kernel") * 1e-6
    loose = sum(o["time_s"] for o in doc["ops"] if o["model"] == "unattributed")
    assert loose < 0.10 * kernel_time


def test_the_device_is_the_traces_own_family(report):
    path, _, doc, err = report
    fam = FAMILY[path.name]
    assert doc["summary"]["device"] == fam
    assert f"using {fam}" in err


def test_gemm_flops_are_2mnk_over_mm_addmm_bmm(report):
    path, _, doc, _ = report
    want = _gemm_flops(_events(path))
    if not want:
        pytest.skip("no shapes recorded")
    got = sum(o["flops"] for o in doc["ops"] if o["op"] in ("aten::mm", "aten::addmm", "aten::bmm"))
    assert got == pytest.approx(want, rel=0.01)


def test_idle_causes_add_up_to_the_idle_time(report):
    _, _, doc, _ = report
    assert sum(c["time_s"] for c in doc["idle_causes"]) == pytest.approx(doc["summary"]["idle_s"], rel=1e-6,
                                                                         abs=1e-12)
    assert {c["category"] for c in doc["idle_causes"]} <= {"host wait", "kernel wait", "other"}


def test_text_report_exits_0_and_shows_the_new_rows(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = REAL / "trace_filter_sampled_rank-0.json.gz"
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["profile", "--trace", str(path), "--no-save", "--top", "8"]) == 0
    text = out.getvalue()
    for what in ("overlap of streams", "memcpy DtoD", "memset", "idle time by cause",
                 "top kernels", "per step:", "ProfilerStep#551", "flag:", "device: the trace has no deviceProperties; its SM count is its kernels'"):
        assert what in text, what


def test_at_80_columns_a_long_kernel_name_is_cropped_and_its_figures_stay_on_its_line(monkeypatch):
    """ROCm's Tensile names run to hundreds of characters: the name gives way, not the calls or the rates
    (which wrapped onto a line of their own, and the calls column vanished, before)."""
    import contextlib
    import io

    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["profile", str(REAL / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"), "--no-save"]) == 0
    lines = out.getvalue().splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("top kernels"))
    rows = lines[start + 1:start + 6]
    assert all(len(x) <= 80 and " ×" in x and x.rstrip().endswith("GB/s") for x in rows), rows
    assert any("Cijk_" in x and "…" in x for x in rows), rows


def test_the_a100_trace_is_placed_on_a100_and_its_smaller_memory_said():
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["profile", "--trace", str(REAL / "nccl_parser_config_nccl_data.json.gz"), "--json",
                     "--no-save"]) == 0
    note = json.loads(out.getvalue())["summary"]["device_note"]
    assert "a100 family" in note and "39 GiB" in note and "another variant" in note


def test_the_mi250_trace_gets_amd_roofs_not_h100s():
    import contextlib
    import io

    from rooftop.models.catalog import lookup_device

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["profile", "--trace", str(REAL / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
                     "--json", "--no-save"]) == 0
    s = json.loads(out.getvalue())["summary"]
    assert lookup_device(s["device"]).vendor == "amd"
    assert "104 compute units" in s["device_note"] and "no known GPU" not in err


def test_the_per_step_split_of_the_a100_trace():
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["profile", "--trace", str(REAL / "nccl_parser_config_nccl_data.json.gz"), "--json",
                     "--no-save"]) == 0
    doc = json.loads(out.getvalue())
    steps = [e for e in _events(REAL / "nccl_parser_config_nccl_data.json.gz")
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert [s["name"] for s in doc["steps"]] == sorted(e["name"] for e in steps)
    for s, e in zip(doc["steps"], sorted(steps, key=lambda e: e["ts"])):
        assert s["cpu_s"] == pytest.approx(e["dur"] * 1e-6)
        assert 0 < s["busy_s"] <= s["span_s"]
    assert sum(s["kernels"] for s in doc["steps"]) <= doc["summary"]["kernels"]


def test_a_kept_profile_shows_its_new_rows_as_profile_gave_them(tmp_path, capsys, monkeypatch):
    """Kept in the store, a profile's memcpy / memset rows, overlap, idle causes, top kernels, steps and flags come
    back as `rooftop profile --json` gave them, and `rooftop show` prints them."""
    monkeypatch.setenv("COLUMNS", "200")
    path = REAL / "trace_filter_sampled_rank-1.json.gz"
    db = str(tmp_path / "k.db")
    assert main(["profile", "--trace", str(path), "-d", "a100", "--json", "--db", db]) == 0
    own = json.loads(capsys.readouterr().out)
    assert main(["show", own["run_id"][:8], "--json", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    for key in ("transfers", "overlap", "idle_causes", "top_kernels", "steps", "flags", "launch_queue"):
        assert shown[key] == own[key], key
    assert own["transfers"] and own["overlap"]["time_s"] > 0 and own["idle_causes"] and own["flags"]
    assert main(["show", own["run_id"][:8], "--db", db]) == 0
    text = capsys.readouterr().out
    assert "overlap of streams" in text and "idle time by cause" in text
    assert "memcpy HtoD" in text and "top kernels" in text and "flag:" in text


def test_older_writers_categories_and_async_cpu_to_gpu_flows_link_the_same(tmp_path):
    """Older torch writes `Operator`, `Kernel`, `Runtime`, `Memcpy` and `async_cpu_to_gpu` flows; a kernel
    whose args lack both ids is linked through its flow. The attribution is the same as the trace's own."""
    from rooftop.models.trace.read import parse_trace

    doc = json.loads(gzip.decompress((REAL / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz").read_bytes()))
    mine = parse_trace(doc)
    old = {"cpu_op": "Operator", "kernel": "Kernel", "cuda_runtime": "Runtime", "gpu_memcpy": "Memcpy",
           "ac2g": "async_cpu_to_gpu"}
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy"):
            e["args"].pop("External id", None)
            e["args"].pop("correlation", None)
        if e.get("cat") in old:
            e["cat"] = old[e["cat"]]
    theirs = parse_trace(doc)
    assert theirs.kernel_count == mine.kernel_count == 14
    assert [mine.ops[i].name if i is not None else None for i in mine.kernel_op] == \
        [theirs.ops[i].name if i is not None else None for i in theirs.kernel_op]
    assert all(i is not None for i in theirs.kernel_op)


def test_the_rank_table_says_its_step_is_a_median_step_and_the_rest_the_whole_trace(capsys, monkeypatch):
    """`0  222 ms  157 ms  503 ms`: idle above the step on one row, with no word why."""
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["profile", str(REAL / "nccl_parser_config_nccl_data.json.gz"), "--no-save"]) == 0
    out = capsys.readouterr().out
    assert "step = the median profiler step" in out and "over the whole trace, so idle can exceed a step" in out


def test_show_of_a_kept_job_shows_its_ranks_as_profile_did(tmp_path, capsys, monkeypatch):
    """The rank table, straggler and collectives were kept but `show` printed rank 0's op groups alone."""
    monkeypatch.setenv("COLUMNS", "200")
    db = str(tmp_path / "r.db")
    ranks = [str(REAL / f"trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
    assert main(["profile", *ranks, "--db", db]) == 0
    capsys.readouterr()
    assert main(["runs", "--json", "--db", db]) == 0
    run = json.loads(capsys.readouterr().out)[0]["id"]
    assert main(["show", run, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "2 ranks of 128" in out and "straggler: rank" in out and "collectives on the communication roofline" in out


def test_a_copy_of_no_recorded_time_shows_no_rate(tmp_path, capsys, monkeypatch):
    """`dur: 0` memcpys showed `0 GB/s` as if measured."""
    monkeypatch.setenv("COLUMNS", "120")
    doc = json.loads(gzip.decompress((REAL / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz").read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "gpu_memcpy":
            e["dur"] = 0
    path = tmp_path / "dur0.json"
    path.write_text(json.dumps(doc))
    assert main(["profile", str(path), "--no-save"]) == 0
    text = capsys.readouterr().out
    table = text[:text.index("critical path of ")]  # the op table's row (the path names the copy again, untimed)
    (row,) = [line for line in table.splitlines() if "memcpy HtoD" in line]
    assert "GB/s" not in row, row
    assert "GB/s" not in "".join(line for line in text.splitlines() if "memcpy HtoD" in line)
