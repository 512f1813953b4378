"""Sliding-window attention: read from the config (layer_types, else the family's rule) and applied to the
KV bytes a decode step reads, the KV cache it holds (a rolling cache keeps the window) and attention's
FLOPs; said in the output. The built-ins serve at the dtype people serve them; configs the model cannot
use (MoE without expert widths, an unknown torch_dtype) are refused with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rooftop.models.catalog import lookup_device
from rooftop.models.llm.step import ModelError, Phase, arch_from_config, step_bound, with_dtype
from rooftop.models.ops import Attention
from rooftop.store.hfconfig import load_arch
from rooftop.tui.cli import main

CONFIGS = Path(__file__).parent / "data" / "configs"
MISTRAL = CONFIGS / "mistral-7b-v0.1.json"  # the published config.json of mistralai/Mistral-7B-v0.1
GEMMA2 = CONFIGS / "gemma-2-9b.json"  # google/gemma-2-9b's
H100 = lookup_device("h100")


def _cfg(path: Path, **changes: object) -> dict:
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    return cfg


# -- reading the window --------------------------------------------------------------------------------


def test_mistral_slides_on_every_layer() -> None:
    a = load_arch(str(MISTRAL))
    assert (a.sliding_window, a.sliding_layers) == (4096, 32)
    assert (load_arch("mistral-7b").sliding_window, load_arch("mistral-7b").sliding_layers) == (4096, 32)


def test_gemma2_alternates_sliding_and_full_layers() -> None:
    a = load_arch(str(GEMMA2))
    assert (a.sliding_window, a.sliding_layers, a.full_layers) == (4096, 21, 21)
    assert load_arch("gemma-2-9b").sliding_layers == 21


def test_gemma3_has_five_sliding_to_one_full() -> None:
    cfg = _cfg(GEMMA2, model_type="gemma3_text", num_hidden_layers=34, sliding_window=1024)
    a = arch_from_config(cfg)
    assert (a.sliding_window, a.sliding_layers) == (1024, 34 - 34 // 6)  # layers 5, 11, … are full
    assert arch_from_config({**cfg, "sliding_window_pattern": 2}).sliding_layers == 17


def test_qwen2_slides_only_with_use_sliding_window_from_max_window_layers() -> None:
    base = {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
            "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936, "sliding_window": 32768,
            "max_window_layers": 21, "use_sliding_window": False, "torch_dtype": "bfloat16"}
    assert arch_from_config(base).sliding_layers == 0  # Qwen2.5's published configs: the window is off
    on = arch_from_config({**base, "use_sliding_window": True})
    assert (on.sliding_window, on.sliding_layers) == (32768, 3)


def test_layer_types_win_over_the_family_rule() -> None:
    types = ["sliding_attention", "sliding_attention", "full_attention"] * 14
    a = arch_from_config(_cfg(GEMMA2, layer_types=types))
    assert a.sliding_layers == 28
    assert arch_from_config(_cfg(MISTRAL, layer_types=["full_attention"] * 32)).sliding_layers == 0
    with pytest.raises(ModelError, match="'layer_types'.* must list 32 entries"):
        arch_from_config(_cfg(MISTRAL, layer_types=["sliding_attention"] * 31))
    with pytest.raises(ModelError, match="'layer_types'"):
        arch_from_config(_cfg(MISTRAL, layer_types=["chunked_attention"] * 32))


def test_a_null_window_is_no_window() -> None:
    assert arch_from_config(_cfg(MISTRAL, sliding_window=None)).sliding_layers == 0
    with pytest.raises(ModelError, match="'sliding_window'"):
        arch_from_config(_cfg(MISTRAL, sliding_window="4k"))


# -- applying it -----------------------------------------------------------------------------------------


def test_mistral_at_batch_64_and_8k_reads_the_window_of_kv() -> None:
    """The issue's case: 68.7 GB of KV without the window, 34.4 GB with it, on the H100 reference."""
    a = load_arch(str(MISTRAL))
    ph = Phase("decode", 64, prompt=8192, context=8192)
    windowed = step_bound(a, ph, H100)
    full = step_bound(arch_from_config(_cfg(MISTRAL, sliding_window=None)), ph, H100)
    assert full.kv_bytes == pytest.approx(68.72e9, rel=1e-3)
    assert windowed.kv_bytes == pytest.approx(34.36e9, rel=1e-3) == full.kv_bytes / 2
    assert windowed.kv_bytes_held == windowed.kv_bytes == windowed.memory.kv_bytes  # the rolling cache holds it
    assert windowed.bytes_bound_s == pytest.approx(15.7e-3, rel=5e-3)
    assert full.lower_bound_s == pytest.approx(27.1e-3, rel=5e-3)
    assert windowed.lower_bound_s < 16.1e-3 and windowed.lower_bound_s >= windowed.bytes_bound_s
    (attn,) = [(lo, an) for lo, an in windowed.ops if lo.name == "attention"]
    (attn_full,) = [(lo, an) for lo, an in full.ops if lo.name == "attention"]
    assert attn[1].flops == pytest.approx(attn_full[1].flops / 2)  # 4096 of the 8192 keys scored


def test_below_the_window_nothing_changes() -> None:
    ph = Phase("decode", 8, prompt=1024, context=1024)
    a = step_bound(load_arch(str(MISTRAL)), ph, H100)
    b = step_bound(arch_from_config(_cfg(MISTRAL, sliding_window=None)), ph, H100)
    assert a.kv_bytes == b.kv_bytes and a.lower_bound_s == b.lower_bound_s and a.kernels == b.kernels


def test_gemma2_attention_is_half_windowed_half_full() -> None:
    step = step_bound(load_arch("gemma-2-9b"), Phase("decode", 8, prompt=8192, context=8192), H100)
    attn = [(lo.count, lo.op) for lo, _ in step.ops if lo.name == "attention"]
    assert [(n, op.window, op.t) for n, op in attn] == [(21, 4096, 8192), (21, 0, 8192)]
    per_token = 2 * 8 * 256 * 2  # K and V, 8 KV heads × 256, bf16
    assert step.kv_bytes == 8 * per_token * (21 * 4096 + 21 * 8192)
    assert step.kernels == step_bound(load_arch("gemma-2-9b"), Phase("decode", 8, prompt=100, context=100),
                                      H100).kernels  # one attention kernel a layer either way


def test_prefill_under_a_window_scores_fewer_pairs_and_keeps_the_window() -> None:
    ph = Phase("prefill", 1, prompt=8192)
    a = step_bound(load_arch(str(MISTRAL)), ph, H100)
    b = step_bound(arch_from_config(_cfg(MISTRAL, sliding_window=None)), ph, H100)
    [(_, wa)] = [(lo, an) for lo, an in a.ops if lo.name == "attention"]
    [(_, wb)] = [(lo, an) for lo, an in b.ops if lo.name == "attention"]
    w, t = 4096, 8192
    assert wa.flops / wb.flops == pytest.approx((w * (w + 1) / 2 + (t - w) * w) / (t * (t + 1) / 2))
    assert a.kv_bytes == b.kv_bytes / 2  # written to a rolling cache of the window


def test_the_op_language_takes_a_window() -> None:
    from rooftop.models.spec import SpecError, parse_spec

    op = parse_spec("attn b=64 h=32 kv=8 d=128 t=8192 decode window=4096")
    assert isinstance(op, Attention) and op.window == 4096 and parse_spec(op.spec()).cost() == op.cost()
    assert "window=4096" in op.spec()
    assert op.cost().bytes == pytest.approx(parse_spec("attn b=64 h=32 kv=8 d=128 t=4096 decode").cost().bytes)
    with pytest.raises(SpecError, match="window needs causal or decode"):
        parse_spec("attn b=1 h=8 t=64 window=16")


def test_rooftop_llm_says_the_window_in_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["llm", str(MISTRAL), "-d", "h100", "--batch", "64", "--context", "8192"]
    assert main([*args, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["steps"][0]
    assert s["sliding_window"] == 4096 and s["sliding_layers"] == 32
    assert s["kv_bytes"] == pytest.approx(34.36e9, rel=1e-3)
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "sliding window 4096 tokens on every layer" in out and "window=4096" in out
    assert main(["llm", str(GEMMA2), "-d", "h100", "--context", "8192"]) == 0
    assert "sliding window 4096 tokens on 21 of 42 layers" in " ".join(capsys.readouterr().out.split())


# -- the dtype a built-in is served at, and configs refused ------------------------------------------------


def test_the_built_in_gemma2_is_served_in_bf16_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    a = load_arch("gemma-2-9b")
    assert a.dtype == "bf16" and "float32" in a.dtype_note
    own = load_arch(str(GEMMA2))  # the same config from a file is the same model: served alike, and said
    assert own.dtype == "bf16" and "served in bf16" in own.dtype_note
    assert with_dtype(own, "fp32").dtype == "fp32"  # --dtype still takes it as published
    assert main(["llm", "gemma-2-9b", "-d", "h100", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["steps"][0]
    assert s["dtype"] == "bf16" and "served in bf16" in s["dtype_note"]
    assert s["weights_bytes"] == pytest.approx(a.params * 2)
    assert main(["llm", "gemma-2-9b", "-d", "h100"]) == 0
    assert "served in bf16" in " ".join(capsys.readouterr().out.split())
    assert main(["llm", "gemma-2-9b", "-d", "h100", "--dtype", "fp32", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["steps"][0]
    assert s["dtype"] == "fp32" and s["dtype_note"] is None


def test_a_moe_config_without_expert_widths_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    mixtral = {"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
               "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2,
               "torch_dtype": "bfloat16"}
    with pytest.raises(ModelError, match="8 experts but no expert width"):
        arch_from_config(mixtral)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(mixtral))
    assert main(["llm", str(path), "-d", "h100"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "moe_intermediate_size" in err


def test_an_unknown_torch_dtype_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="'torch_dtype' = \"float12\" is not a dtype"):
        arch_from_config(_cfg(MISTRAL, torch_dtype="float12"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_cfg(MISTRAL, torch_dtype="float12")))
    assert main(["llm", str(path), "-d", "h100"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bfloat16" in err
    assert arch_from_config(_cfg(MISTRAL, torch_dtype="torch.float16")).dtype == "fp16"
    with pytest.raises(ModelError, match="= null must be a dtype name|= true must be a dtype name"):
        arch_from_config(_cfg(MISTRAL, torch_dtype=True))  # said as the file wrote it, not Python's True


async def test_the_llm_tab_says_the_window_and_the_served_dtype() -> None:
    from rooftop.tui.app.panes.llm import Llm
    from test_tui import app, text_of
    from textual.widgets import Input, Select, Static

    a = app(initial_tab="llm")
    async with a.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        pane = a.query_one(Llm)
        a.query_one("#llm-model", Select).value = "gemma-2-9b"
        await pilot.pause()
        a.query_one("#llm-context", Input).value = "8192"
        await pilot.pause()
        summary = " ".join(text_of(a.query_one("#llm-summary", Static)).split())
        assert pane.step is not None and pane.step.arch.dtype == "bf16"
        assert "served in bf16" in summary and "sliding window 4096 tokens on 21 of 42 layers" in summary
        assert pane.step.kv_bytes == 2 * 8 * 256 * 2 * (21 * 4096 + 21 * 8192)
