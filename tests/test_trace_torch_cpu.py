"""Traces made here with torch's own profiler on the CPU: rooftop reads them without torch, and its figures
match what the program did (the ops, their shapes, 2·M·N·K for the GEMMs, a split that adds up)."""

from __future__ import annotations

import json

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace
from rooftop.tui.cli import main

torch = pytest.importorskip("torch")


def _record(path, shapes: bool):
    from torch.profiler import ProfilerActivity, profile

    a, b, bias = torch.randn(64, 32), torch.randn(32, 48), torch.randn(48)
    x = torch.randn(4, 16, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes) as p:
        for _ in range(3):
            torch.mm(a, b)
            torch.addmm(bias, a, b)
            torch.bmm(x, x.transpose(1, 2))
            torch.relu(a).sum()
    p.export_chrome_trace(str(path))
    return path


def test_a_few_ops_without_shapes(tmp_path, capsys):
    path = _record(tmp_path / "plain.json", shapes=False)
    trace = load_trace(path)
    names = {o.name for o in trace.ops}
    assert {"aten::mm", "aten::addmm", "aten::bmm", "aten::relu", "aten::sum"} <= names
    assert not trace.on_device and trace.kernel_count == 0
    assert all(o.dims == () for o in trace.ops)
    assert main(["profile", "--trace", str(path), "--json", "--no-save", "-d", "h100"]) == 0
    doc = json.loads(capsys.readouterr().out)
    s = doc["summary"]
    assert 0 < s["device_busy_s"] <= s["span_s"]
    shares = [o["share"] for o in doc["ops"]] + [s["idle_share"]]
    assert all(0 <= x <= 1 for x in shares) and sum(shares) <= 1 + 1e-9


def test_record_shapes_gives_the_gemm_flops(tmp_path):
    path = _record(tmp_path / "shapes.json", shapes=True)
    work = build_workload(load_trace(path), lookup_device("h100"))
    by = {}
    for g in work.groups:
        by[g.op] = by.get(g.op, 0.0) + g.flops
    assert by["aten::mm"] == pytest.approx(3 * 2 * 64 * 32 * 48)
    assert by["aten::addmm"] == pytest.approx(3 * 2 * 64 * 32 * 48)
    assert by["aten::bmm"] == pytest.approx(3 * 2 * 4 * 16 * 8 * 16)
    assert sum(g.alone_s for g in work.groups) <= work.busy_s * (1 + 1e-9)
    assert work.steps == () and work.overlap_s == 0.0


def test_the_cpu_threads_the_program_used_against_the_roofs_threads(tmp_path):
    """A CPU roof measured with fewer threads than the program used is said so, with the fix."""
    import dataclasses

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        p.add_metadata("rooftop_cpu_threads", "4")  # what rooftop's recorder writes for a program it runs
        torch.mm(torch.randn(64, 64), torch.randn(64, 64))
    path = tmp_path / "threads.json"
    p.export_chrome_trace(str(path))
    trace = load_trace(path)
    assert trace.cpu_threads == 4
    cpu = dataclasses.replace(lookup_device("h100"), id="one-thread-cpu", kind="cpu", sm_count=1)
    [flag] = [f for f in build_workload(trace, cpu).flags if f.kind == "threads"]
    assert "measured with 1 thread" in flag.text and "ran with 4" in flag.text and "--threads 4" in flag.text
    four = dataclasses.replace(cpu, sm_count=4)
    assert not [f for f in build_workload(trace, four).flags if f.kind == "threads"]


def test_a_parent_op_keeps_its_own_work_beside_the_op_it_calls(tmp_path):
    """nll_loss_backward clears grad_input through the zero_ it calls and writes the N picked values itself;
    sum sets its output through fill_ and reads its input itself. Each parent keeps its own W and Q beside its
    child's (they were dropped), and nothing is counted twice: the two add up to the parent's whole call."""
    from torch.profiler import ProfilerActivity, profile

    n, c = 48, 64
    logp = torch.randn(n, c).log_softmax(1).detach().requires_grad_()
    target = torch.randint(0, c, (n,))
    x = torch.randn(256, 32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        torch.nn.functional.nll_loss(logp, target).backward()
        x.sum(0)
    path = tmp_path / "parents.json"
    p.export_chrome_trace(str(path))
    work = build_workload(load_trace(path), lookup_device("h100"))
    by = {(g.op, g.shapes_text): g for g in work.groups}
    back, zero = by[("aten::nll_loss_backward", "48×64 · 48")], by[("aten::zero_", "48×64")]
    assert back.flops == n  # one FLOP per target
    assert back.bytes == 4 + 4 + n * 8 + n * 4  # grad_output, total_weight, target read; N values written
    assert zero.bytes == n * c * 4  # the clearing of grad_input, once
    total = by[("aten::sum", "256×32")].bytes + by[("aten::fill_", "1×32")].bytes
    assert by[("aten::sum", "256×32")].flops == 256 * 32 and total == (256 * 32 + 32) * 4  # x read, 32 sums written


def test_an_index_whose_indices_are_recorded_empty_is_costed_from_the_ops_inside_it(tmp_path):
    """`x[idx]` records its indices (a list of optional tensors) as `[]`; the source's as_strided to the output's
    shape and each index's reshape inside it give Q: the indices and the picked elements read, the output written,
    as the tensors the program made say. W = 0."""
    from torch.profiler import ProfilerActivity, profile

    from rooftop.models.program.opcontext import OpContext
    from rooftop.models.program.shapecost import cost_op

    x, y = torch.randn(64, 48, dtype=torch.bfloat16), torch.randn(8, 16, 12)
    rows, cols = torch.randint(0, 64, (32,)), torch.randint(0, 48, (32,))
    mask = x[:, 0] > 0
    cases = [(x, (rows,)), (x, (rows, cols)), (y, (slice(None), rows[:5] % 16)), (y, ((rows[:4] % 8).reshape(2, 2),)),
             (x, (mask,))]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        outs = [src[ix] for src, ix in cases]
    path = tmp_path / "index.json"
    p.export_chrome_trace(str(path))
    trace = load_trace(path)
    context = OpContext(trace)
    found = [i for i, o in enumerate(trace.ops) if o.name == "aten::index"]
    assert len(found) == len(cases)
    for i, (src, ix), out in zip(found, cases, outs):
        o = trace.ops[i]
        assert o.dims[1] == [] and cost_op(o.name, o.dims, o.types, None, o.concrete).model == "tensors"
        index = [t.nonzero() if t.dtype == torch.bool else t for t in ix if isinstance(t, torch.Tensor)]
        size = src.element_size()
        want = sum(t.numel() * t.element_size() for t in index) + min(out.numel(), src.numel()) * size \
            + out.numel() * size
        c = context.cost(i)
        assert c is not None and c.model == "index" and c.flops == 0
        assert c.bytes == want and c.shape["n"] == out.numel()
