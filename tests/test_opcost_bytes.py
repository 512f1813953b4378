"""Q by the compulsory-traffic convention on hand-checked records, and malformed records never crash.

Each record is written as torch.profiler writes it (Input Dims, Input type,
Concrete Inputs); the expected bytes are worked out here from the shapes.
"""

from __future__ import annotations

import math
import random

import pytest
from rooftop.models.program.shapecost import cost_op

F, L = "float", "long int"


def test_gather_reads_what_it_picks_not_whole_rows():
    # logits 8192×50304, gather(-1, index 8192×1): 8192 elements picked, not 8192 rows of 50304
    c = cost_op("aten::gather", [[8192, 50304], [], [8192, 1], []], [F, "Scalar", L, "Scalar"], None,
                ["", "-1", "", "False"])
    assert c.model == "index" and c.bytes == 8192 * 8 + 8192 * 4 + 8192 * 4  # index, picked, output


def test_index_select_and_embedding_read_the_rows_they_pick():
    c = cost_op("aten::index_select", [[50, 32], [], [32]], [F, "Scalar", L], None, ["", "0", ""])
    assert c.bytes == 32 * 8 + 32 * 32 * 4 * 2
    e = cost_op("aten::embedding", [[50, 32], [2, 16], [], [], []], [F, L, "Scalar", "Scalar", "Scalar"], None,
                ["", "", "-1", "False", "False"])
    assert e.bytes == 32 * 8 + 2 * 32 * 32 * 4
    # more lookups than rows: the table is read at most once
    big = cost_op("aten::embedding", [[10, 4], [1000]], [F, L])
    assert big.bytes == 1000 * 8 + 10 * 4 * 4 + 1000 * 4 * 4


def test_nll_loss_reads_the_picked_log_probabilities_not_the_whole_input():
    fwd = cost_op("aten::nll_loss_forward", [[8192, 50304], [8192], [], [], []], [F, L, "", "Scalar", "Scalar"],
                  None, ["", "", "", "1", "-100"])
    assert fwd.model == "loss" and fwd.flops == 8192
    assert fwd.bytes == 8192 * 8 + 8192 * 4 + 2 * 4  # target, picked values, loss and total weight
    none = cost_op("aten::nll_loss_forward", [[64, 10], [64], [], [], []], [F, L, "", "Scalar", "Scalar"],
                   None, ["", "", "", "0", "-100"])
    assert none.bytes == 64 * 8 + 64 * 4 + (64 + 1) * 4  # reduction='none': one loss per target
    bwd = cost_op("aten::nll_loss_backward", [[], [8192, 50304], [8192], [], [], [], []],
                  [F, F, L, "", "Scalar", "Scalar", F], None, ["", "", "", "", "1", "-100", ""])
    # grad, total weight, target read; grad_input cleared (its zero_ does it), N values written
    assert bwd.bytes == 4 + 4 + 8192 * 8 + 8192 * 4 + 8192 * 50304 * 4


def test_fill_and_zero_only_write():
    for name in ("aten::fill_", "aten::zero_"):
        c = cost_op(name, [[1024, 1024], []][: 2 if name == "aten::fill_" else 1], [F, "Scalar"])
        assert c.bytes == 1024 * 1024 * 4 and c.flops == 0
    z = cost_op("aten::zeros", [[], [], [], [], []], ["ScalarList", "Scalar", "Scalar", "", ""], None,
                ["[2, 16, 4, 8]", "15", "0", "", ""])
    assert z.bytes == 2 * 16 * 4 * 8 * 2  # bf16 (ScalarType 15)


def test_embedding_dense_backward_writes_the_rows_it_touches():
    c = cost_op("aten::embedding_dense_backward", [[2, 16, 32], [2, 16], [], [], []], [F, L, "Scalar", "Scalar",
                                                                                      "Scalar"], None,
                ["", "", "50", "-1", "False"])
    assert c.flops == 2 * 16 * 32  # one add per grad_output element
    assert c.bytes == 2 * 16 * 32 * 4 + 32 * 8 + 2 * 32 * 32 * 4  # grad, indices; 32 rows read and written
    few_rows = cost_op("aten::embedding_dense_backward", [[4096, 8], [4096], [], [], []], [F, L, "Scalar", "Scalar",
                                                                                          "Scalar"], None,
                       ["", "", "10", "-1", "False"])
    assert few_rows.bytes == 4096 * 8 * 4 + 4096 * 8 + 2 * 10 * 8 * 4  # at most the table's 10 rows


def test_foreach_add_counts_every_member_and_writes_self_back():
    c = cost_op("aten::_foreach_add_", [[[128, 128], [128]], [[128, 128], [128]], []],
                ["TensorList", "TensorList", "Scalar"], None, ["", "", "-0.001"])
    n = 128 * 128 + 128
    assert c.model == "optimizer" and c.flops == n and c.bytes == 3 * n * 4  # self, other read; self written
    steps = cost_op("aten::_foreach_add_", [[[]] * 25, []], ["TensorList", "Scalar"], None, ["", "1"])
    assert steps.bytes == 25 * 2 * 4  # 0-d step counters: read and written once each
    bf16 = cost_op("aten::_foreach_mul_", [[[1000]], []], ["TensorList", "Scalar"], ("bf16", 2.0))
    assert bf16.bytes == 2 * 1000 * 2  # the element size a kernel's name gave (its math runs on the fp32 roof)


def test_fused_adamw_reads_four_and_writes_three_per_element():
    params = [[10, 20], [20]]
    dims = [params, params, params, params, [], [[], []]] + [[]] * 9
    types = ["TensorList"] * 6 + ["Scalar"] * 7 + ["", ""]
    conc = ["", "", "", "", "", "", "0.001", "0.9", "0.999", "0.01", "1e-08", "False", "False", "", ""]
    c = cost_op("aten::_fused_adamw_", dims, types, None, conc)
    assert c.model == "optimizer" and c.flops == 14 * 220
    assert c.bytes == 7 * 220 * 4 + 2 * 4  # + the two step counters
    ams = cost_op("aten::_fused_adamw_", dims[:4] + [params] + dims[5:], types, None,
                  conc[:11] + ["True"] + conc[12:])
    assert ams.bytes == 9 * 220 * 4 + 2 * 4 and ams.flops == 15 * 220


def test_backward_ops_write_their_gradients():
    t = cost_op("aten::threshold_backward", [[4, 16, 8, 8], [4, 16, 8, 8], []], [F, F, "Scalar"], None, ["", "", "0"])
    assert t.bytes == 3 * 4096 * 4  # grad and input read, grad_input written
    ln = cost_op("aten::native_layer_norm_backward",
                 [[64, 512], [64, 512], [], [64, 1], [64, 1], [512], [512], []],
                 [F, F, "ScalarList", F, F, F, F, "ScalarList"], None, ["", "", "[512]", "", "", "", "",
                                                                        "[True, True, True]"])
    reads = (2 * 64 * 512 + 2 * 64 + 2 * 512) * 4
    assert ln.bytes == reads + (64 * 512 + 2 * 512) * 4  # dx, dweight, dbias written
    no_w = cost_op("aten::native_layer_norm_backward",
                   [[64, 512], [64, 512], [], [64, 1], [64, 1], [512], [512], []],
                   [F, F, "ScalarList", F, F, F, F, "ScalarList"], None, ["", "", "[512]", "", "", "", "",
                                                                          "[True, False, False]"])
    assert no_w.bytes == reads + 64 * 512 * 4
    sm = cost_op("aten::_softmax_backward_data", [[32, 50], [32, 50], [], []], [F, F, "Scalar", "Scalar"], None,
                 ["", "", "1", "6"])
    assert sm.model == "softmax" and sm.bytes == 3 * 32 * 50 * 4 and sm.flops == 4 * 32 * 50


def test_batch_norm_forward_and_backward():
    x = [4, 8, 8, 8]
    fwd = cost_op("aten::native_batch_norm", [x, [8], [8], [8], [8], [], [], []], [F] * 5 + ["Scalar"] * 3, None,
                  ["", "", "", "", "", "True", "0.1", "1e-05"])
    n = 4 * 8 * 8 * 8
    assert fwd.model == "norm" and fwd.flops == 8 * n
    # x, weight, bias, running mean and var read; y, saved mean and invstd, running mean and var written
    assert fwd.bytes == (n + 4 * 8) * 4 + n * 4 + 2 * 8 * 4 + 2 * 8 * 4
    bwd = cost_op("aten::native_batch_norm_backward", [x, x, [8], [8], [8], [8], [8], [], [], []],
                  [F] * 7 + ["Scalar", "Scalar", "ScalarList"], None, [""] * 9 + ["[True, True, True]"])
    assert bwd.flops == 13 * n and bwd.bytes == (2 * n + 5 * 8) * 4 + (n + 2 * 8) * 4


def test_conv_backward_counts_the_gradients_asked_for():
    dims = [[4, 16, 8, 8], [4, 8, 8, 8], [16, 2, 3, 3], [], [], [], [], [], [], [], []]
    types = [F, F, F] + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
    conc = ["", "", "", "[16]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "4", "[True, True, True]"]
    both = cost_op("aten::convolution_backward", dims, types, None, conc)
    fwd = 2 * 4 * 16 * 2 * 9 * 64  # 2·N·O·(C/groups)·kernel·pixels
    assert both.model == "conv" and both.flops == 2 * fwd and both.shape["groups"] == 4
    weight_only = cost_op("aten::convolution_backward", dims, types, None, conc[:10] + ["[False, True, False]"])
    assert weight_only.flops == fwd
    reads = (4 * 16 * 64 + 4 * 8 * 64 + 16 * 2 * 9) * 4
    assert weight_only.bytes == reads + 16 * 2 * 9 * 4


def test_transposed_convolution_counts_input_pixels():
    c = cost_op("aten::convolution", [[2, 8, 5, 5], [8, 4, 3, 3], [4], [], [], [], [], [], []],
                [F, F, F, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"], None,
                ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"])
    assert c.flops == 2 * 2 * 8 * 4 * 9 * 25  # as FlopCounterMode: the input's pixels for a transposed conv
    assert c.shape["out0"] == (5 - 1) * 2 - 2 + 2 + 1 + 1 and c.shape["o"] == 4


def test_elementwise_in_place_and_comparisons():
    add_ = cost_op("aten::add_", [[2048, 128], [2048, 128], []], [F, F, "Scalar"])
    assert add_.bytes == 3 * 2048 * 128 * 4  # self and other read, self written back
    eq = cost_op("aten::eq", [[1000], [1000]], [F, F])
    assert eq.bytes == 2 * 4000 + 1000  # a bool output
    s = cost_op("aten::sum", [[5, 128], [], [], []], [F, "ScalarList", "Scalar", ""], None, ["", "[0]", "True", ""])
    assert s.model == "reduction" and s.bytes == (5 * 128 + 128) * 4 and s.flops == 5 * 128


def test_autograd_nodes_and_views_move_nothing():
    for name in ("MmBackward0", "autograd::engine::evaluate_function: MmBackward0",
                 "torch::autograd::AccumulateGrad", "detach_", "aten::view"):
        c = cost_op(name, [[128, 128]], [F])
        assert c.model == "none" and c.bytes == 0 and c.flops == 0, name


# -- malformed records (cases a fuzz run found) -----------------------------------------------------------------

CONV = (["aten::convolution", [[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], [], [], []],
         [F, F, F, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]])


@pytest.mark.parametrize("name,dims,types,concrete", [
    ("aten::convolution", CONV[1], CONV[2], ["", "", "", "[0, 0]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"]),
    ("aten::convolution", CONV[1], CONV[2], ["", "", "", "[1, 1]", "[" + "9" * 400 + ", 1]", "[1, 1]", "False",
                                             "[0, 0]", "1"]),
    ("aten::convolution", CONV[1], CONV[2], ["", "", "", "[1, 1]", "[-9, 0]", "[1, 1]", "False", "[0, 0]", "1"]),
    ("aten::_foreach_add_", [[[4, 4], "a"], []], ["TensorList", "Scalar"], ["", "1"]),
    ("aten::_foreach_add_", [[[4, [4]]], []], ["TensorList", "Scalar"], ["", "1"]),
    ("aten::_foreach_add_", ["a", []], ["TensorList", "Scalar"], ["", "1"]),
    ("aten::mm", [[8, -3], [-3, 4]], [F, F], []),
    ("aten::add", [[-1, 5], [5]], [F, F], []),
    ("aten::add", [[True, 5], [5]], [F, F], []),
    ("aten::max_pool2d", [[1, 1, 4, 4], [], [], [], [], []], [F] + ["ScalarList"] * 4 + ["Scalar"],
     ["", "[2, 2]", "[0, 0]", "[0, 0]", "[1, 1]", "False"]),
])
def test_malformed_records_are_uncosted_not_a_crash(name, dims, types, concrete):
    c = cost_op(name, dims, types, None, concrete)
    assert c.model == "uncosted" and c.flops == 0 and c.bytes == 0
    assert c.counting.startswith("not costed: ")


def test_fuzzed_records_never_raise_and_never_give_nan_inf_or_negative():
    """Real records with dims, types and arguments swapped for bad values: every result is a plain figure."""
    from rooftop.models.program.opcost import matmul, memory, rows

    base = [
        ("aten::convolution", CONV[1], CONV[2], ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]),
        ("aten::mm", [[8, 16], [16, 4]], [F, F], ["", ""]),
        ("aten::_flash_attention_backward", [[2, 8, 4, 16]] * 5 + [[2, 4, 8]] + [[]] * 11,
         [F] * 6 + ["Scalar"] * 11, [""] * 11 + ["True"] + [""] * 5),
        ("aten::_fused_adamw_", [[[4, 4]]] * 4 + [[], [[]]] + [[]] * 9, ["TensorList"] * 6 + ["Scalar"] * 9,
         [""] * 11 + ["False"] + [""] * 3),
        ("aten::gather", [[8, 50], [], [8, 1], []], [F, "Scalar", L, "Scalar"], ["", "-1", "", "False"]),
        ("aten::index", [[8, 50], [[8], [8]]], [F, "TensorList"], ["", ""]),
        ("aten::index_put_", [[8, 50], [[8]], [8, 50], []], [F, "TensorList", F, "Scalar"], ["", "", "", "True"]),
        ("aten::native_layer_norm", [[8, 32], [], [32], [32], []], [F, "ScalarList", F, F, "Scalar"],
         ["", "[32]", "", "", "1e-05"]),
        ("aten::max_pool2d_with_indices", [[1, 2, 8, 8], [], [], [], [], []], [F] + ["ScalarList"] * 4 + ["Scalar"],
         ["", "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "True"]),
        ("aten::constant_pad_nd", [[4, 4], [], []], [F, "ScalarList", "Scalar"], ["", "[1, 1, 2, 2]", "0"]),
        ("aten::embedding_dense_backward", [[2, 16, 32], [2, 16], [], [], []], [F, L] + ["Scalar"] * 3,
         ["", "", "50", "-1", "False"]),
        ("aten::sum", [[4, 4], [], [], []], [F, "ScalarList", "Scalar", ""], ["", "[0]", "True", ""]),
    ]
    bad_dims = [-1, "a", [1], None, 10**30, True, 2.5, [], [[]]]
    bad_text = ["0", "[0, 0]", "[-5]", "1e400", "[" + "9" * 400 + "]", "a", "[", "[[1]]", "True", "-1", "[]"]
    rng = random.Random(19)
    for _ in range(3000):
        name, dims, types, conc = rng.choice(base)
        dims = [list(d) if isinstance(d, list) else d for d in dims]
        conc = list(conc)
        for _ in range(rng.randint(1, 3)):
            what = rng.random()
            if what < 0.4 and dims:
                i = rng.randrange(len(dims))
                if isinstance(dims[i], list) and dims[i] and rng.random() < 0.7:
                    dims[i][rng.randrange(len(dims[i]))] = rng.choice(bad_dims)
                else:
                    dims[i] = rng.choice(bad_dims)
            elif what < 0.8 and conc:
                conc[rng.randrange(len(conc))] = rng.choice(bad_text)
            elif what < 0.9:
                dims = dims[: rng.randrange(len(dims) + 1)]
            else:
                name = rng.choice(sorted(matmul.ATTENTION) + sorted(rows.NORMS) + sorted(memory.GATHERS))
        c = cost_op(name, dims, types, None, conc)
        for v in (c.flops, c.bytes):
            assert isinstance(v, float) and math.isfinite(v) and v >= 0, (name, dims, conc, c)
    assert cost_op("aten::mm", None, None).model == "uncosted"


def test_gemms_read_each_matrix_once():
    bf = "c10::BFloat16"
    # matmul broadcasting a weight over a batch: the weight is read once, M is the batch's rows
    mat = cost_op("aten::matmul", [[8, 1, 3584], [3584, 18944]], [bf, bf])
    assert mat.shape == {"m": 8, "n": 18944, "k": 3584} and mat.flops == 2 * 8 * 18944 * 3584
    assert mat.bytes == 2 * (8 * 3584 + 3584 * 18944 + 8 * 18944)
    bmm = cost_op("aten::baddbmm", [[4, 64, 16], [4, 64, 32], [4, 32, 16], [], []], [F, F, F, "Scalar", "Scalar"])
    assert bmm.flops == 2 * 4 * 64 * 16 * 32 and bmm.bytes == 4 * (2 * 4 * 64 * 16 + 4 * 64 * 32 + 4 * 32 * 16)
    f8 = "c10::Float8_e4m3fn"
    mm8 = cost_op("aten::_scaled_mm", [[128, 256], [256, 64], [], [], [], [], [], []],
                  [f8, f8, F, F, "", "", "Scalar", "Scalar"], None, ["", "", "", "", "", "", "15", "False"])
    assert mm8.path == "fp8-tc" and mm8.flops == 2 * 128 * 64 * 256
    assert mm8.bytes == 128 * 256 + 256 * 64 + 2 * 4 + 128 * 64 * 2  # fp8 in, two fp32 scales, bf16 out


def test_group_norm_forward_and_backward():
    x = [2, 8, 4, 4]
    n = 2 * 8 * 16
    fwd = cost_op("aten::native_group_norm", [x, [8], [8], [], [], [], [], []], [F, F, F] + ["Scalar"] * 5, None,
                  ["", "", "", "2", "8", "16", "4", "1e-05"])
    assert fwd.model == "norm" and fwd.shape == {"rows": 8, "cols": 32}  # 2 samples × 4 groups of 2·16
    assert fwd.flops == 8 * n and fwd.bytes == (n + 2 * 8) * 4 + (n + 2 * 8) * 4  # x, w, b; y, mean, rstd
    bwd = cost_op("aten::native_group_norm_backward", [x, x, [2, 4], [2, 4], [8], [], [], [], [], []],
                  [F, F, F, F, F] + ["Scalar"] * 4 + ["ScalarList"], None,
                  ["", "", "", "", "", "2", "8", "16", "4", "[True, True, True]"])
    assert bwd.flops == 13 * n and bwd.bytes == (2 * n + 2 * 8 + 8) * 4 + (n + 2 * 8) * 4


def test_a_repeated_record_is_costed_once_and_shared_read_only():
    a = cost_op("aten::mm", [[64, 32], [32, 16]], [F, F])
    b = cost_op("aten::mm", [[64, 32], [32, 16]], [F, F])
    assert a is b and a.shape == {"m": 64, "n": 16, "k": 32}
    with pytest.raises(TypeError):
        a.shape["m"] = 1  # type: ignore[index]
    assert cost_op("aten::mm", [[64, 32], [32, 8]], [F, F]).flops == 2 * 64 * 32 * 8  # a new record, a new cost


def test_reductions_find_their_dim_and_where_writes_its_values_type():
    nrm = cost_op("aten::linalg_vector_norm", [[512, 8192], [], [], [], []], [F, "Scalar", "", "Scalar", ""], None,
                  ["", "2", "", "False", ""])
    assert nrm.bytes == 512 * 8192 * 4 + 4  # ord=2 is not a dim: a full reduction to one value
    rows_ = cost_op("aten::linalg_vector_norm", [[512, 8192], [], [], [], []], [F, "Scalar", "ScalarList", "Scalar",
                                                                              ""], None, ["", "2", "[1]", "False", ""])
    assert rows_.bytes == 512 * 8192 * 4 + 512 * 4
    w = cost_op("aten::where", [[2048], [2048], [2048]], ["bool", F, F])
    assert w.bytes == 2048 * (1 + 4 + 4) + 2048 * 4


def test_batch_norm_in_eval_keeps_no_statistics():
    x = [4, 8, 8, 8]
    n = 4 * 8 * 8 * 8
    ev = cost_op("aten::native_batch_norm", [x, [8], [8], [8], [8], [], [], []], [F] * 5 + ["Scalar"] * 3, None,
                 ["", "", "", "", "", "False", "0.1", "1e-05"])
    assert ev.bytes == (n + 4 * 8) * 4 + n * 4  # x, weight, bias, running stats read; y written
