"""The LLM step says what binds it: the bytes (ΣT ≥ Q/B, MoE included), the kernel launches, and
whether the model fits in the device's memory at all; a bad config.json is one line, exit 2."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.models.catalog import lookup_device
from rooftop.models.llm.step import (
    ModelError,
    Phase,
    arch_from_config,
    builtin_arch,
    builtin_models,
    expected_experts,
    step_bound,
)
from rooftop.models.profile import DeviceProfile
from rooftop.store.hfconfig import load_arch
from rooftop.tui.cli import main

H100 = lookup_device("h100")
H200 = lookup_device("h200")  # the reference profile: no launch figure of its own, it takes the H100's
UNTIMED = dataclasses.replace(H200, id="untimed", launch_overhead=None)  # a profile with no launch figure at all
GiB = 2**30
# `rooftop measure --plan full` on one H200 (2026-11-30): launch 10.8 µs plain, 0.85 µs in a CUDA graph.
H200_MEASURED = DeviceProfile.from_dict(
    json.loads((Path(__file__).parent / "data" / "h200-measured-2026-11-30.profile.json").read_text())
)


def ops_by_name(step):
    return {lo.name: (lo, a) for lo, a in step.ops}


# -- MoE: the op table and the weights total use one expert count -------------------------------------


def test_mixtral_op_table_reads_the_expected_experts_so_the_sum_is_not_below_the_bytes_bound() -> None:
    """Batch 4 touches 8·(1 − (6/8)^4) = 5.47 experts per layer: the op table said 5, the weights total 5.47."""
    arch = load_arch("mixtral-8x7b")
    step = step_bound(arch, Phase("decode", 4), H100)
    used = expected_experts(8, 2, 4)
    assert used == pytest.approx(5.469, abs=1e-3)
    for name in ("gate", "up", "down"):
        lo, a = ops_by_name(step)[name]
        assert lo.count == pytest.approx(arch.layers * used)
        assert "5.47 of 8 experts" in lo.note
    weights_in_table = sum(
        dict(a.cost.terms).get("A (K×N, weights)", 0) * lo.count for lo, a in step.ops
    ) + sum(dict(a.cost.terms).get("weights", 0) * lo.count for lo, a in step.ops)
    assert weights_in_table == pytest.approx(step.weights_read_bytes, rel=1e-3)  # the same bytes, bar biases
    assert step.lower_bound_s >= step.bytes_bound_s


MODELS = sorted(builtin_models())


@settings(max_examples=80, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    kind=st.sampled_from(["decode", "prefill"]),
    batch=st.integers(1, 512),
    context=st.sampled_from([1, 7, 128, 1000, 4096, 32768]),
    kv_dtype=st.sampled_from([None, "fp8"]),
    dtype=st.sampled_from(["bf16", "fp8", "fp4"]),
    device=st.sampled_from(["h100", "h200", "b300", "a100"]),
    tp=st.sampled_from([1, 1, 2, 4, 8]),
    pp=st.sampled_from([1, 1, 2, 4]),
)
def test_the_sum_of_op_bounds_is_never_below_the_bytes_bound(model, kind, batch, context, kv_dtype, dtype, device,
                                                            tp, pp) -> None:
    from hypothesis import assume

    from rooftop.models.llm.step import ModelError, check_parallel, with_dtype

    assume(f"{dtype}-tc" in lookup_device(device).peak)
    arch = with_dtype(builtin_arch(model), dtype)
    try:
        check_parallel(arch, tp, pp)
    except ModelError:
        assume(False)  # a split the model's heads do not allow
    if kind == "prefill":
        batch = min(batch, 8)  # prompts of up to 32k tokens
    step = step_bound(arch, Phase(kind, batch, prompt=context, context=context, kv_dtype=kv_dtype), lookup_device(device),
                      tp=tp, pp=pp)
    assert step.lower_bound_s >= step.bytes_bound_s * (1 - 1e-12), (model, kind, batch, context)
    assert step.time_bound_s >= step.lower_bound_s


# -- the launch floor ------------------------------------------------------------------------------------


def test_a_measured_launch_overhead_sets_a_floor_under_the_step() -> None:
    """On the H200, eager launches at 10.8 µs: a Qwen2.5-7B decode step's kernels alone take longer than its bytes."""
    arch = load_arch("qwen2.5-7b")
    step = step_bound(arch, Phase("decode", 8, prompt=1024, context=1024), H200_MEASURED)
    per_layer = 13  # 2 norms, q, k, v, attention, o, 2 residual adds, gate, up, act, down
    assert step.kernels == arch.layers * per_layer + 2  # + the final norm and the lm_head
    assert step.launch_floor_s == pytest.approx(step.kernels * 10.834e-6, rel=1e-3)
    assert step.launch_floor_s > step.lower_bound_s > step.bytes_bound_s
    assert step.binds == "launch" and step.time_bound_s == step.launch_floor_s
    assert step.tokens_per_s == pytest.approx(8 / step.launch_floor_s)
    assert step.graph_floor_s == pytest.approx(step.kernels * 0.8509e-6, rel=1e-3)
    d = step.to_dict()
    assert d["kernels"] == step.kernels and d["launch_floor_s"] == step.launch_floor_s
    assert d["graph_floor_s"] == step.graph_floor_s and d["binds"] == "launch"
    assert d["step_time_bound_s"] == step.launch_floor_s
    from rooftop.models.llm.step import launch_line

    line = launch_line(step)
    assert "an estimate" in line and "the launches bind" in line and "CUDA graph" in line


def test_without_a_launch_figure_the_step_says_so_and_uses_none() -> None:
    step = step_bound(load_arch("qwen2.5-7b"), Phase("decode", 8), UNTIMED)
    assert step.launch_floor_s is None and step.graph_floor_s is None
    assert step.time_bound_s == step.lower_bound_s and step.binds == "roofline"
    from rooftop.models.llm.step import launch_line

    assert "launch overhead not measured for untimed" in launch_line(step)


def test_cli_llm_shows_the_launch_floor_and_which_binds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "qwen2.5-7b", "-d", "h100", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["steps"][0]
    assert s["launch_overhead_s"] == pytest.approx(4.5e-6)
    assert s["launch_floor_s"] == pytest.approx(s["kernels"] * 4.5e-6)
    assert s["binds"] == "roofline" and s["step_time_bound_s"] == s["decode_step_lower_bound_s"]
    assert main(["llm", "qwen2.5-7b", "-d", "h200"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "h100's measured launch overhead (Hopper, the same family): not measured on h200" in out
    assert "T ≥ max(ΣT, launch)" in out


def test_a_single_op_includes_one_launch_where_the_profile_has_it(capsys: pytest.CaptureFixture[str]) -> None:
    from rooftop.models.analysis import analyze
    from rooftop.models.spec import parse_spec

    tiny = parse_spec("gemm 64 64 64 bf16")
    a = analyze(tiny, H100)
    assert a.time_bound == pytest.approx(4.5e-6) and a.launch_binds
    assert "T includes one kernel launch" in a.launch_note()
    b = analyze(tiny, UNTIMED)
    assert b.launch_overhead is None and b.time_bound == b.time_lower_bound
    assert b.launch_note().startswith("launch overhead not measured for untimed")
    assert main(["op", "gemm 64 64 64 bf16", "-d", "h100", "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    assert d["kernels"] == 1 and d["launch_floor_s"] == pytest.approx(4.5e-6) and d["binds"] == "launch"
    assert d["time_bound_s"] == pytest.approx(4.5e-6)
    assert main(["op", "gemm 64 64 64 bf16", "-d", "h200", "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    assert d["launch_floor_s"] == pytest.approx(4.5e-6)  # h200 takes h100's figure


# -- memory fit ------------------------------------------------------------------------------------------


def test_mixtral_in_bf16_does_not_fit_an_h100(capsys: pytest.CaptureFixture[str]) -> None:
    arch = load_arch("mixtral-8x7b")
    step = step_bound(arch, Phase("decode", 4), H100)
    assert step.memory.fits is False and step.memory.weights_fit is False
    assert step.memory.needed_bytes == pytest.approx(arch.weights_bytes + step.kv_bytes)
    assert main(["llm", "mixtral-8x7b", "-d", "h100", "--batch", "4", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["steps"][0]
    assert s["fits"] is False and s["memory_bytes"] == pytest.approx(arch.weights_bytes + s["kv_bytes"])
    assert s["device_memory_bytes"] == H100.memory_bytes
    assert main(["llm", "mixtral-8x7b", "-d", "h100", "--batch", "4"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"does not fit: held weights {arch.weights_bytes / GiB:.1f}" in out and "h100's 79.2 GiB" in out
    assert "the weights alone exceed it" in out


def test_a_kv_cache_of_448_gib_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    step = step_bound(load_arch("qwen2.5-7b"), Phase("decode", 256, prompt=32768, context=32768), H200)
    assert step.kv_bytes / GiB == pytest.approx(448.0)
    assert step.memory.fits is False and step.memory.weights_fit is True
    assert "the KV cache alone exceeds it" in step.memory.describe("h200")
    assert main(["llm", "qwen2.5-7b", "-d", "h200", "--batch", "1,256", "--context", "32768"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "batch 256, ctx 32768: does not fit" in out and "batch 1, ctx 32768: does not fit" not in out


def test_what_fits_says_so_and_an_unknown_memory_is_not_checked() -> None:
    from dataclasses import replace

    step = step_bound(load_arch("qwen2.5-7b"), Phase("decode", 1), H100)
    assert step.memory.fits is True and step.memory.describe("h100").startswith("fits: ")
    unknown = step_bound(load_arch("qwen2.5-7b"), Phase("decode", 1), replace(H100, memory_bytes=None))
    assert unknown.memory.fits is None and "not checked" in unknown.memory.describe("h100")
    assert unknown.to_dict()["fits"] is None


async def test_the_llm_tab_says_what_does_not_fit() -> None:
    from textual.widgets import Select, Static

    from test_tui import app, text_of

    a = app(initial_tab="llm")
    async with a.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "fits: held weights" in text_of(a.query_one("#llm-summary", Static))
        a.query_one("#llm-model", Select).value = "mixtral-8x7b"
        await pilot.pause()
        summary = " ".join(text_of(a.query_one("#llm-summary", Static)).split())
        assert "does not fit: held weights 87.0" in summary and "h100's 79.2 GiB" in summary


# -- config.json: every bad value is one line, exit 2 --------------------------------------------------

GOOD = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("text, word", [
    (json.dumps({**GOOD, "num_key_value_heads": "eight"}), "num_key_value_heads"),
    (json.dumps({**GOOD, "num_key_value_heads": [8]}), "num_key_value_heads"),
    (json.dumps({**GOOD, "head_dim": 1.5}), "head_dim"),
    (json.dumps(GOOD)[:-1] + ', "num_key_value_heads": NaN}', "num_key_value_heads"),
    (json.dumps(GOOD)[:-1] + ', "head_dim": Infinity}', "head_dim"),
    (json.dumps(GOOD)[:-1] + ', "num_local_experts": -Infinity}', "num_local_experts"),
    (json.dumps({**GOOD, "num_local_experts": 8, "num_experts_per_tok": "2"}), "num_experts_per_tok"),
    (json.dumps({**GOOD, "text_config": [1, 2]}), "text_config"),
    (json.dumps({**GOOD, "text_config": "llama"}), "text_config"),
    (json.dumps({**GOOD, "torch_dtype": ["bfloat16"]}), "torch_dtype"),
    (json.dumps({**GOOD, "tie_word_embeddings": "no"}), "tie_word_embeddings"),
    (json.dumps({**GOOD, "hidden_size": 2**70}), "hidden_size"),
    (json.dumps(GOOD)[:-1] + ', "moe_intermediate_size": 1' + "0" * 5000 + "}", "cannot read"),
    ("[" * 2500 + "]" * 2500, "cannot read"),
    ('{"text_config": ' + "[" * 2500 + "]" * 2500 + "}", "cannot read"),
], ids=["text", "list", "fraction", "nan", "inf", "-inf", "text-top-k", "text_config-list", "text_config-text",
        "dtype-list", "bool-text", "2^70", "5001-digits", "nested-2500", "nested-text_config"])
def test_a_bad_config_is_one_line_and_exit_2(tmp_path, capsys: pytest.CaptureFixture[str], text: str, word: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    assert main(["llm", str(path), "-d", "h100"]) == 2
    err = capsys.readouterr().err
    assert word in err and "internal error" not in err and len(err.strip().splitlines()) == 1, err


def test_checked_configs_still_read_as_before() -> None:
    arch = arch_from_config({**GOOD, "head_dim": 128.0, "tie_word_embeddings": False})
    assert arch.head_dim == 128 and not arch.tied and arch.kv_heads == 8
    with pytest.raises(ModelError, match="text_config"):
        arch_from_config({**GOOD, "text_config": 3})
    assert math.isclose(arch.params, load_arch("llama-3.1-8b").params)
