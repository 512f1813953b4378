"""An op with no W model is "W unknown": never memory- or compute-bound, no bound, its time kept at any roof.

Before, such an op got Q = its input tensors' sizes and W = 0 and read "memory-bound" (fbgemm's TBE lookup on a
real A100 rank took its 7.7 G-element weight table as Q, before it had a model of its own; vLLM's aten::index, whose
indices the profiler did not record, a 184 kB "memory" op). On the DLRM ranks the op left without a model is
`aten::cat` of a TensorList the profiler recorded as `[]`: its inputs' sizes are not in the trace.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace
from rooftop.tui.cli import main

DATA = Path(__file__).parent / "data" / "real-traces"
RANK0 = DATA / "trace_filter_sampled_rank-0.json.gz"
CAT = "aten::cat"  # its TensorList recorded as [] on these ranks: no sizes, so no model


def test_an_op_without_a_model_is_w_unknown_with_no_bound_and_keeps_its_time():
    w = build_workload(load_trace(RANK0), lookup_device("a100"))
    unknown = [g for g in w.groups if g.model in ("tensors", "uncosted") and g.regime != "comm"]
    cat = [g for g in unknown if g.op == CAT]
    assert cat and sum(g.time_s for g in cat) > 0.010  # 11 ms of kernels, no model
    for g in unknown:
        assert g.regime == "W unknown" and g.flops == 0 and g.bytes == 0, g.op
        assert g.bound_s is None and g.fraction_of_roof is None and g.intensity is None
        assert "W and Q unknown" in g.counting
    # "every op at its roof" takes nothing off an op it cannot place: the step at the roofs keeps its time
    kept = sum(g.alone_s for g in unknown)
    assert w.at_roof_s >= w.idle_s + kept
    assert w.bytes == sum(g.bytes for g in w.groups if g.model not in ("tensors", "uncosted"))


def test_w_unknown_in_the_report_json_and_show(tmp_path, capsys):
    """aten::cat of an unrecorded TensorList: no sizes, so no W model, in --json, the report and `show`."""
    db = str(tmp_path / "u.db")
    assert main(["profile", "--trace", str(RANK0), "-d", "a100", "--json", "--db", db]) == 0
    doc = json.loads(capsys.readouterr().out)
    cat = [o for o in doc["ops"] if o["op"] == CAT and o["model"] == "tensors"]
    assert cat
    for o in cat:
        assert o["model"] == "tensors" and o["regime"] == "W unknown"
        assert o["bytes"] == 0 and o["flops"] == 0 and o["bound_s"] is None
        assert o["fraction_of_roof"] is None and o["time_s"] > 0
    assert main(["profile", "--trace", str(RANK0), "-d", "a100", "--no-save", "--wide"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if " cat " in line and "W unknown" in line]
    assert rows  # the largest of them (the table lists the top rows)
    assert all("memory" not in r and "GB/s" not in r for r in rows)
    assert main(["show", doc["run_id"][:8], "--db", db, "--wide"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if " cat " in line and "W unknown" in line]
    assert rows and all("memory" not in r for r in rows)


@pytest.mark.parametrize("name", ["aten::my_custom_op", "vllm::not_a_known_op"])
def test_cost_of_an_unknown_op_counts_nothing(name):
    from rooftop.models.program.shapecost import cost_op

    c = cost_op(name, [[100, 10]], ["float"])
    assert c.model == "tensors" and c.flops == 0 and c.bytes == 0 and "4000 B" in c.counting


@pytest.mark.parametrize("dims, types, concrete, nbytes", [
    ([[], [], [], [0]], ["Scalar", "Scalar", "Scalar", "long int"], ["0", "1", "1", ""], 8),  # .start_out: 1 int64
    ([[]] * 5, ["Scalar", "", "", "", "Scalar"], ["1024", "", "", "", "False"], 8 * 1024),  # arange(end)
    ([[]] * 7, ["Scalar"] * 7, ["0", "10", "0.5", "6", "", "", ""], 4 * 20),  # .start_step, dtype float
    ([[]] * 5, ["Scalar"] * 5, [""] * 5, None),  # no arguments recorded: W unknown
])
def test_arange_from_its_recorded_bounds(dims, types, concrete, nbytes):
    """aten::arange (on every HF decode trace here) had no model and read 'memory-bound'; its length is its
    bounds, recorded as Concrete Inputs."""
    from rooftop.models.program.shapecost import cost_op

    c = cost_op("aten::arange", dims, types, None, concrete)
    if nbytes is None:
        assert c.model == "tensors" and c.bytes == 0
    else:
        assert c.model == "copy" and c.bytes == nbytes and c.flops == 0


def test_an_autograd_node_that_launches_kernels_of_its_own_is_costed_not_no_work():
    """TBE's backward runs as an autograd node (`CppNode<SplitLookupFunction_…>`) that launches its kernels itself,
    with no aten op under it: 16% of an A100 rank's kernel time, which read "no work" (an autograd node costs
    nothing of its own where its aten ops do the work). It is costed with its forward's record (the fused
    optimizer's model); a node with no model would be W unknown, never "no work"."""
    w = build_workload(load_trace(DATA / "trace_filter_sampled_rank-1.json.gz"), lookup_device("a100"))
    nodes = [g for g in w.groups if g.op.startswith("torch::autograd::CppNode<") and g.kernels]
    assert sum(g.time_s for g in nodes) > 0.1 * w.op_time_s
    for g in nodes:
        assert g.regime != "no work", g.op
        if "SplitLookupFunction" in g.op:
            assert g.model == "optimizer" and g.regime == "memory" and g.bytes > 0, g.op
        else:
            assert g.regime == "memory" or (g.regime == "W unknown" and "W and Q unknown" in g.counting), g.op
    assert not [g for g in w.groups if g.regime == "no work" and g.kernels and g.model == "none"]
