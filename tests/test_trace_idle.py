"""Each gap of the device's timeline gets one cause from the trace, in HTA's three categories and by its rules in
its order: a kernel launched late is host wait (a host sync, a host-side copy or the CPU op that issued it); a
queued one is kernel wait under 30 µs (launch overhead) and other beyond (queued behind something else)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rooftop.models.catalog import lookup_device
from rooftop.models.trace.timeline import idle_causes, sweep
from rooftop.models.trace.read import parse_trace
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace

QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"


def _ev(cat, name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1 if cat not in ("kernel", "gpu_memcpy") else 0,
            "tid": tid if cat not in ("kernel", "gpu_memcpy") else 7, "ts": ts, "dur": dur, "args": args}


def _trace():
    """Kernels at 0, 100, 110, 300 and 400 µs (10 µs each); the CPU side says why each gap is there."""
    ev = [
        _ev("cpu_op", "aten::a", 0, 5, **{"External id": 1}),
        _ev("cuda_runtime", "cudaLaunchKernel", 1, 5, correlation=1),
        _ev("kernel", "k1", 0, 10, correlation=1),
        _ev("cuda_runtime", "cudaDeviceSynchronize", 12, 80),  # gap 10–100: the CPU waits on a sync
        _ev("cpu_op", "aten::b", 92, 10, **{"External id": 2}),
        _ev("cuda_runtime", "cudaLaunchKernel", 93, 5, correlation=2),
        _ev("kernel", "k2", 100, 10, correlation=2),
        _ev("cuda_runtime", "cudaLaunchKernel", 101, 5, correlation=3),  # inside aten::b
        _ev("kernel", "k3", 113, 10, correlation=3),  # gap 110–113: about one launch
        _ev("cpu_op", "aten::slow", 120, 190, **{"External id": 4}),
        _ev("cuda_runtime", "cudaLaunchKernel", 290, 5, correlation=4),
        _ev("kernel", "k4", 300, 10, correlation=4),  # gap 123–300: launched late, from aten::slow
        _ev("cuda_runtime", "cudaLaunchKernel", 296, 5, correlation=5),
        _ev("kernel", "k5", 400, 10, correlation=5),  # gap 310–400: queued at 296, waited on something else
    ]
    return parse_trace({"traceEvents": ev})


def test_each_gap_gets_its_cause():
    t = _trace()
    got = {c.cause: (c.category, c.gaps, round(c.time_s * 1e6, 3)) for c in idle_causes(t)}
    assert got == {
        "host sync": ("host wait", 1, 90.0),
        "launch overhead": ("kernel wait", 1, 3.0),
        "CPU: aten::slow": ("host wait", 1, 177.0),
        "queued, waiting": ("other", 1, 90.0),
    }
    assert sum(v[2] for v in got.values()) == pytest.approx((t.span_s - t.busy_s) * 1e6)


def test_the_alone_times_overlap_and_idle_make_up_the_span():
    ev = [_ev("kernel", "a", 0, 10, stream=7), _ev("kernel", "b", 5, 10, stream=8),
          _ev("kernel", "c", 30, 5, stream=7)]
    t = parse_trace({"traceEvents": ev})
    sw = sweep(t.kernels)
    assert sw.busy_s == pytest.approx(20e-6) and sw.overlap_s == pytest.approx(5e-6)
    assert sw.alone_s == pytest.approx((5e-6, 5e-6, 5e-6))
    w = build_workload(t, lookup_device("h100"))
    s = w.shares()
    assert s["ops"] + s["overlap"] + s["idle"] + s["transfers"] == pytest.approx(1.0)
    assert w.idle_s == pytest.approx(15e-6)


def test_the_decode_steps_idle_time_is_the_cpu_in_the_attention_op():
    """On the H200 decode trace most of the idle time is two first-of-step cuDNN attention calls of 37–39 ms
    of CPU time each: the largest cause is that op, not launch overhead."""
    w = build_workload(load_trace(QWEN), lookup_device("h200"))
    top = w.idle_causes[0]
    assert top.cause == "CPU: aten::_cudnn_attention_forward" and top.category == "host wait"
    assert top.time_s > 0.5 * w.idle_s and top.time_s > 0.070
    launch = [c for c in w.idle_causes if c.cause == "launch overhead"]
    assert launch and launch[0].time_s < 0.05 * w.idle_s


def test_one_process_on_two_gpus_is_said_and_its_mfu_is_over_both():
    """The decode step with its later layers' kernels on a second GPU (as HF's `device_map="auto"` splits a
    model): the same FLOPs over the same span are half the MFU of two GPUs' roofs, not all of one's."""
    import gzip
    import json

    doc = json.loads(gzip.decompress(QWEN.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    mid = sorted(e["ts"] for e in kernels)[len(kernels) // 2]
    for e in kernels:
        if e["ts"] >= mid:
            e["args"]["device"] = 1
    one = build_workload(load_trace(QWEN), lookup_device("h200"))
    two = build_workload(parse_trace(doc), lookup_device("h200"))
    assert one.gpus == 1 and two.gpus == 2 and two.summary()["gpus"] == 2
    assert two.flops == pytest.approx(one.flops) and two.span_s == pytest.approx(one.span_s)
    assert two.mfu == pytest.approx(one.mfu / 2) and two.bandwidth_utilisation == pytest.approx(
        one.bandwidth_utilisation / 2)
    assert any("one process ran kernels on 2 GPUs (0, 1)" in n for n in two.notes)
    assert not any("GPUs (" in n for n in one.notes)


def test_a_two_gpu_profile_says_so_in_its_report_and_keeps_it_in_the_store(tmp_path, capsys, monkeypatch):
    import gzip
    import json

    from rooftop.tui.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    doc = json.loads(gzip.decompress(QWEN.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["args"].get("External id", 0) % 2:
            e["args"]["device"] = 1
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc))
    db = str(tmp_path / "r.db")
    assert main(["profile", str(path), "-d", "h200", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "of 2 × bf16-tc" in out and "bandwidth" in out and "of 2 × 4295 GB/s" in out, out
    assert main(["runs", "--json", "--db", db]) == 0
    run = json.loads(capsys.readouterr().out)[0]["id"]
    assert main(["show", run, "--db", db]) == 0
    assert "of 2 × bf16-tc" in capsys.readouterr().out  # kept: the stored profile is read over both GPUs too


def test_a_point_ten_times_its_roof_is_blamed_on_the_count_not_the_roof():
    """An mm recorded as 8×10^12 · 10^12×10^6 gave MFU 2874708261% 'so that roof is low, re-measure the roofs'. It is
    left out of MFU (which stays within the busy fraction), the headline says so, and the flags blame its count."""
    import gzip
    import json

    from rooftop.models.program.workload import flag_lines
    from rooftop.tui.render.profile import headline_lines

    doc = json.loads(gzip.decompress(QWEN.read_bytes()))
    mm = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm")
    mm["args"]["Input Dims"] = [[8, 10**12], [10**12, 10**6]]
    w = build_workload(parse_trace(doc), lookup_device("h200"))
    lines = flag_lines(w.flags)
    assert w.mfu <= w.busy_fraction and w.mfu_over(w.groups) > 10
    [wrong] = w.left_out
    assert wrong.op == "aten::mm" and wrong.shapes[0] == [8, 10**12]
    assert any("leave out 1 op group" in h and "mm at" in h for h in headline_lines(w.headline()))
    assert any(line.startswith("1 op group ran above") and "overcounted" in line for line in lines), lines
    assert any(line.startswith("the program's matmul FLOPs") and "overcounted" in line for line in lines), lines
    real = build_workload(load_trace(QWEN), lookup_device("v100-16"))  # a low roof: still said to be the roof
    assert any("the roof is low" in line for line in flag_lines(real.flags))


def test_an_op_without_its_roof_says_which_roof_it_lacks():
    """`no roof` beside `404.7% !` of the DRAM roof read as a contradiction: it is the bf16-tc roof V100 lacks."""
    w = build_workload(load_trace(QWEN), lookup_device("v100-16"))
    mm = next(g for g in w.groups if g.op == "aten::mm")
    assert mm.regime == "no bf16-tc roof" and mm.fraction_of_roof > 1  # of the DRAM slope, which it has


# -- the rules' order: was the next kernel already queued? ---------------------------------------------------------


def _gap(gap_us: float, launch_us: float | None, held: tuple[str, float, float] | None = None,
         tid_launch: int = 1):
    """Kernel k1 at 0–10 µs, then k2 `gap_us` later, launched at `launch_us` (None: no launch recorded) on thread
    `tid_launch`; `held` = (runtime call, start, end) on thread 1 during the gap (a sync, a copy)."""
    end = 10 + gap_us
    ev = [_ev("cuda_runtime", "cudaLaunchKernel", -5, 2, correlation=1), _ev("kernel", "k1", 0, 10, correlation=1),
          _ev("kernel", "k2", end, 10, **({"correlation": 2} if launch_us is not None else {}))]
    if launch_us is not None:
        ev.append(_ev("cpu_op", "aten::late", launch_us - 1, 4, tid=tid_launch, **{"External id": 2}))
        ev.append(_ev("cuda_runtime", "cudaLaunchKernel", launch_us, 2, tid=tid_launch, correlation=2))
    if held:
        name, lo, hi = held
        ev.append(_ev("cuda_runtime", name, lo, hi - lo))
    t = parse_trace({"traceEvents": ev})
    assert [k.name for k in t.kernels] == ["k1", "k2"]
    return t


SYNC, COPY = "cudaDeviceSynchronize", "cudaMemcpyAsync"
RULES = [  # (what, gap µs, k2's launch µs, what held the CPU during the gap) → (cause, category)
    ("late, a sync ran in the gap", 200, 150, (SYNC, 12, 149), ("host sync", "host wait")),
    ("late, a copy held the CPU", 200, 180, (COPY, 20, 179), ("memcpy (host side)", "host wait")),
    ("late, nothing held the CPU but its op", 200, 180, None, ("CPU: aten::late", "host wait")),
    ("queued, a sync ran in a short gap", 2, 3, (SYNC, 5, 400), ("launch overhead", "kernel wait")),
    ("queued, a sync ran in a long gap", 500, 3, (SYNC, 5, 600), ("queued, waiting", "other")),
    ("queued, a copy held the CPU", 500, 3, (COPY, 12, 505), ("queued, waiting", "other")),
    ("queued, 29.9 µs: kernel wait", 29.9, 3, None, ("launch overhead", "kernel wait")),
    ("queued, 30 µs: HTA's threshold is not under itself", 30, 3, None, ("queued, waiting", "other")),
    ("no launch recorded, a sync ran in a short gap", 2, None, (SYNC, 5, 400), ("launch overhead", "kernel wait")),
    ("no launch recorded, a long gap", 500, None, (SYNC, 5, 600), ("queued, waiting", "other")),
]


@pytest.mark.parametrize(("what", "gap", "launch", "held", "want"), RULES, ids=[r[0] for r in RULES])
def test_each_rule_is_asked_in_htas_order(what, gap, launch, held, want):
    """A sync or a copy is a cause only of a kernel launched after the device went idle (HTA's host wait); a kernel
    already queued waited on the device, whatever the CPU was doing."""
    got = idle_causes(_gap(gap, launch, held))
    assert [(c.cause, c.category, c.gaps) for c in got] == [(*want, 1)], what
    assert got[0].time_s == pytest.approx(gap * 1e-6)


def test_a_graph_replay_queued_from_another_thread_waits_while_a_copy_waits_on_the_gpu():
    """A training rank's ~64 ms gaps, each ended by a CUDA-graph replay another thread queued ~65 ms earlier, while
    the main thread's copy call was itself waiting on the GPU: 'memcpy (host side)' (host wait) before; the
    replay was queued, so the gap is other, as HTA has it."""
    ev = []
    for i in range(4):
        t0 = i * 65_002
        ev += [_ev("cuda_runtime", "cudaLaunchKernel", t0 - 850 if i else -5, 5, correlation=10 + i),
               _ev("kernel", f"k{i}", t0, 1000, correlation=10 + i),
               _ev("cuda_runtime", "cudaGraphLaunch", t0 + 200, 30, tid=2, correlation=100 + i),  # another thread
               _ev("kernel", f"replay{i}", t0 + 64_100, 900, correlation=100 + i),
               _ev("cuda_runtime", "cudaMemcpyAsync", t0 + 1100, 63_000)]  # the main thread waits in a copy
    t = parse_trace({"traceEvents": ev})
    got = {c.cause: (c.category, c.gaps, round(c.time_s * 1e6, 3)) for c in idle_causes(t)}
    assert got == {"queued, waiting": ("other", 4, 4 * 63_100.0), "launch overhead": ("kernel wait", 3, 6.0)}


def test_back_to_back_queued_kernels_under_a_long_device_sync_are_kernel_wait():
    """An H200 training step: 687 gaps of ~1.6 µs between kernels queued long before, while one
    cudaDeviceSynchronize waited for them all, were called 'host sync'. The kernels were queued: kernel wait."""
    n, k_us, gap_us = 688, 5.0, 1.6
    ev = []
    for i in range(n):
        ev.append(_ev("cpu_op", "aten::mul", i * 3.0, 2.5, **{"External id": i + 1}))
        ev.append(_ev("cuda_runtime", "cudaLaunchKernel", i * 3.0 + 0.5, 1.5, correlation=i + 1))
        ev.append(_ev("kernel", "elementwise", 3000 + i * (k_us + gap_us), k_us, correlation=i + 1))
    ev.append(_ev("cuda_runtime", SYNC, n * 3.0 + 10, 3000 + n * (k_us + gap_us)))  # waits for the whole queue
    t = parse_trace({"traceEvents": ev})
    got = idle_causes(t)
    assert [(c.cause, c.category, c.gaps) for c in got] == [("launch overhead", "kernel wait", n - 1)]
    assert got[0].time_s == pytest.approx((n - 1) * gap_us * 1e-6)
    w = build_workload(t, lookup_device("h200"))
    assert [c.category for c in w.idle_causes] == ["kernel wait"] and w.idle_s == pytest.approx(got[0].time_s)


# -- times kept from the trace's first event ----------------------------------------------------------------------


EPOCH_US = 1682725898236567  # a real trace's first time: µs since 1970 (trace_filter_sampled_rank-0)


def _epoch_trace(start_us: float, n: int = 3000):
    """n kernels of 1.4 µs every 4 µs, queued: the gaps are (n − 1) × 2.6 µs exactly."""
    ev = []
    for i in range(n):
        ev.append(_ev("cuda_runtime", "cudaLaunchKernel", start_us + i * 0.2, 0.1, correlation=i + 1))
        ev.append(_ev("kernel", "k", start_us + 1000 + i * 4, 1.4, correlation=i + 1))
    return parse_trace({"traceEvents": ev})


def test_an_epoch_stamped_trace_loses_no_time():
    """A trace stamped in µs since 1970: as seconds since then each time is a quarter-µs step, and the gaps of
    3000 kernels summed lost over 0.1 ms. Kept from the trace's first event, they are exact."""
    n = 3000
    exact = (n - 1) * 2.6e-6
    epoch, zero = _epoch_trace(EPOCH_US, n), _epoch_trace(0.0, n)
    for t in (epoch, zero):
        causes = idle_causes(t)
        assert sum(c.time_s for c in causes) == pytest.approx(exact, abs=1e-10)  # was 91 µs short
        assert [(c.cause, c.gaps) for c in causes] == [("launch overhead", n - 1)]
        w = build_workload(t, lookup_device("h200"))
        assert w.idle_s == pytest.approx(exact, abs=1e-10) and w.busy_s == pytest.approx(n * 1.4e-6, abs=1e-10)
        assert t.span_s == pytest.approx((n - 1) * 4e-6 + 1.4e-6, abs=1e-12)
    assert epoch.origin_us == EPOCH_US and epoch.kernels[0].ts == pytest.approx(1000e-6, abs=1e-12)
