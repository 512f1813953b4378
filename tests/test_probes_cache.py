"""The cache probes: W and Q, the kernels' results in Triton's interpreter, the SASS they compile to, the plans."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest

from rooftop.models.units import GiB, KiB, MiB
from rooftop.probes.cache import CacheSweep, l1_template, l2_template
from rooftop.probes.plan import build_plan

from probe_fixtures import cpu_backend  # noqa: F401 - a fixture


def test_l2_template_counts_the_bytes_read_over_distinct_chunks():
    s = l2_template(CacheSweep(l2_sets=(), l1_regions=()), 16 * MiB)
    assert s.family == "l2_read" and s.footprint_bytes == 16 * MiB
    assert s.shape["chunks"] == 64 and s.shape["programs"] == 4 * GiB // (256 * KiB)
    assert s.bytes == s.shape["programs"] * 256 * KiB  # each program reads its 256 KiB chunk once
    assert s.flops == s.bytes / 4  # one add per fp32 element read
    assert s.conditions["method"].startswith("triton") and ".cg" in s.conditions["method"]
    big = l2_template(CacheSweep(l2_sets=(), l1_regions=()), 8 * GiB)  # more chunks than the minimum grid
    assert big.shape["programs"] == big.shape["chunks"] and big.bytes == big.footprint_bytes


def test_l1_template_counts_every_pass():
    s = l1_template(CacheSweep(l2_sets=(), l1_regions=()), 132, 16 * KiB)
    p, passes = s.shape["programs"], s.shape["passes"]
    assert p == 264 and s.footprint_bytes == 264 * 16 * KiB and s.conditions["per_sm_bytes"] == 32 * KiB
    assert s.bytes == p * 16 * KiB * passes >= 4 * GiB
    assert s.flops == s.bytes / 4 and "rotated" in s.conditions["method"]


def test_an_l1_region_must_hold_two_blocks_to_rotate():
    with pytest.raises(ValueError, match="at least two"):
        l1_template(CacheSweep(l2_sets=(), l1_regions=()), 132, 8 * KiB)  # one 2048-element block


def _h200(cpu_backend):
    info = dataclasses.replace(cpu_backend.info, kind="cuda", index=0, name="NVIDIA H200", units=132,
                               l2_bytes=60 * MiB, memory_bytes=int(139.8 * GiB), compute_capability="9.0")
    return dataclasses.replace(cpu_backend, spec="cuda:0", info=info)


def test_gpu_plans_hold_the_cache_steps_and_the_cpu_plan_none(cpu_backend):
    quick = build_plan(_h200(cpu_backend), "quick")
    cache = [s.template for s in quick.steps if s.template.family in ("l2_read", "l1_read")]
    assert [(s.family, s.footprint_bytes) for s in cache if s.family == "l2_read"] == [
        ("l2_read", 1 * MiB), ("l2_read", 8 * MiB), ("l2_read", 30 * MiB), ("l2_read", 120 * MiB)]  # to 2 × L2
    assert [s.conditions["per_sm_bytes"] for s in cache if s.family == "l1_read"] == [32 * KiB, 128 * KiB]
    assert any("l2_read" in n and "bytes read" in n for n in quick.notes)
    full = build_plan(_h200(cpu_backend), "full")
    sets = [s.template.footprint_bytes for s in full.steps if s.template.family == "l2_read"]
    assert sets[0] == 1 * MiB and sets[-1] == 120 * MiB and len(sets) > 4
    assert build_plan(_h200(cpu_backend), "quick", "cache").steps[0].template.family == "l2_read"
    for plan in ("quick", "full"):
        fams = {s.template.family for s in build_plan(cpu_backend, plan).steps}
        assert not fams & {"l2_read", "l1_read"}
    assert build_plan(cpu_backend, "quick", "cache").steps == ()


def test_on_a_cpu_without_the_interpreter_a_cache_step_is_skipped_with_the_reason(cpu_backend, monkeypatch):
    from rooftop.probes import cache
    from rooftop.probes.steps import run_step

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(cache, "triton_available", lambda: True)  # with or without triton installed here
    sweep = CacheSweep(l2_sets=(64 * KiB,), l1_regions=(), chunk=16 * KiB, min_read=64 * KiB)
    s = run_step(cache.steps(cpu_backend, sweep)[0])
    assert s.stats is None and "run on a GPU" in s.skipped


def test_without_triton_a_cache_step_is_skipped_with_the_reason(cpu_backend, monkeypatch):
    from rooftop.probes import cache
    from rooftop.probes.steps import run_step

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(cache, "triton_available", lambda: False)
    sweep = CacheSweep(l2_sets=(64 * KiB,), l1_regions=(), chunk=16 * KiB, min_read=64 * KiB)
    s = run_step(cache.steps(cpu_backend, sweep)[0])
    assert s.stats is None and "triton is not installed" in s.skipped


INTERPRETED = textwrap.dedent(
    """
    import dataclasses, json
    from rooftop.models.units import KiB
    from rooftop.probes.backend import select_backend
    from rooftop.probes.cache import CacheSweep, steps
    from rooftop.probes.steps import run_step
    from rooftop.probes.timing import Protocol

    be = select_backend("cpu")
    be = dataclasses.replace(be, protocol=Protocol(window_s=1e-4, repeats=3, max_calls=1, warmups=0),
                             info=dataclasses.replace(be.info, units=2))
    # 4 and 16 KiB working sets of 2 KiB chunks (8 programs at least); 2 programs per "SM" × 2 KiB regions
    sweep = CacheSweep(l2_sets=(4 * KiB, 16 * KiB), l1_regions=(2 * KiB,), chunk=2 * KiB, block=64, warps=1,
                       l1_block=128, l1_warps=1, min_read=16 * KiB)
    out = []
    for st in steps(be, sweep):
        s = run_step(st)
        out.append({"family": s.family, "skipped": s.skipped, "err": s.max_error, "shape": dict(s.shape),
                    "bytes": s.bytes, "bw": s.bandwidth})
    print(json.dumps(out))
    """
)


def test_the_kernels_sum_what_torch_sums_in_the_interpreter():
    """Every program's sum equals torch's over the chunk (L2) or passes × its region (L1): the probes
    check it after timing and record max_error; a wrong kernel would be skipped, not measured."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, "-c", INTERPRETED], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert [g["family"] for g in got] == ["l2_read", "l2_read", "l1_read"]
    for g in got:
        assert g["skipped"] == "" and g["err"] is not None and g["err"] <= 1e-5 and g["bw"] > 0, g
    assert [g["shape"]["chunks"] for g in got[:2]] == [2, 8] and got[0]["shape"]["programs"] == 8
    assert got[2]["shape"] == {"n": 2048, "region": 512, "programs": 4, "passes": 2}
    assert got[2]["bytes"] == 4 * 512 * 4 * 2


SM90_SASS = textwrap.dedent(
    """
    import json, os, re, subprocess, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from rooftop.probes import cache_triton

    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    aligned = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}  # as a launch specialises them
    out = {}
    for fn, sig, cx, warps in (
        (cache_triton.l2_chunks, {"x_ptr": "*fp32", "out_ptr": "*fp32", "nchunks": "i32", "CHUNK": "constexpr",
                                  "BLOCK": "constexpr"}, {"CHUNK": 65536, "BLOCK": 1024}, 4),
        (cache_triton.l1_passes, {"x_ptr": "*fp32", "out_ptr": "*fp32", "passes": "i32", "REGION": "constexpr",
                                  "BLOCK": "constexpr"}, {"REGION": 4096, "BLOCK": 2048}, 8)):
        k = triton.compile(ASTSource(fn, sig, constexprs=cx, attrs=aligned), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": warps})
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(k.asm["cubin"])
        lines = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True, check=True).stdout.splitlines()
        labels = {m.group(1): i for i, l in enumerate(lines) if (m := re.match(r"^(\\.L_x_\\d+):", l))}
        in_loop = 0  # loads between a label and a branch back to it
        for i, l in enumerate(lines):
            m = re.search(r"BRA `\\((\\.L_x_\\d+)\\)", l)
            if m and labels.get(m.group(1), i) < i:
                in_loop += sum("LDG" in x for x in lines[labels[m.group(1)]:i])
        out[fn.__name__] = {"loads": sorted({m for l in lines for m in re.findall(r"LDG[.\\w]*", l)}),
                            "in_loop": in_loop}
    print(json.dumps(out))
    """
)


def test_the_kernels_compile_for_sm90_with_their_loads_in_the_loop(tmp_path):
    """No GPU needed: on an H100/H200 (sm_90) the L2 kernel's loads are 128-bit `.cg` loads
    (LDG.E.128.STRONG.GPU: cached in L2 only) and the L1 kernel's are 128-bit default loads (cached in
    L1) inside the runtime pass loop, so they cannot have been hoisted out of it."""
    triton = pytest.importorskip("triton")
    pytest.importorskip("triton.backends.nvidia")
    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    if not all(os.path.exists(os.path.join(bindir, tool)) for tool in ("ptxas", "nvdisasm")):
        pytest.skip("this triton wheel bundles no ptxas/nvdisasm")
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path)}
    env.pop("TRITON_INTERPRET", None)
    run = subprocess.run([sys.executable, "-c", SM90_SASS], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["l2_chunks"]["loads"] == ["LDG.E.128.STRONG.GPU"]
    assert got["l1_passes"]["loads"] == ["LDG.E.128"] and got["l1_passes"]["in_loop"] >= 2
