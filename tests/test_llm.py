"""LLM steps on the roofline, against seed 000 §6, seed 001 and seed 002."""

from __future__ import annotations

import json

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.llm.step import (
    ModelError,
    Phase,
    amdahl,
    arch_from_config,
    compute_bound_batch,
    step_bound,
    with_dtype,
)
from rooftop.models.units import GiB
from rooftop.store.hfconfig import load_arch
from rooftop.tui.cli import main

LINEAR = ("q", "k", "v", "o", "gate", "up", "down")
H100 = lookup_device("h100")


def ops_by_name(step):
    return {lo.name: a for lo, a in step.ops}


def test_qwen25_7b_sizes_match_seed_000() -> None:
    """Seed 000 §6: 15.23 GB of bf16 weights, 1.09 GB of it the input embedding, 14.14 GB read per step."""
    arch = load_arch("qwen2.5-7b")
    assert arch.layers == 28
    assert arch.weights_bytes == pytest.approx(15.23e9, abs=0.005e9)
    assert arch.embedding_bytes == pytest.approx(1.09e9, abs=0.005e9)
    step = step_bound(arch, Phase("decode", 1, prompt=128), H100)
    assert step.weights_read_bytes == pytest.approx(14.14e9, abs=0.005e9)
    # 14.14 GB / 3085 GB/s
    assert step.weights_read_bytes / H100.B() == pytest.approx(4.58e-3, abs=0.005e-3)
    assert step.bytes_bound_s == pytest.approx(4.58e-3, rel=0.005)  # + 7 MiB of KV at prompt 128
    assert step.lower_bound_s == pytest.approx(4.58e-3, rel=0.01)
    assert step.tokens_per_s == pytest.approx(1 / step.lower_bound_s)


def test_seven_linear_layers_and_their_shapes() -> None:
    """Seed 000 §6: q, k, v, o, gate, up, down; k and v output 512, q and o 3584."""
    step = step_bound(load_arch("qwen2.5-7b"), Phase("decode", 1), H100)
    ops = ops_by_name(step)
    assert all(name in ops for name in LINEAR)
    assert ops["k"].op.n == ops["v"].op.n == 512
    assert ops["q"].op.n == ops["o"].op.n == 3584
    assert ops["gate"].op.n == ops["up"].op.n == ops["down"].op.k == 18944


@pytest.mark.parametrize("batch", [1, 8])
def test_decode_linear_layers_sit_at_i_about_batch(batch: int) -> None:
    """Seed 000 §6 (and seed 001's slider): decode I ≈ batch, memory-bound."""
    ops = ops_by_name(step_bound(load_arch("qwen2.5-7b"), Phase("decode", batch), H100))
    for name in LINEAR:
        assert ops[name].intensity == pytest.approx(batch, rel=0.03)
        assert ops[name].regime == "memory"


def test_batch_one_compute_time_and_measured_share() -> None:
    """Seed 000 §6: W ≈ 14.1 GFLOP → W/F ≈ 0.018 ms; H100 measured 11.56 ms, about 7 ms outside the bound."""
    step = step_bound(load_arch("qwen2.5-7b"), Phase("decode", 1), H100, measured_s=11.56e-3)
    linear_flops = sum(a.flops * lo.count for lo, a in step.ops if lo.name in LINEAR + ("lm_head",))
    assert linear_flops == pytest.approx(14.14e9, rel=0.005)
    assert step.compute_s == pytest.approx(0.018e-3, rel=0.03)
    assert step.explained == pytest.approx(0.40, abs=0.01)
    assert step.measured_s - step.lower_bound_s == pytest.approx(7e-3, abs=0.05e-3)


def test_prefill_lands_on_the_flat() -> None:
    """Seed 000 §6: prefill's linear layers sit right of the bf16 ridge (260) on H100."""
    ops = ops_by_name(step_bound(load_arch("qwen2.5-7b"), Phase("prefill", 1, prompt=1024), H100))
    for name in ("q", "o", "gate", "up", "down"):
        assert ops[name].regime == "compute"
        assert 340 <= ops[name].intensity <= 1000
    assert ops["attention"].op.causal and ops["attention"].op.q_len == 1024


def test_kv_cache_grows_with_batch_and_context_and_shrinks_with_fp8() -> None:
    arch = load_arch("qwen2.5-7b")
    base = step_bound(arch, Phase("decode", 4, context=1024), H100).kv_bytes
    assert base == 4 * 1024 * 28 * 2 * 512 * 2
    assert step_bound(arch, Phase("decode", 8, context=1024), H100).kv_bytes == 2 * base
    assert step_bound(arch, Phase("decode", 4, context=2048), H100).kv_bytes == 2 * base
    assert step_bound(arch, Phase("decode", 4, context=1024, kv_dtype="fp8"), H100).kv_bytes == base / 2


def test_batching_gain_shrinks_with_context() -> None:
    """Seed 000 §6: batch 1 → 16 barely moves the step at a short prompt, much more at a long one."""
    arch = load_arch("qwen2.5-7b")

    def ratio(ctx: int) -> float:
        one = step_bound(arch, Phase("decode", 1, context=ctx), H100).lower_bound_s
        return step_bound(arch, Phase("decode", 16, context=ctx), H100).lower_bound_s / one

    assert ratio(128) < 1.05
    assert ratio(128) < ratio(1024) < ratio(4096)
    assert ratio(4096) > 1.2  # the bound; HF eager attention measured ×4.4 (its GQA repeat_kv copies K and V)


def test_the_batch_where_decode_turns_compute_bound() -> None:
    arch = load_arch("qwen2.5-7b")
    lin = compute_bound_batch(arch, H100, 128, linear_only=True)
    assert 260 <= lin <= 300  # "batch 到两百多之前都是这样"
    assert compute_bound_batch(arch, H100, 128) > lin  # the KV cache pushes it out
    assert compute_bound_batch(arch, H100, 8192) is None  # …or forever, at long context


def test_seed_002_decode_attention_inside_a_model() -> None:
    """Seed 002: B=8, H=32, D=128, T=8192 bf16 → ≈1.07 GFLOP, 1.0 GiB of KV, I ≈ 1 per layer."""
    step = step_bound(with_dtype(load_arch("llama-2-7b"), "bf16"), Phase("decode", 8, context=8192), H100)
    attn = ops_by_name(step)["attention"]
    assert attn.flops == pytest.approx(1.07e9, rel=0.01)
    assert dict(attn.cost.terms)["K,V read (KV cache)"] == pytest.approx(1.0 * GiB)
    assert attn.intensity == pytest.approx(1.0, rel=0.01)
    assert attn.regime == "memory"


def test_tied_embeddings_are_read_as_the_lm_head() -> None:
    arch = load_arch("qwen2.5-0.5b")
    assert arch.tied
    step = step_bound(arch, Phase("decode", 1), H100)
    assert step.weights_read_bytes == pytest.approx(arch.weights_bytes)


def test_moe_reads_only_routed_experts() -> None:
    arch = load_arch("mixtral-8x7b")
    one = step_bound(arch, Phase("decode", 1), H100)
    many = step_bound(arch, Phase("decode", 256), H100)
    expert_bytes = arch.layers * arch.expert_params * arch.size
    assert one.weights_read_bytes == pytest.approx(arch.weights_bytes - arch.embedding_bytes - 6 * expert_bytes)
    assert many.weights_read_bytes == pytest.approx(arch.weights_bytes - arch.embedding_bytes, rel=1e-6)


def test_config_json_loading_and_errors(tmp_path) -> None:
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    arch = load_arch(str(tmp_path))
    assert arch == arch_from_config(cfg, tmp_path.name)
    assert arch.params == load_arch("llama-3.1-8b").params
    bad = dict(cfg)
    del bad["num_hidden_layers"]
    with pytest.raises(ModelError, match="num_hidden_layers"):
        arch_from_config(bad)
    with pytest.raises(ModelError, match="must divide"):
        arch_from_config({**cfg, "num_key_value_heads": 5})
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ModelError, match="cannot read"):
        load_arch(str(tmp_path / "broken.json"))
    with pytest.raises(ModelError, match="qwen2.5-7b"):
        load_arch("no-such-model")


def test_a_model_read_from_a_file_is_named_by_its_config_then_its_file_then_the_cache_then_its_folder(tmp_path) -> None:
    cfg = {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "torch_dtype": "bfloat16"}
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "config.json").write_text(json.dumps({**cfg, "_name_or_path": "mistralai/Mistral-7B-v0.1"}))
    assert load_arch(str(configs / "config.json")).name == "mistralai/Mistral-7B-v0.1"  # not "configs"
    (configs / "config.json").write_text(json.dumps({**cfg, "_name_or_path": "/data/models/Mistral-7B-v0.1/"}))
    assert load_arch(str(configs)).name == "Mistral-7B-v0.1"  # a local path: its last part
    (configs / "mistral-7b.json").write_text(json.dumps(cfg))
    assert load_arch(str(configs / "mistral-7b.json")).name == "mistral-7b"
    snap = tmp_path / "hub" / "models--mistralai--Mistral-7B-v0.1" / "snapshots" / ("7231864" * 5 + "abcde")
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(cfg))
    assert load_arch(str(snap)).name == "mistralai/Mistral-7B-v0.1"  # not the commit the snapshot is named by
    folder = tmp_path / "Mistral-7B-v0.1"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    assert load_arch(str(folder / "config.json")).name == "Mistral-7B-v0.1"


@pytest.mark.parametrize("where", ["configs", "checkpoint-500", "7231864abcdef0", "model", "tmpab12_x"])
def test_a_config_kept_in_a_folder_that_names_no_model_is_named_by_its_config(tmp_path, monkeypatch, capsys,
                                                                              where) -> None:
    """`rooftop llm configs/config.json` was the model "configs": a folder that says where configs are kept gives
    the config's own kind (model_type, else its architecture), never the folder's name."""
    cfg = {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "vocab_size": 32000, "torch_dtype": "bfloat16"}
    monkeypatch.chdir(tmp_path)
    (tmp_path / where).mkdir()
    (tmp_path / where / "config.json").write_text(json.dumps(cfg))
    assert load_arch(f"{where}/config.json").name == "mistral"
    (tmp_path / where / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "model_type"}))
    assert load_arch(where).name == "Mistral"  # MistralForCausalLM less its head
    (tmp_path / where / "config.json").write_text(json.dumps({**cfg, "_name_or_path": f"/data/{where}"}))
    assert load_arch(where).name == "mistral"  # a local _name_or_path that names no model either
    (tmp_path / where / "model.json").write_text(json.dumps(cfg))
    assert load_arch(f"{where}/model.json").name == "mistral"
    assert main(["llm", f"{where}/config.json", "-d", "h100"]) == 0
    assert capsys.readouterr().out.startswith("mistral decode on h100")


def test_a_built_in_answers_to_its_name_and_hub_id_and_a_near_miss_is_told_the_name(tmp_path, monkeypatch) -> None:
    want = load_arch("mistral-7b")
    for ref in ("Mistral-7B-v0.1", "mistral-7b-v0.1", "mistralai/Mistral-7B-v0.1"):
        assert load_arch(ref) == want, ref
    with pytest.raises(ModelError, match=r"did you mean llama-3\.1-8b\?"):
        load_arch("lama-3.1-8b")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mistralai" / "Mistral-7B-v0.1").mkdir(parents=True)  # a folder of that name is the user's
    with pytest.raises(ModelError, match="has no config.json"):
        load_arch("mistralai/Mistral-7B-v0.1")


def test_a_name_a_config_or_its_folder_gives_is_shown_never_obeyed(tmp_path, capsys) -> None:
    cfg = {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "torch_dtype": "bfloat16"}
    named = tmp_path / "named"
    named.mkdir()
    (named / "config.json").write_text(json.dumps({**cfg, "_name_or_path": "org/\x1b]0;pwned\x07\x1b[2JEVIL"}))
    folder = tmp_path / "fold\x1b[31mer"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    for ref in (named, folder):
        assert main(["llm", str(ref), "-d", "h100"]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\\x1b" in out.splitlines()[0], out.splitlines()[0]


GEMMA2_9B_HUB = {  # google/gemma-2-9b's config.json as published: no tie_word_embeddings key, fp32
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attn_logit_softcapping": 50.0,
    "cache_implementation": "hybrid", "final_logit_softcapping": 30.0, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584, "intermediate_size": 14336,
    "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 16, "num_hidden_layers": 42,
    "num_key_value_heads": 8, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "sliding_window": 4096, "torch_dtype": "float32", "vocab_size": 256000}


def test_a_hub_gemma_config_is_tied_and_served_in_bf16_like_the_built_in(tmp_path) -> None:
    """Gemma's config class ties the LM head when the file leaves the key out (10.16 B params, fp32, before)."""
    (tmp_path / "config.json").write_text(json.dumps(GEMMA2_9B_HUB))
    got, want = load_arch(str(tmp_path)), load_arch("gemma-2-9b")
    assert got.tied and got.params == want.params and got.dtype == want.dtype == "bf16"
    assert "served in bf16" in got.dtype_note and "float32" in got.dtype_note
    nested = {"model_type": "gemma3", "torch_dtype": "bfloat16",  # a multimodal config: dtype beside text_config
              "text_config": {k: v for k, v in GEMMA2_9B_HUB.items() if k not in ("torch_dtype", "model_type")}}
    (tmp_path / "config.json").write_text(json.dumps(nested))
    arch = load_arch(str(tmp_path))
    assert arch.tied and arch.dtype == "bf16" and not arch.dtype_note
    llama = {k: v for k, v in GEMMA2_9B_HUB.items() if k != "model_type"} | {"model_type": "llama"}
    (tmp_path / "config.json").write_text(json.dumps(llama))
    assert not load_arch(str(tmp_path)).tied  # Llama's default stays untied


def test_a_deepseek_v3_config_caches_one_latent_not_k_and_v_per_head() -> None:
    """MLA's cache is one latent per token (kv_lora_rank + qk_rope_head_dim); taken as 128 heads of K and V it
    came out about 25× too large, with no word said. Now: (512 + 64) × 61 layers × 2 B = 70,272 B a token,
    where 128 heads × 2 × 128 wide would be 61 × 65,536 B = 3,997,696 B (57× as much)."""
    v3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
          "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280,
          "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
          "v_head_dim": 128, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
          "first_k_dense_replace": 3, "torch_dtype": "bfloat16"}
    arch = arch_from_config(v3)
    assert arch.kv_bytes(1) == (512 + 64) * 61 * 2 == 70_272
    no_width = {k: v for k, v in v3.items() if k != "intermediate_size"}  # the fuzzer's find: the 3 dense layers
    with pytest.raises(ModelError, match="give intermediate_size"):  # had an MLP of width 0, I = inf in the table
        arch_from_config(no_width)


def test_amdahl_seed_002() -> None:
    """Seed 002 §2.2: attention 17.6 ms sped up 0.55 → 0.33 ms per layer; 58 ms → 51 ms, ×1.14."""
    split = amdahl({"attention": 17.6, "mlp": 24.0, "runtime": 6.0, "comm": 10.4}, {"attention": 0.55 / 0.33})
    assert split.total_before == pytest.approx(58.0)
    assert split.total_after == pytest.approx(50.96, abs=0.01)
    assert split.speedup == pytest.approx(1.14, abs=0.005)
    with pytest.raises(ModelError, match="unknown part"):
        amdahl({"a": 1.0}, {"b": 2.0})


def test_cli_llm_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["llm", "qwen2.5-7b", "-d", "h100", "--batch", "1,16", "--measured-ms", "11.56,12.50", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    s1, s16 = out["steps"]
    for key in ("weights_bytes", "kv_bytes", "decode_step_lower_bound_s", "tokens_per_s_upper_bound", "ops"):
        assert key in s1
    assert s1["weights_bytes"] == pytest.approx(15.23e9, abs=0.005e9)
    assert s1["decode_step_lower_bound_s"] == pytest.approx(4.59e-3, rel=0.01)
    assert s16["tokens_per_s_upper_bound"] > 14 * s1["tokens_per_s_upper_bound"]
    assert {o["name"] for o in s1["ops"]} >= set(LINEAR)
    assert all("regime" in o and "intensity" in o for o in s1["ops"])
    assert out["compute_bound_batch"]["linear_layers"] > 200


def test_cli_llm_report_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["llm", "qwen2.5-7b", "-d", "h100", "--parts", "attention=17.6,mlp=24", "--speedup", "attention=2"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Qwen2.5-7B decode on h100" in out and "lm_head" in out and "×1.27" in out
    for argv, word in ((["llm", "nope"], "unknown model"), (["llm", "qwen2.5-7b", "--batch", "x"], "--batch"),
                       (["llm", "qwen2.5-7b", "--kv-dtype", "fp9"], "fp9"),
                       (["llm", "qwen2.5-7b", "--parts", "a=1", "--speedup", "b=2"], "unknown part"),
                       (["llm", "qwen2.5-7b", "--parts", "a=1,a=3"], "'a' is given twice"),  # the last won
                       (["llm", "qwen2.5-7b", "--parts", "=1,a=2"], "is not NAME=NUMBER"),  # a part with no name
                       (["llm", "qwen2.5-7b", "--parts", "a=1,,b=2"], "an empty item"),
                       (["llm", "qwen2.5-7b", "--parts", "a=1", "--speedup", "a=2,a=3"], "given twice"),
                       (["llm", "qwen2.5-7b", "--phase", "prefill", "--context", "1024,4096"],
                        "give --prompt N")):  # it was ignored: rows of the same prefill
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert word in err and len(err.strip().splitlines()) == 1


def test_a_measured_step_faster_than_its_bound_is_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    """`--measured-ms 1` against ΣT 4.87 ms showed 'expl. 487%, rest -3.87' with no word."""
    assert main(["llm", "llama-3.1-8b", "-d", "h100", "--measured-ms", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "! batch 1, ctx 128: faster than the bound: measured 1 ms against ΣT 4.87 ms" in out
    assert main(["llm", "llama-3.1-8b", "-d", "h100", "--measured-ms", "6"]) == 0
    assert "faster than the bound" not in capsys.readouterr().out
