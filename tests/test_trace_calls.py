"""The reader keeps the runtime calls that order the device's work (launches, event records, stream waits, syncs,
memcpy calls) with their thread and correlation, Kineto's cuda_sync events with their event and stream args, and the
CPU's user ranges: what the critical path's graph is built from."""

from __future__ import annotations

from rooftop.models.trace.read import CALL_KINDS, parse_trace

US = 1e-6


def _x(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def test_runtime_calls_kept_with_thread_correlation_and_kind():
    events = [
        _x("cuda_runtime", "cudaLaunchKernel", 10, 2, correlation=1),
        _x("kernel", "k1", 15, 5, pid=0, tid=7, correlation=1, stream=7, device=0),
        _x("cuda_runtime", "cudaEventRecord", 13, 1, correlation=2),
        _x("cuda_runtime", "cudaStreamWaitEvent", 4, 1, tid=2, correlation=3),  # another thread, earlier
        _x("cuda_runtime", "cudaFuncSetAttribute", 20, 1, correlation=4),  # orders nothing: CPU work
        _x("cuda_runtime", "cudaStreamSynchronize", 21, 9, correlation=5),
        _x("cuda_runtime", "cudaMemcpyAsync", 31, 3, correlation=6),
        _x("cuda_runtime", "cudaMemcpyAsync", 31, 3, correlation=6),  # recorded twice: kept once
        _x("cuda_sync", "Stream Wait Event", 18, 0, pid=0, tid=8, stream=8, correlation=3, device=0,
           wait_on_stream=7, wait_on_cuda_event_record_corr_id=2),
        _x("user_annotation", "forward", 9, 30),
    ]
    t = parse_trace({"traceEvents": events})
    c = t.calls
    assert c.name == ("cudaStreamWaitEvent", "cudaLaunchKernel", "cudaEventRecord", "cudaStreamSynchronize",
                      "cudaMemcpyAsync")
    assert [CALL_KINDS[k] for k in c.kind] == ["wait", "launch", "record", "sync", "copy"]
    assert list(c.correlation) == [3, 1, 2, 5, 6]
    assert [c.threads[i] for i in c.thread] == [(1, 2), (1, 1), (1, 1), (1, 1), (1, 1)]
    base = 10  # times count from the first event in the file
    assert [round(x / US, 6) for x in c.ts] == [4 - base, 10 - base, 13 - base, 21 - base, 31 - base]
    assert [round(x / US, 6) for x in c.dur] == [1, 2, 1, 9, 3]
    (s,) = t.device_syncs
    assert (s.name, s.stream, s.correlation, s.wait_on_stream, s.record) == ("Stream Wait Event", 8, 3, 7, 2)
    assert [(round(a / US), round(b / US), n) for a, b, n in t.annotations] == [(9 - base, 39 - base, "forward")]


def test_a_trace_with_no_runtime_calls_has_none():
    t = parse_trace({"traceEvents": [_x("kernel", "k", 0, 5, pid=0, tid=7, stream=7)]})
    assert len(t.calls) == 0 and t.device_syncs == () and t.annotations == ()


def test_calls_in_order_with_a_copy_keep_one_of_it():
    events = [_x("cuda_runtime", "cudaLaunchKernel", t, 1, correlation=c) for t, c in ((0, 1), (5, 2), (5, 2), (9, 3))]
    c = parse_trace({"traceEvents": events}).calls
    assert list(c.correlation) == [1, 2, 3] and [round(x / US) for x in c.ts] == [0, 5, 9]
