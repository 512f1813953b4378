"""Every kernel has an owner: kernels launched before the trace's window, user annotations standing in for ops,
kernels no op owns grouped by kernel family, the coverage line, and an honest MFU and bandwidth headline.

The real cases: TraceLens's H100 HF Qwen1.5 trace (30% of its kernel time launched in the warm-up step, run in
the sync that opens ProfilerStep#6), and traces built in the shape of the jobs the issue names (an MI300X DDP
ResNet whose identical steps read 1383 / 866 / 746 kernels; DeepSeek-style training whose kernels are launched
inside `mlp(F)` / `dispatch(F)` / `combine(B)` ranges, not aten ops).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from rooftop.models.catalog import lookup_device
from rooftop.models.trace.kernelfamily import kernel_family
from rooftop.models.trace.read import parse_trace
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace
from rooftop.tui.cli import main

DATA = Path(__file__).parent / "data"
H100 = DATA / "real-traces" / "more" / "h100-hf-qwen1.5-0.5b-infer-bs16.json.gz"
VLLM = DATA / "real-traces" / "more" / "vllm-decode-full-mi300x.replay.json.gz"
MI300X = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 205822885888, "computeMajor": 9,
          "computeMinor": 4, "numSms": 304, "warpSize": 64}


def ev(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def kernel(name: str, ts: float, dur: float, corr: int, stream: int = 7, **more: object) -> dict:
    return ev("kernel", name, ts, dur, pid=0, tid=stream, correlation=corr, device=0, stream=stream, **more)


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # every line of the report whole on its line


def run_json(tmp_path: Path, doc: dict, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[dict, str]:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert main(["profile", "--trace", str(path), "--json", "--no-save", *extra]) == 0
    out = json.loads(capsys.readouterr().out)
    assert main(["profile", "--trace", str(path), "--no-save", "--wide", *extra]) == 0
    return out, capsys.readouterr().out


# -- kernels launched before the window ------------------------------------------------------------------------


def _h100_raw() -> tuple[list[dict], dict[int, dict], dict]:
    ev_ = json.loads(gzip.decompress(H100.read_bytes()))["traceEvents"]
    runtime = {e["args"]["correlation"]: e for e in ev_ if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    step = next(e for e in ev_ if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    return ev_, runtime, step


def test_the_h100_traces_kernels_launched_before_the_window_are_rows_of_their_own_not_a_graph():
    """436 kernels (30% of the kernel time) have no launch in the trace: their correlations are below every
    runtime call's. They were called "a CUDA graph replays them" and counted into ProfilerStep#6."""
    events, runtime, step = _h100_raw()
    kernels = [e for e in events if e.get("cat") == "kernel"]
    early = [e for e in kernels if e["args"]["correlation"] not in runtime]
    assert len(early) == 436 and all(e["args"]["correlation"] < min(runtime) for e in early)
    trace = load_trace(H100)
    assert not trace.graph_kernels
    assert sum(1 for i in trace.before_window if trace.kernels[i].cat == "kernel") == 436
    w = build_workload(trace, lookup_device("h100"))
    rows = [g for g in w.groups if g.owner == "before window"]
    assert sum(g.kernels for g in rows) == 436
    assert sum(g.time_s for g in rows) == pytest.approx(sum(e["dur"] for e in early) * 1e-6)
    assert not any("graph" in n for n in w.notes)
    [note] = [n for n in w.notes if "launched before it" in n]
    assert note.startswith("436 kernels") and "30.1% of kernel time" in note and "counted in no step" in note


def test_the_h100_traces_step_counts_the_kernels_launched_in_it():
    """ProfilerStep#6 read 1459 kernels: its own 1029 and the warm-up step's tail that started in it."""
    events, runtime, step = _h100_raw()
    lo, hi = step["ts"], step["ts"] + step["dur"]
    mine = sum(1 for e in events if e.get("cat") == "kernel" and e["args"]["correlation"] in runtime
               and lo <= runtime[e["args"]["correlation"]]["ts"] <= hi)
    assert mine == 1029
    [s] = build_workload(load_trace(H100), lookup_device("h100")).steps
    assert s.name == "ProfilerStep#6" and s.kernels == mine


def test_the_h100_traces_early_kernels_are_costed_as_their_twins_ops_and_run_at_the_same_rate():
    """The 436 are ProfilerStep#6's last 436 kernels, name for name: each is costed as its twin's op. Each such
    row runs at the rate of the same op in the window (±3%): the same work, so the costing is right."""
    w = build_workload(load_trace(H100), lookup_device("h100"))
    early = [g for g in w.groups if g.owner == "before window"]
    assert early and all(not g.family and g.modelled for g in early)
    assert w.coverage()["modelled"] > 0.999
    same = {(g.op, json.dumps(g.shapes), g.dtype): g for g in w.groups if g.owner == "op"}
    checked = 0
    for g in early:
        twin = same[(g.op, json.dumps(g.shapes), g.dtype)]
        if g.flops > 0 and g.time_s > 100e-6:
            assert g.achieved_flops == pytest.approx(twin.achieved_flops, rel=0.03), g.op
            checked += 1
    assert checked >= 3


def _resnet_like(backlog_names: list[str] | None = None) -> dict:
    """An MI300X DDP-ResNet-like trace: three identical ProfilerSteps of six ops, each launching one kernel
    (hipLaunchKernel). The GPU is behind: the warm-up step's last eight kernels (no launch in the trace, lower
    correlations) run first, through step 1 and into step 2, and each step's own kernels queue behind them."""
    ops = [("aten::cudnn_convolution", "MIOpenConvFwd_igemm_nhwc", [[32, 64, 56, 56], [64, 64, 3, 3]]),
           ("aten::native_batch_norm", "batchnorm_fwd_nhwc", [[32, 64, 56, 56]]),
           ("aten::relu_", "vectorized_elementwise_kernel_relu", [[32, 64, 56, 56]]),
           ("aten::mm", "Cijk_Alik_Bljk_HHS_BH_MT128x128x32", [[2048, 2048], [2048, 2048]]),
           ("aten::add_", "vectorized_elementwise_kernel_add", [[32, 64, 56, 56], [32, 64, 56, 56]]),
           ("aten::sum", "reduce_kernel_sum", [[32, 64, 56, 56]])]
    names = [k for _, k, _ in ops]
    backlog = backlog_names or (names * 2)[-8:]
    events = [kernel(name, 100 + 15 * i, 15, corr=1 + i) for i, name in enumerate(backlog)]  # t 100 … 220
    corr, gpu = 1000, 100 + 15 * len(backlog)
    for s in range(3):
        start = 100 + 60 * s
        events.append(ev("user_annotation", f"ProfilerStep#{s + 1}", start, 60))
        for j, (op, kname, dims) in enumerate(ops):
            t = start + 10 * j
            events.append(ev("cpu_op", op, t, 8, **{"External id": corr, "Input Dims": dims,
                                                     "Input type": ["c10::Half"] * len(dims)}))
            events.append(ev("hip_runtime", "hipLaunchKernel", t + 2, 4, correlation=corr))
            gpu = max(gpu, t + 6)
            events.append(kernel(kname, gpu, 15, corr=corr, **{"External id": corr}))
            gpu += 15
            corr += 1
    return {"deviceProperties": [MI300X], "traceEvents": events}


def test_identical_steps_get_equal_kernel_counts_when_the_warm_ups_kernels_spill_into_them(tmp_path, capsys):
    """By start time the steps read 11 / 10 / 6 (as the MI300X ResNet's read 1383 / 866 / 746; the kernel that
    started where step 1 ends was counted in both); by launch time each has its 6, and the 8 launched before the
    window are their own rows, costed as their twins' ops."""
    doc, text = run_json(tmp_path, _resnet_like(), capsys)
    assert [s["kernels"] for s in doc["steps"]] == [6, 6, 6]
    assert doc["summary"]["kernels"] == 26
    early = [o for o in doc["ops"] if o["owner"] == "before window"]
    assert sum(o["kernels"] for o in early) == 8
    assert {o["op"] for o in early} == {"aten::cudnn_convolution", "aten::native_batch_norm", "aten::relu_",
                                        "aten::mm", "aten::add_", "aten::sum"}
    mm = {o["owner"]: o for o in doc["ops"] if o["op"] == "aten::mm"}
    assert mm["before window"]["flops"] == mm["op"]["flops"] / 3  # one call's worth of the three steps' three
    assert "(before window) mm fp16 2048×2048 · 2048×2048" in text
    assert not any("graph" in n for n in doc["notes"])
    assert any(n.startswith("8 kernels") and "tail of ProfilerStep#1" in n for n in doc["notes"])


def test_a_launch_where_one_step_ends_and_the_next_begins_counts_once():
    """Steps were closed at both ends: a kernel launched at the instant step 1 ended and step 2 began was in both."""
    events = [ev("user_annotation", "ProfilerStep#1", 0, 50), ev("user_annotation", "ProfilerStep#2", 50, 50)]
    for c, t in ((1, 10), (2, 50), (3, 60)):
        events += [ev("cuda_runtime", "cudaLaunchKernel", t, 2, correlation=c), kernel("k", t + 5, 3, corr=c)]
    w = build_workload(parse_trace({"traceEvents": events}), lookup_device("h100"))
    assert [s.kernels for s in w.steps] == [1, 2]


def test_kernels_from_before_the_window_that_match_no_step_are_grouped_by_family(tmp_path, capsys):
    """Where the early kernels are not the first step's tail name for name, nothing says which op made them: rows
    by kernel family, `(before window) gemm kernels`, time only."""
    odd = ["Cijk_Alik_Bljk_HHS_BH_MT64x64x16"] * 3 + ["rccl_AllReduce_Sum_f16"] + ["vectorized_elementwise_kernel"] * 4
    doc, text = run_json(tmp_path, _resnet_like(odd), capsys)
    assert [s["kernels"] for s in doc["steps"]] == [6, 6, 6]
    early = {o["op"]: o for o in doc["ops"] if o["owner"] == "before window"}
    assert {k: v["kernels"] for k, v in early.items()} == {
        "(before window) gemm kernels": 3, "(before window) comm kernels": 1, "(before window) elementwise kernels": 4}
    assert all(o["family"] == kernel_family(odd[0]) for o in early.values() if "gemm" in o["op"])
    assert early["(before window) comm kernels"]["regime"] == "comm"
    assert early["(before window) gemm kernels"]["regime"] == "W unknown" and not early["(before window) gemm kernels"]["modelled"]
    assert "(before window) gemm kernels" in text and "grouped by kernel family (elementwise" in " ".join(doc["notes"])
    cov = doc["summary"]["coverage"]
    assert cov["by_owner"]["before window"] == pytest.approx(8 / 26) and cov["by_family"] == pytest.approx(8 / 26)
    assert "launched before the window, grouped by kernel family" in text


# -- annotations as owners -------------------------------------------------------------------------------------


def _deepseek_like() -> dict:
    """DeepSeek-style training: its kernels are launched inside record_function ranges (user_annotation), with no
    aten op around the launch, except one aten::add_ inside mlp(F); one launch sits in the step outside every
    range; one, from a second thread with no ranges, runs inside a gpu_user_annotation on its stream."""
    events = [ev("user_annotation", "ProfilerStep#3", 0, 1000),
              ev("user_annotation", "forward", 10, 600),
              ev("user_annotation", "layer.0", 20, 400),
              ev("user_annotation", "mlp(F)", 30, 120),
              ev("user_annotation", "dispatch(F)", 160, 90),
              ev("user_annotation", "combine(B)", 260, 120)]
    corr = [100]

    def launch(t: float, name: str, start: float, dur: float, tid: int = 1) -> None:
        c = corr[0]
        corr[0] += 1
        events.append(ev("cuda_runtime", "cudaLaunchKernel", t, 3, tid=tid, correlation=c))
        events.append(kernel(name, start, dur, corr=c))

    launch(40, "deep_gemm::fp8_gemm_kernel<128, 128>", 50, 40)
    launch(60, "deep_gemm::fp8_gemm_kernel<128, 128>", 100, 40)
    events.append(ev("cpu_op", "aten::add_", 80, 20, **{"External id": 7, "Input Dims": [[4096, 7168], [4096, 7168]],
                                                          "Input type": ["c10::BFloat16", "c10::BFloat16"]}))
    launch(85, "vectorized_elementwise_kernel<4, AddFunctor>", 140, 20)
    launch(170, "deep_ep::intranode::dispatch<8>", 200, 60)
    launch(270, "deep_ep::intranode::combine<8>", 300, 50)
    launch(450, "void at::native::softmax_warp_forward<float>", 400, 10)  # in forward, outside layer.0
    launch(700, "triton_poi_fused_mul_0", 720, 15)  # in the step only: a step owns nothing
    launch(500, "fused_moe_kernel", 800, 30, tid=2)
    events.append(ev("gpu_user_annotation", "moe(F)", 790, 50, pid=0, tid=7))
    return {"traceEvents": events}


def test_user_annotations_own_the_kernels_launched_inside_them_where_no_aten_op_does(tmp_path, capsys):
    """77% of a DeepSeek-style job's kernel time was unattributed: here each range owns what was launched in it
    (the innermost one), the aten op inside mlp(F) keeps its kernel, ProfilerStep#3 owns nothing, and a device
    range owns a kernel no CPU range encloses the launch of."""
    trace = parse_trace(_deepseek_like())
    ranges = {o.name for o in trace.ops if o.origin == "annotation"}
    assert ranges == {"mlp(F)", "dispatch(F)", "combine(B)", "forward", "moe(F)"}
    doc, text = run_json(tmp_path, _deepseek_like(), capsys, "-d", "h100")
    by = {o["op"]: o for o in doc["ops"]}
    assert by["mlp(F)"]["owner"] == "annotation" and by["mlp(F)"]["kernels"] == 2
    assert by["mlp(F)"]["time_s"] == pytest.approx(80e-6) and by["mlp(F)"]["family"] == "gemm"
    assert by["aten::add_"]["owner"] == "op" and by["aten::add_"]["kernels"] == 1
    assert by["dispatch(F)"]["regime"] == "comm" and by["combine(B)"]["regime"] == "comm"  # DeepEP's, by family
    assert by["mlp(F)"]["regime"] == "W unknown" and by["mlp(F)"]["bound_s"] is None and not by["mlp(F)"]["modelled"]
    assert by["forward"]["kernels"] == 1  # the innermost range around the launch, not layer.0's parents
    assert by["moe(F)"]["owner"] == "annotation" and by["moe(F)"]["kernels"] == 1
    assert not any(o["op"].startswith("ProfilerStep") for o in doc["ops"])
    assert by["(no op) elementwise kernels"]["owner"] == "family" and by["(no op) elementwise kernels"]["kernels"] == 1
    cov = doc["summary"]["coverage"]
    assert cov["by_owner"]["annotation"] == pytest.approx(230 / 265)  # of 265 µs of kernels
    assert cov["owned"] == pytest.approx(250 / 265) and cov["modelled"] == pytest.approx(20 / 265)
    assert "has an owner (ops 7.5%, annotations 86.8%)" in text
    assert any("launched inside user annotations" in n for n in doc["notes"])


# -- ownerless kernels by family -------------------------------------------------------------------------------


def test_a_graph_replay_without_its_capture_is_grouped_by_family_and_names_the_flag(capsys):
    """vLLM's FULL hipGraph decode: 97% of its kernel time was one `(CUDA graph replay)` row with no W, Q or
    regime. By family instead (moe, gemm, attention, …), each row `(graph) FAMILY kernels`, and the note says
    which flag gives them ops."""
    events = json.loads(gzip.decompress(VLLM.read_bytes()))["traceEvents"]
    graph = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime" and e["name"] == "hipGraphLaunch"}
    replayed = [e for e in events if e.get("cat") == "kernel" and e["args"].get("correlation") in graph]
    fams: dict[str, float] = {}
    for e in replayed:
        fams[kernel_family(e["name"])] = fams.get(kernel_family(e["name"]), 0.0) + e["dur"] * 1e-6
    assert main(["profile", "--trace", str(VLLM), "--json", "--no-save"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {o["family"]: o for o in doc["ops"] if o["op"].startswith("(graph) ")}
    assert {f: r["time_s"] for f, r in rows.items()} == pytest.approx(fams)
    assert {"moe", "gemm", "attention", "norm"} <= set(rows)
    assert all(r["owner"] == "family" and r["op"] == f"(graph) {f} kernels" for f, r in rows.items())
    assert not any(o["model"] == "unattributed" for o in doc["ops"])
    assert any("--graph-capture CAPTURE" in n and f"{len(replayed)} kernels" in n for n in doc["notes"])


# -- the coverage line, in the report, show, the Profile tab and --json ----------------------------------------


def test_the_coverage_line_is_in_the_report_show_the_profile_tab_and_the_json(tmp_path, capsys):
    from rooftop.store.runs import Store
    from rooftop.tui.app.panes.profile import split_text
    from rooftop.tui.render.profile import profile_detail

    db = str(tmp_path / "c.db")
    assert main(["profile", "--trace", str(H100), "--json", "--db", db]) == 0
    doc = json.loads(capsys.readouterr().out)
    cov = doc["summary"]["coverage"]
    assert cov["owned"] == pytest.approx(0.699, abs=5e-4) and cov["by_owner"]["before window"] == pytest.approx(
        0.301, abs=5e-4) and cov["modelled"] > 0.999 and cov["time_s"] == pytest.approx(45.5e-3, rel=0.01)
    line = ("coverage: 69.9% of kernel time has an owner, 100.0% a W and Q model; 30.1% launched before the window "
            "(costed as their twins' ops in the first step)")
    assert main(["show", doc["run_id"][:8], "--db", db]) == 0
    assert line in capsys.readouterr().out
    assert main(["show", doc["run_id"][:8], "--json", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["coverage"] == cov
    with Store.open(db) as store:
        run = store.run(doc["run_id"])
        assert line in profile_detail(run, store.samples(run.id)).plain.replace("\n", " ")
        assert ("W and Q from shapes: 100.0% of kernel time; owner: 69.9%; 30.1% launched before the window"
                in split_text(run).plain.replace("\n", " "))


def _collectives(sizes: list[dict], annotations: bool = False) -> dict:
    """A GEMM and one all-reduce per entry of `sizes`: a record_param_comms op launching an NCCL kernel, its
    message in its own args (PyTorch ≥ 2.1), or in the `nccl:all_reduce` range inside it (`annotations`: the op
    records no collective, as PyTorch 2.1's did on a V100 DLRM job)."""
    doc = _gemms((2048, 0.5, 7, 100))
    for i, size in enumerate(sizes):
        t, corr = 1000 + 100 * i, 50 + i
        if annotations:
            shapes = {k: v for k, v in size.items() if k in ("Input Dims", "Input type")}
            doc["traceEvents"] += [ev("cpu_op", "record_param_comms", t, 20, **{"External id": corr, **shapes}),
                                   ev("user_annotation", "nccl:all_reduce", t + 1, 18, **size)]
        else:
            doc["traceEvents"].append(ev("cpu_op", "record_param_comms", t, 20, **{"External id": corr,
                                                                                   "Collective name": "allreduce",
                                                                                   **size}))
        doc["traceEvents"] += [ev("cuda_runtime", "cudaLaunchKernel", t + 5, 3, correlation=corr),
                               kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2000 + 100 * i, 40 + 10 * i,
                                      corr=corr)]
    return doc


SIZED = {"In msg nelems": 1048576, "Out msg nelems": 1048576, "dtype": "Float", "Group size": 8,
         "Input Dims": [[1048576]], "Input type": ["float"]}


@pytest.mark.parametrize("annotations", [False, True], ids=["own-args", "nccl-range"])
def test_a_collective_counts_as_modelled_where_the_trace_gives_its_size(tmp_path, capsys, annotations):
    """Communication is costed on its link with its message size (the collectives table), never on DRAM: that is
    its model, so its time counts as modelled where the trace gives the size (in the op's own args, or in the
    backend's `nccl:*` range inside it), and not where it gives none (it then has its time, and no W or Q)."""
    unsized = {"Input Dims": [[]], "Input type": [""]} if annotations else {}
    doc, text = run_json(tmp_path, _collectives([SIZED, unsized], annotations), capsys, "-d", "h100")
    comms = [o for o in doc["ops"] if o["op"] == "record_param_comms"]
    [sized] = [o for o in comms if o["time_s"] == pytest.approx(40e-6)]
    [bare] = [o for o in comms if o["time_s"] == pytest.approx(50e-6)]
    assert sized["regime"] == bare["regime"] == "comm" and sized["model"] == bare["model"] == "collective"
    assert sized["modelled"] and sized["sized"] == 1 and not bare["modelled"] and bare["sized"] == 0
    mm = next(o for o in doc["ops"] if o["op"] == "aten::mm")
    cov = doc["summary"]["coverage"]
    assert cov["modelled"] == pytest.approx((mm["time_s"] + 40e-6) / (mm["time_s"] + 90e-6))
    assert cov["owned"] == pytest.approx(1.0)
    total = mm["time_s"] + 90e-6
    assert cov["comm_sized"] == pytest.approx(40e-6 / total) and cov["comm_unsized"] == pytest.approx(50e-6 / total)
    [line] = [x for x in text.splitlines() if x.startswith("coverage: ")]
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    assert line == (f"coverage: 100.0% of kernel time has an owner, {pct(cov['modelled'])} a W and Q model "
                    f"({pct(cov['comm_sized'])} communication, on its links); {pct(cov['comm_unsized'])} "
                    "communication of a size the trace does not give (time only)")


def test_a_kept_profile_keeps_which_collectives_had_their_size(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_collectives([SIZED, {}])))
    db = str(tmp_path / "c.db")
    assert main(["profile", "--trace", str(path), "-d", "h100", "--json", "--db", db]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["show", doc["run_id"][:8], "--json", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["summary"]["coverage"] == doc["summary"]["coverage"]
    mine = sorted((o["time_s"], o["modelled"]) for o in doc["ops"] if o["op"] == "record_param_comms")
    assert sorted((o["time_s"], o["modelled"]) for o in shown["ops"] if o["op"] == "record_param_comms") == mine
    assert [m for _, m in mine] == [True, False]


def test_a_collective_group_with_a_call_of_unknown_size_is_not_modelled(tmp_path, capsys):
    """Two calls with the same shapes, one whose record says its message and one whose does not: one op group,
    of which the trace cannot cost every call on its link, so its time is not counted as modelled."""
    bare = {"Input Dims": [[1048576]], "Input type": ["float"]}  # no message elements or dtype: no size
    doc, _ = run_json(tmp_path, _collectives([SIZED, bare]), capsys, "-d", "h100")
    [g] = [o for o in doc["ops"] if o["op"] == "record_param_comms"]
    assert g["calls"] == 2 and g["sized"] == 1 and not g["modelled"] and g["regime"] == "comm"


# -- the headline: MFU and bandwidth without the ops a wrong count puts above their roof -------------------------


def _gemms(*calls: tuple[int, float, int, float]) -> dict:
    """aten::mm calls (n, the fraction of its bf16 roof it runs at on h100, its stream, its start µs): an n×n×n
    GEMM whose kernel takes its bound over the fraction."""
    F = lookup_device("h100").F("bf16-tc")
    events = []
    for i, (n, frac, stream, start) in enumerate(calls):
        dur = 2 * n**3 / F / frac * 1e6
        events += [ev("cpu_op", "aten::mm", i * 10, 8, **{"External id": i + 1, "Input Dims": [[n, n], [n, n]],
                                                          "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
                   ev("cuda_runtime", "cudaLaunchKernel", i * 10 + 2, 3, correlation=i + 1),
                   kernel("sm90_xmma_gemm_bf16bf16_bf16f32", start, dur, corr=i + 1, stream=stream)]
    return {"traceEvents": events}


def test_an_op_200_times_above_its_roof_stays_out_of_mfu_and_the_headline_says_so(tmp_path, capsys):
    """A GEMM whose recorded shapes make it 200× faster than the roof (a wrong W) set MFU. It is left out, with
    its time and how far above the roof it ran; the flags still blame its count."""
    doc, text = run_json(tmp_path, _gemms((4096, 200.0, 7, 100), (2048, 0.5, 7, 200)), capsys, "-d", "h100")
    ops = {o["shapes"][0][0]: o for o in doc["ops"]}
    wrong, right = ops[4096], ops[2048]
    assert wrong["fraction_of_roof"] == pytest.approx(200.0) and right["fraction_of_roof"] == pytest.approx(0.5)
    s = doc["summary"]
    F = lookup_device("h100").F("bf16-tc")
    assert s["mfu"] == pytest.approx(right["flops"] / s["span_s"] / F)
    assert s["mfu"] <= s["busy_fraction"]
    [out] = s["headline"]["left_out"]
    assert out["op"] == "aten::mm" and out["shapes"][0] == [4096, 4096] and out["time_s"] == pytest.approx(wrong["time_s"])
    assert s["headline"]["left_out_share"] == pytest.approx(wrong["time_s"] / (wrong["time_s"] + right["time_s"]))
    line = next(x for x in text.splitlines() if x.startswith("MFU and bandwidth leave out"))
    assert "1 op group above 1.5× its roof" in line and "mm at 2.0e+04% of its roof" in line
    assert any("overcounted" in f for f in text.splitlines() if f.startswith("flag:"))


def test_mfu_is_held_at_the_busy_fraction_and_says_so(tmp_path, capsys):
    """Two GEMMs on two streams at once, each at 90% of the roof: 180% of the peak while busy, which no device
    does (the roofs are low). Held at the busy fraction, and said."""
    trace = _gemms((4096, 0.9, 7, 100), (4096, 0.9, 8, 100))
    trace["traceEvents"].append(kernel("vectorized_elementwise_kernel", 900, 5, corr=99))  # the span twice busy
    doc, text = run_json(tmp_path, trace, capsys, "-d", "h100")
    s = doc["summary"]
    assert s["headline"]["mfu_counted"] > s["busy_fraction"] and not s["headline"]["left_out"]
    assert s["mfu"] == s["busy_fraction"] and s["headline"]["mfu_held"]
    assert any(x.startswith("MFU held at the busy fraction") for x in text.splitlines())


def test_every_op_at_its_roof_keeps_the_time_of_an_op_with_no_model(tmp_path, capsys):
    """An op with no W model (Q from its tensors' sizes) was given Q/B as its bound: 'every op at its roof'
    promised it would take almost no time. It keeps its measured time; the modelled GEMM saves its own."""
    doc = _gemms((2048, 0.5, 7, 100))
    doc["traceEvents"] += [
        ev("cpu_op", "fbgemm::jagged_dense_elementwise_add", 50, 8,
           **{"External id": 9, "Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["float", "float"]}),
        ev("cuda_runtime", "cudaLaunchKernel", 52, 3, correlation=9),
        kernel("jagged_dense_elementwise_kernel", 400, 100, corr=9)]
    w = build_workload(parse_trace(doc), lookup_device("h100"))
    jag = next(g for g in w.groups if g.op.startswith("fbgemm::"))
    mm = next(g for g in w.groups if g.op == "aten::mm")
    assert not jag.modelled and mm.modelled
    assert w.roof_saves_s == pytest.approx(mm.alone_s * 0.5)
    assert w.bound_s == pytest.approx(w.busy_s - mm.alone_s * 0.5)


def test_show_of_a_profile_kept_before_the_honest_headline_redraws_it(tmp_path, capsys):
    """A profile kept before MFU left anything out holds the MFU of every op: `show` still knows its roofs are the
    same (it was told they had changed and listed the samples instead), and draws the report with today's MFU."""
    import sqlite3

    path = tmp_path / "g.json"
    path.write_text(json.dumps(_gemms((4096, 200.0, 7, 100), (2048, 0.5, 7, 200))))
    db = str(tmp_path / "o.db")
    assert main(["profile", "--trace", str(path), "-d", "h100", "--json", "--db", db]) == 0
    doc = json.loads(capsys.readouterr().out)
    w = build_workload(parse_trace(json.loads(path.read_text())), lookup_device("h100"))
    with sqlite3.connect(db) as con:  # as the earlier rooftop kept it: every op's FLOPs, no headline
        device = json.loads(con.execute("SELECT device_json FROM runs WHERE id = ?", (doc["run_id"],)).fetchone()[0])
        for k in ("headline", "coverage", "busy_fraction"):
            device["profile"].pop(k)
        device["profile"]["mfu"] = w.mfu_over(w.groups)
        device["profile"]["bandwidth_utilisation"] = w.bandwidth_over(w.groups)
        con.execute("UPDATE runs SET device_json = ? WHERE id = ?", (json.dumps(device), doc["run_id"]))
    assert w.mfu_over(w.groups) > 5 * w.mfu
    assert main(["show", doc["run_id"][:8], "--db", db]) == 0
    out, err = capsys.readouterr()
    assert "have changed" not in err and "MFU and bandwidth leave out 1 op group" in out
