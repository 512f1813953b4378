"""Launch-queue depth: synthetic Kineto traces with known answers, and the shared real traces against HTA's
queue length (tests/data/hta-queue.json, by scripts/hta_queue.py)."""

from __future__ import annotations

import functools
import gzip
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from rooftop.models.trace.launchqueue import CUDA_CAP, blocked_launches, launch_queue, time_at_depth
from rooftop.models.trace.read import parse_trace
from rooftop.store.tracefile import load_trace

from tests.helpers.kineto import KinetoTrace

DATA = Path(__file__).parent / "data"
US = 1e-6
D = 100.0  # µs, each kernel of the full-queue trace


def full_queue(cap: int, n: int, other: KinetoTrace | None = None) -> KinetoTrace:
    """A CPU launching faster than the device runs, into a queue the driver caps at `cap`. The first `cap`
    launches (1 µs each, one a µs from 0) all go in before the first kernel starts at S = cap + 6; kernel i
    runs [S + i·D, S + (i+1)·D). Launch `cap` + k (k ≥ 0) finds the queue full: it begins when the one before
    it returns (launch `cap` at `cap` µs) and returns 1 µs after kernel k ends, the end that freed its slot."""
    t = other or KinetoTrace()
    s = cap + 6.0
    end = [s + (i + 1) * D for i in range(n)]
    for i in range(n):
        if i < cap:
            c0, c1 = float(i), i + 1.0
        else:
            k = i - cap
            c0 = float(cap) if k == 0 else end[k - 1] + 1.0
            c1 = end[k] + 1.0
        t.kernel(f"k{i}", c0, s + i * D, D, launch_dur=c1 - c0)
    return t


def full_answers(cap: int, n: int) -> dict:
    """The queue of `full_queue(cap, n)`, worked out by hand (µs): B = n − cap blocked launches. The depth ramps
    1..cap over [0, cap − 1), stays at cap while launches are blocked (each joins as the end that freed its slot
    leaves) until kernel B ends, then drains by one at each kernel's end."""
    b = n - cap
    s = cap + 6.0
    e0, eb = s + D, s + (b + 1) * D
    span = s + n * D
    area = (cap - 1) * cap / 2 + (eb - (cap - 1)) * cap + D * cap * (cap - 1) / 2
    return {"span": span, "mean": area / span, "max": cap, "at_cap": eb - (cap - 1),
            "blocked": b, "blocked_s": (e0 + 1 - cap - 1) + (b - 1) * (D - 1)}


@pytest.mark.parametrize("cap, n", [(1024, 1524), (200, 300)])
def test_a_queue_that_fills_to_its_cap_blocks_the_cpu(cap, n):
    q = launch_queue(parse_trace(full_queue(cap, n).doc()))
    want = full_answers(cap, n)
    (s,) = q.streams
    assert (s.stream, s.launches, s.max, s.cap, s.plateau) == (7, n, want["max"], cap, True)
    assert q.span_s == pytest.approx(want["span"] * US, rel=1e-9)
    assert s.mean == pytest.approx(want["mean"], rel=1e-9)
    assert s.at_cap_s == pytest.approx(want["at_cap"] * US, rel=1e-9)
    assert s.at_cap_fraction == pytest.approx(want["at_cap"] / want["span"], rel=1e-9)
    assert q.median_launch_s == pytest.approx(1 * US)
    assert (s.blocked, len(q.blocked)) == (want["blocked"], want["blocked"])
    assert q.blocked_s == pytest.approx(want["blocked_s"] * US, rel=1e-9)
    assert q.verdict == "device-bound"
    assert launch_queue(parse_trace(full_queue(cap, n).doc()), hta=True).streams[0].max == cap + 1  # HTA's count:
    # the blocked call from its start, one above the cap


def test_each_blocked_launch_is_freed_by_the_kernel_that_ended_while_it_waited():
    cap, n = 200, 300
    t = parse_trace(full_queue(cap, n).doc())
    got = blocked_launches(t)
    by_name = {k.name: i for i, k in enumerate(t.kernels)}
    assert got == [(by_name[f"k{cap + k}"], by_name[f"k{k}"]) for k in range(n - cap)]
    for launched, freed in got:  # the freeing end falls inside the blocked call
        k, f = t.kernels[launched], t.kernels[freed]
        assert k.launch_ts < f.end <= k.launch_ts + k.launch_dur


def test_a_cpu_bound_trace_keeps_its_queue_at_one_or_less_and_blocks_nothing():
    """A launch every 10 µs, its kernel 3 µs later for 4 µs: each launch is in the queue 7 µs of 10 (mean 0.7),
    never two at once. One launch call is slow (200 µs, a kernel ending inside it): a slow call at depth 1 is no
    full queue."""
    t = KinetoTrace()
    for i in range(100):
        c0 = 10.0 * i + (200.0 if i >= 50 else 0.0)
        t.kernel(f"k{i}", c0, c0 + 3, 4, launch_dur=200.0 if i == 49 else 2.0)
    q = launch_queue(parse_trace(t.doc()))
    (s,) = q.streams
    span = 10.0 * 99 + 200 + 7
    assert (s.max, s.cap, s.plateau, s.blocked, s.at_cap_s) == (1, CUDA_CAP, False, 0, 0.0)
    assert s.mean == pytest.approx(100 * 7 / span, rel=1e-9)
    assert q.blocked == () and q.blocked_s == 0.0
    assert q.verdict == "CPU-bound"


def test_two_streams_each_have_their_own_queue_and_the_cap_the_trace_showed():
    """The full queue on stream 7, and 10 launches on stream 9 (each 50 µs in the queue, one at a time): stream
    9 never saturates, so it is held to the plateau stream 7 showed (200), not CUDA's default."""
    t = full_queue(200, 300)
    for i in range(10):
        t.kernel(f"side{i}", 1000.0 * i + 0.5, 1000.0 * i + 10.5, 40, stream=9)
    q = launch_queue(parse_trace(t.doc()))
    by = {s.stream: s for s in q.streams}
    want = full_answers(200, 300)
    assert by[7].cap == 200 and by[7].plateau and by[7].blocked == want["blocked"]
    assert (by[9].launches, by[9].max, by[9].cap, by[9].plateau, by[9].blocked, by[9].at_cap_s) == \
        (10, 1, 200, False, 0, 0.0)
    assert by[9].mean == pytest.approx(10 * 50 / want["span"], rel=1e-9)
    assert by[7].mean == pytest.approx(want["mean"], rel=1e-9)
    assert q.deepest is by[7]
    assert q.blocked_s == pytest.approx(want["blocked_s"] * US, rel=1e-9)


def test_a_graph_replays_kernels_hold_no_slot_of_their_own():
    t = KinetoTrace()
    t.kernel("k0", 0.0, 5.0, 10)
    t.kernel("g0", 20.0, 25.0, 10, launch="cudaGraphLaunch")
    q = launch_queue(parse_trace(t.doc()))
    assert [s.launches for s in q.streams] == [1]


def test_it_round_trips_through_json():
    from rooftop.models.trace.launchqueue import LaunchQueue

    q = launch_queue(parse_trace(full_queue(200, 300).doc()))
    back = LaunchQueue.from_dict(json.loads(json.dumps(q.to_dict())))
    assert back.streams == q.streams and back.blocked_s == pytest.approx(q.blocked_s)
    assert back.verdict == q.verdict == "device-bound"


# -- the shared real traces against HTA's queue length ---------------------------------------------------------

@functools.cache
def _load(name: str):
    return load_trace(DATA / name)


HTA = json.loads((DATA / "hta-queue.json").read_text())
NAMES = sorted(n for n, f in HTA["traces"].items() if f["streams"])
# launch calls HTA 0.5.0 does not count as launches (its list of launch names lacks them; a later HTA added
# cuLaunchKernelEx): Triton's kernels on the H200 decode trace, one kernel of the SGLang replay
HTA_MISSES = ("cuLaunchKernelEx", "hipModuleLaunchKernel")


@functools.cache
def _missed(path: Path) -> Counter:
    """Per stream, the activities whose launch call is one HTA does not count."""
    with gzip.open(path) as f:
        ev = json.load(f)["traceEvents"]
    calls = {e["args"].get("correlation"): e["name"] for e in ev
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and isinstance(e.get("args"), dict)}
    return Counter(str(e["args"]["stream"]) for e in ev
                   if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                   and calls.get(e["args"].get("correlation")) in HTA_MISSES)


@pytest.mark.parametrize("name", NAMES)
def test_counted_as_hta_counts_the_queue_matches_htas_series(name):
    """With HTA's definition (a launch leaves when its activity starts) the series is HTA's: the same launches
    (less those HTA 0.5.0 does not know as launches), the same max, the same time at that max."""
    t = _load(name)
    q = launch_queue(t, hta=True)
    mine = {str(s.stream): s for s in q.streams}
    at = {str(k[1]): v for k, v in time_at_depth(t, hta=True).items()}
    missed = _missed(DATA / name)
    for stream, h in HTA["traces"][name]["streams"].items():
        s = mine[stream]
        assert s.launches == h["launches"] + missed[stream], stream
        assert s.max == h["max"], stream
        assert sum(v for d, v in at[stream].items() if d >= h["max"]) == pytest.approx(h["at_max_s"], rel=1e-6,
                                                                                       abs=1e-9), stream
        assert h["at_1024_s"] == 0.0 and s.at_cap_s == 0.0  # no shared trace fills a queue


def test_a_trace_of_counter_ranges_has_no_queue_by_either_count():
    """The CUPTI range-profiler trace has no kernel events (its activities are the profiler's even split of its
    ranges): HTA finds no queue, and rooftop reports none rather than one made of invented times."""
    name = "real-traces/more/cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz"
    assert HTA["traces"][name]["streams"] == {}
    assert launch_queue(_load(name)) is None


def test_htas_missed_launches_are_real_launches_on_the_decode_trace():
    """506 of the H200 decode trace's 2624 launched kernels come through cuLaunchKernelEx (Triton): HTA 0.5.0
    leaves them out of its queue, though each holds its stream's queue like any launch."""
    name = "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
    assert _missed(DATA / name) == Counter({"7": 506})
    (s,) = launch_queue(_load(name)).streams
    assert (s.launches, HTA["traces"][name]["streams"]["7"]["launches"]) == (2624, 2118)


@pytest.mark.parametrize("name", NAMES)
def test_counted_to_the_activitys_end_the_queue_is_htas_plus_what_is_running(name):
    """rooftop keeps a launch in the queue until its activity ends: its max is HTA's or one more (the
    activity running), and its time-weighted mean is each launch's time in the queue over the span, exactly
    (the area under a sum of intervals is the sum of their lengths). HTA's summary mean is over the series'
    change points: 0.5 for a queue that goes 1, 0, 1, 0 however long it stays at each."""
    t = _load(name)
    q = launch_queue(t)
    mine = {str(s.stream): s for s in q.streams}
    for stream, h in HTA["traces"][name]["streams"].items():
        s = mine[stream]
        assert h["max"] <= s.max <= h["max"] + 1, stream
        mine_k = [k for i, k in enumerate(t.kernels)
                  if str(k.stream) == stream and k.launch_ts is not None and i not in t.graph_kernels]
        assert s.mean == pytest.approx(sum(k.end - k.launch_ts for k in mine_k) / q.span_s, rel=1e-9), stream
        assert (s.blocked, s.plateau, s.cap) == (0, False, CUDA_CAP), stream


def test_the_cpu_bound_decode_trace_and_the_deep_resnet_queue():
    """The H200 decode step launches one kernel at a time (the device waits on the CPU); ResNet-50's training
    step on the V100 queues up to 570 launches ahead, but never meets a cap: no launch call there waited."""
    decode = launch_queue(_load("qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"))
    assert decode.verdict == "CPU-bound" and decode.deepest.max == 4
    resnet = launch_queue(_load("real-traces/more/v100-resnet50-train-2021-legacy.json.gz"))
    assert (resnet.deepest.max, resnet.verdict, resnet.blocked_s) == (570, "", 0.0)
    assert resnet.deepest.mean == pytest.approx(101.25, abs=0.01)


# -- the report, --json, the store and show ---------------------------------------------------------------------


def _profile(tmp_path, capsys, monkeypatch, path: Path, *more: str) -> tuple[str, dict, str, dict]:
    """`rooftop profile` of the trace at 80 columns, its --json, then `show` of the kept run and its --json."""
    from rooftop.tui.cli import main

    monkeypatch.setenv("COLUMNS", "80")
    db = str(tmp_path / "r.db")
    assert main(["profile", "--trace", str(path), "-d", "h200", "--db", db, *more]) == 0
    report = capsys.readouterr().out
    assert main(["profile", "--trace", str(path), "-d", "h200", "--json", "--no-save", "--db", db]) == 0
    live = json.loads(capsys.readouterr().out)
    assert main(["runs", "--json", "--db", db]) == 0
    run = json.loads(capsys.readouterr().out)[0]["id"]
    assert main(["show", run, "--db", db]) == 0
    shown = capsys.readouterr().out
    assert main(["show", run, "--json", "--db", db]) == 0
    return report, live, shown, json.loads(capsys.readouterr().out)


def _queue_line(out: str) -> str:
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    at = next(i for i, line in enumerate(lines) if line.startswith("launch queue:"))
    return " ".join(lines[at:at + 2]) if not lines[at].rstrip().endswith("-bound") else lines[at]


def test_a_full_queue_is_one_line_of_the_report_in_json_and_back_from_the_store(tmp_path, capsys, monkeypatch):
    path = full_queue(1024, 1524).write(tmp_path / "full.json")
    report, live, shown, stored = _profile(tmp_path, capsys, monkeypatch, path)
    want = ("launch queue: mean 679, max 1,024 on stream 7 (at its cap of 1,024 for 32.7% of the span); the CPU "
            "waited 49.5 ms on a full queue: device-bound")
    assert _queue_line(report) == want
    assert _queue_line(shown) == want
    for doc in (live, stored):
        q = doc["launch_queue"]
        assert q["blocked_s"] == pytest.approx(full_answers(1024, 1524)["blocked_s"] * US, rel=1e-9)
        (s,) = q["per_stream"]
        assert (s["stream"], s["max"], s["cap"]) == (7, 1024, 1024)
        assert s["at_cap_fraction"] == pytest.approx(32.7e-2, abs=1e-3) and s["mean"] == pytest.approx(full_answers(1024, 1524)["mean"], rel=1e-9)
        assert q["verdict"] == "device-bound"


def test_the_cpu_bound_decode_trace_says_so_and_an_old_profile_without_a_queue_still_shows(tmp_path, capsys,
                                                                                          monkeypatch):
    path = DATA / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
    report, live, shown, stored = _profile(tmp_path, capsys, monkeypatch, path)
    want = "launch queue: mean 0.3, max 4 on stream 7 (its cap 1,024): CPU-bound"
    assert _queue_line(report) == want == _queue_line(shown)
    assert live["launch_queue"]["per_stream"][0]["launches"] == 2624 == stored["launch_queue"]["per_stream"][0][
        "launches"]
    import sqlite3

    from rooftop.tui.cli import main

    db = str(tmp_path / "r.db")  # a profile kept before the launch queue was: no line, nothing made up
    with sqlite3.connect(db) as con:
        rid, device = con.execute("SELECT id, device_json FROM runs").fetchone()
        device = json.loads(device)
        del device["profile"]["rows"]["launch_queue"]
        con.execute("UPDATE runs SET device_json = ? WHERE id = ?", (json.dumps(device), rid))
    assert main(["show", rid[:8], "--db", db]) == 0
    out = capsys.readouterr().out
    assert "launch queue" not in out and "span 154 ms" in out


def test_htas_queue_in_the_critical_path_record_is_the_one_recorded_here():
    """The critical-path record (scripts/hta_critpath.py) keeps HTA's queue length too, from the same series:
    where the two records meet, they give the same launches, max, mean of changes and time at the max."""
    path = DATA / "hta-critpath.json"
    if not path.exists():
        pytest.skip("no critical-path record in this checkout")
    other = json.loads(path.read_text())["traces"]
    met = 0
    for name, f in HTA["traces"].items():
        theirs = (other.get(name) or {}).get("queue")
        if theirs is None:
            continue
        assert set(theirs) == set(f["streams"]), name
        for stream, h in f["streams"].items():
            t = theirs[stream]
            assert (t["changes"], t["max"]) == (2 * h["launches"], h["max"]), (name, stream)
            assert t["mean"] == pytest.approx(h["mean_of_changes"], rel=1e-9), (name, stream)
            assert t["at_max_us"] * US == pytest.approx(h["at_max_s"], rel=1e-6, abs=1e-9), (name, stream)
            met += 1
    assert met > 0


def _walked(events: list[tuple[float, int]]) -> tuple[dict[int, float], int]:
    """The queue walked one step at a time, as its definition reads: the steps by time, a leave (−1) before a join
    (+1) at the same instant; the time to the next step added to the depth held over it."""
    at_depth: dict[int, float] = {}
    depth = top = 0
    steps = sorted(events, key=lambda e: (e[0], e[1]))
    for (t, d), (nxt, _) in zip(steps, [*steps[1:], (steps[-1][0], 0)]):
        depth += d
        top = max(top, depth)
        if nxt > t:
            at_depth[depth] = at_depth.get(depth, 0.0) + (nxt - t)
    return at_depth, top


@pytest.mark.parametrize("seed", range(6))
def test_the_depths_match_a_step_by_step_walk_with_ties_on_every_instant(seed):
    """Whole µs everywhere, so joins and leaves meet at the same instants and a kernel may end at its own launch
    (its leave is then its join: it holds no time): the merge's tie rule, in both counts, against a plain walk."""
    rng = random.Random(seed)
    t = KinetoTrace()
    for i in range(rng.randint(1, 60)):
        c0 = float(rng.randint(0, 40))
        ts = c0 + rng.randint(-2, 6)  # a kernel may start before its call (clocks a µs apart)
        t.kernel(f"k{i}", c0, ts, float(rng.randint(0, 5)), launch_dur=1.0)
    trace = parse_trace(t.doc())
    ties = 0
    for hta in (False, True):
        events = []
        for k in trace.kernels:  # the times as the reader keeps them (seconds from the first event)
            leave = max(k.ts if hta else k.ts + k.dur, k.launch_ts)
            events += [(k.launch_ts, 1), (leave, -1)]
        ties += len(events) - len({e for e, _ in events})
        want, top = _walked(events)
        (got,) = time_at_depth(trace, hta).values()
        assert list(got) == list(want)
        assert got == pytest.approx(want, rel=1e-12)
        assert launch_queue(trace, hta).streams[0].max == top
    assert ties > 0
