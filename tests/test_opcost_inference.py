"""The inference frameworks' ops (vLLM, SGLang, aiter, fbgemm) costed from their recorded shapes, checked against
TraceLens's per-op figures on the two shared graph pairs (MI300X vLLM and SGLang decode).

Each TraceLens row's op is costed from the capture (or replay) trace's own record (`tests/helpers/tracelens.py`,
which prints the table). rooftop's W is within 2% of TraceLens's wherever both count it the same way. Where they
differ, the shapes say which is right, and the test says so:
- MoE (vllm::moe_forward, GPT-OSS's mxfp4 experts): TraceLens assumes the expert width equals the hidden size
  (3072; its own "LIMITATION" note); the weights the MoE kernels read, recorded inside the op as views
  [32, 1536, 5888] (w13: K = 3072 packed two to a byte, N = 2 × 2944) and [32, 1472, 3072] (w2: K = 2944), say
  the width is 2944. rooftop's W is TraceLens's × 2944 / 3072.
- A copy (aten::copy_, cumsum's scan): TraceLens counts 1 FLOP per element; a copy or a cast does no arithmetic,
  rooftop counts 0. Their bytes agree.
- GQA: both count scores per query head (64 on vLLM, 32 on SGLang) and K/V per KV head (8): the same.
- Causal: a decode step's query sees its whole context: neither halves it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from helpers.tracelens import MORE, rows
from rooftop.models.catalog import lookup_device
from rooftop.models.program.shapecost import cost_op
from rooftop.models.trace.read import CpuOp
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace

COPIES = ("aten::copy_", "aten::cumsum")
VLLM_CAPTURE = MORE / "vllm-decode-full-mi300x.capture.json.gz"


@pytest.fixture(scope="module")
def table():
    return rows()


def test_every_tracelens_row_is_costed_from_its_record(table):
    assert len(table) >= 45 and {r.pair for r in table} == {"vllm_decode_full", "sglang_decode"}
    assert not [r for r in table if r.model in ("tensors", "uncosted")]


def test_w_within_two_percent_of_tracelens_where_both_count_alike(table):
    alike = [r for r in table if r.op not in COPIES and not r.op.startswith("vllm::moe_forward")]
    assert {r.table for r in alike} >= {"GEMM", "InferenceAttention_fwd", "RMSNorm_fwd", "UnaryElementwise", "RoPE_fwd"}
    for r in alike:
        if r.theirs_gflop == 0:
            assert r.ours_gflop == 0, r
        else:
            assert r.ours_gflop == pytest.approx(r.theirs_gflop, rel=0.02), r


def test_gemm_flops_and_bytes_match_tracelens(table):
    gemms = [r for r in table if r.table == "GEMM"]
    assert len(gemms) == 17
    for r in gemms:  # TraceLens adds the bias add (M·N FLOPs, under 0.02%); FlopCounterMode and rooftop do not
        assert r.ours_gflop == pytest.approx(r.theirs_gflop, rel=0.001), r
        assert r.ours_mib == pytest.approx(r.theirs_mib, rel=0.001), r


def test_decode_attention_from_the_iteration_annotations_lengths(table):
    """Σ q·k over the step's requests (32 decodes, 55086 / 32785 keys in all) is in the replay's
    `execute_…_generation_32(sq32sk55086…)` annotation, not in any shape; W and Q then agree exactly."""
    attn = [r for r in table if r.table == "InferenceAttention_fwd" and r.ours_gflop]
    assert len(attn) == 3
    for r in attn:
        assert r.ours_gflop == pytest.approx(r.theirs_gflop, rel=1e-6) and r.ours_mib == pytest.approx(r.theirs_mib)
    vllm = next(r for r in attn if r.pair == "vllm_decode_full")
    assert vllm.ours_gflop * 1e9 == 4 * 64 * 64 * 55086  # 2·h_q·pairs·(d + d): per query head (GQA: 64 of 8 KV)


def test_moe_width_is_the_weights_not_the_hidden_size(table):
    [r] = [r for r in table if r.op.startswith("vllm::moe_forward")]
    assert r.ours_gflop == pytest.approx(r.theirs_gflop * 2944 / 3072, rel=1e-9)
    assert r.ours_gflop * 1e9 == 2 * 32 * 4 * (3072 * 5888 + 2944 * 3072)  # M · top-k · both GEMMs of one expert
    assert r.ours_mib == pytest.approx(r.theirs_mib, rel=0.05)  # the touched experts' weights dominate both


def test_copies_do_no_arithmetic_and_move_the_same_bytes(table):
    copies = [r for r in table if r.op in COPIES]
    assert copies
    for r in copies:
        assert r.ours_gflop == 0 and r.theirs_gflop > 0
        if r.theirs_mib:
            assert r.ours_mib == pytest.approx(r.theirs_mib, rel=0.02), r


def _op(trace, name):
    return next(i for i, o in enumerate(trace.ops) if o.name == name)


def test_attention_without_the_steps_lengths_is_w_unknown_and_with_an_enclosing_annotation_is_costed():
    """The capture records the attention's shapes but not its lengths: no model, never a guess. With the step's
    annotation enclosing it (or the only one in the trace), the context pass costs it."""
    from rooftop.models.program.opcontext import OpContext

    trace = load_trace(VLLM_CAPTURE)
    i = _op(trace, "vllm::unified_attention_with_output")
    o = trace.ops[i]
    assert cost_op(o.name, o.dims, o.types, None, o.concrete).model == "tensors"
    assert OpContext(trace).cost(i) is None
    step = CpuOp("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)", 0.0, 1e9, o.tid)
    ops = list(trace.ops) + [step]
    ops[i] = dataclasses.replace(o, parent=len(ops) - 1)
    c = OpContext(dataclasses.replace(trace, ops=tuple(ops))).cost(i)
    assert c is not None and c.model == "attention" and c.flops == 4 * 64 * 64 * 55086
    assert c.shape["t"] == 55086 and c.shape["kv"] == 8
    # a prefill chunk of 100 new tokens after 400: its causal triangle is taken off (query j sees 401 + j keys)
    prefill = dataclasses.replace(step, name="execute_1_context_1(sq100sk500sqsq10000sqsk50000)")
    ops[-1] = prefill
    c = OpContext(dataclasses.replace(trace, ops=tuple(ops))).cost(i)
    pairs = sum(401 + j for j in range(100))
    assert c.flops == 2 * 64 * pairs * 128


def test_the_moe_wrapper_owns_its_matmuls_once_and_the_capture_workload_counts_each_gemm_once():
    from rooftop.models.program.opcontext import OpContext

    trace = load_trace(VLLM_CAPTURE)
    i = _op(trace, "vllm::moe_forward")
    c = OpContext(trace).cost(i)
    assert c is not None and c.shape["top_k"] == 4 and c.shape["experts"] == 32
    w = build_workload(trace, lookup_device("mi300x-ds"))  # no kernels run at capture: nothing placed twice
    assert not [g for g in w.groups if g.op.startswith("vllm::") and g.flops > 0]


@pytest.mark.parametrize("name, dims, types, concrete, flops, nbytes", [
    # vLLM: in-place fused add + RMS norm: x and residual read and written back, the weight read
    ("_C::fused_add_rms_norm", [[8, 4096], [8, 4096], [4096], []], ["c10::BFloat16"] * 3 + ["Scalar"], [],
     5 * 8 * 4096, 4 * 8 * 4096 * 2 + 4096 * 2),
    ("_C::rms_norm", [[8, 4096], [8, 4096], [4096], []], ["c10::BFloat16"] * 3 + ["Scalar"], [],
     4 * 8 * 4096, 2 * 8 * 4096 * 2 + 4096 * 2),
    # partial rotary: a 64-wide cos/sin cache on 128-wide heads rotates half of each head
    ("_C::rotary_embedding", [[8], [8, 4096], [8, 1024], [], [4096, 64], []],
     ["long int", "c10::BFloat16", "c10::BFloat16", "Scalar", "c10::BFloat16", "Scalar"], ["", "", "", "128", "", "True"],
     3 * 8 * 5120 / 2, 2 * 8 * 5120 / 2 * 2 + 8 * 8 + 8 * 64 * 2),
    ("_C::silu_and_mul", [[8, 11008], [8, 22016]], ["c10::BFloat16"] * 2, [], 5 * 8 * 11008, 3 * 8 * 11008 * 2),
    # an fp8 KV cache: the new bf16 keys and values written at one byte each
    ("_C_cache_ops::reshape_and_cache_flash", [[8, 8, 128], [8, 8, 128], [1000, 16, 8, 128], [1000, 16, 8, 128], [8],
                                               [], [], []],
     ["c10::BFloat16", "c10::BFloat16", "c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "long int", "", "float", "float"],
     [], 0, 2 * 8 * 1024 * 2 + 2 * 8 * 1024 + 8 * 8),
    ("fbgemm::f8f8bf16_rowwise", [[16, 5120], [8192, 5120], [16], [8192], [], []],
     ["c10::Float8_e4m3fn"] * 2 + ["float"] * 2 + ["", "Scalar"], [], 2 * 16 * 8192 * 5120,
     16 * 5120 + 8192 * 5120 + 4 * (16 + 8192) + 16 * 8192 * 2),
    ("fbgemm::FloatToFP8RowwiseQuantized", [[1000, 256], []], ["float", "Scalar"], [], 2 * 256000,
     1000 * 256 * 4 + 1000 * 264),
    ("fbgemm::permute_2D_sparse_data", [[26], [26, 2048], [400000], [], []], ["int", "int", "long int", "", ""], [], 0,
     26 * 4 + 2 * (26 * 2048 * 4 + 400000 * 8)),
])
def test_framework_ops_from_their_schemas(name, dims, types, concrete, flops, nbytes):
    c = cost_op(name, dims, types, None, concrete)
    assert c.model not in ("tensors", "uncosted"), c.counting
    assert c.flops == pytest.approx(flops) and c.bytes == pytest.approx(nbytes)


def test_a_real_rank_s_fbgemm_ops_now_have_models():
    """On a real A100 rank the fbgemm quantize / permute ops were 'memory-bound' on their inputs' sizes; now they
    are costed from their shapes, and the TBE lookup from its shapes and its backward's (tests/test_opcost_embedding)."""
    w = build_workload(load_trace(Path(__file__).parent / "data" / "real-traces" / "trace_filter_sampled_rank-0.json.gz"),
                       lookup_device("a100"))
    by = {g.op: g for g in w.groups}
    for op in ("fbgemm::FloatToFP8RowwiseQuantized", "fbgemm::FP8RowwiseQuantizedToFloat",
               "fbgemm::permute_pooled_embs_auto_grad", "fbgemm::permute_2D_sparse_data", "fbgemm::bounds_check_indices"):
        assert by[op].model == "copy" and by[op].bytes > 0 and by[op].regime == "memory", op
        assert by[op].fraction_of_roof is not None and by[op].fraction_of_roof < 1.5, op  # no op above its roof
    tbe = by["fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function"]
    assert tbe.model == "index" and tbe.regime == "memory" and tbe.fraction_of_roof < 1.5


@pytest.mark.parametrize("causal", [True, False])
def test_aiter_batch_prefill_reads_its_causal_flag_and_its_paged_caches_kv_heads(causal):
    """aiter::mha_batch_prefill(q [tokens, h, d], k, v as a paged cache [blocks, h_kv, d/8, block, 8], cu_seqlens_q,
    kv_indptr, kv_page_indices, max_seqlen_q, max_seqlen_k, p_dropout, softmax_scale, logits_soft_cap,
    zero_tensors, is_causal, …): two prefill chunks, 100 tokens after 400 cached and 200 after 600."""
    from rooftop.models.program.opcost import inference
    from rooftop.models.program.shapecost import cost_with

    bf = "c10::BFloat16"
    dims = [[300, 32, 128], [1000, 8, 16, 16, 8], [1000, 8, 16, 16, 8], [3], [3], [80]] + [[]] * 9
    types = [bf, bf, bf, "int", "int", "int"] + ["Scalar"] * 9
    concrete = [""] * 6 + ["200", "800", "0.0", "0.088", "0.0", "False", str(causal)] + ["-1", "-1"]
    assert cost_op("aiter::mha_batch_prefill", dims, types, None, concrete).model == "tensors"  # lengths unknown
    lengths = inference.lengths_of("execute_2_context_2(sq300sk1300sqsq50000sqsk210000)_generation_0(sq0sk0sqsq0sqsk0)")
    c = cost_with("aiter::mha_batch_prefill", dims, types, concrete, lambda call: inference.attention(call, lengths))
    pairs = 100 * 500 + 200 * 800 - ((100 * 99 + 200 * 199) / 2 if causal else 0)
    assert c.flops == 2 * 32 * pairs * 256 and c.shape["kv"] == 8
    assert c.bytes == 2 * 300 * 32 * 128 * 2 + 2 * 1300 * 8 * 128 * 2  # Q and O; K and V of every key once
