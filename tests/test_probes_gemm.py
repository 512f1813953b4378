"""GEMM probes: correctness checks per dtype, TF32 restored, unsupported points skipped, budgets."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rooftop.probes.gemm import (
    TOLERANCE,
    GemmProbe,
    GemmSweeps,
    check,
    first_tensor,
    fp8_inputs,
    operands,
    shape_unsupported,
    template,
    tf32_mode,
    unsupported,
)
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


def test_tf32_mode_when_only_the_new_precision_api_was_used():
    """torch ≥ 2.9: setting only torch.backends.cuda.matmul.fp32_precision leaves the legacy flag behind;
    torch then refuses to say whether TF32 is on (and a cuBLAS matmul raises). The probe still runs, with
    both in agreement, and leaves the user's settings as they were."""
    mm = torch.backends.cuda.matmul
    if not hasattr(torch.backends, "fp32_precision"):
        pytest.skip(f"torch {torch.__version__} has no fp32_precision API")
    old = (torch.get_float32_matmul_precision(), mm.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision)
    try:
        mm.fp32_precision = "tf32"
        with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
            torch.get_float32_matmul_precision()
        for enabled in (False, True):
            with tf32_mode(enabled):
                assert mm.allow_tf32 is enabled  # torch's own consistency check passes
                assert mm.fp32_precision == ("tf32" if enabled else "ieee")
            assert mm.fp32_precision == "tf32" and torch.backends.mkldnn.matmul.fp32_precision == old[2]
        with tf32_mode(False):
            assert check("fp32", torch.device("cpu")) <= TOLERANCE["fp32"]
    finally:
        torch.set_float32_matmul_precision(old[0])
        mm.fp32_precision = old[1]
        torch.backends.mkldnn.matmul.fp32_precision = old[2]
    assert torch.get_float32_matmul_precision() == old[0]


def test_scaled_mm_tuple_of_torch_before_2_5(monkeypatch):
    """torch < 2.5 returns (out, amax) from torch._scaled_mm (pytorch#128683): the check takes the tensor."""
    real = torch._scaled_mm
    monkeypatch.setattr(torch, "_scaled_mm", lambda *a, **k: (real(*a, **k), torch.tensor(0.0)))
    assert check("fp8", torch.device("cpu")) <= TOLERANCE["fp8"]
    out = torch.zeros(2)
    assert first_tensor(out) is out and first_tensor((out, None)) is out


def test_fp8_m_sweep_reaches_m_1():
    """_scaled_mm constrains K and N (multiples of 16) and the layouts, not M: decode-sized GEMMs run."""
    assert shape_unsupported("fp8", 1, 8192, 8192) is None
    kernel, ref = operands("fp8", 1, 64, 64, torch.device("cpu"))
    got = first_tensor(kernel())
    assert got.shape == (1, 64) and got.dtype == torch.bfloat16
    assert float((got.double() - ref()).abs().max() / ref().abs().max()) <= TOLERANCE["fp8"]


def test_fp8_inputs_have_the_layouts_scaled_mm_checks_on_cuda():
    """torch's CUDA checks (_meta_registrations._check_scaled_mm_sizes): a row-major, b column-major,
    tensor-wise scales as fp32 with one element."""
    a, b, scale = fp8_inputs(32, 64, 48, torch.device("cpu"))
    assert a.shape == (32, 48) and a.stride() == (48, 1)
    assert b.shape == (48, 64) and b.stride() == (1, 48)
    assert a.dtype == b.dtype == torch.float8_e4m3fn
    assert scale.dtype == torch.float32 and scale.numel() == 1


# (A's strides, B's strides) for m, n, k = 32, 48, 64: what fast code hands each path's kernel.
# int8 and fp8 take B column-major (_int_mm runs ~7× slower on an H200 with B row-major; _scaled_mm
# rejects it on CUDA); the float GEMMs take both row-major, as the reference protocol times them.
LAYOUTS = {
    "fp64": ((64, 1), (48, 1)), "fp32": ((64, 1), (48, 1)), "tf32": ((64, 1), (48, 1)),
    "fp16": ((64, 1), (48, 1)), "bf16": ((64, 1), (48, 1)),
    "fp8": ((64, 1), (1, 64)), "int8": ((64, 1), (1, 64)),
}


@pytest.mark.parametrize("dtype", sorted(LAYOUTS))
def test_each_path_hands_its_kernel_the_fast_layout(dtype, monkeypatch):
    """The strides the timed kernel receives, intercepted at the torch call (CI has no GPU to see the
    7× of a wrong int8 layout)."""
    seen = []
    for name in ("mm", "_int_mm", "_scaled_mm"):
        real = getattr(torch, name)

        def spy(a, b, *args, _real=real, _name=name, **kw):
            seen.append((_name, a.shape, b.shape, a.stride(), b.stride()))
            return _real(a, b, *args, **kw)

        monkeypatch.setattr(torch, name, spy)
    kernel, _ = operands(dtype, 32, 48, 64, torch.device("cpu"))
    kernel()
    want = {"int8": "_int_mm", "fp8": "_scaled_mm"}.get(dtype, "mm")
    assert seen == [(want, (32, 64), (64, 48), *LAYOUTS[dtype])]


def test_support_on_the_cpu(cpu_backend):
    assert unsupported(cpu_backend, "fp32") is None
    assert "CPU has no TF32" in unsupported(cpu_backend, "tf32")
    assert "emulation" in unsupported(cpu_backend, "fp8")
    assert "M > 16" in shape_unsupported("int8", 8, 64, 64)
    assert shape_unsupported("int8", 32, 64, 64) is None
    assert "multiples of 16" in shape_unsupported("fp8", 16, 8200, 8192)


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
    assert by[("int8", 32)].conditions["b_layout"] == "column-major"
    assert fp32.conditions["b_layout"] == "row-major"
    assert torch.get_float32_matmul_precision() == "highest"


def test_int8_falls_back_to_b_row_major_when_column_major_fails_its_check(cpu_backend, monkeypatch):
    """cuBLAS has been wrong for some transposed int8 inputs: a wrong product must not be timed, and the
    right, slow layout still gives int8 a roof (the samples say which layout ran)."""
    real = torch._int_mm

    def broken(a, b, *args, **kw):
        out = real(a, b, *args, **kw)
        return out.add_(1) if b.stride(0) == 1 else out  # wrong whenever B is column-major

    monkeypatch.setattr(torch, "_int_mm", broken)
    backend = dataclasses.replace(cpu_backend, protocol=TINY)
    [sample] = [run_step(s) for s in GemmProbe(backend, GemmSweeps((32,), 32, (), ("int8",))).steps()]
    assert sample.stats is not None and sample.max_error == 0.0
    assert sample.conditions["b_layout"] == "row-major"
    monkeypatch.setattr(torch, "_int_mm", lambda a, b, *args, **kw: real(a, b, *args, **kw).add_(1))
    [sample] = [run_step(s) for s in GemmProbe(backend, GemmSweeps((32,), 32, (), ("int8",))).steps()]
    assert sample.skipped.startswith("result check failed")


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
