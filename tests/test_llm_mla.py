"""Multi-head latent attention in `rooftop llm`: DeepSeek-V3 and DeepSeek-V2-Lite from their published configs.

The figures are worked by hand from the configs (tests/data/configs/deepseek-v3.json, deepseek-v2-lite.json,
written from the published config.json files) in each docstring.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.llm.step import Phase, step_bound, weights_read_bytes
from rooftop.models.llm.mla import LatentAttention
from rooftop.store.hfconfig import load_arch
from rooftop.tui.cli import main

CONFIGS = Path(__file__).parent / "data" / "configs"
V3 = str(CONFIGS / "deepseek-v3.json")
LITE = str(CONFIGS / "deepseek-v2-lite.json")
H200 = lookup_device("h200")


def test_deepseek_v3_has_671_billion_parameters_without_its_mtp_layer() -> None:
    """embedding and lm_head 2 × 129,280 × 7,168 = 1,853,358,080
    attention, 61 layers × (q_a 7168·1536 + q_b 1536·128·192 + kv_a 7168·576 + kv_b 512·128·256 + o 128·128·7168
      = 11,010,048 + 37,748,736 + 4,128,768 + 16,777,216 + 117,440,512 = 187,105,280) = 11,413,422,080
    dense MLP, first 3 layers × 3 · 7168 · 18432 = 1,189,085,184
    routed experts, 58 layers × 256 × 3 · 7168 · 2048 = 653,908,770,816; shared 58 × 44,040,192 = 2,554,331,136
    routers 58 × 256 × 7168 = 106,430,464; norms 61 × (2·7168 + 1536 + 512) = 999,424; final norm 7,168
    sum 671,026,404,352 ≈ 671 B (the MTP layer, num_nextn_predict_layers 1, is not counted: it makes 685 B)."""
    arch = load_arch(V3)
    assert arch.params == 671_026_404_352
    assert (arch.dense_layers, arch.moe_layers, arch.mtp_layers) == (3, 58, 1)
    assert load_arch("deepseek-v3").params == arch.params  # the built-in is the same config


def test_deepseek_v3_kv_cache_is_one_latent_per_token_and_layer() -> None:
    """(kv_lora_rank 512 + qk_rope_head_dim 64) × 61 layers × 2 B (bf16) = 70,272 B a token;
    batch 8 × context 4096 = 32,768 tokens × 70,272 B = 2,302,672,896 B = 2.303 GB."""
    arch = load_arch(V3)
    step = step_bound(arch, Phase("decode", 8, prompt=4096, context=4096), H200)
    assert arch.kv_bytes(1) == 70_272
    assert step.kv_bytes == 2_302_672_896
    assert round(step.kv_bytes / 1e9, 3) == 2.303


def test_deepseek_v3_reads_about_37_gb_of_fp8_weights_a_decode_step_at_batch_1() -> None:
    """At batch 1 a layer touches 8 of 256 experts (256 · (1 − (1 − 8/256)¹) = 8) and the shared one.
    fp8 linear weights read: attention 11,413,422,080 + dense 1,189,085,184 + 58 × 9 × 44,040,192 = 35,591,487,488
    at 1 + 4/16,384 B (one fp32 scale per 128×128 block) = 35,600,176,816 B;
    bf16: lm_head 926,679,040 + routers 106,430,464 + norms 999,424 + 7,168 = 1,034,116,096 × 2 = 2,068,232,192 B;
    total 37,668,409,008 B ≈ 37 GB (the input embedding table is not read: one row a token)."""
    arch = load_arch(V3)
    assert arch.weights is not None and arch.weights.wdtype == "fp8-b128x128"
    read = weights_read_bytes(arch, Phase("decode", 1, prompt=4096))
    assert read == pytest.approx(37_668_409_008, rel=1e-12)
    assert 36e9 < read < 38e9
    step = step_bound(arch, Phase("decode", 1, prompt=4096), H200)
    assert step.lower_bound_s >= step.bytes_bound_s  # the op table counts every byte Q/B does


def test_deepseek_v2_lite_parameters_kv_and_weights_read() -> None:
    """No q_lora_rank: q is one projection. Attention per layer 2048·16·192 + 2048·576 + 512·16·256 + 16·128·2048
    = 13,762,560, × 27 = 371,589,120; dense layer 1: 3·2048·10944 = 67,239,936; 26 MoE layers × (64 + 2 shared)
    × 3·2048·1408 (8,650,752) = 14,844,690,432; routers 26·64·2048 = 3,407,872; norms 27·(2·2048 + 512) = 124,416;
    embedding + lm_head 2 · 102,400 · 2048 = 419,430,400; final norm 2048: total 15,706,484,224 ≈ 15.7 B. KV (512 + 64) · 27 · 2 B = 31,104 B a token.
    Batch 1 reads (371,589,120 + 67,239,936 + 26 · 8 · 8,650,752 + 3,407,872 + 124,416 + 2048 + 209,715,200) × 2 B
    = 4,902,870,016 B (6 routed + 2 shared experts a layer)."""
    arch = load_arch(LITE)
    assert arch.params == 15_706_484_224
    assert arch.mla is not None and arch.mla.q_lora_rank == 0
    assert arch.kv_bytes(1) == 31_104
    assert weights_read_bytes(arch, Phase("decode", 1)) == 4_902_870_016
    assert arch.weights is None and arch.weights_bytes == 2 * arch.params


def test_latent_attention_counts_one_latent_read_for_all_heads() -> None:
    """Decode, b 1, h 128, t 4096: W = 2·128·4096·(576 + 512) = 1,140,850,688;
    Q = queries 128·576·2 + cache 4096·576·2 + output 128·512·2 = 147,456 + 4,718,592 + 131,072 = 4,997,120 B."""
    c = LatentAttention(dtype="bf16", b=1, h=128, latent=512, rope=64, q=1, t=4096).cost()
    assert c.flops == 1_140_850_688
    assert c.bytes == 4_997_120
    causal = LatentAttention(b=1, h=1, q=4, t=4, causal=True)
    assert causal.pairs == 4 * 4 - 4 * 3 / 2  # the causal triangle, as attention counts it


def test_absorbed_and_expanded_read_the_same_weights_and_cache_but_differ_in_attention() -> None:
    """Both read every weight once (q absorb + v up hold kv_b_proj's two halves) and the latent cache; expanded
    decode re-expands the 4096 cached latents each step (kv_b over 4096 rows: 2·4096·512·128·256 FLOPs a layer)
    and writes and reads per-head K and V, so its ΣT is larger."""
    arch = load_arch(V3)
    ph = Phase("decode", 1, prompt=4096)
    absorbed = step_bound(arch, ph, H200)
    expanded = step_bound(replace(arch, mla=replace(arch.mla, convention="expanded")), ph, H200)
    assert absorbed.weights_read_bytes == expanded.weights_read_bytes
    assert absorbed.kv_bytes == expanded.kv_bytes
    names = {lo.name for lo, _ in absorbed.ops}, {lo.name for lo, _ in expanded.ops}
    assert {"q absorb", "v up"} <= names[0] and "kv_b" not in names[0] and "kv_b" in names[1]
    kv_b = next(a for lo, a in expanded.ops if lo.name == "kv_b")
    assert kv_b.flops == 2 * 4096 * 512 * 128 * 256
    assert expanded.lower_bound_s > absorbed.lower_bound_s >= absorbed.bytes_bound_s
    assert expanded.lower_bound_s >= expanded.bytes_bound_s


def test_prefill_and_tensor_parallel_run_on_mla() -> None:
    """A prefill writes the latent cache of its prompt: 2048 tokens × 31,104 B; TP 2 gives each rank 8 of 16
    heads and the whole latent (it is shared by the heads, so replicated, as vLLM keeps it)."""
    arch = load_arch(LITE)
    pre = step_bound(arch, Phase("prefill", 1, prompt=2048), H200)
    assert pre.kv_bytes == 2048 * 31_104
    assert pre.lower_bound_s >= pre.bytes_bound_s
    tp = step_bound(arch, Phase("decode", 1, prompt=2048), H200, tp=2)
    assert tp.kv_bytes == 2048 * 31_104


def test_cli_says_the_convention_and_carries_it_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", V3, "-d", "h200", "--batch", "8", "--context", "4096", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)["steps"][0]
    assert step["attention"] == "mla-absorbed" and step["kv_elements_per_token_layer"] == 576
    assert step["kv_bytes"] == 2_302_672_896 and step["params"] == 671_026_404_352
    assert (step["mtp_layers"], step["mtp_counted"], step["dense_layers"]) == (1, False, 3)
    assert step["weight_format"] == "fp8-b128x128" and step["gemm_dtype"] == "fp8"
    assert main(["llm", V3, "-d", "h200", "--mla", "expanded", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"][0]["attention"] == "mla-expanded"
    assert main(["llm", "deepseek-v2-lite", "-d", "h200", "--mla", "expanded"]) == 0
    out = capsys.readouterr().out
    assert "expanded: each step up-projects" in out and "--mla absorbed" in out


def test_mla_flag_on_a_model_without_it_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "qwen2.5-7b", "--mla", "expanded"]) == 2
    err = capsys.readouterr().err
    assert "kv_lora_rank" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_mla_config_missing_a_dimension_names_it() -> None:
    from rooftop.models.llm.step import ModelError, arch_from_config

    cfg = json.loads(Path(LITE).read_text())
    del cfg["v_head_dim"]
    with pytest.raises(ModelError, match="v_head_dim"):
        arch_from_config(cfg)


async def test_the_llm_tab_shows_deepseek_v3_with_its_latent_cache_and_fp8_weights() -> None:
    """The tab's list has DeepSeek-V3; picking it gives the MLA step (absorbed, said in the summary), the fp8
    format and, at batch 8 × context 4096, the 2,302,672,896 B latent cache."""
    from rooftop.tui.app.panes.llm import Llm
    from test_tui import app, text_of
    from textual.widgets import Input, Select, Static

    a = app(initial_tab="llm")
    async with a.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        pane = a.query_one(Llm)
        a.query_one("#llm-model", Select).value = "deepseek-v3"
        await pilot.pause()
        a.query_one("#llm-batch", Input).value = "8"
        a.query_one("#llm-context", Input).value = "4096"
        await pilot.pause()
        summary = " ".join(text_of(a.query_one("#llm-summary", Static)).split())
        assert pane.step is not None and pane.step.kv_bytes == 2_302_672_896
        assert "multi-head latent attention, absorbed" in summary and "fp8-b128x128/bf16" in summary
