"""`rooftop llm --measured-tokens-per-s`: a throughput claim above the bound is flagged, naming what caps it."""

from __future__ import annotations

import json

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.llm.claims import binding_cap, claim_lines
from rooftop.models.llm.step import Phase, step_bound, with_dtype
from rooftop.store.hfconfig import load_arch
from rooftop.tui.cli import main


def test_120_tok_s_for_a_70b_fp8_model_at_batch_1_on_one_h100_is_impossible(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["llm", "llama-3.1-70b", "--dtype", "fp8", "-d", "h100-sxm-ds", "--measured-tokens-per-s", "120"]
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "! batch 1, ctx 128: 120 tok/s is above the bound: the weights alone (69.5 GB a step at 3.35 TB/s) caps " \
           "it at 48.2 tok/s, which no run can beat" in text
    assert main([*argv, "--json"]) == 0
    claim = json.loads(capsys.readouterr().out)["steps"][0]["claim"]
    assert (claim["above_bound"], claim["capped_by"]) == (True, "weights")
    # by hand: 69.5 GB of weights a token (all but the input embedding, 1 B each) over 3.35 TB/s
    arch = load_arch("llama-3.1-70b")
    assert claim["caps_tokens_per_s"]["weights"] == pytest.approx(3.35e12 / (arch.params - arch.embedding_params))
    assert 47 < claim["caps_tokens_per_s"]["weights"] < 49


def test_a_claim_within_the_bound_is_not_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "llama-3.1-70b", "--dtype", "fp8", "-d", "h100-sxm-ds", "--measured-tokens-per-s", "40"]) == 0
    assert "tok/s is above" not in capsys.readouterr().out


def test_the_kv_cache_caps_a_long_context_batch() -> None:
    arch = load_arch("llama-3.1-8b")
    step = step_bound(arch, Phase("decode", 64, context=32768), lookup_device("h100-sxm-ds"))
    assert step.kv_bytes > step.weights_read_bytes
    cap = binding_cap(step, 5 * step.tokens_per_s)
    assert cap is not None and cap.name == "kv" and "the KV cache alone" in claim_lines(step, 5 * step.tokens_per_s)[0]


def test_above_only_the_eager_launch_floor_is_said_not_called_impossible() -> None:
    step = step_bound(load_arch("qwen2.5-0.5b"), Phase("decode", 1), lookup_device("h100"))
    assert step.binds == "launch"
    between = 2 / (step.lower_bound_s + step.launch_floor_s)  # above the launches' cap, below the roofline's
    (line,) = claim_lines(step, between)
    assert "of launching each kernel eagerly" in line and "only a CUDA graph" in line
    assert claim_lines(step, 0.9 * step.tokens_per_s) == []


def test_a_pipeline_claim_is_a_pass_through_every_stage() -> None:
    arch = with_dtype(load_arch("llama-3.1-70b"), "fp8")
    step = step_bound(arch, Phase("decode", 1), lookup_device("h100-sxm-ds"), pp=4)
    assert binding_cap(step, 0.95 * step.tokens_per_s) is None
    assert binding_cap(step, 1.2 * step.tokens_per_s) is not None  # tok/s≤ counts all 4 stages in turn


@pytest.mark.parametrize("value, says", [("0", "values must be positive tok/s"), ("fast", "expected tok/s"),
                                         ("1,2", "gives 2 values for 1 op")])
def test_bad_claims_are_one_line(value: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "qwen2.5-7b", "-d", "h100", "--measured-tokens-per-s", value]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
