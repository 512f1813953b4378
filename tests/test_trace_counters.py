"""The GPU's own counters a trace carries (CUPTI `cuda_profiler_range` events) as measured W and Q, beside the model's.

On the real range-profiler trace (HTA's test data: no kernel events, 77 ranges of FP instruction counters) the
figures are checked against HTA's own (tests/data/hta-cupti.json) and against the raw JSON by hand: the n-th range (by start) is the n-th cudaLaunchKernel (by
start), its op the innermost cpu_op enclosing that launch on its thread (HTA's pairing, in
hta/analyzers/cupti_counter_analysis.py), its W 2 × the FMA instructions + the multiplies + the adds.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from pathlib import Path

import pytest
from rooftop.models.catalog import lookup_device
from rooftop.models.counters import DRAM_BYTES, DRAM_READ, DRAM_WRITE, TENSOR_INSTS, counted, rule
from rooftop.models.trace.read import parse_trace
from rooftop.models.program.workload import MEASURED, RANGES, build_workload
from rooftop.store.runs import Store
from rooftop.store.tracefile import load_trace
from rooftop.store.workloads import profile_json, profile_problem, save_profile, stored_workload
from rooftop.tui.cli import main
from rich.console import Console
from rooftop.tui.render.profile import profile_report

CUPTI = Path(__file__).parent / "data" / "real-traces" / "more" / "cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz"
SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _render(work, width: int = 80) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, highlight=False, markup=False).print(profile_report(work))
    return buf.getvalue()


# -- the real range-profiler trace ------------------------------------------------------------


def _by_hand(path: Path) -> dict[str, tuple[int, float]]:
    """Op name → (ranges, W) from the raw JSON, by HTA's pairing and rule, computed apart from rooftop's reader."""
    ev = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ranges = sorted((e for e in ev if e.get("cat") == "cuda_profiler_range"), key=lambda e: e["ts"])
    launches = sorted((e for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"),
                      key=lambda e: e["ts"])
    assert len(ranges) == len(launches) == 77
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    out: dict[str, tuple[int, float]] = {}
    for r, launch in zip(ranges, launches):
        around = [o for o in ops if (o["pid"], o["tid"]) == (launch["pid"], launch["tid"])
                  and o["ts"] <= launch["ts"] <= o["ts"] + o["dur"]]
        op = min(around, key=lambda o: o["dur"])["name"]  # the innermost
        a = r["args"]
        w = sum((2 if op_ == "fma" else 1) * a[SASS.format(p + op_)] for p in "dfh" for op_ in ("fma", "mul", "add"))
        n, total = out.get(op, (0, 0.0))
        out[op] = (n + 1, total + w)
    return out


@pytest.fixture(scope="module")
def cupti_json() -> dict:
    rc, out, _ = _cli("profile", "--trace", str(CUPTI), "--json", "--no-save")
    assert rc == 0
    return json.loads(out)


def test_the_ranges_are_the_kernels_with_measured_w_per_op_group(cupti_json):
    doc = cupti_json
    assert doc["summary"]["kernels"] == 77 and doc["summary"]["kernel_times"] == RANGES
    theirs = _by_hand(CUPTI)
    mine = {g["op"]: (g["kernels"], g["measured_flops"]) for g in doc["ops"]}
    assert set(mine) == set(theirs)
    for op, (n, w) in theirs.items():
        assert mine[op][0] == n, op
        assert mine[op][1] == pytest.approx(w, rel=1e-12), op
    conv = next(g for g in doc["ops"] if g["op"] == "aten::cudnn_convolution")
    assert conv["measured_flops"] == 49_128_439_808  # 28 ranges' 2·FFMA + FMUL + … as the trace's args say
    assert conv["measured_bytes"] is None and conv["time_measured"] is False  # no DRAM counter; not timed
    assert doc["summary"]["measured_flops"] == pytest.approx(sum(w for _, w in theirs.values()), rel=1e-12)
    assert "smsp__sass_thread_inst_executed_op_" in doc["summary"]["counted_by"]
    assert "Q: no DRAM counter recorded" in doc["summary"]["counted_by"]


def test_the_same_op_groups_and_w_as_hta(cupti_json):
    """HTA 0.5.0's own get_cupti_counter_data_with_operators, by its bottom-level op (scripts/hta_cupti.py)."""
    hta = json.loads((Path(__file__).parent / "data" / "hta-cupti.json").read_text())
    assert hta["ranges"] == cupti_json["summary"]["kernels"]
    mine = {g["op"]: {"kernels": g["kernels"], "flops": g["measured_flops"]} for g in cupti_json["ops"]}
    assert mine == hta["ops"]


def test_a_trace_of_ranges_is_not_called_idle(cupti_json):
    s = cupti_json["summary"]
    assert s["idle_s"] == 0.0 and s["device_busy_s"] == pytest.approx(s["span_s"])  # was 100% idle, 0 kernels
    assert s["span_s"] == pytest.approx(9.350187)  # the profiler's window: 77 ranges of 121,431 µs
    assert s["largest_share"] != "idle" and cupti_json["idle_causes"] == []
    # nothing is read from the ranges' times: they are the profiler's even split, not the kernels'
    assert s["mfu"] is None and s["speedup_at_roof"] is None and s["speedup_without_gaps"] is None
    assert all(g["fraction_of_roof"] is None and g["achieved_flops"] is None for g in cupti_json["ops"])
    rc, text, _ = _cli("profile", "--trace", str(CUPTI), "--no-save")
    assert rc == 0
    assert "waits for the CPU" not in text and "100.0%" not in text.split("idle time")[0].splitlines()[-1]
    assert "range profiler's window over 77 kernels" in text and "not measured" in text
    assert "counted by the GPU" in text and "49.1 GFLOP" in text  # the convolutions' W counted
    assert all(len(line) <= 80 for line in text.splitlines())


def test_hta_gets_the_same_kernels_and_owners_from_the_reader():
    t = load_trace(CUPTI)
    assert t.range_times and t.counters is not None
    assert (t.counters.ranges, t.counters.matched, len(t.counters.kernels)) == (77, 77, 77)
    assert all(o is not None for o in t.kernel_op) and not t.warnings


# -- a trace with kernels and counter ranges: measured beside estimated, per op group -------------------------


def _ev(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _mixed(ranges: int = 3) -> dict:
    """aten::mm (64×128 · 128×256, float) and aten::add_ (64×256), one kernel each, and aten::mm again: kernels,
    launches and (`ranges` of the three) counter ranges with FP32 and DRAM counters."""
    mm = {"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"]}
    add = {"Input Dims": [[64, 256], [64, 256], []], "Input type": ["float", "float", "Scalar"]}
    ev = [
        _ev("cpu_op", "aten::mm", 0, 20, **{"External id": 1, **mm}),
        _ev("cuda_runtime", "cudaLaunchKernel", 2, 4, correlation=11, **{"External id": 1}),
        _ev("kernel", "sgemm_64x64", 30, 10, pid=0, tid=7, correlation=11, **{"External id": 1}),
        _ev("cpu_op", "aten::add_", 25, 10, **{"External id": 2, **add}),
        _ev("cuda_runtime", "cudaLaunchKernel", 27, 4, correlation=12, **{"External id": 2}),
        _ev("kernel", "vectorized_elementwise_kernel", 45, 5, pid=0, tid=7, correlation=12, **{"External id": 2}),
        _ev("cpu_op", "aten::mm", 40, 20, **{"External id": 3, **mm}),
        _ev("cuda_runtime", "cudaLaunchKernel", 42, 4, correlation=13, **{"External id": 3}),
        _ev("kernel", "sgemm_64x64", 60, 10, pid=0, tid=7, correlation=13, **{"External id": 3}),
    ]
    counters = [
        ("sgemm_64x64", {SASS.format("ffma"): 2_097_152, SASS.format("fadd"): 10, DRAM_READ: 163_840,
                         DRAM_WRITE: 65_536}),
        ("vectorized_elementwise_kernel", {SASS.format("fadd"): 16_384, DRAM_READ: 131_072, DRAM_WRITE: 65_536}),
        ("sgemm_64x64", {SASS.format("ffma"): 2_101_248, SASS.format("fadd"): 0, DRAM_READ: 180_000,
                         DRAM_WRITE: 70_000}),
    ]
    for n, (name, c) in enumerate(counters[:ranges]):  # the profiler's own times: its window, split evenly
        ev.append(_ev("cuda_profiler_range", name, 100 + 50 * n, 50, pid=0, tid=0, **c))
    return {"traceEvents": ev, "deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}]}


def test_measured_w_and_q_beside_the_estimate_per_op_group():
    work = build_workload(parse_trace(_mixed()), lookup_device("h100"))
    assert work.kernel_times == MEASURED and work.counted_by
    mm = next(g for g in work.groups if g.op == "aten::mm")
    add = next(g for g in work.groups if g.op == "aten::add_")
    assert mm.flops == 2 * 2 * 64 * 128 * 256  # the model's: two calls of 2·M·N·K
    assert mm.measured_flops == 2 * 2_097_152 + 10 + 2 * 2_101_248  # the counters': an FFMA 2 FLOP, an FADD 1
    assert mm.measured_bytes == 163_840 + 65_536 + 180_000 + 70_000
    assert mm.measured_intensity == pytest.approx(mm.measured_flops / mm.measured_bytes)
    assert add.measured_flops == 16_384 and add.measured_bytes == 196_608
    assert mm.timed and mm.fraction_of_roof is not None  # the kernels' own times: measured
    assert work.measured() == (mm.measured_flops + add.measured_flops, mm.measured_bytes + add.measured_bytes)
    top = {k.name: k for k in work.top_kernels}
    assert top["sgemm_64x64"].measured_flops == mm.measured_flops
    text = _render(work)
    assert "W counted" in text and "Q counted" in text and "8.40 MFLOP" in text  # mm's 8,396,810 FLOP
    assert "dram__bytes_read.sum + dram__bytes_write.sum" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_an_op_replayed_in_a_graph_has_its_own_counted_figures():
    import dataclasses

    t = parse_trace(_mixed())
    second = max((i for i, o in enumerate(t.ops) if o.name == "aten::mm"), key=lambda i: t.ops[i].ts)
    ops = list(t.ops)
    ops[second] = dataclasses.replace(ops[second], origin="capture")  # as a graph-capture join leaves it
    work = build_workload(dataclasses.replace(t, ops=tuple(ops)), lookup_device("h100"))
    mm = sorted((g for g in work.groups if g.op == "aten::mm"), key=lambda g: g.measured_flops)
    assert [g.measured_flops for g in mm] == [2 * 2_097_152 + 10, 2 * 2_101_248]
    assert [g.measured_bytes for g in mm] == [229_376, 250_000]


def test_the_same_from_a_file_as_from_plain_json(tmp_path: Path):
    p = tmp_path / "mixed.json"
    p.write_text(json.dumps(_mixed()))
    a, b = load_trace(p), parse_trace(_mixed())
    assert a.counters == b.counters and a.counters is not None and len(a.counters.kernels) == 3


def test_ranges_that_do_not_pair_with_the_launches_count_nothing():
    t = parse_trace(_mixed(ranges=2))  # 2 ranges, 3 launches, 3 kernels: no pairing holds
    assert t.counters is not None and t.counters.matched == 0 and not t.counters.kernels
    assert any("matched to no kernel: 2 ranges, 3 kernel launches, 3 kernels" in w for w in t.warnings)
    work = build_workload(t, lookup_device("h100"))
    assert all(g.measured_flops is None and g.measured_bytes is None for g in work.groups)
    assert work.measured() == (None, None)


def test_ranges_alone_with_another_number_of_launches_are_kernels_no_op_owns():
    doc = _mixed()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["cat"] != "kernel" and e["args"].get("correlation") != 13]
    t = parse_trace(doc)  # 3 ranges, 2 launches, no kernel events
    assert t.range_times and t.kernel_count == 3 and t.kernel_op == (None, None, None)
    assert any("matched to no kernel: 3 ranges, 2 kernel launches, 0 kernels" in w for w in t.warnings)
    rows = [g for g in build_workload(t, lookup_device("h100")).groups if g.kernels]
    assert rows and all(g.owner == "family" and g.op.startswith("(no op) ") and not g.timed for g in rows)
    assert sum(g.measured_flops for g in rows) == 8_396_810 + 16_384


def test_a_pairing_whose_names_disagree_is_none():
    doc = _mixed()
    for e in doc["traceEvents"]:
        if e["cat"] == "cuda_profiler_range":
            e["name"] = "some_other_kernel"
    t = parse_trace(doc)
    assert t.counters is not None and not t.counters.kernels


# -- the store and --json ---------------------------------------------------------------------


def test_measured_w_and_q_survive_the_store(tmp_path: Path):
    for doc in (_mixed(), None):
        trace = parse_trace(doc) if doc else load_trace(CUPTI)
        dev = lookup_device("h100" if doc else "a100")
        work = build_workload(trace, dev)
        with Store.open(tmp_path / "r.db") as store:
            rid = save_profile(store, work, source="t", backend="trace")
            run, samples = store.run(rid), store.samples(rid)
            assert profile_problem(run, samples) is None
            back = stored_workload(run, samples, dev)
            got = profile_json(run, samples)
        assert (back.counted_by, back.kernel_times) == (work.counted_by, work.kernel_times)
        assert back.measured() == work.measured()
        want = {g.op: (g.measured_flops, g.measured_bytes, g.timed) for g in work.groups}
        assert {g.op: (g.measured_flops, g.measured_bytes, g.timed) for g in back.groups} == want
        assert {o["op"]: (o["measured_flops"], o["measured_bytes"], o["time_measured"]) for o in got["ops"]} == want
        assert [k.measured_flops for k in back.top_kernels] == [k.measured_flops for k in work.top_kernels]
        assert _render(back) == _render(work)  # `rooftop show` reads as `rooftop profile` did


def test_an_edited_measured_count_is_refused(tmp_path: Path):
    work = build_workload(parse_trace(_mixed()), lookup_device("h100"))
    with Store.open(tmp_path / "r.db") as store:
        rid = save_profile(store, work, source="t", backend="trace")
        run, samples = store.run(rid), store.samples(rid)
    samples[0].conditions["profile"]["measured_flops"] = -5
    assert "not an op group" in (profile_problem(run, samples) or "")


def test_json_fields(tmp_path: Path):
    p = tmp_path / "mixed.json.gz"
    p.write_bytes(gzip.compress(json.dumps(_mixed()).encode()))
    rc, out, _ = _cli("profile", "--trace", str(p), "--json", "--no-save", "-d", "h100")
    assert rc == 0
    doc = json.loads(out)
    mm = next(o for o in doc["ops"] if o["op"] == "aten::mm")
    assert (mm["measured_flops"], mm["measured_bytes"], mm["time_measured"]) == (8_396_810, 479_376, True)
    assert mm["measured_intensity"] == pytest.approx(8_396_810 / 479_376)
    assert mm["flops"] == 2 * 2 * 64 * 128 * 256 and mm["estimate"] is True  # the model's, beside
    s = doc["summary"]
    assert s["kernel_times"] == "measured" and s["measured_flops"] == 8_396_810 + 16_384
    assert s["measured_bytes"] == 479_376 + 196_608 and "dram__bytes_read.sum" in s["counted_by"]
    k = next(k for k in doc["top_kernels"] if k["name"] == "sgemm_64x64")
    assert (k["measured_flops"], k["measured_bytes"]) == (8_396_810, 479_376)


def test_a_trace_without_counters_says_nothing_of_them():
    ev = [_ev("cpu_op", "aten::a", 0, 5, **{"External id": 1}),
          _ev("cuda_runtime", "cudaLaunchKernel", 1, 5, correlation=1),
          _ev("kernel", "k1", 10, 10, pid=0, tid=7, correlation=1)]
    work = build_workload(parse_trace({"traceEvents": ev}), lookup_device("h100"))
    s = work.summary()
    assert (s["counted_by"], s["kernel_times"], s["measured_flops"], s["measured_bytes"]) == ("", MEASURED, None, None)
    assert "counted" not in _render(work)


# -- the rule -------------------------------------------------------------------------------


def test_the_rule_for_each_kind_of_metric():
    assert counted({SASS.format("hfma"): 3, SASS.format("dmul"): 2}).flops == 8
    assert counted({DRAM_BYTES: 100}).bytes == 100 and counted({DRAM_BYTES: 100}).flops is None
    assert counted({DRAM_READ: 7}).bytes == 7
    c = counted({"sm__ops_path_tensor_src_bf16_dst_fp32.sum": 1e9, SASS.format("ffma"): 5})
    assert (c.flops, c.path) == (1e9 + 10, "bf16-tc")
    # tensor instructions with no tensor-op counter: the CUDA-core part is no W
    assert counted({TENSOR_INSTS: 4, SASS.format("ffma"): 5}).flops is None
    assert counted({TENSOR_INSTS: 0, SASS.format("ffma"): 5}).flops == 10
    assert "tensor-core work is not in it" in rule([SASS.format("ffma")])
    assert "W unknown" in rule([SASS.format("ffma"), TENSOR_INSTS])


# -- the app's Profile tab ------------------------------------------------------------------------


async def test_the_profile_tab_shows_w_and_q_counted(tmp_path: Path):
    from textual.widgets import Static

    from rooftop.tui.app import AppConfig, create_app
    from rooftop.tui.app.widgets import FitTable

    with Store.open(tmp_path / "r.db") as store:
        save_profile(store, build_workload(load_trace(CUPTI), lookup_device("a100")), source="cupti", backend="trace")
    app = create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", export_dir=tmp_path))
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        ops = app.query_one("#prof-ops", FitTable)
        assert "wc" in ops.shown
        conv = next(" ".join(map(str, ops.get_row_at(i))) for i in range(ops.row_count)
                    if "cudnn_convolution" in " ".join(map(str, ops.get_row_at(i))))
        assert "49.1 GFLOP" in conv
        split = str(app.query_one("#prof-split", Static).render())
        assert "range profiler's window over 77 kernels" in split and "busy" not in split
        # no share of a time the profiler split rather than measured: the coverage counts kernels
        assert "of kernels" in split and "of kernel time" not in split and "bandwidth n/a" in split
        assert "counted by the GPU's counters" in split
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert {"share", "time", "op"} <= set(ops.shown)


@pytest.mark.parametrize("chunk", [4096, 1 << 16])
def test_a_streamed_trace_keeps_its_ranges_counters_in_every_piece(chunk):
    """The reader streams a file a piece at a time into typed events, which keep no counter args: a piece that
    holds counter ranges stays raw, so the ranges read in the middle pieces (not only the last) keep their
    counters, the same as the file read whole."""
    from rooftop.store.tracefile import event_stream

    whole = parse_trace(json.loads(gzip.decompress(CUPTI.read_bytes())))
    with gzip.open(CUPTI, "rb") as f:
        streamed = parse_trace(event_stream(f, chunk))
    assert whole.counters is not None and streamed.counters is not None
    assert streamed.counters == whole.counters
    assert whole.counters.matched == 77 and len(whole.counters.kernels) == 77
