"""An LLM step split over tensor- and pipeline-parallel ranks, MoE expert FLOPs, and the report's units."""

from __future__ import annotations

import json

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.llm.step import ModelError, Phase, expected_experts, step_bound
from rooftop.store.hfconfig import load_arch
from rooftop.tui.cli import main

GiB = 2**30
H100_DS = lookup_device("h100-sxm-ds")  # 80 GB (74.5 GiB), with nvlink and pcie


def test_mixtral_at_tp8_fits_each_h100_and_reads_an_eighth() -> None:
    arch = load_arch("mixtral-8x7b")
    one = step_bound(arch, Phase("decode", 4), H100_DS)
    rank = step_bound(arch, Phase("decode", 4), H100_DS, tp=8)
    assert one.memory.fits is False and rank.memory.fits is True
    assert rank.memory.weights_bytes == pytest.approx(arch.weights_bytes / 8, rel=0.01)  # norms, router stay whole
    assert rank.weights_read_bytes == pytest.approx(one.weights_read_bytes / 8, rel=0.01)
    assert rank.kv_bytes == pytest.approx(one.kv_bytes / 8)  # 8 KV heads, one a rank
    assert rank.bytes_bound_s == pytest.approx(one.bytes_bound_s / 8, rel=0.01)
    assert rank.lower_bound_s >= rank.bytes_bound_s
    assert rank.tokens_per_s == pytest.approx(4 / rank.time_bound_s)  # no pipeline: a pass is one rank's step


def test_pipeline_stages_a_token_passes_in_turn() -> None:
    arch = load_arch("llama-3.1-8b")
    one = step_bound(arch, Phase("decode", 8), H100_DS)
    rank = step_bound(arch, Phase("decode", 8), H100_DS, tp=2, pp=4)
    assert rank.weights_read_bytes == pytest.approx(one.weights_read_bytes / 8, rel=0.01)
    assert rank.pass_s == pytest.approx(4 * rank.time_bound_s)
    assert rank.tokens_per_s == pytest.approx(8 / (4 * rank.time_bound_s))
    # the pass: all layers at 1/tp, about half the single GPU's bound
    assert rank.pass_s == pytest.approx(one.time_bound_s / 2, rel=0.02)


def test_cli_reports_per_rank_and_json_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "mixtral-8x7b", "-d", "h100-sxm-ds", "--batch", "4", "--tp", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["steps"][0]
    assert (s["tp"], s["pp"], s["per_rank"], s["fits"]) == (8, 1, True, True)
    assert out["parallel"][0]["compute_s"] == pytest.approx(s["step_compute_s"])  # the rank's own, not /8 again
    assert main(["llm", "mixtral-8x7b", "-d", "h100-sxm-ds", "--batch", "4", "--tp", "8"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "does not fit" not in text and "fits: held per GPU (1 of 8) weights 10.9" in text
    assert "per rank of TP 8 × PP 1" in text
    assert main(["llm", "qwen2.5-7b", "--batch", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"][0]["per_rank"] is False
    assert main(["llm", "llama-3.1-8b", "-d", "h100-sxm-ds", "--tp", "2", "--pp", "4"]) == 0
    assert "a token passes all 4 stages in turn" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("args, says", [
    (["qwen2.5-7b", "--tp", "1000"], "28 query heads do not split 1000 ways"),
    (["qwen2.5-7b", "--tp", "8"], "28 query heads do not split 8 ways"),
    (["qwen2.5-7b", "--tp", "7"], "4 KV heads neither split 7 ways"),
    (["qwen2.5-7b", "--pp", "29"], "more pipeline stages than the model's 28 layers"),
    (["qwen2.5-7b", "--tp", "0"], "degrees start at 1"),
])
def test_tp_and_pp_the_model_cannot_split_are_refused(args: list[str], says: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", *args, "-d", "h100-sxm-ds"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_kv_heads_fewer_than_tp_are_replicated() -> None:
    arch = load_arch("qwen2.5-72b")  # 64 query heads, 8 KV heads
    assert (arch.heads, arch.kv_heads) == (64, 8)
    step = step_bound(arch, Phase("decode", 1), H100_DS, tp=16)
    attn = {lo.name: a for lo, a in step.ops}["attention"].op
    assert (attn.h, attn.kv) == (4, 1)  # each rank keeps one KV head: 16 ranks hold 2 copies of each
    with pytest.raises(ModelError, match="KV heads"):
        step_bound(load_arch("qwen2.5-7b"), Phase("decode", 1), H100_DS, tp=14)  # divides 28 query heads, but 4 KV heads: neither


def test_moe_expert_flops_are_tokens_times_top_k_exactly() -> None:
    arch = load_arch("mixtral-8x7b")
    step = step_bound(arch, Phase("decode", 4), lookup_device("h100"))
    ops = {lo.name: (lo, a) for lo, a in step.ops}
    per_token = 3 * 2 * arch.hidden * arch.moe_intermediate + 5 * arch.moe_intermediate  # gate, up, down, silu·mul
    w = sum(a.flops * lo.count for lo, a in (ops[n] for n in ("gate", "up", "down", "act")))
    assert w == pytest.approx(arch.layers * 4 * arch.experts_per_token * per_token, rel=1e-12)
    used = expected_experts(arch.experts, arch.experts_per_token, 4)
    lo, a = ops["gate"]
    assert lo.count == pytest.approx(arch.layers * used)  # each expected expert's weights read once
    assert a.bytes >= arch.hidden * arch.moe_intermediate * 2


def test_llm_report_gives_sizes_in_gib(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "qwen2.5-7b", "-d", "h100"]) == 0
    out = capsys.readouterr().out
    assert "wts GiB" in out and "KV GiB" in out and "read per step" in out and "held weights" in out
    assert " GB " not in out and "GB)" not in out and "wts GB" not in out
    row = next(line for line in out.splitlines() if line.split()[:2] == ["1", "128"])
    assert row.split()[2] == "13.17"  # 14.14 GB read per step, in GiB
