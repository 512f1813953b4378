"""Checkpoint weight formats from `quantization_config`: the bytes a weight costs, scales in, and which parts.

gpt-oss-20b (tests/data/configs/gpt-oss-20b.json, written from the published config.json) ships its experts in
MXFP4 and everything else in bf16; its checkpoint is about 13.8 GB for 20.9 B parameters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.dtypes import grouped_dtype, weight_dtype
from rooftop.models.llm.step import Phase, step_bound, weights_read_bytes
from rooftop.models.errors import ModelError
from rooftop.models.llm.weightformat import weight_format
from rooftop.store.hfconfig import load_arch
from rooftop.tui.cli import main

OSS = str(Path(__file__).parent / "data" / "configs" / "gpt-oss-20b.json")


def test_gpt_oss_20b_checkpoint_size_within_3_percent() -> None:
    """Experts 24 layers × 32 × 3 · 2880² = 19,110,297,600 weights at 4.25 bits (0.53125 B) = 10,152,345,600 B;
    the rest (20,908,050,240 − 19,110,297,600 = 1,797,752,640: attention, embedding, lm_head, routers, norms) at
    bf16 = 3,595,505,280 B; total 13,747,850,880 B, 0.4% under the published ~13.8 GB.
    Parameters: embedding + lm_head 2 · 201,088 · 2880 = 1,158,266,880; per layer attention 2880·4096 + 2·2880·512
    + 4096·2880 + q, k, v biases 4096 + 1024 = 26,547,200, experts 796,262,400, router 92,160, norms 5760;
    × 24 + 2880 = 20,908,050,240 ≈ 20.9 B."""
    arch = load_arch(OSS)
    assert arch.params == 20_908_050_240
    assert arch.weights is not None and arch.weights.parts == ("mlp", "experts", "shared")  # attention kept bf16
    assert arch.weights_bytes == 13_747_850_880
    assert arch.weights_bytes == pytest.approx(13.8e9, rel=0.03)
    assert (arch.sliding_window, arch.sliding_layers, arch.experts, arch.experts_per_token) == (128, 12, 32, 4)


def test_gpt_oss_decode_reads_its_experts_at_4_25_bits() -> None:
    """Batch 1 touches 4 of 32 experts a layer: 24 · 4 · 24,883,200 = 2,388,787,200 weights × 0.53125 B
    = 1,269,043,200 B; the rest but the input embedding, 20,908,050,240 − 579,133,440 − 19,110,297,600
    = 1,218,619,200 × 2 B = 2,437,238,400 B; 3,706,281,600 B a step. Each expert GEMM's weight term is k·n·0.53125."""
    arch = load_arch(OSS)
    h100 = lookup_device("h100")
    assert weights_read_bytes(arch, Phase("decode", 1)) == 3_706_281_600
    step = step_bound(arch, Phase("decode", 1), h100)
    down = next(a for lo, a in step.ops if lo.name == "down")
    weights = dict(down.cost.terms)["A (K×N, weights, mxfp4)"]
    assert weights == 2880 * 2880 * 0.53125
    assert down.path == "bf16-tc"  # H100 has no FP4 tensor cores: weight-only, unpacked to bf16
    assert step.lower_bound_s >= step.bytes_bound_s
    b200 = step_bound(arch, Phase("decode", 1), lookup_device("b200-ds"))
    assert next(a for lo, a in b200.ops if lo.name == "down").path == "fp4-tc"
    q = next(a for lo, a in step.ops if lo.name == "q")
    assert q.op.dtype == "bf16" and q.op.wdtype is None  # attention stays bf16 (modules_to_not_convert)


def test_formats_and_their_bits() -> None:
    """fp8 with one fp32 per 128×128 block: 8 + 32/16384 bits; MXFP4 4 + 8/32 = 4.25; NVFP4 4 + 8/16 = 4.5;
    AWQ int4 group 128 with an fp16 scale and a 4-bit zero: 4 + (16 + 4)/128 = 4.15625 bits."""
    fp8, _ = weight_format({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
    mx, _ = weight_format({"quantization_config": {"quant_method": "mxfp4"}})
    nv, _ = weight_format({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                                   "exclude_modules": ["lm_head", "model.layers.0.self_attn"]}})
    awq, _ = weight_format({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}})
    gptq, _ = weight_format({"quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": -1}})
    assert fp8 and fp8.bits == 8 + 32 / 16384 and fp8.native == "fp8"
    assert mx and mx.bits == 4.25 and nv and nv.bits == 4.5 and "attention" not in nv.parts
    assert awq and awq.wdtype == "int4-g128" and awq.bits == 4.15625 and awq.native is None
    assert gptq and gptq.wdtype == "int8-ch" and gptq.bits == 8
    shared, _ = weight_format({"quantization_config": {"quant_method": "fp8",
                                                       "modules_to_not_convert": ["model.layers.*.mlp.shared_experts"]}})
    assert shared and shared.parts == ("attention", "mlp", "experts")  # shared_experts is not the routed experts


def test_an_unknown_method_is_said_and_bad_keys_are_one_line() -> None:
    fmt, note = weight_format({"quantization_config": {"quant_method": "bitsandbytes"}})
    assert fmt is None and "'bitsandbytes' not read" in note and "model's dtype" in note
    with pytest.raises(ModelError, match="weight_block_size"):
        weight_format({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, "x"]}})
    with pytest.raises(ModelError, match="bits"):
        weight_format({"quantization_config": {"quant_method": "gptq", "bits": 3}})
    with pytest.raises(ModelError, match="group_size"):
        weight_format({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 0}})


def test_grouped_weight_dtypes_parse_by_name() -> None:
    """int4-g64: (4 + (16 + 4)/64)/8 = 0.5390625 B; fp8-b128x128: 1 + 4/16384 B; unknown shapes are None."""
    assert grouped_dtype("int4-g64").size == 0.5390625  # type: ignore[union-attr]
    assert weight_dtype("fp8-b128x128").size == 1 + 4 / 16384  # type: ignore[union-attr]
    assert grouped_dtype("int4-g0") is None and grouped_dtype("int5-g64") is None and grouped_dtype("fp8-b0x1") is None
    assert weight_dtype("mxfp4").size == 4.25 / 8 and weight_dtype("nvfp4").size == 4.5 / 8  # type: ignore[union-attr]


def test_op_takes_mxfp4_and_nvfp4_on_blackwell_and_says_no_roof_elsewhere(capsys: pytest.CaptureFixture[str]) -> None:
    """A 4096³ MXFP4 GEMM reads X and A at 4096² × 0.53125 B = 8,912,896 B each and writes Y in bf16."""
    assert main(["op", "gemm", "4096", "4096", "4096", "mxfp4", "-d", "b200-ds", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["path"] == "fp4-tc"
    assert row["bytes"] == 2 * 4096 * 4096 * 0.53125 + 4096 * 4096 * 2
    assert main(["op", "gemm", "1", "4096", "4096", "nvfp4", "-d", "h100-sxm-ds"]) == 2
    err = capsys.readouterr().err
    assert "no fp4-tc roof" in err and "b200-ds" in err


def test_dtype_flag_drops_the_checkpoint_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", OSS, "-d", "h100", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)["steps"][0]
    assert step["weight_format"] == "mxfp4" and step["weight_bits"] == 4.25
    assert step["weights_bytes"] == 13_747_850_880
    assert main(["llm", OSS, "-d", "h100", "--dtype", "bf16", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)["steps"][0]
    assert step["weight_format"] == "bf16" and step["weights_bytes"] == 2 * step["params"]
