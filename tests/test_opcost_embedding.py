"""fbgemm's table-batched embedding (TBE) ops costed from their records, checked against fbgemm's own byte count.

fbgemm_gpu's benchmark (`fbgemm_gpu/bench/split_table_batched_embeddings_benchmark.py`) reports a pooled TBE's
bandwidth from `read_write_bytes = output_size_multiplier * B * sum(Ds) + param_size_multiplier * B * sum(Ds) * L`
(L lookups per bag) for the forward, and `2 * read_write_bytes` for the backward. rooftop's forward Q is that plus
the indices and offsets it reads; its backward Q reads grad_output once (fbgemm's doubling counts it twice), and
adds the rowwise-adagrad momentum of each touched row and the indices and offsets.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.program.opcontext import OpContext
from rooftop.models.program.opcost import embedding
from rooftop.models.program.opcost.base import Tensor
from rooftop.models.program.shapecost import cost_op, cost_with
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace

REAL = Path(__file__).parent / "data" / "real-traces"
FWD = "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function"
BWD = "torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>"
# the forward's inputs as torch.profiler records them (fbgemm_gpu 2023, rowwise adagrad: 29 inputs)
TYPES = ["float", "c10::Half", "c10::Half", "c10::Half", "int", "long", "int", "Scalar", "Scalar", "long", "Scalar",
         "long", "long", "Scalar", "", "", "int", "Scalar", "Scalar", "Scalar", "float", "float", "int", "long",
         "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"]


def record(t: int, b: int, lookups: int, rows: int, width: int) -> tuple[list, list[str]]:
    """A TBE forward's Input Dims and Concrete Inputs: t tables of `rows` rows, total_D = width."""
    dims = [[0], [rows * width], [0], [0, 0], [t], [t], [t + 1], [], [], [t + 1], [], [lookups], [t * b + 1], [], [],
            [], [0], [], [], [], [rows * t], [0], [t], [t], [], [], [], [], []]
    concrete = [""] * len(dims)
    concrete[7] = str(width)
    return dims, concrete


def fbgemm_bytes(b: int, ds: list[int], bag: int, param: float, out: float) -> float:
    """fbgemm's benchmark: pooled read_write_bytes."""
    return out * b * sum(ds) + param * b * sum(ds) * bag


def test_the_forward_is_fbgemms_byte_count_plus_its_indices_and_offsets():
    t, b, bag, d = 8, 512, 20, 64
    n = t * b * bag
    dims, concrete = record(t, b, n, 1000 * t, t * d)
    c = cost_op(FWD, dims, TYPES, None, concrete)
    assert c.model == "index" and c.shape["total_d"] == t * d and c.shape["b"] == b
    assert c.bytes == pytest.approx(fbgemm_bytes(b, [d] * t, bag, 2.0, 4.0) + 8 * n + 8 * (t * b + 1))
    assert c.flops == n * d  # one add per element of each looked-up row
    assert "estimate" in c.counting and "mean D = total_D / T" in c.counting


def test_the_backward_reads_and_writes_fbgemms_rows_and_its_optimizer_state():
    t, b, bag, d = 8, 512, 20, 64
    n = t * b * bag
    dims, concrete = record(t, b, n, 1000 * t, t * d)
    grad = Tensor((b, t * d), "fp32", 4.0)
    c = cost_with(FWD, dims, TYPES, concrete, lambda call: embedding.backward(call, grad))
    assert c is not None and c.model == "optimizer"
    fbgemm_backward = 2 * fbgemm_bytes(b, [d] * t, bag, 2.0, 4.0)
    grad_twice = 4.0 * b * t * d  # fbgemm's doubling reads grad_output twice; it is read once
    assert c.bytes == pytest.approx(fbgemm_backward - grad_twice + 2 * 4.0 * n + 8 * n + 8 * (t * b + 1))
    assert c.flops == (1 + 4) * n * d  # summed per row, then rowwise adagrad's update
    assert "every lookup's row as touched" in c.counting


def test_mixed_widths_are_taken_at_their_mean_and_a_grad_of_another_batch_is_no_pair():
    t, b, n = 3, 100, 3000
    dims, concrete = record(t, b, n, 50, 64 + 128 + 256)
    c = cost_op(FWD, dims, TYPES, None, concrete)
    assert c.flops == pytest.approx(n * (64 + 128 + 256) / 3) and "= 149.3" in c.counting
    wrong = Tensor((b + 1, 448), "fp32", 4.0)
    assert cost_with(FWD, dims, TYPES, concrete, lambda call: embedding.backward(call, wrong)) is None


def test_without_total_d_or_a_known_optimizer_it_stays_w_unknown():
    dims, concrete = record(4, 64, 1000, 100, 256)
    assert cost_op(FWD, dims, TYPES, None, [""] * len(dims)).model == "tensors"  # no total_D, no backward
    adam = FWD.replace("rowwise_adagrad", "adam")
    assert cost_op(adam, dims, TYPES, None, concrete).model == "tensors" and not embedding.is_tbe(adam)
    node = cost_op(BWD, [[64, 256]], ["float"], None, [])
    assert node.model == "tensors"  # a node alone (its forward before the window): W unknown, not "moves no data"


def test_each_backward_node_of_a_real_rank_is_paired_with_its_own_forward():
    """Rank 0 runs two TBE modules a step (different batches and tables): each node pairs with the forward whose
    batch is its grad_output's, the latest one before it."""
    trace = load_trace(REAL / "trace_filter_sampled_rank-0.json.gz")
    pairs = OpContext(trace).tbe_pairs()
    ops = trace.ops
    nodes = [i for i, o in enumerate(ops) if o.name == BWD]
    forwards = [i for i, o in enumerate(ops) if o.name == FWD]
    assert len(nodes) == len(forwards) == 4 and set(pairs) == {*nodes, *forwards}
    for i in nodes:
        f = pairs[i]
        assert pairs[f] == i and ops[f].ts < ops[i].ts
        assert ops[i].dims[0][0] == embedding.sizes(ops[f].dims)[0]


def test_the_dlrm_rank_s_tbe_rows_are_placed_below_their_roof():
    w = build_workload(load_trace(REAL / "trace_filter_sampled_rank-1.json.gz"), lookup_device("a100"))
    tbe = [g for g in w.groups if embedding.is_tbe(g.op)]
    assert {g.model for g in tbe} == {"index", "optimizer"}
    for g in tbe:
        assert g.regime == "memory" and 0.2 < g.fraction_of_roof < 1.0, g.op
        assert g.shape["total_d"] == 1296 and g.shape["tables"] == 10 and g.shape["b"] == 262144
