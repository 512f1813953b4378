"""The launch floor as serving stacks pay it: a MoE layer's experts in fused launches (the per-expert floor
HF eager pays shown beside it), and a launch figure for every built-in device — its own, else its
family's, else the reference's, each said so — so that T does not swing with whether one was measured."""

from __future__ import annotations

import json

import pytest
from rooftop.models.catalog import catalog, lookup_device
from rooftop.models.llm.step import FUSED_MOE_LAUNCHES, Phase, launch_line, step_bound
from rooftop.store.hfconfig import load_arch
from rooftop.tui.cli import main

H100, H200 = lookup_device("h100"), lookup_device("h200")


def test_qwen3_moe_at_batch_64_is_bound_by_its_roofline_not_per_expert_launches() -> None:
    """The issue's case: 24,666 kernels × 4.5 µs = 111 ms against a roofline of ~20 ms."""
    arch = load_arch("qwen3-30b-a3b")
    step = step_bound(arch, Phase("decode", 64), H100)
    assert step.eager_kernels == 24666
    assert step.eager_moe_floor_s == pytest.approx(24666 * 4.5e-6)
    per_layer_dense = 2 + 3 + 1 + 1 + 2  # norms, q k v, attention, o, residuals
    assert step.kernels == arch.layers * (per_layer_dense + 1 + FUSED_MOE_LAUNCHES) + 2  # + router; final norm, lm_head
    assert step.binds == "roofline" and step.time_bound_s == step.lower_bound_s
    assert step.launch_floor_s == pytest.approx(step.kernels * 4.5e-6)
    assert step.launch_floor_s < step.lower_bound_s
    line = launch_line(step)
    assert "2 fused launches" in line and "HF eager" in line and "111 ms" in line


def test_a_dense_model_has_no_separate_per_expert_floor() -> None:
    step = step_bound(load_arch("qwen2.5-7b"), Phase("decode", 8), H100)
    assert step.eager_kernels == step.kernels and step.eager_moe_floor_s is None
    assert "HF eager" not in launch_line(step)


def test_pipeline_stages_split_the_fused_launches_too() -> None:
    arch = load_arch("mixtral-8x7b")
    whole = step_bound(arch, Phase("decode", 16), H100)
    stage = step_bound(arch, Phase("decode", 16), H100, pp=4)
    assert stage.kernels == pytest.approx(whole.kernels / 4, abs=len(stage.ops))


def test_every_built_in_device_has_a_launch_figure_and_says_whose() -> None:
    devices = catalog()
    assert all(p.launch_overhead is not None for p in devices.values())
    own = [p.id for p in devices.values() if p.launch_overhead.source != "typical"]
    assert own == ["h100"]  # the one measurement the reference publishes
    h200 = devices["h200"].launch_overhead
    assert h200.value == devices["h100"].launch_overhead.value
    assert h200.source == "typical" and "h100's" in h200.case and "same family" in h200.case
    assert "the only one" in devices["mi300x-ds"].launch_overhead.case  # no CDNA figure: said so


def test_h100_and_h200_differ_by_their_bandwidth_not_by_a_launch_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """Same model, same batch: T moved ×6.3 between the two on a bandwidth ratio of 1.39."""
    t = {}
    for dev in ("h100", "h200"):
        assert main(["llm", "qwen3-30b-a3b", "-d", dev, "--batch", "64", "--json"]) == 0
        s = json.loads(capsys.readouterr().out)["steps"][0]
        assert s["binds"] == "roofline" and s["launch_floor_s"] is not None
        assert s["kernels_eager_moe"] == 24666 and s["launch_floor_eager_moe_s"] == pytest.approx(0.111, rel=1e-2)
        t[dev] = s["step_time_bound_s"]
    ratio = t["h100"] / t["h200"]
    assert ratio == pytest.approx(H200.B() / H100.B(), rel=0.05)
    assert main(["llm", "qwen3-30b-a3b", "-d", "h200", "--batch", "64"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not measured on h200" in out and "HF eager" in out
