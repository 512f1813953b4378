"""The FMA sweep: the closed form, the CPU torch chain, and (with triton) the Triton kernel."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from rooftop.probes.fma import A, B, CPU_NOTE, FmaProbe, FmaSweep, chain_kernel, expected, max_error, template
from rooftop.probes.steps import run_step
from rooftop.probes.timing import Protocol

from probe_fixtures import cpu_backend  # noqa: F401 - a fixture


def test_closed_form_matches_iterating():
    x0 = torch.rand(16, dtype=torch.float64)
    x = x0.clone()
    for _ in range(37):
        x = x * A + B
    assert torch.allclose(expected(x0, 37, A, B), x, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_chain_kernel_computes_the_recurrence(dtype):
    x = torch.rand(10_000, dtype=dtype) + 0.5
    y = torch.empty_like(x)
    chain_kernel(x, y, reps=9, chunk_elems=1024)()
    assert max_error(x, y, 9) < (1e-5 if dtype == torch.float32 else 1e-12)
    assert not torch.equal(x, y)  # x is left as it was; y holds the result


def test_template_counts_two_flop_per_fma_and_one_load_one_store(cpu_backend):
    s = template(cpu_backend, "fp64", 64, n=1000)
    assert s.flops == 2 * 64 * 1000 and s.bytes == 2 * 1000 * 8
    assert s.path == "fp64-fma" and s.conditions["method"] == "torch-chain"
    assert s.intensity == pytest.approx(64 / 8)


def test_cpu_sweep_runs_and_is_verified(cpu_backend):
    backend = dataclasses.replace(cpu_backend, protocol=Protocol(window_s=1e-4, repeats=3, max_calls=3, warmups=1))
    probe = FmaProbe(backend, FmaSweep(reps=(1, 8)), n=1 << 16)
    samples = [run_step(s) for s in probe.steps()]
    assert [(s.dtype, s.shape["reps"]) for s in samples] == [("fp32", 1), ("fp32", 8), ("fp64", 1), ("fp64", 8)]
    for s in samples:
        assert not s.skipped, s.skipped
        assert s.flop_rate > 0 and s.max_error is not None
    assert probe.note() == CPU_NOTE


def test_triton_kernel_in_the_interpreter():
    pytest.importorskip("triton")
    code = textwrap.dedent(
        """
        import torch
        from rooftop.probes import fma_triton
        from rooftop.probes.fma import A, B, TOLERANCE, max_error
        # fp32 and fp64 (and fp16); not bf16: wrong in the interpreter (triton #4972)
        for dtype, name in ((torch.float32, "fp32"), (torch.float64, "fp64"), (torch.float16, "fp16")):
            for reps in (1, 64):
                x = torch.rand(3000, dtype=dtype) + 0.5
                y = torch.empty_like(x)
                fma_triton.run(x, y, reps, A, B)
                err = max_error(x, y, reps)
                assert err <= TOLERANCE[name], (name, reps, err)
                assert reps == 1 or not torch.equal(x, y)
        print("ok")
        """
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ok" in out.stdout


SM90_SASS = textwrap.dedent(
    """
    import json, os, re, subprocess, sys, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from rooftop.probes import fma_triton

    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    out = {}
    for dtype, reps in json.loads(sys.argv[1]):
        sig = {"x_ptr": "*" + dtype, "y_ptr": "*" + dtype, "n": "i32", "a": "fp32", "b": "fp32",
               "R": "constexpr", "BLOCK": "constexpr"}
        src = ASTSource(fma_triton.fma_kernel, sig, constexprs={"R": reps, "BLOCK": fma_triton.BLOCK})
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": fma_triton.NUM_WARPS})
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(kernel.asm["cubin"])
        sass = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True, check=True).stdout
        out[f"{dtype}:{reps}"] = {op: len(re.findall(pattern, sass)) for op, pattern in (
            ("FFMA", r"\\bFFMA\\b"), ("DFMA", r"\\bDFMA\\b"), ("HFMA2", r"\\bHFMA2\\b(?!\\.MMA)"),
            ("FMUL", r"\\b[DFH]MUL2?\\b"), ("local", r"\\b(?:STL|LDL)\\b"), ("BRA", r"\\bBRA\\b"))}
    print(json.dumps(out))
    """
)


def test_triton_kernel_compiles_for_sm90_with_every_fma_in_registers(tmp_path):
    """No GPU needed: Triton compiles for an H100/H200 (sm_90) with its bundled ptxas, and the SASS shows
    the chain — 8 independent elements per thread (BLOCK 1024, 4 warps), R = 64 fully unrolled into
    512 FFMA / 512 DFMA / 256 HFMA2 (fp16 in pairs), no separate multiply, no spills to local memory.
    The full plan's R = 2048 compiles too (a partly unrolled loop, still FMAs only)."""
    triton = pytest.importorskip("triton")
    pytest.importorskip("triton.backends.nvidia")
    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    if not all(os.path.exists(os.path.join(bindir, tool)) for tool in ("ptxas", "nvdisasm")):
        pytest.skip("this triton wheel bundles no ptxas/nvdisasm")
    cases = [("fp32", 64), ("fp64", 64), ("fp16", 64), ("fp32", 2048)]
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path)}
    env.pop("TRITON_INTERPRET", None)
    run = subprocess.run([sys.executable, "-c", SM90_SASS, json.dumps(cases)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["fp32:64"]["FFMA"] == 512 and got["fp64:64"]["DFMA"] == 512 and got["fp16:64"]["HFMA2"] == 256
    for case, ops in got.items():
        assert ops["FMUL"] == 0 and ops["local"] == 0, (case, ops)
    assert got["fp32:64"]["BRA"] == 1  # only the exit: the R loop is gone
    assert got["fp32:2048"]["FFMA"] >= 256 and got["fp32:2048"]["BRA"] >= 2  # a loop of unrolled FMA blocks
