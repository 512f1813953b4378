"""The critical path and its what-ifs on small Kineto traces made here, each with an answer known from its events;
and on the shared real traces: re-timing with nothing changed gives back every time exactly, the split sums to the
path's length, and every trace gives a path or says in one line why it cannot.

Times in the traces are µs; the answers are in seconds (the trace's first event is its clock's zero)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from rooftop.models.program import depgraph as dg
from rooftop.models.catalog import lookup_device
from rooftop.models.program.critpath import (
    AT_ROOF,
    HIDDEN,
    NO_GAPS,
    SPLIT_KEYS,
    STRAGGLER,
    WHOLE,
    WindowError,
    critical_path,
    shrinkable,
    windows_of,
)
from rooftop.models.program.depgraph import build_graph
from rooftop.models.program.retime import last_points, retime, retime_few, window_ends
from rooftop.models.trace.read import parse_trace
from rooftop.models.program.workload import build_workload

US = 1e-6
DATA = Path(__file__).parent / "data"
QWEN = DATA / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
REAL = sorted((DATA / "real-traces").rglob("*.json.gz"))
H200 = lookup_device("h200")
BF16 = ["c10::BFloat16", "c10::BFloat16"]
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


class Events:
    """One thread's ops and runtime calls, and the device's activities, as torch.profiler writes them."""

    def __init__(self) -> None:
        self.ev: list[dict] = []
        self.ids = 100

    def _id(self) -> int:
        self.ids += 1
        return self.ids

    def x(self, cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: object) -> None:
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                        "args": args})

    def call(self, name: str, ts: float, dur: float = 1.0) -> int:
        corr = self._id()
        self.x("cuda_runtime", name, ts, dur, correlation=corr)
        return corr

    def launch(self, kernel: str, at: float, ts: float, dur: float, stream: int = 7, op: tuple | None = None,
               **args: object) -> int:
        """A kernel at [ts, ts + dur] launched at `at` (a 2 µs call), inside op (name, dims) when given."""
        corr = self._id()
        link = {}
        if op is not None:
            ext = self._id()
            link = {"External id": ext}
            self.x("cpu_op", op[0], at - 0.5, 3.0, **{"External id": ext, "Input Dims": op[1], "Input type": BF16})
        self.x("cuda_runtime", "cudaLaunchKernel", at, 2.0, correlation=corr, **link)
        self.x("kernel", kernel, ts, dur, pid=0, tid=stream, correlation=corr, stream=stream, device=0, **link,
               **args)
        return corr

    def trace(self):
        return parse_trace({"traceEvents": self.ev})


BIG_MM = ("aten::mm", [[4096, 4096], [4096, 4096]])
SMALL_MM = ("aten::mm", [[64, 64], [64, 64]])


def _answer(t, window=None, peers=()):
    w = build_workload(t, H200)
    return w, critical_path(t, w, window, peers)


def _what(cp, name: str):
    (got,) = [x for x in cp.what_if if x.name == name]
    return got


def _event_wait_trace() -> Events:
    """Stream 7 runs A (1 ms); stream 8 runs B, then waits on the event recorded after A, then runs C."""
    e = Events()
    e.launch("gemm_A", 0.5, 5, 1000, stream=7, op=BIG_MM)
    record = e.call("cudaEventRecord", 3.0)
    e.launch("gemm_B", 5, 10, 50, stream=8, op=SMALL_MM)
    wait = e.call("cudaStreamWaitEvent", 8.0)
    e.x("cuda_sync", "Stream Wait Event", 60, 0, pid=0, tid=8, stream=8, correlation=wait, device=0,
        wait_on_stream=7, wait_on_cuda_event_record_corr_id=record)
    e.launch("tail_C", 12, 1005, 10, stream=8)  # no op: a group with no bound
    return e


def test_two_streams_joined_by_an_event_wait_only_the_waited_on_kernel_shortens_the_step():
    t = _event_wait_trace().trace()
    w, cp = _answer(t)
    assert cp.graph and cp.window == WHOLE
    (step,) = cp.steps
    assert step.length_s == pytest.approx((1015 - 0.5) * US, abs=1e-12)  # first call to C's end
    assert step.split["device"] == pytest.approx(1010 * US, abs=1e-12)  # A and C: B ran beside A, off the path
    assert step.split["launch"] == pytest.approx(4.5 * US, abs=1e-12)  # A's launch to its start
    assert step.split["other_stream"] == pytest.approx(0.0, abs=1e-12)  # C started the moment A ended
    ops = {o.label.split()[0]: o for o in cp.ops}
    a_key = w.kernel_group[[k.name for k in t.kernels].index("gemm_A")]
    b_key = w.kernel_group[[k.name for k in t.kernels].index("gemm_B")]
    assert {o.key for o in cp.ops} >= {a_key} and b_key not in {o.key for o in cp.ops}
    assert ops["aten::mm"].time_s == pytest.approx(1000 * US, abs=1e-12)
    groups = w.group_by_key()
    bound_a = groups[a_key].bound_s
    assert bound_a is not None and bound_a < 1000 * US
    (op_a,) = [x for x in cp.what_if if x.name.startswith("op:") and "4096" in x.name]
    assert op_a.retimed and op_a.saving_s == pytest.approx(1000 * US - bound_a, abs=1e-12)
    assert cp.fix_first[0].key == a_key and cp.fix_first[0].saving_s == op_a.saving_s
    # B shrunk to its roof (the other stream's kernel) saves nothing: C still waits for A
    g = build_graph([t], [[(-math.inf, math.inf)]])
    bi = [k.name for k in t.kernels].index("gemm_B")
    f = shrinkable(groups[b_key])
    assert f is not None and f < 1
    cut = {g.duration_edge(g.device_act(0, bi)): t.kernels[bi].dur * (1 - f)}
    assert window_ends(g, retime(g, cut)) == window_ends(g)


def test_an_event_wait_is_read_from_the_cuda_sync_event_not_guessed():
    """Without Kineto's cuda_sync event the wait's record is unknown: C's delay after B (queued behind the wait) is
    put on another stream, and A is off the path (its speed-up would save nothing the trace can show)."""
    e = _event_wait_trace()
    e.ev = [x for x in e.ev if x["cat"] != "cuda_sync"]
    t = e.trace()
    w, cp = _answer(t)
    assert cp.steps[0].split["other_stream"] == pytest.approx((1005 - 60) * US, abs=1e-12)
    a_key = w.kernel_group[[k.name for k in t.kernels].index("gemm_A")]
    assert a_key not in {o.key for o in cp.ops}
    # B (before the wait on its stream) is on the path instead, its wait kept as observed: shrunk, it saves only
    # until A's end is the window's last point
    (op_b,) = [x for x in cp.what_if if x.name.startswith("op:")]
    assert "64×64" in op_b.name and op_b.saving_s == pytest.approx(10 * US, abs=1e-12)


def test_a_fully_overlapped_all_reduce_hidden_saves_nothing():
    e = Events()
    e.launch("gemm_K", 0.5, 5, 200, stream=7, op=BIG_MM)
    e.launch(NCCL, 3.5, 10, 90, stream=20)  # under K from start to end
    _, cp = _answer(e.trace())
    assert cp.graph
    hidden = _what(cp, HIDDEN)
    assert hidden.retimed and hidden.saving_s == 0.0 and hidden.length_s == cp.length_s
    assert cp.length_s == pytest.approx((205 - 0.5) * US, abs=1e-12)
    assert cp.split["device"] == pytest.approx(200 * US, abs=1e-12)


def test_a_cpu_bound_step_no_roof_what_if_saves_anything():
    e = Events()
    e.x("user_annotation", "ProfilerStep#1", 0, 300)
    e.launch("gemm_1", 10.5, 15, 10, op=BIG_MM)
    e.launch("gemm_2", 200.5, 205, 10, op=BIG_MM)
    _, cp = _answer(e.trace())
    assert cp.window == "ProfilerStep#1"
    (step,) = cp.steps
    assert step.length_s == pytest.approx(300 * US, abs=1e-12)  # the step's CPU range: its last CPU work after the kernels
    assert step.split["cpu"] == pytest.approx(296 * US, abs=1e-12)
    assert step.split["launch"] == pytest.approx(4 * US, abs=1e-12)  # the two launch calls' own time
    assert step.split["device"] == 0.0 and step.ops == ()
    assert _what(cp, AT_ROOF).saving_s == 0.0
    assert not [x for x in cp.what_if if x.name.startswith("op:")] and cp.fix_first == ()
    assert _what(cp, NO_GAPS).saving_s == pytest.approx(4 * US, abs=1e-12)  # only the launch calls' time goes


def _rank(arrive: float, work: float) -> Events:
    """A rank that works on the device until `work`, then enters the all-reduce at `arrive` (its launch 5 µs
    before); every rank's all-reduce ends at 110 µs."""
    e = Events()
    e.x("cpu_op", "aten::empty", 0, 0.1)  # both clocks count from 0
    if work:
        e.launch("gemm_pre", 0.5, 2, work, op=BIG_MM)
    e.launch(NCCL, arrive - 5, arrive, 110 - arrive, stream=20)
    return e


def test_a_two_rank_collective_the_late_rank_sets_the_end():
    early, late = _rank(10, 0).trace(), _rank(100, 78).trace()
    _, cp = _answer(early, peers=[late])
    assert cp.graph
    (step,) = cp.steps
    assert step.length_s == pytest.approx(105 * US, abs=1e-12)  # from rank 0's launch at 5 to the end at 110
    assert step.split["device"] == pytest.approx(10 * US, abs=1e-12)  # the all-reduce once both had arrived
    assert step.split["peers"] == pytest.approx(95 * US, abs=1e-12)  # rank 1 not there yet
    straggler = _what(cp, STRAGGLER)
    # rank 1 arriving at 10 µs (its late launch at 95 made early): the all-reduce ends at 20, but its matmul, which
    # held no arrival, still runs to 80: the job's step ends there
    assert straggler.saving_s == pytest.approx(30 * US, abs=1e-12)
    assert _what(cp, HIDDEN).saving_s == pytest.approx(10 * US, abs=1e-12)  # its own time gone, still waits for rank 1
    _, alone = _answer(early)  # without its peer: the all-reduce is rank 0's own 100 µs
    assert alone.split["peers"] == 0.0 and alone.split["device"] == pytest.approx(100 * US, abs=1e-12)


def test_a_window_named_by_an_annotation_and_one_the_trace_lacks():
    e = _event_wait_trace()
    e.x("user_annotation", "forward", 0, 20)
    t = e.trace()
    label, names, spans = windows_of(t, "forward")
    assert label == "forward" and len(spans) == 1
    _, cp = _answer(t, "forward")
    assert cp.window == "forward" and cp.steps[0].start == spans[0][0]
    with pytest.raises(WindowError, match=r"no annotation named 'backward'.*'forward'"):
        windows_of(t, "backward")


def _load(path: Path):
    from rooftop.store.tracefile import load_trace

    return load_trace(path)


@pytest.mark.parametrize("path", [QWEN, *REAL], ids=lambda p: p.name)
def test_every_real_trace_gives_a_path_whose_split_sums_to_its_length(path):
    t = _load(path)
    w = build_workload(t, H200)
    cp = critical_path(t, w)
    assert cp.graph or cp.why_not
    assert sum(cp.split[k] for k in SPLIT_KEYS) == pytest.approx(cp.length_s, rel=1e-9, abs=1e-12)
    for s in cp.steps:
        assert sum(s.split.values()) == pytest.approx(s.length_s, rel=1e-9, abs=1e-12)
        assert sum(o.time_s for o in s.ops) == pytest.approx(s.split["device"], rel=1e-9, abs=1e-12)
    for x in cp.what_if:
        assert 0.0 <= x.saving_s <= cp.length_s and 0.0 <= x.length_s <= cp.length_s
        assert x.retimed == cp.graph
    assert [f.saving_s for f in cp.fix_first] == sorted((f.saving_s for f in cp.fix_first), reverse=True)


@pytest.mark.parametrize("path", [QWEN, *REAL], ids=lambda p: p.name)
def test_re_timing_with_nothing_changed_gives_back_every_time_exactly(path):
    t = _load(path)
    _, _, spans = windows_of(t)
    g = build_graph([t], [spans])
    assert set(retime(g)) <= {0.0} and retime_few(g, {}) == {}
    cut_nothing = {e: 0.0 for e in range(0, len(g.in_kind), 7)}
    assert set(retime(g, cut_nothing)) <= {0.0}
    ends = window_ends(g)
    for w, p in enumerate(last_points(g)):
        assert p < 0 or ends[w] == g.time[p]
    # each binding edge's weight is the delay observed on it; no other edge asks for more than its slack
    for p in range(g.points):
        for e in range(g.in_start[p], g.in_start[p + 1]):
            gap = g.time[p] - g.time[g.in_pred[e]]
            if e == g.binding[p]:
                assert g.in_weight[e] == gap and g.in_slack[e] == 0.0
            else:
                assert g.in_weight[e] + g.in_slack[e] <= max(gap, 0.0) + 1e-15


def test_on_the_h200_decode_trace_what_ifs_are_no_larger_than_the_sums_they_replace():
    t = _load(QWEN)
    w = build_workload(t, H200)
    cp = critical_path(t, w)
    assert cp.graph and cp.steps
    groups = {f"op:{' '.join(x for x in (g.op, g.dtype, g.shapes_text) if x)}": g for g in w.groups}
    summed = {AT_ROOF: w.roof_saves_s, NO_GAPS: w.span_s - w.no_gaps_s}
    checked = 0
    for x in cp.what_if:
        assert x.retimed and 0.0 <= x.saving_s <= cp.length_s and 0.0 <= x.length_s <= cp.length_s
        if x.name in summed:
            limit = summed[x.name]
        else:
            g = groups[x.name]
            limit = g.alone_s * (1 - shrinkable(g))
        assert x.saving_s <= limit + 1e-12, x.name
        checked += 1
    assert checked >= 3
    # the step is CPU-bound (the device idle 91% of it): the roofs buy almost nothing of what the sum promised
    assert _what(cp, AT_ROOF).saving_s < 0.1 * w.roof_saves_s


def test_a_gpu_only_trace_falls_back_to_the_sums_labelled():
    e = Events()
    e.x("kernel", "gemm", 5, 100, pid=0, tid=7, stream=7, device=0)
    e.x("kernel", "gemm", 205, 100, pid=0, tid=7, stream=7, device=0)
    t = e.trace()
    w, cp = _answer(t)
    assert not cp.graph and "launch" in cp.why_not
    assert cp.what_if and all(not x.retimed for x in cp.what_if)
    assert _what(cp, NO_GAPS).length_s == w.no_gaps_s
    assert cp.length_s == w.span_s


def test_the_graph_of_the_decode_trace_is_linked():
    """Every kernel of the decode trace hangs off its launch: no device activity is a source of the graph."""
    t = _load(QWEN)
    g = build_graph([t], [[(-math.inf, math.inf)]])
    kinds = [g.in_kind[e] for e in range(len(g.in_kind))]
    assert kinds.count(dg.LAUNCH) == len(t.kernels)
    sources = [p for p in range(g.points) if g.in_start[p] == g.in_start[p + 1]]
    assert all(g.act_call[p >> 1] == dg.CALL_ACT for p in sources)


def test_decoded_json_round_trip_keeps_the_answer(tmp_path):
    """The same trace read from a file (the store's streaming reader) gives the same path as read in memory."""
    e = _event_wait_trace()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": e.ev}).encode()))
    a = _answer(e.trace())[1]
    b = _answer(_load(path))[1]
    assert a.length_s == b.length_s and a.split == b.split


def test_peers_are_joined_step_by_step_by_name_and_a_step_a_peer_lacks_is_its_own():
    r0, r1 = Events(), Events()
    r0.x("user_annotation", "ProfilerStep#1", 0, 200)
    r0.x("user_annotation", "ProfilerStep#2", 200, 200)
    r0.launch("gemm_1", 10, 15, 100, op=BIG_MM)
    r0.launch(NCCL, 205, 210, 240, stream=20)
    r1.x("cpu_op", "aten::empty", 0, 0.1)
    r1.x("user_annotation", "ProfilerStep#2", 200, 200)
    r1.launch(NCCL, 390, 400, 50, stream=20)
    _, cp = _answer(r0.trace(), peers=[r1.trace()])
    one, two = cp.steps
    assert one.split["peers"] == 0.0 and one.length_s == pytest.approx(200 * US, abs=1e-12)
    assert two.length_s == pytest.approx(250 * US, abs=1e-12)  # to the all-reduce's end at 450
    assert two.split["device"] == pytest.approx(50 * US, abs=1e-12)
    assert two.split["peers"] == pytest.approx(200 * US, abs=1e-12)  # rank 1 entered it at 400
    # rank 1 there at 210 with rank 0: the all-reduce ends at 260, and the step at its CPU range's end, 400
    assert _what(cp, STRAGGLER).saving_s == pytest.approx(50 * US, abs=1e-12)


def _full_queue_step() -> Events:
    """A CPU launching into a stream whose queue holds 64: kernels 0–15 are 1 ms matmuls, 16–79 10 µs kernels of no
    op. Launches 0–63 (1 µs each, every 2 µs) fill the queue before kernel 0 starts at 200 µs; launch 64 + k finds it
    full and returns 1 µs after kernel k ends; the CPU then works 1 ms on its own (the step ends there, after the
    device's last 640 µs of small kernels)."""
    e = Events()
    s, big, n, cap = 200.0, 1000.0, 80, 64
    dur = [big if i < 16 else 10.0 for i in range(n)]
    starts = [s + sum(dur[:i]) for i in range(n)]
    ends = [a + d for a, d in zip(starts, dur)]
    c1 = 0.0
    for i in range(n):
        c0, c1 = (2.0 * i, 2.0 * i + 1) if i < cap else (128.0 if i == cap else ends[i - cap - 1] + 2, ends[i - cap] + 1)
        corr, ext = e._id(), e._id()
        op = BIG_MM if i < 16 else ("aten::add", [[64], [64]])
        e.x("cpu_op", op[0], c0 - 0.25, c1 - c0 + 0.5, **{"External id": ext, "Input Dims": op[1], "Input type": BF16})
        e.x("cuda_runtime", "cudaLaunchKernel", c0, c1 - c0, correlation=corr, **{"External id": ext})
        e.x("kernel", "gemm" if i < 16 else "add", starts[i], dur[i], pid=0, tid=7, correlation=corr, stream=7,
            device=0, **{"External id": ext})
    e.x("cpu_op", "optimizer", c1 + 1, 1000.0)
    e.x("user_annotation", "ProfilerStep#1", 0, c1 + 1001)
    return e


def test_a_full_launch_queue_makes_the_step_device_bound_and_its_kernels_at_their_roof_shorten_it():
    """The 16 launches the full queue held each returned when a matmul ended: the CPU's path runs through the
    device's matmuls (device-bound, 16 ms of the 17.2 ms step), not through 16 ms of slow launch calls. So the
    matmuls at their roof shorten the step by what they lose, every µs of it: the CPU is freed that much earlier."""
    from rooftop.models.trace.launchqueue import blocked_launches

    t = _full_queue_step().trace()
    assert blocked_launches(t) == [(64 + k, k) for k in range(16)]
    w, cp = _answer(t)
    (step,) = cp.steps
    length = (16201 + 1001) * US
    assert step.length_s == pytest.approx(length, abs=1e-12)
    # the matmuls back to back, and the last held call's return after the last of them (the µs it took to return)
    assert step.split["device"] == pytest.approx((16 * 1000 + 1) * US, abs=1e-12)
    assert step.split["launch"] == pytest.approx(200 * US, abs=1e-12)  # the first launch → its kernel
    assert step.split["cpu"] == pytest.approx(1001 * US, abs=1e-12)  # the CPU's own work after its last launch
    assert [(o.label.split()[0], o.kernels) for o in step.ops] == [("aten::mm", 16)]
    [mm] = [g for g in w.groups if g.op == "aten::mm"]
    f = shrinkable(mm)
    assert 0 < f < 1
    saved = 16 * 1000 * (1 - f) * US
    assert _what(cp, AT_ROOF).saving_s == pytest.approx(saved, rel=1e-9)
    assert cp.fix_first[0].key == mm.key and cp.fix_first[0].saving_s == pytest.approx(saved, rel=1e-9)


def _job_rank(arrive: float, post: float, side_end: float = 0.0) -> Events:
    """One rank: a matmul on stream 7 until `arrive` (none when it arrives at 10), the all-reduce from there to 110
    µs (the late rank arrives at 100), a kernel of `post` µs after it on stream 7 and, with `side_end`, a kernel on
    stream 8 from 20 µs to `side_end` that waits on nothing (the rank's own work, which no arrival speeds). Every
    launch made at once (0.5–9.5 µs), so the device sets when each rank arrives."""
    e = Events()
    e.x("cpu_op", "aten::empty", 0, 0.1)  # both clocks count from 0
    if arrive > 10:
        e.launch("gemm_pre", 0.5, 2, arrive - 2, op=BIG_MM)
    e.launch(NCCL, 3, arrive, 110 - arrive)
    e.launch("tail_post", 5, 110, post)
    if side_end:
        e.launch("side_work", 7.5, 20, side_end - 20, stream=8)
    return e


@pytest.mark.parametrize("base", [0, 1], ids=["from the early rank", "from the late rank"])
def test_the_straggler_at_the_median_when_the_late_rank_ends_last_another_ranks_own_work_bounds_it(base):
    """Rank 1 arrives at 100 µs and ends last (its work after the all-reduce to 250); rank 0, at 10, runs a kernel on
    another stream to 230 that waits on nothing. Rank 1 at the median's arrival (10) ends at 160, but the job's step
    still runs to rank 0's 230: it saves 20 µs, not rank 1's own 90, whichever rank's path is read."""
    ranks = [_job_rank(10, 90, side_end=230).trace(), _job_rank(100, 140).trace()]
    _, cp = _answer(ranks[base], peers=[ranks[1 - base]])
    lo = 3 if base == 0 else 0.5  # the path's rank's first launch
    assert cp.length_s == pytest.approx((250 - lo) * US, abs=1e-12)  # to rank 1's end at 250
    assert sum(cp.split.values()) == pytest.approx(cp.length_s, abs=1e-12)
    straggler = _what(cp, STRAGGLER)
    assert straggler.saving_s == pytest.approx(20 * US, abs=1e-12)
    assert straggler.length_s == pytest.approx((230 - lo) * US, abs=1e-12)


@pytest.mark.parametrize("base", [0, 1], ids=["from the early rank", "from the late rank"])
def test_the_straggler_at_the_median_when_the_late_rank_does_not_end_last_its_own_work_bounds_it(base):
    """Rank 0 arrives at 10 µs and ends last (190 µs of work after the all-reduce, to 300); rank 1, late at 100, runs
    a kernel on another stream to 280 that waits on nothing. At the median's arrival rank 0 ends at 210, but the
    straggler's own unshrunk work still runs to 280: the step saves 20 µs, not 90."""
    ranks = [_job_rank(10, 190).trace(), _job_rank(100, 140, side_end=280).trace()]
    _, cp = _answer(ranks[base], peers=[ranks[1 - base]])
    lo = 3 if base == 0 else 0.5
    assert cp.length_s == pytest.approx((300 - lo) * US, abs=1e-12)
    assert sum(cp.split.values()) == pytest.approx(cp.length_s, abs=1e-12)
    straggler = _what(cp, STRAGGLER)
    assert straggler.saving_s == pytest.approx(20 * US, abs=1e-12)
    assert straggler.length_s == pytest.approx((280 - lo) * US, abs=1e-12)
    for w in cp.what_if:
        assert 0 <= w.saving_s <= cp.length_s and 0 <= w.length_s <= cp.length_s


def test_an_op_groups_what_if_for_a_job_shrinks_its_kernels_on_every_rank_given_its_workload():
    """Two ranks alike (a matmul from 2 to 400 µs, over twice its roof bound, then the all-reduce for 10 µs and 50
    µs after): the matmul at its roof shortens the job's step as it does one rank's, when both ranks' workloads are
    given; with the peer's kernels left as they were, the peer's matmul still holds the all-reduce: it saves
    nothing."""

    def rank() -> Events:
        e = Events()
        e.x("cpu_op", "aten::empty", 0, 0.1)
        e.launch("gemm_pre", 0.5, 2, 398, op=BIG_MM)
        e.launch(NCCL, 4, 400, 10)  # after the matmul's op: not of its group
        e.launch("tail_post", 7, 410, 50)
        return e

    t0, t1 = rank().trace(), rank().trace()
    w0, w1 = build_workload(t0, H200), build_workload(t1, H200)
    alone = [w for w in critical_path(t0, w0).what_if if w.name.startswith("op:aten::mm")]
    both = [w for w in critical_path(t0, w0, peers=[t1], peer_works=[w1]).what_if if w.name.startswith("op:aten::mm")]
    held = critical_path(t0, w0, peers=[t1])
    assert alone and alone[0].saving_s > 50 * US
    assert both[0].saving_s == pytest.approx(alone[0].saving_s, abs=1e-12)
    assert _what(held, AT_ROOF).saving_s == 0.0  # rank 1's matmul, on the path, keeps its time


def test_collectives_joined_across_ranks_by_what_they_are_and_when_not_the_nth_of_a_name():
    """Rank 0 runs three all-reduces (10–50, 100–150, 200–260 µs); rank 1's trace lacks its first (a sampled trace):
    its two run 120–150 and 230–260. The n-th kernel of a name on each rank would join rank 0's first (done at 50)
    to rank 1's at 120; they are joined as the calls that ran at once, ending together: rank 0's second and third
    to rank 1's two, the late rank setting each end (30 µs of rank 0's third waits on rank 1)."""
    r0, r1 = Events(), Events()
    for e in (r0, r1):
        e.x("cpu_op", "aten::empty", 0, 0.1)
    for at, (ts, end) in zip((3, 5, 7), ((10, 50), (100, 150), (200, 260))):
        r0.launch(NCCL, at, ts, end - ts, stream=20)
    for at, (ts, end) in zip((5, 7), ((120, 150), (230, 260))):
        r1.launch(NCCL, at, ts, end - ts, stream=20)
    t0, t1 = r0.trace(), r1.trace()
    _, names, spans = windows_of(t0)
    g = build_graph([t0, t1], [spans, spans])
    joined = [tuple((g.act_rank[a], g.time[2 * a] / US) for a in grp) for grp in g.comm_groups]
    assert joined == [((0, 100.0), (1, 120.0)), ((0, 200.0), (1, 230.0))]
    _, cp = _answer(t0, peers=[t1])
    assert cp.length_s == pytest.approx(257 * US, abs=1e-12)  # rank 0's first launch at 3 to the end at 260
    assert cp.split["device"] == pytest.approx(30 * US, abs=1e-12)  # the third once rank 1 had come, at 230
    assert cp.split["peers"] == pytest.approx(227 * US, abs=1e-12)  # until then, on rank 1 (from 3 to 230)
