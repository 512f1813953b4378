"""GEMM probes: correctness checks per dtype, TF32 restored, unsupported points skipped, budgets."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rooftop.probes.gemm import TOLERANCE, GemmProbe, GemmSweeps, check, shape_support, support, template, tf32_mode
from rooftop.probes.steps import run_step
from rooftop.probes.timing import Protocol

from probe_fixtures import cpu_backend  # noqa: F401 - a fixture

TINY = Protocol(window_s=1e-4, repeats=3, max_calls=3, warmups=2)


@pytest.mark.parametrize("dtype", ["fp64", "fp32", "fp16", "bf16", "int8", "fp8"])
def test_kernels_agree_with_a_float64_product(dtype):
    err = check(dtype, torch.device("cpu"))  # fp8 runs as torch's CPU emulation here: fine at this size
    assert err <= TOLERANCE[dtype]


def test_template_counts_w_and_q():
    s = template("bf16", 2, 8192, 4096, "warm", "m")
    assert s.flops == 2 * 2 * 8192 * 4096
    assert s.bytes == 2 * (2 * 4096 + 4096 * 8192 + 2 * 8192)
    assert s.path == "bf16-tc"
    assert template("int8", 32, 64, 64, "warm", "square").bytes == 32 * 64 + 64 * 64 + 4 * 32 * 64
    assert template("fp32", 64, 64, 64, "warm", "square").path == "fp32-matmul"
    assert template("tf32", 64, 64, 64, "warm", "square").path == "tf32-tc"


def test_tf32_setting_is_restored_even_on_error():
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        with tf32_mode(False):
            assert torch.get_float32_matmul_precision() == "highest"
        with pytest.raises(RuntimeError):
            with tf32_mode(True):
                assert torch.get_float32_matmul_precision() == "high"
                raise RuntimeError("kernel failed")
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(old)


def test_support_on_the_cpu(cpu_backend):
    assert support(cpu_backend, "fp32") is None
    assert "CPU has no TF32" in support(cpu_backend, "tf32")
    assert "emulation" in support(cpu_backend, "fp8")
    assert "M > 16" in shape_support("int8", 8, 64, 64)
    assert shape_support("int8", 32, 64, 64) is None
    assert "multiples of 16" in shape_support("fp8", 1, 8192, 8192)


def test_sweep_measures_supported_and_skips_the_rest(cpu_backend):
    backend = dataclasses.replace(cpu_backend, protocol=TINY)
    probe = GemmProbe(backend, GemmSweeps(squares=(32,), nk=32, ms=(1, 32), dtypes=("fp32", "tf32", "int8")))
    samples = [run_step(s) for s in probe.steps()]
    by = {(s.dtype, s.shape["m"]): s for s in samples}
    assert len(samples) == 9
    fp32 = by[("fp32", 32)]
    assert fp32.stats and fp32.flop_rate > 0 and fp32.max_error <= TOLERANCE["fp32"]
    assert by[("tf32", 32)].skipped.startswith("TF32 is a tensor-core mode")
    assert by[("int8", 1)].skipped.startswith("torch._int_mm needs M > 16")
    assert by[("int8", 32)].stats is not None and by[("int8", 32)].max_error == 0.0
    assert torch.get_float32_matmul_precision() == "highest"


def test_budget_skips_points_predicted_too_slow(cpu_backend):
    backend = dataclasses.replace(cpu_backend, protocol=dataclasses.replace(TINY, max_call_s=1e-9))
    probe = GemmProbe(backend, GemmSweeps(squares=(16, 32, 64), nk=16, ms=(), dtypes=("fp32",)))
    samples = [run_step(s) for s in probe.steps()]
    assert "over the plan's" in samples[0].skipped
    assert all("already over" in s.skipped for s in samples[1:])


def test_cold_points_flush_before_each_sample(cpu_backend, monkeypatch):
    backend = dataclasses.replace(cpu_backend, protocol=TINY)
    flushes = []
    monkeypatch.setattr(backend, "flush", lambda: flushes.append(1))
    probe = GemmProbe(backend, GemmSweeps(squares=(32,), nk=32, ms=(), dtypes=("fp32",), cold_squares=(32,)))
    warm, cold = [run_step(s) for s in probe.steps()]
    assert warm.cache == "warm" and cold.cache == "cold" and cold.stats is not None
    assert len(flushes) == TINY.repeats  # once per sample, for the cold point only
