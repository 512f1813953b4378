"""`rooftop profile --trace REPLAY --graph-capture CAPTURE`: graph-replayed kernels joined to the op that launched
them when the graph was captured.

The two real pairs (vLLM and SGLang decode on MI300X, one FULL hipGraph per step) are checked for the share of
replayed kernel time that gets a captured op, the kernel count and busy time the join must not change, and the GEMM
FLOPs of the joined aten::mm / aten::addmm against TraceLens's own GEMM.csv on the same joined traces. A PIECEWISE
pair (eager ops between graph launches, several graphs captured, two of them the same layer) is built here in the
real files' format, with the ways a capture can fail to match its replay.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from rooftop.models.program.opcontext import reads_inside
from rooftop.models.trace.capture import CaptureError
from rooftop.models.trace.capture import join_captures as join_with
from rooftop.models.catalog import lookup_device
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace
from rooftop.tui.cli import main


def join_captures(replay, captures):
    """The join as `rooftop profile --graph-capture` does it: a MoE layer's op copied with the ops inside it."""
    return join_with(replay, captures, whole_subtree=reads_inside)

MORE = Path(__file__).parent / "data" / "real-traces" / "more"
PAIRS = {"vllm": ("vllm-decode-full-mi300x", "vllm_decode_full"),
         "sglang": ("sglang-qwen3-8b-decode-mi300x", "sglang_decode")}
GEMMS = ("aten::mm", "aten::addmm")  # the GEMM ops rooftop models; the framework wrappers around them have no model yet


def replay_row(g) -> bool:
    """A row of graph-replayed kernels no op owns (grouped by kernel family): what an unjoined replay gives."""
    op, owner = (g["op"], g["owner"]) if isinstance(g, dict) else (g.op, g.owner)
    return owner == "family" and op.startswith("(graph) ")



def pair(name: str) -> tuple[Path, Path]:
    stem = PAIRS[name][0]
    return MORE / f"{stem}.replay.json.gz", MORE / f"{stem}.capture.json.gz"


def joined(name: str):
    replay, capture = pair(name)
    return load_trace(replay), join_captures(load_trace(replay), [(capture.name, load_trace(capture))])


# -- the real pairs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_a_real_replay_joined_to_its_capture_gives_every_replayed_kernel_its_op(name):
    plain, (trace, report) = joined(name)
    dev = lookup_device("mi300x-ds")
    before, after = build_workload(plain, dev), build_workload(trace, dev)
    replayed = [i for i in plain.graph_kernels if plain.kernels[i].cat == "kernel"]
    assert report.launches == report.joined == 1 and report.kernels == len(replayed)
    assert report.share == pytest.approx(1.0)  # every replayed kernel's time has the op that launched it
    assert all(trace.kernel_op[i] is not None and trace.ops[trace.kernel_op[i]].origin == "capture" for i in replayed)
    assert after.kernels == before.kernels and after.busy_s == before.busy_s and after.span_s == before.span_s
    assert sum(g.time_s for g in after.groups) == pytest.approx(sum(g.time_s for g in before.groups))
    assert not any(replay_row(g) for g in after.groups) and any(replay_row(g) for g in before.groups)
    graph = [g for g in after.groups if g.owner == "graph"]
    assert sum(g.time_s for g in graph) == pytest.approx(report.time_s)
    assert all(g.shapes for g in graph) and any(g.model == "gemm" for g in graph)
    eager = [g for g in after.groups if g.owner == "op"]
    assert {(g.op, g.calls) for g in eager} == {(g.op, g.calls) for g in before.groups if g.owner == "op"}


def tracelens_gemms(name: str) -> list[dict]:
    with open(MORE / "tracelens-csv" / PAIRS[name][1] / "GEMM.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_joined_gemm_flops_match_tracelens_within_two_percent(name):
    _, (trace, _) = joined(name)
    work = build_workload(trace, lookup_device("mi300x-ds"))
    rows = tracelens_gemms(name)
    compared = 0
    for row in rows:
        if row["name"] not in GEMMS:
            continue  # vllm::rocm_unquantized_gemm, aiter::gemm_a16w16: the same GEMM one level up
        mnk = {"m": int(row["param: M"]), "n": int(row["param: N"]), "k": int(row["param: K"])}
        [g] = [g for g in work.groups if g.op == row["name"] and dict(g.shape) == mnk]
        assert g.flops / g.calls == pytest.approx(float(row["GFLOPS_first"]) * 1e9, rel=0.02)
        compared += 1
    assert compared == sum(r["name"] in GEMMS for r in rows) >= 4


def test_the_capture_trace_lists_its_graph_with_each_launch_and_its_op():
    capture = load_trace(pair("sglang")[1])
    [g] = capture.captured
    assert len(g.launches) == 544 and all(x.name and x.op is not None for x in g.launches)
    mm = [capture.ops[x.op] for x in g.launches if x.name.startswith("Cijk_")]
    assert {o.name for o in mm} == {"aten::mm"} and len(mm) == 145
    assert load_trace(pair("sglang")[0]).captured == ()


def test_a_joined_moe_layer_is_costed_from_the_top_k_and_expert_weights_copied_with_it():
    """vllm::moe_forward's W is read from the ops inside it (TopK's k = 4, the E × … views of its mxfp4 expert
    weights), which launch no kernel: the join copies its whole subtree with it, so each replayed layer is costed as
    the capture's own record is (2·M·top-k·one expert's weights, both GEMMs)."""
    _, (trace, _) = joined("vllm")
    work = build_workload(trace, lookup_device("mi300x-ds"))
    [g] = [g for g in work.groups if g.op == "vllm::moe_forward"]
    assert g.owner == "graph" and g.modelled and g.regime != "W unknown" and g.calls == 24
    assert g.flops / g.calls == 2 * 32 * 4 * (3072 * 5888 + 2944 * 3072)
    assert dict(g.shape) == {"m": 32, "experts": 32, "top_k": 4, "experts_used": 32}
    copied = [o for o in trace.ops if o.origin == "capture" and o.name == "aten::view" and o.dims
              and o.dims[0] in ([32, 1536, 5888], [32, 1472, 3072])]
    assert len(copied) == 2 * 24  # both expert views, once per layer of the one replay


def test_a_joined_attention_reads_the_steps_lengths_from_the_replays_iteration_annotation():
    """The step's `execute_…_generation_32(sq32sk55086…)` annotation is in the replay trace and owns no kernel;
    the reader keeps it, and the attention copied from the capture (at the replay's launch, inside it) is costed
    from its lengths: TraceLens's figures exactly (0.9025 GFLOP, 108.09 MiB per call)."""
    plain, (trace, _) = joined("vllm")
    [(ts, end, name)] = plain.iterations
    assert name.startswith("execute_32_context_0(") and "sk55086" in name and end > ts
    assert not any(o.name == name for o in plain.ops)  # it owns no kernel: no op of the trace
    work = build_workload(trace, lookup_device("mi300x-ds"))
    [g] = [g for g in work.groups if g.op == "vllm::unified_attention_with_output"]
    assert g.owner == "graph" and g.model == "attention" and g.modelled
    assert g.flops / g.calls == 4 * 64 * 64 * 55086
    assert g.bytes / g.calls / 2 ** 20 == pytest.approx(108.08984375)
    assert load_trace(pair("vllm")[1]).iterations == ()  # the capture ran no step


# -- a PIECEWISE pair built in the real files' format --------------------------------------------------------------

BF16 = "c10::BFloat16"
MI300X = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992, "computeMajor": 9,
          "computeMinor": 4, "warpSize": 64, "numSms": 304}
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85031714816, "computeMajor": 9,
        "computeMinor": 0, "warpSize": 32, "numSms": 132}
NORM = ("aiter::rms_norm", [[8, 4096], [4096]], "rmsnorm_kernel")
QKV = (("aten::linear", "aten::mm"), [[8, 4096], [4096, 12288]], "Cijk_gemm_A")
OUT = ("aten::mm", [[8, 4096], [4096, 4096]], "Cijk_gemm_B")
ADD = ("aten::add", [[8, 4096], [8, 4096]], "elementwise_add")
ZERO = ("aten::zero_", [[8, 4096]], "(memset)")
LAYER = [NORM, QKV]  # the piece before attention; a second layer captures the same piece
TAIL = [OUT, ADD, ZERO]
ATTN = ("aten::bmm", [[64, 8, 128], [64, 128, 1024]], "attention_kernel")


class Doc:
    """A Kineto trace as ROCm's profiler writes it (cuda_runtime calls, kernels on pid 2), events added in order."""

    def __init__(self, device: dict, names: bool = True) -> None:
        self.events: list[dict] = []
        self.ids = 0
        self.cuda = device is H100
        self.device, self.names = device, names and not self.cuda  # CUDA's launch calls name no kernel

    def _id(self) -> int:
        self.ids += 1
        return self.ids

    def op(self, name: str, ts: float, dur: float, dims: list) -> int:
        ext = self._id()
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 7, "tid": 7, "ts": ts, "dur": dur,
                            "args": {"External id": ext, "Input Dims": dims, "Input type": [BF16] * len(dims)}})
        return ext

    def call(self, name: str, ts: float, dur: float = 1.0, ext: int | None = None, kernel: str = "") -> int:
        corr = self._id()
        args: dict = {"correlation": corr}
        if ext is not None:
            args["External id"] = ext
        if kernel and self.names:
            args["kernel"] = kernel
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 7, "tid": 7, "ts": ts,
                            "dur": dur, "args": args})
        return corr

    def launch(self, ts: float, kernel: str, ext: int) -> int:
        return self.call("cudaLaunchKernel" if self.cuda else "hipLaunchKernel", ts, 2.0, ext, kernel)

    def ran(self, name: str, ts: float, dur: float, corr: int, ext: int | None = None, cat: str = "kernel",
            stream: int = 0) -> None:
        args: dict = {"device": 0, "stream": stream, "correlation": corr}
        if ext is not None:
            args["External id"] = ext
        if cat == "gpu_memset":
            args["bytes"] = 65536
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 2, "tid": stream, "ts": ts, "dur": dur,
                            "args": args})

    def write(self, path: Path) -> Path:
        doc = {"schemaVersion": 1, "deviceProperties": [self.device], "traceEvents": self.events}
        with gzip.open(path, "wt") as f:
            json.dump(doc, f)
        return path

    @property
    def capture_calls(self) -> tuple[str, str]:
        return ("cudaStreamBeginCapture", "cudaStreamEndCapture") if self.cuda else ("hipStreamBeginCapture",
                                                                                     "hipStreamEndCapture")


def capture_doc(graphs: list[list[tuple]], device: dict = MI300X, names: bool = True) -> Doc:
    """The capture trace: a warm-up launch that ran (no part of a graph), then each graph's launches between a
    BeginCapture and an EndCapture, each inside its op (an op pair nests the second in the first)."""
    d = Doc(device, names)
    ext = d.op("aten::fill_", 10, 5, [[8, 4096], []])
    d.ran("fill_kernel", 20, 2, d.launch(11, "fill_kernel", ext), ext)
    begin, end = d.capture_calls
    t = 100.0
    for spec in graphs:
        d.call(begin, t, 2)
        t += 5
        for op, dims, kernel in spec:
            if isinstance(op, tuple):
                d.op(op[0], t, 9, [dims[0], dims[1][::-1]])
                ext = d.op(op[1], t + 1, 7, dims)
            else:
                ext = d.op(op, t, 8, dims)
            if kernel == "(memset)":
                d.call("cudaMemsetAsync" if d.cuda else "hipMemsetAsync", t + 2, 1, ext)
            else:
                d.launch(t + 2, kernel, ext)
            t += 10
        d.call(end, t, 2)
        t += 50
    return d


def replay_doc(parts: list, steps: int = 2, device: dict = MI300X) -> Doc:
    """The replay trace: per profiler step, graph launches (their kernels with the launch's correlation and no
    External id) and eager ops with their own kernels, in the order given."""
    d = Doc(device)
    t = 1000.0
    for s in range(steps):
        start = t
        for kind, spec in parts:
            if kind == "graph":
                corr = d.call("cudaGraphLaunch" if d.cuda else "hipGraphLaunch", t, 5)
                kt = t + 10
                for *_, kernel in spec:
                    if kernel == "(memset)":
                        d.ran("Memset (Device)", kt, 3, corr, cat="gpu_memset")
                    else:
                        d.ran(kernel, kt, 40, corr)
                    kt += 41
                t = kt + 5
            else:
                op, dims, kernel = spec
                ext = d.op(op, t, 10, dims)
                d.ran(kernel, t + 12, 6, d.launch(t + 2, kernel, ext), ext)
                t += 30
        d.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 7, "tid": 7,
                         "ts": start - 1, "dur": t - start + 2, "args": {}})
        t += 100
    return d


PIECEWISE = [("graph", LAYER), ("eager", ATTN), ("graph", TAIL), ("graph", LAYER)]


def write_pair(tmp_path: Path, graphs: list, parts: list = PIECEWISE, device: dict = MI300X,
               names: bool = True) -> tuple[Path, Path]:
    return (replay_doc(parts, device=device).write(tmp_path / "replay.json.gz"),
            capture_doc(graphs, device, names).write(tmp_path / "capture.json.gz"))


def test_a_piecewise_replay_joins_each_graph_and_keeps_the_eager_op_between(tmp_path):
    replay, capture = write_pair(tmp_path, [LAYER, TAIL, LAYER])
    plain = load_trace(replay)
    trace, report = join_captures(plain, [(capture.name, load_trace(capture))])
    assert report.graphs == 3 and report.launches == report.joined == 6
    assert report.kernels == report.kernels_joined == 2 * (2 + 2 + 2) and report.share == pytest.approx(1.0)
    dev = lookup_device("mi300x-ds")
    before, work = build_workload(plain, dev), build_workload(trace, dev)
    assert work.kernels == before.kernels and work.busy_s == before.busy_s
    by = {(g.op, g.owner, g.shapes_text): g for g in work.groups}
    qkv = by[("aten::mm", "graph", "8×4096 · 4096×12288")]
    assert qkv.calls == 4 and qkv.kernels == 4  # two layers a step, two steps: calls and W count per replay
    assert qkv.flops == pytest.approx(4 * 2 * 8 * 4096 * 12288)
    assert by[("aten::mm", "graph", "8×4096 · 4096×4096")].calls == 2
    assert not any(g.op == "aten::linear" for g in work.groups)  # the op around the GEMM launched nothing
    by = {(g.op, g.owner): g for g in work.groups}
    assert by[("aiter::rms_norm", "graph")].calls == 4 and by[("aten::add", "graph")].calls == 2
    attn = by[("aten::bmm", "op")]  # the eager op between the graphs: its own launch, as before
    assert attn.calls == 2 and attn.flops == pytest.approx(2 * 2 * 64 * 8 * 128 * 1024)
    assert [t.cat for t in work.transfers] == ["memset"] and work.transfers[0].calls == 2
    assert not any(replay_row(g) for g in work.groups)


def test_the_cli_shows_graph_rows_and_says_how_much_was_joined(tmp_path, capsys):
    replay, capture = write_pair(tmp_path, [LAYER, TAIL, LAYER])
    assert main(["profile", "--trace", str(replay), "--graph-capture", str(capture), "-d", "mi300x-ds",
                 "--no-save", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "(graph) mm bf16 8×4096 · 4096×12288" in out and "(graph) aiter::rms_norm bf16 8×4096 · 4096" in out
    assert "(graph) bmm" not in out and "bmm bf16 64×8×128" in out
    assert "6 of 6 graph launches joined to their capture; 12 of 12 replayed kernels (100.0% of their time)" \
        in " ".join(out.split())
    assert "(CUDA graph replay)" not in out


def test_a_capture_folder_is_read_file_by_file(tmp_path, capsys):
    folder = tmp_path / "capture_traces"
    folder.mkdir()
    replay = replay_doc(PIECEWISE).write(tmp_path / "replay.json.gz")
    capture_doc([LAYER]).write(folder / "piece_1.json.gz")
    capture_doc([TAIL]).write(folder / "piece_2.json.gz")
    assert main(["profile", "--trace", str(replay), "--graph-capture", str(folder), "-d", "mi300x-ds",
                 "--no-save", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    gc = doc["summary"]["graph_capture"]
    assert gc["captures"] == ["piece_1.json.gz", "piece_2.json.gz"] and gc["joined"] == gc["launches"] == 6
    assert gc["share"] == pytest.approx(1.0) and gc["not_joined"] == {}
    assert {o["owner"] for o in doc["ops"]} == {"graph", "op"}
    assert doc["notes"][0].startswith("graph capture (piece_1.json.gz, piece_2.json.gz): 6 of 6")


# -- what does not match ---------------------------------------------------------------------------------------------


def _bad(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_a_capture_trace_with_no_captured_graph_is_refused_in_one_line(tmp_path, capsys):
    replay, _ = write_pair(tmp_path, [LAYER])
    err = _bad(capsys, ["profile", "--trace", str(replay), "--graph-capture", str(replay), "--no-save"])
    assert "replay.json.gz: no graph capture in this trace" in err and "BeginCapture" in err


def test_a_replay_with_no_graph_launch_is_refused_in_one_line(tmp_path, capsys):
    replay, capture = write_pair(tmp_path, [LAYER], parts=[("eager", ATTN)])
    err = _bad(capsys, ["profile", "--trace", str(replay), "--graph-capture", str(capture), "--no-save"])
    assert "no graph launch" in err


def test_graph_capture_needs_one_replay_trace(tmp_path, capsys):
    replay, capture = write_pair(tmp_path, [LAYER])
    assert "give the replay with --trace" in _bad(capsys, ["profile", "--graph-capture", str(capture), "--no-save",
                                                           "--", "python", "x.py"])
    assert "give one --trace FILE" in _bad(capsys, ["profile", "--trace", str(replay), str(replay),
                                                    "--graph-capture", str(capture), "--no-save"])
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no traces in it" in _bad(capsys, ["profile", "--trace", str(replay), "--graph-capture", str(empty),
                                              "--no-save"])


def test_a_capture_of_other_kernels_joins_nothing_and_says_where_it_parts(tmp_path, capsys):
    other = [NORM, ("aten::mm", QKV[1], "Cijk_gemm_Z")]
    replay, capture = write_pair(tmp_path, [other, TAIL])
    assert main(["profile", "--trace", str(replay), "--graph-capture", str(capture), "-d", "mi300x-ds",
                 "--no-save", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    gc = doc["summary"]["graph_capture"]
    assert gc["launches"] == 6 and gc["joined"] == 2  # the tail's launches; no layer is given another's ops
    assert gc["share"] == pytest.approx(1 / 3)  # 2 of the 6 kernels a step, all 40 µs
    assert gc["not_joined"] == {"no_match": 4}
    line = next(n for n in doc["notes"] if "not joined" in n)
    assert "4 graph launches not joined" in line and "parts from it at activity 2" in line
    assert "the replay ran Cijk_gemm_A, the capture launched Cijk_gemm_Z" in line
    replayed = [o for o in doc["ops"] if replay_row(o)]
    assert replayed and sum(o["kernels"] for o in replayed) == 8  # the unjoined launches keep their kernels, no op
    assert {o["op"] for o in doc["ops"] if o["owner"] == "graph"} == {"aten::mm", "aten::add", "aten::zero_"}  # the tail's


def test_captures_with_the_same_kernels_but_other_shapes_are_not_guessed_between(tmp_path, capsys):
    wide = [NORM, (QKV[0], [[16, 4096], [4096, 12288]], QKV[2])]  # another batch size: the same kernels
    replay, capture = write_pair(tmp_path, [LAYER, TAIL])
    other = capture_doc([wide]).write(tmp_path / "capture_bs16.json.gz")
    trace, report = join_captures(load_trace(replay), [(capture.name, load_trace(capture)),
                                                       (other.name, load_trace(other))])
    assert report.joined == 2 and report.failed_kernels == 8
    [(why, lines)] = report.failed.items()
    assert why == "other_shapes" and len(lines) == 4
    assert "capture.json.gz graph 1, capture_bs16.json.gz graph 1" in lines[0] and "batch size" in lines[0]
    assert all(o.dims != tuple(wide[1][1]) for o in trace.ops)


def test_a_captured_launch_with_no_replayed_kernel_is_fitted_around_when_the_ops_stay_the_same(tmp_path):
    extra = [NORM, ("aten::empty_like", [[8, 4096]], "noop_kernel"), QKV]  # launched at capture, no graph node
    replay, capture = write_pair(tmp_path, [extra, TAIL])
    trace, report = join_captures(load_trace(replay), [(capture.name, load_trace(capture))])
    assert report.joined == 6 and report.passed_over == 4 and report.share == pytest.approx(1.0)
    assert any("fitted around" in line for line in report.lines())
    work = build_workload(trace, lookup_device("mi300x-ds"))
    assert not any(g.op == "aten::empty_like" for g in work.groups)
    assert next(g for g in work.groups if g.shapes == QKV[1]).calls == 4


def test_a_fit_that_could_give_a_kernel_either_of_two_ops_is_not_made(tmp_path):
    twice = [NORM, QKV, ("aten::mm", [[8, 4096], [4096, 8192]], QKV[2])]  # which Cijk_gemm_A ran?
    replay, capture = write_pair(tmp_path, [twice, TAIL])
    _, report = join_captures(load_trace(replay), [(capture.name, load_trace(capture))])
    assert report.joined == 2 and list(report.failed) == ["ambiguous_fit"]
    assert "fit a capture in more than one way" in " ".join(report.lines())


def test_cuda_captures_name_no_kernel_so_graphs_match_by_count_and_kind(tmp_path):
    replay, capture = write_pair(tmp_path, [LAYER, TAIL], device=H100)
    cap = load_trace(capture)
    assert all(x.name == "" for g in cap.captured for x in g.launches if x.cat == "kernel")
    trace, report = join_captures(load_trace(replay), [(capture.name, cap)])
    assert report.joined == report.by_order == 6 and report.share == pytest.approx(1.0)
    assert any("matched by the count and kind of their activities only" in line for line in report.lines())
    work = build_workload(trace, lookup_device("h100"))
    assert next(g for g in work.groups if g.shapes == QKV[1]).calls == 4


def test_several_streams_are_matched_stream_by_stream(tmp_path):
    d = replay_doc([("graph", LAYER + TAIL)], steps=1)
    for e in d.events:  # the tail's kernels ran on a second stream, overlapping the layer's
        if e["cat"] in ("kernel", "gpu_memset") and e["name"] in ("Cijk_gemm_B", "elementwise_add", "Memset (Device)"):
            e["args"]["stream"] = e["tid"] = 5
            e["ts"] -= 80
    replay = d.write(tmp_path / "replay.json.gz")
    capture = capture_doc([LAYER + TAIL]).write(tmp_path / "capture.json.gz")
    plain = load_trace(replay)
    keys = [plain.kernels[i].name for i in sorted(plain.graph_kernels)]
    assert keys != [k for *_, k in LAYER + TAIL if k != "(memset)"]  # not the capture's order by start
    trace, report = join_captures(plain, [(capture.name, load_trace(capture))])
    assert report.joined == 1 and report.share == pytest.approx(1.0)
    for i in plain.graph_kernels:
        k = plain.kernels[i]
        if k.cat == "kernel":
            want = {s[2]: s for s in LAYER + TAIL}[k.name]
            assert trace.ops[trace.kernel_op[i]].dims == tuple(want[1])


def test_join_refuses_what_has_nothing_to_join(tmp_path):
    replay, capture = write_pair(tmp_path, [LAYER])
    with pytest.raises(CaptureError, match="no graph capture"):
        join_captures(load_trace(replay), [("r", load_trace(replay))])


# -- kept in the store: show, --json and the Profile tab ---------------------------------------------------------


def test_a_joined_profile_kept_shows_its_graph_rows_in_show_and_its_json(tmp_path, capsys):
    replay, capture = pair("vllm")
    db = str(tmp_path / "s.db")
    assert main(["profile", "--trace", str(replay), "--graph-capture", str(capture), "-d", "mi300x-ds",
                 "--json", "--db", db]) == 0
    own = json.loads(capsys.readouterr().out)
    assert main(["show", own["run_id"][:8], "--db", db, "--wide"]) == 0
    shown = capsys.readouterr().out
    assert "(graph) addmm bf16 5120 · 32×2880 · 2880×5120" in shown and "(graph) vllm::moe_forward" in shown
    assert "graph capture (vllm-decode-full-mi300x.capture.json.gz): 1 of 1 graph launch joined" in \
        " ".join(shown.split())
    assert main(["show", own["run_id"][:8], "--json", "--db", db]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["graph_capture"] == own["summary"]["graph_capture"]
    assert doc["summary"]["graph_capture"]["share"] == pytest.approx(1.0) and doc["notes"] == own["notes"]
    assert [(o["op"], o["owner"], o["calls"]) for o in doc["ops"]] == [(o["op"], o["owner"], o["calls"])
                                                                        for o in own["ops"]]
    assert any(o["owner"] == "graph" and o["op"] == "aten::addmm" for o in doc["ops"])


async def test_the_profile_tab_marks_graph_rows(tmp_path):
    from rooftop.store.runs import Store
    from rooftop.store.workloads import save_profile
    from rooftop.tui.app import AppConfig, create_app
    from rooftop.tui.app.widgets import FitTable

    _, (trace, _) = joined("sglang")
    work = build_workload(trace, lookup_device("mi300x-ds"))
    with Store.open(tmp_path / "r.db") as store:
        save_profile(store, work, source="sglang.replay.json.gz", backend="trace")
    app = create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", export_dir=tmp_path))
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        ops = app.query_one("#prof-ops", FitTable)
        rows = [" ".join(str(c) for c in ops.get_row_at(i)) for i in range(ops.row_count)]
        assert any("(graph) mm bf16 32×4096" in r for r in rows)
        assert any("argmax" in r and "(graph)" not in r for r in rows)  # an eager op says nothing


def test_a_capture_read_leniently_keeps_its_launches_kernel_names(tmp_path):
    """A file that is not strict JSON (a NaN somewhere) is read event by event as plain JSON: the launches made
    while capturing still name their kernels, so the graphs still match by name."""
    replay, capture = write_pair(tmp_path, [LAYER, TAIL])
    text = gzip.decompress(capture.read_bytes()).decode().replace('"traceEvents": [',
                                                                   '"traceEvents": [{"ph": "X", "ts": NaN}, ', 1)
    capture.write_bytes(gzip.compress(text.encode()))
    cap = load_trace(capture)
    assert [x.name for x in cap.captured[0].launches] == ["rmsnorm_kernel", "Cijk_gemm_A"]
    _, report = join_captures(load_trace(replay), [(capture.name, cap)])
    assert report.joined == 6 and report.by_order == 0
