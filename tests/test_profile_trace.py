"""`rooftop profile` on real files: the H200 Qwen2.5-7B decode trace and the Nsight Compute raw CSV.

The figures pinned here were measured on an H200 (torch.profiler and ncu, 2026-11-30); the files are
copies kept under tests/data so nothing outside the repository is read.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.ncu import NcuError, parse_ncu_csv
from rooftop.models.program.shapecost import cost_op
from rooftop.models.trace.read import TraceError, parse_trace, union_length
from rooftop.models.trace.kernelfamily import kernel_family
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace
from rooftop.tui.cli import main

DATA = Path(__file__).parent / "data"
QWEN = DATA / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
NCU = DATA / "ncu-raw.csv"
MiB = 1024**2


@pytest.fixture(scope="module")
def qwen():
    return build_workload(load_trace(QWEN), lookup_device("h200"))


def test_qwen_trace_kernels_span_and_busy(qwen):
    assert qwen.on_device and qwen.kernels == 2620
    assert round(qwen.busy_s * 1e3, 2) == 13.83  # the union of kernel intervals
    assert round(qwen.span_s * 1e3, 2) == 154.35
    assert qwen.idle_s == pytest.approx(qwen.span_s - qwen.busy_s)
    assert qwen.idle_s / qwen.span_s > 0.9


def test_qwen_gemms_from_input_dims(qwen):
    gemms = [g for g in qwen.groups if g.op in ("aten::mm", "aten::addmm")]
    assert sum(g.calls for g in gemms if g.op == "aten::mm") == 226
    assert sum(g.calls for g in gemms if g.op == "aten::addmm") == 168
    assert round(sum(g.flops for g in gemms) / 1e9, 2) == 226.25
    assert all(g.model == "gemm" and g.path == "bf16-tc" for g in gemms)


def test_qwen_gemv_shaped_linears_are_memory_bound_and_idle_is_the_largest_share(qwen):
    skinny = [g for g in qwen.groups if g.model == "gemm" and g.shape.get("m") == 8]
    assert len(skinny) >= 6
    assert {g.regime for g in skinny} == {"memory"}
    # the biggest one, gate/up 8×3584×18944: its weights stream at most at B, so its fraction is ≤ 1
    top = max(skinny, key=lambda g: g.time_s)
    assert top.shape == {"m": 8, "n": 18944, "k": 3584}
    assert 0.5 < top.fraction_of_roof <= 1.0
    assert qwen.largest_share() == "idle"
    assert qwen.summary()["largest_share"] == "idle"


def test_qwen_every_kernel_is_attributed_to_its_op(qwen):
    assert not [g for g in qwen.groups if g.model == "unattributed"]
    assert sum(g.kernels for g in qwen.groups) == 2620
    attn = [g for g in qwen.groups if g.model == "attention"]
    assert attn and all(g.shape["q"] == 1 and g.shape["h"] == 28 and g.shape["kv"] == 4 for g in attn)


def test_qwen_amdahl_and_mfu(qwen):
    s = qwen.summary()
    assert s["speedup_without_gaps"] == pytest.approx(qwen.span_s / qwen.busy_s)
    assert 1.0 < s["speedup_at_roof"] < s["speedup_without_gaps"]  # the gaps are worth far more than the roof
    assert s["mfu_path"] == "bf16-tc"
    assert s["mfu"] == pytest.approx(qwen.flops / qwen.span_s / lookup_device("h200").F("bf16-tc"))
    assert 0 < s["bandwidth_utilisation"] < 1


def test_cli_trace_json_shape(capsys):
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--json", "--no-save"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"ops", "summary"}
    for op in doc["ops"]:
        assert set(op) >= {"op", "shapes", "dtype", "calls", "time_s", "share", "flops", "bytes", "intensity", "regime",
                           "bound_s", "fraction_of_roof"}
    assert set(doc["summary"]) >= {"span_s", "device_busy_s", "idle_s", "bound_s", "mfu"}
    assert doc["summary"]["kernels"] == 2620
    times = [o["time_s"] for o in doc["ops"]]
    assert times == sorted(times, reverse=True)


def test_cli_trace_text_names_idle_as_the_largest_share(capsys):
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--no-save", "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "largest share: idle time" in out
    assert "idle time" in out and "91.0%" in out
    assert "MFU" in out and "bandwidth" in out and "estimates" in out


def test_cli_trace_picks_the_traces_gpu_when_no_device_is_given(capsys):
    assert main(["profile", "--trace", str(QWEN), "--json", "--no-save"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["summary"]["device"] == "h200"
    assert "the trace's NVIDIA H200" in cap.err


def test_cli_trace_is_kept_as_a_run(tmp_path, capsys):
    from rooftop.store.runs import Store

    db = tmp_path / "p.db"
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--json", "--db", str(db)]) == 0
    doc = json.loads(capsys.readouterr().out)
    with Store.open(db) as store:
        run = store.run(doc["run_id"])
        assert run.plan == "profile" and run.status == "complete"
        samples = store.samples(run.id)
        assert len(samples) == len(doc["ops"])
        top = samples[0].conditions["profile"]
        assert top["op"] == doc["ops"][0]["op"] and top["calls"] == doc["ops"][0]["calls"]
        assert samples[0].stats.median_s * top["calls"] == pytest.approx(doc["ops"][0]["time_s"])
        assert run.device["profile"]["kernels"] == 2620
        assert store.profiles() == {}  # a profile is not a device's measured roofs


def test_a_trace_or_csv_named_alone_is_read_as_with_trace_and_ncu(capsys, tmp_path):
    """`rooftop profile run.json.gz` is what people type first: it reads the trace (was "is not a Python
    program"), with options after the file still taken as options."""
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--json", "--no-save"]) == 0
    want = json.loads(capsys.readouterr().out)
    assert main(["profile", str(QWEN), "-d", "h200", "--json", "--no-save"]) == 0
    assert json.loads(capsys.readouterr().out) == want
    ranks = sorted((DATA / "real-traces").glob("trace_filter_sampled_rank-*.json.gz"))
    assert main(["profile", *map(str, ranks), "--json", "--no-save", "--top", "3"]) == 0
    assert [r["rank"] for r in json.loads(capsys.readouterr().out)["ranks"]] == [0, 1]  # one job of two ranks
    assert main(["profile", "--", str(NCU), "-d", "h200", "--json", "--no-save"]) == 0
    assert json.loads(capsys.readouterr().out)["kernels"]
    notes = tmp_path / "notes.txt"
    notes.write_text("not a program\n")
    assert main(["profile", str(notes), "--no-save"]) == 2  # neither a trace nor a program: still refused
    assert "is not a Python program" in capsys.readouterr().err
    assert main(["profile", str(QWEN), "--top", "-1"]) == 2  # the options after it are checked as options
    assert "--top must be 0 or more" in capsys.readouterr().err
    assert main(["profile", str(QWEN), "--no-save", "--", "python", "train.py"]) == 2  # a trace and a program
    assert "give one of" in capsys.readouterr().err


# -- bad input: one line, exit 2 --------------------------------------------------------


def _bad(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


def test_missing_trace_file(capsys, tmp_path):
    assert "no such file" in _bad(capsys, ["profile", "--trace", str(tmp_path / "nope.json"), "--no-save"])


def test_not_a_trace(capsys, tmp_path):
    p = tmp_path / "notes.json"
    p.write_text("these are notes, not JSON\n")
    assert "not a trace" in _bad(capsys, ["profile", "--trace", str(p), "--no-save"])
    p.write_text(json.dumps({"hello": 1}))
    assert "no traceEvents" in _bad(capsys, ["profile", "--trace", str(p), "--no-save"])
    p.write_bytes(b"\xff\xfe\x00binary")
    assert "not a trace" in _bad(capsys, ["profile", "--trace", str(p), "--no-save"])


def test_truncated_gz(capsys, tmp_path):
    p = tmp_path / "cut.json.gz"
    p.write_bytes(QWEN.read_bytes()[:50_000])
    assert "truncated or damaged gzip" in _bad(capsys, ["profile", "--trace", str(p), "--no-save"])


MI250 = DATA / "real-traces" / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"


@pytest.mark.parametrize("keep", [0.5, 0.999], ids=["mid-string", "near-the-end"])
def test_truncated_plain_json_says_it_looks_truncated(capsys, tmp_path, keep):
    text = gzip.decompress(MI250.read_bytes())
    p = tmp_path / "cut.json"
    p.write_bytes(text[: int(len(text) * keep)])
    err = _bad(capsys, ["profile", "--trace", str(p), "--no-save"])
    assert f"{p}: looks truncated: the JSON ends mid-way (at line " in err and "cut while it was written" in err
    assert "at at" not in err


def test_bad_json_says_where_without_doubled_words(capsys, tmp_path):
    p = tmp_path / "bad.json"
    text = '{"traceEvents": [{"name": "a' + chr(9) + 'b"}]}'  # a raw tab inside a string
    p.write_text(text)
    err = _bad(capsys, ["profile", "--trace", str(p), "--no-save"])
    col = text.index(chr(9)) + 1
    assert f"not JSON: Invalid control character at line 1, column {col})" in err and "at at" not in err


def test_a_byte_order_mark_is_skipped(capsys, tmp_path):
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + gzip.decompress(MI250.read_bytes()))
    assert main(["profile", "--trace", str(p), "--json", "--no-save", "-d", "mi210"]) == 0
    with_bom = json.loads(capsys.readouterr().out)
    assert main(["profile", "--trace", str(MI250), "--json", "--no-save", "-d", "mi210"]) == 0
    assert with_bom == json.loads(capsys.readouterr().out)
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(json.loads(gzip.decompress(MI250.read_bytes()))).replace(
        '"dur": ', '"dur": NaN, "x": ', 1).encode())  # not strict JSON: read again leniently, the mark skipped there too
    assert main(["profile", "--trace", str(p), "--json", "--no-save", "-d", "mi210"]) == 0
    assert "utf-8-sig" not in capsys.readouterr().err


def test_empty_trace(capsys, tmp_path):
    p = tmp_path / "empty.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {}}]}))
    assert "no kernels and no CPU ops" in _bad(capsys, ["profile", "--trace", str(p), "--no-save"])


def test_options_a_profile_cannot_use_are_refused_not_dropped(capsys, tmp_path):
    """`-d h200,a100` used h200 alone and `--save-trace` with a trace kept nothing, without a word."""
    assert "placed on one device's roofs" in _bad(capsys, ["profile", str(QWEN), "-d", "h200,a100", "--no-save"])
    assert "placed on one device's roofs" in _bad(capsys, ["profile", str(QWEN), "-d", "h200", "-d", "a100"])
    assert "there is none to keep" in _bad(capsys, ["profile", "--trace", str(QWEN), "--save-trace",
                                                    str(tmp_path / "t.json"), "--no-save"])
    assert not (tmp_path / "t.json").exists()


def test_nothing_or_two_inputs(capsys):
    assert "give one of" in _bad(capsys, ["profile", "--no-save"])
    assert "give one of" in _bad(capsys, ["profile", "--trace", str(QWEN), "--ncu", str(NCU), "--no-save"])


def test_not_an_ncu_csv(capsys, tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    assert "not an Nsight Compute raw CSV" in _bad(capsys, ["profile", "--ncu", str(p)])
    with pytest.raises(NcuError):
        parse_ncu_csv("")


# -- Nsight Compute ------------------------------------------------------------------------


def test_ncu_measured_bytes_per_level():
    ks = parse_ncu_csv(NCU.read_text())
    assert len(ks) == 7
    dram = [round(k.dram_bytes / MiB, 1) for k in ks]
    # GEMM 4096³, GEMV 1×8192×8192, sum of 256 MiB, two elementwise passes, softmax, SDPA decode
    assert dram[0] == 168.6 and dram[1] == 130.4 and dram[2] == 258.4 and dram[5] == 111.2 and dram[6] == 514.4
    assert 3 * 4096 * 4096 * 2 / MiB == 96  # the GEMM's algorithmic Q, against 168.6 MiB measured
    assert ks[0].tensor_ops == 2 * 4096**3 and ks[0].path == "bf16-tc"
    assert ks[2].tensor_ops == 0 and ks[2].path is None
    assert all(k.l2_bytes and k.l2_bytes > 0 for k in ks)
    assert ks[0].l2_bytes == pytest.approx(4_925_046_465_014.58 * 175_616e-9)


def test_ncu_points_per_level_on_h200():
    ks = parse_ncu_csv(NCU.read_text())
    pts = ks[0].points(lookup_device("h200"))
    assert [p["level"] for p in pts] == ["dram", "l2"]
    assert pts[0]["intensity"] == pytest.approx(2 * 4096**3 / ks[0].dram_bytes)
    assert 0.5 < pts[0]["fraction_of_roof"] <= 1.0  # the GEMM near its bf16 roof
    gemv = ks[1].points(lookup_device("h200"))[0]
    assert gemv["achieved_bandwidth"] == pytest.approx(ks[1].dram_bytes / ks[1].time_s)


def test_cli_ncu_json_and_text(capsys):
    assert main(["profile", "--ncu", str(NCU), "-d", "h200", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["kernels"]) == 7 and doc["device"] == "h200"
    assert main(["profile", "--ncu", str(NCU), "-d", "h200"]) == 0
    out = capsys.readouterr().out
    assert "7 kernels from Nsight Compute" in out and "169 MiB" in out and "130 MiB" in out


# -- parsing details ----------------------------------------------------------------------


def _qwen_events() -> list[dict]:
    return json.loads(gzip.decompress(QWEN.read_bytes()))["traceEvents"]


def test_kernels_link_by_correlation_and_ac2g_when_the_external_id_is_missing():
    events = _qwen_events()
    for e in events:
        if e.get("cat") == "kernel":
            e["args"].pop("External id", None)
    half = [e for e in events]
    w = build_workload(parse_trace({"traceEvents": half}), lookup_device("h200"))
    assert sum(g.calls for g in w.groups if g.op in ("aten::mm", "aten::addmm")) == 394
    for e in events:  # now only the ac2g flows are left to link them
        if e.get("cat") == "kernel":
            e["args"].pop("correlation", None)
    w = build_workload(parse_trace({"traceEvents": events}), lookup_device("h200"))
    assert sum(g.calls for g in w.groups if g.op in ("aten::mm", "aten::addmm")) == 394


def test_cuda_graph_replays_without_a_capture_are_grouped_by_kernel_family_and_name_the_flag():
    """Kernels a graph launch replayed have no op in the trace: one row per kernel family, `(graph) gemm kernels`,
    owned by their family, with no W or Q (never one opaque row), and a note naming `--graph-capture`."""
    events = _qwen_events()
    runtime = [e for e in events if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"]
    graph = {e["args"]["correlation"] for e in runtime[:100]}
    for e in runtime[:100]:
        e["name"] = "cudaGraphLaunch"
    w = build_workload(parse_trace({"traceEvents": events}), lookup_device("h200"))
    replayed = [e for e in events if e.get("cat") == "kernel" and e["args"]["correlation"] in graph]
    fams = {}
    for e in replayed:
        fams[kernel_family(e["name"])] = fams.get(kernel_family(e["name"]), 0) + 1
    rows = {g.family: g for g in w.groups if g.op.startswith("(graph) ")}
    assert {f: g.kernels for f, g in rows.items()} == fams and len(fams) > 1
    assert all(g.op == f"(graph) {f} kernels" for f, g in rows.items())
    for g in rows.values():
        assert g.owner == "family" and g.flops == 0 and g.bound_s is None and not g.modelled
        assert g.regime == ("comm" if g.family == "comm" else "W unknown")
    [note] = [n for n in w.notes if "graph replays" in n]
    assert f"{len(replayed)} kernels" in note and "--graph-capture CAPTURE" in note
    assert w.coverage()["by_owner"]["family"] == pytest.approx(sum(e["dur"] for e in replayed) * 1e-6 / w.op_time_s)


def test_parse_trace_refuses_what_is_not_a_trace():
    with pytest.raises(TraceError):
        parse_trace({"traceEvents": 3})
    with pytest.raises(TraceError):
        parse_trace("text")


def test_union_length_counts_overlaps_once():
    assert union_length([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == 4
    assert union_length([]) == 0


def test_op_costs_from_shapes():
    bf = "c10::BFloat16"
    mm = cost_op("aten::mm", [[8, 3584], [3584, 512]], [bf, bf])
    assert mm.flops == 2 * 8 * 3584 * 512 and mm.bytes == 2 * (8 * 3584 + 3584 * 512 + 8 * 512)
    addmm = cost_op("aten::addmm", [[512], [8, 3584], [3584, 512], [], []], [bf, bf, bf, "Scalar", "Scalar"])
    assert addmm.flops == mm.flops and addmm.shape == {"m": 8, "n": 512, "k": 3584}
    bmm = cost_op("aten::bmm", [[4, 64, 32], [4, 32, 16]], ["float", "float"])
    assert bmm.flops == 2 * 4 * 64 * 32 * 16 and bmm.path == "fp32-matmul"
    lin = cost_op("aten::linear", [[2, 5, 64], [128, 64], [128]], ["float"] * 3)
    assert lin.shape == {"m": 10, "n": 128, "k": 64}
    sdpa = cost_op("aten::_cudnn_attention_forward", [[8, 28, 1, 128], [8, 4, 1028, 128], [8, 4, 1028, 128]],
                   [bf, bf, bf])
    assert sdpa.model == "attention" and sdpa.flops == 4 * 8 * 28 * 1028 * 128
    assert sdpa.bytes == 2 * (2 * 8 * 28 * 128) + 2 * 2 * 8 * 4 * 1028 * 128
    ln = cost_op("aten::native_layer_norm", [[64, 512], [], [512], [512], []], ["float", "ScalarList", "float",
                                                                                 "float", "Scalar"])
    assert ln.model == "norm" and ln.shape == {"rows": 64, "cols": 512}
    add = cost_op("aten::add", [[8, 1, 3584], [3584], []], [bf, bf, "Scalar"])
    assert add.flops == 8 * 3584 and add.bytes == 2 * (8 * 3584 + 3584) + 2 * 8 * 3584
    view = cost_op("aten::view", [[8, 1], []], ["long int", "ScalarList"])
    assert view.flops == 0 and view.bytes == 0 and view.model == "none"
    odd = cost_op("aten::my_custom_op", [[100, 10]], ["float"])
    assert odd.model == "tensors" and odd.bytes == 0 and odd.flops == 0  # no model: W and Q unknown
    assert "unknown" in odd.counting and "4000 B" in odd.counting
    assert not math.isnan(odd.bytes)


def test_reading_a_trace_loads_no_torch():
    import subprocess
    import sys

    code = (f"from rooftop.tui.cli import main\nmain(['profile', '--trace', {str(QWEN)!r}, '-d', 'h200', '--no-save', "
            "'--json'])\nimport sys\nprint('TORCH' if 'torch' in sys.modules else 'NO-TORCH')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "NO-TORCH"


def test_compare_two_stored_profiles(tmp_path, capsys):
    from rooftop.models.sample import Sample, TimeStats
    from rooftop.store.runs import Store

    data = json.loads(gzip.decompress(QWEN.read_bytes()))
    mm = {e["args"]["External id"] for e in data["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"}
    for e in data["traceEvents"]:
        if e.get("cat") == "kernel" and e["args"].get("External id") in mm:
            e["dur"] *= 2  # the same step with every aten::mm kernel twice as slow
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(data))
    db = str(tmp_path / "c.db")
    ids = []
    for f in (QWEN, slow):
        assert main(["profile", "--trace", str(f), "-d", "h200", "--json", "--db", db]) == 0
        ids.append(json.loads(capsys.readouterr().out)["run_id"])
    assert main(["profile", "--compare", ids[0][:8], ids[1][:8], "--json", "--db", db]) == 0
    doc = json.loads(capsys.readouterr().out)
    ratios = {d["op"]: d["ratio"] for d in doc["ops"] if d["ratio"] is not None}
    mms = [d["ratio"] for d in doc["ops"] if d["op"] == "aten::mm"]
    assert len(mms) == 4 and mms == pytest.approx([2.0] * 4, rel=0.01)
    assert ratios["aten::addmm"] == pytest.approx(1.0)
    a, b = doc["summary"]["device_busy_s"]
    assert b > a
    assert main(["profile", "--compare", ids[0][:8], ids[1][:8], "--db", db]) == 0
    assert "×2.00" in capsys.readouterr().out
    with Store.open(db) as store:  # a measurement run is not a profile: one line, exit 2
        rid = store.begin_run({"name": "Test CPU"}, "quick", "cpu")
        store.add_sample(rid, Sample("gemm", "fp32", {"m": 8, "n": 8, "k": 8}, flops=1024, bytes=768,
                                     stats=TimeStats(1e-6, 1e-6, 1e-6, 1e-6, 0.0, 7, 1), path="fp32-matmul"))
        store.finish_run(rid, "complete")
    assert "not a profile" in _bad(capsys, ["profile", "--compare", ids[0][:8], rid[:8], "--db", db])


def test_show_names_a_profiles_op_groups(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--json", "--db", db]) == 0
    rid = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["show", rid[:8], "--db", db]) == 0
    out = capsys.readouterr().out
    assert "mm bf16 8×3584 · 3584×18944" in out.replace("\n", " ") or "mm bf16 8×3584" in out
    assert "profile bf16 m=8" not in out


def test_show_a_profile_as_profile_shows_it(tmp_path, capsys):
    """`rooftop show` on a profile run prints `rooftop profile`'s report (GB/s where memory-bound, the split,
    MFU), and its --json carries the same ops, summary and notes as `rooftop profile --json`."""
    db = str(tmp_path / "s.db")
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--db", db]) == 0
    report = capsys.readouterr().out
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--json", "--no-save", "--db", db]) == 0
    own = json.loads(capsys.readouterr().out)
    assert main(["runs", "--json", "--db", db]) == 0
    [run] = json.loads(capsys.readouterr().out)
    assert main(["show", run["id"][:8], "--db", db]) == 0
    shown = capsys.readouterr().out
    assert report in shown and "GB/s memory" in shown and "TFLOP/s memory" not in shown
    assert main(["show", run["id"][:8], "--json", "--db", db]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == own["summary"] and doc["notes"] == own["notes"]
    assert [(o["op"], o["shapes"], o["calls"]) for o in doc["ops"]] == [(o["op"], o["shapes"], o["calls"]) for o in own["ops"]]
    for mine, theirs in zip(doc["ops"], own["ops"]):
        assert mine.keys() == theirs.keys()
        assert mine["flops"] == pytest.approx(theirs["flops"]) and mine["share"] == pytest.approx(theirs["share"])
    assert doc["samples"]  # still the whole run document


def test_show_a_profile_whose_roofs_are_gone_lists_groups_by_their_regime(tmp_path, capsys):
    """Placed on roofs this machine no longer knows: the stored groups, memory-bound ones in GB/s, not TFLOP/s."""
    import sqlite3

    db = str(tmp_path / "s.db")
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--json", "--db", db]) == 0
    rid = json.loads(capsys.readouterr().out)["run_id"]
    with sqlite3.connect(db) as con:
        device = json.loads(con.execute("SELECT device_json FROM runs WHERE id = ?", (rid,)).fetchone()[0])
        device["profile"]["device"] = "gone-gpu"
        con.execute("UPDATE runs SET device_json = ? WHERE id = ?", (json.dumps(device), rid))
    assert main(["show", rid[:8], "--db", db]) == 0
    out, err = capsys.readouterr()
    assert "(gone-gpu) are not known here" in err
    row = next(line for line in out.splitlines() if " mm bf16 8×3584 " in line)
    assert "GB/s" in row and "FLOP/s" not in row, row


def test_show_a_profile_whose_roofs_changed_keeps_the_stored_figures(tmp_path, capsys):
    """Roofs that no longer give the stored MFU are not used to redraw the report: the stored groups instead."""
    import sqlite3

    db = str(tmp_path / "s.db")
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--json", "--db", db]) == 0
    rid = json.loads(capsys.readouterr().out)["run_id"]
    with sqlite3.connect(db) as con:
        device = json.loads(con.execute("SELECT device_json FROM runs WHERE id = ?", (rid,)).fetchone()[0])
        device["profile"]["mfu"] *= 2  # as if placed on roofs of half the peak
        con.execute("UPDATE runs SET device_json = ? WHERE id = ?", (json.dumps(device), rid))
    assert main(["show", rid[:8], "--db", db]) == 0
    out, err = capsys.readouterr()
    assert "the roofs of h200 have changed" in err and "MFU" not in out


def test_an_op_group_above_its_roof_is_flagged_with_the_roof_and_its_source():
    """A time under its own bound (fraction of roof > 1.1) is a roof measured elsewhere or bytes not counted:
    flagged (it was a note; a flag also names the roof and the run it came from), as the op report flags a
    measured point above the roof."""
    import dataclasses

    from rooftop.models.profile import Ceiling
    from rooftop.models.program.workload import flag_lines

    h200 = lookup_device("h200")
    slow = dataclasses.replace(h200, id="slow-h200", bandwidth={"dram": Ceiling(1e12, "measured", "test")})
    work = build_workload(load_trace(QWEN), slow)
    ops = [f for f in work.flags if f.kind == "op"]
    assert ops and "aten::mm" in {f.subject for f in ops} and {f.roof for f in ops} == {"dram"}
    assert all(f.ratio > 1.1 and f.source == "slow-h200 (measured, test)" for f in ops)
    [line] = [x for x in flag_lines(work.flags) if "op group" in x]
    assert "dram 1000 GB/s roof of slow-h200 (measured, test)" in line and "roof is low" in line
    assert not [f for f in build_workload(load_trace(QWEN), h200).flags if f.kind == "op"]


def test_cli_ncu_without_a_device_uses_the_gpu_it_ran_on(capsys):
    """The CSV names its GPU (device__attribute_display_name): without -d its roofs are that GPU's, as a
    trace's are, not h100's."""
    assert main(["profile", "--ncu", str(NCU), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["device"] == "h200"
    assert "using h200" in captured.err


@pytest.mark.parametrize("device", ["v100-16", "h200"])
def test_both_fixes_never_take_longer_than_either_alone(capsys, device):
    """On a V100's roofs many of the H200's ops are already 'faster than the roof': their bounds exceed their
    times. Both fixes together (every op at its roof, no gaps) is the busy time less what the roofs save, each op
    capped at its own time: never above no gaps nor every op at its roof."""
    assert main(["profile", "--trace", str(QWEN), "--json", "--no-save", "-d", device]) == 0
    doc = json.loads(capsys.readouterr().out)
    s = doc["summary"]
    saved = sum(o["time_alone_s"] * max(0.0, 1 - o["bound_s"] / o["time_s"])
                for o in doc["ops"] if o["bound_s"] is not None and o["time_s"] > 0)
    assert s["bound_s"] == pytest.approx(s["device_busy_s"] - saved)
    assert s["bound_s"] <= s["step_without_gaps_s"] and s["bound_s"] <= s["step_at_roof_s"]
    assert s["step_at_roof_s"] == pytest.approx(s["idle_s"] + s["bound_s"])
    if device == "v100-16":
        assert sum(o["bound_s"] or 0 for o in doc["ops"]) > s["step_without_gaps_s"]  # the old sum: 36 ms > 13.8
    assert main(["profile", "--trace", str(QWEN), "--no-save", "-d", device]) == 0
    text = " ".join(capsys.readouterr().out.split())
    from rooftop.models.units import fmt_time

    # the report gives the what-ifs re-timed on the critical path, not these sums (kept in --json's summary)
    at_roof = next(w for w in doc["what_if"] if w["name"] == "every op at its roof")
    assert at_roof["retimed"] and f"every op at its roof {fmt_time(at_roof['length_s'])}" in text
    assert "summed" not in text
    assert at_roof["saving_s"] <= s["span_s"] - s["step_at_roof_s"] + 1e-12  # no more than the sum it replaces


@pytest.mark.parametrize("argv", [["gone.json"], ["gone.json.gz", "-d", "h200"]], ids=["json", "gz-with-options"])
def test_a_missing_trace_named_alone_is_no_such_file_as_with_trace(capsys, tmp_path, argv):
    path = tmp_path / argv[0]
    assert main(["profile", str(path), *argv[1:], "--no-save"]) == 2
    err = capsys.readouterr().err
    assert err == f"rooftop profile: error: {path}: no such file (give a torch.profiler Chrome trace, .json or .json.gz)\n"
    assert main(["profile", "--trace", str(path), "--no-save"]) == 2
    assert capsys.readouterr().err == err


def test_thousands_of_steps_list_the_first_and_a_count(capsys, tmp_path):
    doc = json.loads(gzip.decompress(MI250.read_bytes()))
    ev = doc["traceEvents"]
    last = max((e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
               key=lambda e: e["ts"])
    for n in range(3, 3001):
        ev.append({**last, "name": f"ProfilerStep#{n}", "ts": last["ts"] + 100 * (n - 2), "dur": 50.0})
    p = tmp_path / "steps.json"
    p.write_text(json.dumps(doc))
    assert main(["profile", str(p), "--no-save", "-d", "mi210"]) == 0
    out = capsys.readouterr().out
    steps = [line for line in out.splitlines() if line.startswith("  ProfilerStep#")]  # one line a step
    assert [s.split()[0] for s in steps] == [f"ProfilerStep#{n}" for n in range(1, 9)]
    assert "… 2,992 more steps (3,000 in all; --json lists each)" in out


def test_a_launching_op_counts_only_what_the_launching_op_inside_it_does_not():
    """On a GPU trace a pooling backward launches its own kernel and calls fill_, whose kernel clears grad_input:
    grad_input's write is fill_'s, once, and the pooling op keeps its reads (it was counted in both)."""
    n, c, h = 8, 16, 32
    out, inp = [n, c, h // 2, h // 2], [n, c, h, h]

    def ev(cat, name, ts, dur, **args):
        dev = cat == "kernel"
        return {"ph": "X", "cat": cat, "name": name, "pid": 0 if dev else 1, "tid": 7 if dev else 1, "ts": ts,
                "dur": dur, "args": args}
    events = [
        ev("cpu_op", "aten::max_pool2d_with_indices_backward", 0, 50, **{
            "External id": 1, "Input Dims": [out, inp, [], [], [], [], [], out],
            "Input type": ["float", "float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar",
                           "long int"]}),
        ev("cpu_op", "aten::fill_", 2, 10, **{"External id": 2, "Input Dims": [inp, []],
                                              "Input type": ["float", "Scalar"]}),
        ev("cuda_runtime", "cudaLaunchKernel", 3, 4, correlation=2),
        ev("kernel", "fill_kernel", 10, 5, correlation=2, **{"External id": 2}),
        ev("cuda_runtime", "cudaLaunchKernel", 20, 4, correlation=1),
        ev("kernel", "max_pool_backward_kernel", 30, 20, correlation=1, **{"External id": 1}),
    ]
    w = build_workload(parse_trace({"traceEvents": events}), lookup_device("h200"))
    by = {g.op: g for g in w.groups}
    pool, fill = by["aten::max_pool2d_with_indices_backward"], by["aten::fill_"]
    assert fill.bytes == n * c * h * h * 4  # grad_input cleared
    assert pool.bytes == n * c * (h // 2) ** 2 * (4 + 8)  # grad_output and the indices read
    assert pool.flops == n * c * (h // 2) ** 2
    whole = cost_op("aten::max_pool2d_with_indices_backward", [out, inp, [], [], [], [], [], out],
                    ["float", "float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "long int"])
    assert w.bytes == whole.bytes  # the two add up to the call, once


def test_an_op_with_no_work_is_said_so_and_keeps_its_time_at_the_roof(capsys, tmp_path):
    """A convolution whose shapes give W = Q = 0 (batch 0, no output channels) had a bound of 0 s: at its roof it
    'finished in 0 ns' and its kernel time came off every op at its roof. It does no work: no bound, its time kept
    as it ran, and the row says so."""
    conv = {"Input Dims": [[0, 3, 16, 16], [0, 3, 3, 3], [], [], [], [], [], [], []],
            "Input type": ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList",
                           "Scalar"],
            "Concrete Inputs": ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"]}

    def ev(cat, name, ts, dur, **args):
        dev = cat == "kernel"
        return {"ph": "X", "cat": cat, "name": name, "pid": 0 if dev else 1, "tid": 7 if dev else 1, "ts": ts,
                "dur": dur, "args": args}
    events = [
        ev("cpu_op", "aten::convolution", 0, 20, **{"External id": 1, **conv}),
        ev("cuda_runtime", "cudaLaunchKernel", 3, 4, correlation=1),
        ev("kernel", "implicit_convolve_sgemm", 10, 50, correlation=1, **{"External id": 1}),
        ev("cpu_op", "aten::mm", 30, 20, **{"External id": 2, "Input Dims": [[64, 64], [64, 64]],
                                            "Input type": ["float", "float"]}),
        ev("cuda_runtime", "cudaLaunchKernel", 33, 4, correlation=2),
        ev("kernel", "sgemm", 60, 5, correlation=2, **{"External id": 2}),
    ]
    w = build_workload(parse_trace({"traceEvents": events}), lookup_device("h100"))
    conv_g = next(g for g in w.groups if g.op == "aten::convolution")
    assert conv_g.flops == 0 and conv_g.bytes == 0 and conv_g.model == "conv"
    assert conv_g.regime == "no work" and conv_g.bound_s is None and conv_g.fraction_of_roof is None
    assert w.bound_s >= conv_g.time_s  # its 50 µs stay in "both fixes" (was 16 ns: the mm's bound alone)
    path = tmp_path / "conv.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert main(["profile", "--trace", str(path), "--no-save", "-d", "h100"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "convolution" in line)
    assert "no work" in row and "%" in row.split("no work")[0] and "ns" not in row  # its share, no rate, no bound
