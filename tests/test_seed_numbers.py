"""The model against numbers stated in the seed texts.

Each case names the seed section it comes from; the expected values are the
seeds' own figures (rounded as they print them).
"""

from __future__ import annotations

import math

import pytest

from rooftop.models import roofline
from rooftop.models.analysis import analyze
from rooftop.models.catalog import lookup_device
from rooftop.models.compare import compare_path, higher_at
from rooftop.models.spec import parse_spec
from rooftop.models.units import GiB


def dev(i: str):
    return lookup_device(i)


INTENSITY_CASES = [
    # (seed section, spec, expected I, relative tolerance)
    ("000 §2 table 2: fp32 y = x·a + b, I = 1/sizeof", "ew n=1e9 fp32", 0.25, 1e-9),
    ("000 §2 table 2: fp64 elementwise, I = 1/8", "ew n=1e6 fp64", 0.125, 1e-9),
    ("000 §2: fp16 thin GEMM (GEMV) I ≈ M = 1", "gemv 8192 8192 fp16", 1.0, 1e-3),
    ("000 §6: decode batch 8, I ≈ 8", "gemm 8 8192 8192 bf16", 8.0, 2e-3),
    ("000 §5: M sweep, I ≈ 2M/sizeof; fp32 M = 1 → 0.5", "gemm 1 8192 8192 fp32", 0.5, 1e-3),
    ("003 §2.1: square GEMM I = 2n/(3s)", "gemm 4096 4096 4096 bf16", 2 * 4096 / 6, 1e-9),
    ("003 §2.2: GEMV fp8 I ≈ 2/s = 2", "gemv 8192 8192 fp8", 2.0, 1e-3),
    ("000 §4: FMA sweep I = R/sizeof (fp32, R = 64)", "fma 64 fp32", 16.0, 1e-9),
    ("003 §2.4.1: naive attention I ≈ d/s = 64 (d 128, bf16)", "attn b=1 h=1 d=128 t=16384 naive", 64.0, 0.05),
    ("003 §2.4.3: decode attention I = 2/s = 1", "attn b=1 h=1 d=128 t=8192 decode", 1.0, 1e-3),
    ("002 §2: decode attention b8 h32 d128 t8192 I ≈ 1", "attn b=8 h=32 d=128 t=8192 decode", 1.0, 1e-3),
]


@pytest.mark.parametrize("section,spec,expected,rel", INTENSITY_CASES, ids=[c[0] for c in INTENSITY_CASES])
def test_intensity_matches_seed(section: str, spec: str, expected: float, rel: float) -> None:
    assert parse_spec(spec).cost().intensity == pytest.approx(expected, rel=rel)


def test_naive_attention_intensity_does_not_grow_with_length() -> None:
    """Seed 003 §2.4.1: the N² terms cancel, so I is pinned near d/s whatever N."""
    short = parse_spec("attn b=1 h=8 d=128 t=4096 naive").cost().intensity
    long = parse_spec("attn b=1 h=8 d=128 t=65536 naive").cost().intensity
    flash = parse_spec("attn b=1 h=8 d=128 t=65536 flash").cost().intensity
    assert long == pytest.approx(short, rel=0.05)
    assert flash > 10 * long  # FlashAttention moves the point right (seed 003 §2.4.2)


def test_seed_002_decode_attention_case() -> None:
    """Seed 002 §2: 1.07 GFLOP, 1.0 GiB of KV; 0.55 ms measured → ≈1.95 TB/s and TFLOP/s."""
    op = parse_spec("attn b=8 h=32 d=128 t=8192 decode")
    c = op.cost()
    assert c.flops == pytest.approx(1.07e9, rel=0.01)
    kv = dict(c.terms)["K,V read (KV cache)"]
    assert kv == pytest.approx(1.0 * GiB, rel=1e-9)
    a = analyze(op, dev("h100"), measured_time=0.55e-3)
    assert a.regime == "memory"
    assert a.measured.achieved_bandwidth == pytest.approx(1.95e12, rel=0.01)
    assert a.measured.achieved_flops == pytest.approx(1.95e12, rel=0.01)
    # FP8 / INT8 KV halves the KV bytes (seed 002 §2.1: 1.0 GiB → 0.5 GiB)
    fp8 = parse_spec("attn b=8 h=32 d=128 t=8192 decode kvdtype=fp8").cost()
    assert dict(fp8.terms)["K,V read (KV cache)"] == pytest.approx(0.5 * GiB, rel=1e-9)


RIDGES = [
    # seed 000 table 3 (fp16 ridges, 1000·F/B with unrounded values), table 4, §3 text
    ("v100-32", "fp16-tc", 123.0),
    ("a100", "fp16-tc", 175.5),
    ("h100", "fp16-tc", 255.3),
    ("h200", "fp16-tc", 175.9),
    ("b300", "fp16-tc", 279.3),
    ("mi100", "fp16-tc", 132.9),
    ("mi210", "fp16-tc", 101.3),
    ("rtx4080", "fp16-tc", 157.6),
    ("h100", "bf16-tc", 260.1),  # §6: "BF16 的 I* = 260"
    ("h100", "fp32-fma", 19.9),  # §3: FP32 CUDA core I* = 19.9
    ("b300", "fp64-tc", 0.165),  # §3: "FP64 的 I* 是 0.16"
    ("rtx4080", "fp64-tc", 1.12),  # §7: "ridge point 是 1.12"
]


@pytest.mark.parametrize("device,path,expected", RIDGES)
def test_reference_ridges(device: str, path: str, expected: float) -> None:
    assert dev(device).ridge(path) == pytest.approx(expected, rel=0.005)


def test_h100_h200_crossover() -> None:
    """Seed 000 §3: H200 has 39% more bandwidth, a little less fp16; they cross at I = 245."""
    h100, h200 = dev("h100"), dev("h200")
    assert h200.B() / h100.B() == pytest.approx(1.39, abs=0.005)
    cmp = compare_path(h100, h200, "fp16-tc")
    assert cmp.crossover.intensity == pytest.approx(245, abs=0.5)
    assert cmp.crossover.higher_below == "h200"
    assert cmp.crossover.higher_above == "h100"
    assert higher_at(h100, h200, "fp16-tc", 100) == "h200"
    assert higher_at(h100, h200, "fp16-tc", 300) == "h100"


def test_h100_m_sweep_turns_flat_near_272() -> None:
    """Seed 000 §5: the H100 fp16 M sweep (N = K = 8192) reaches the ridge at M ≈ 272."""
    m = roofline.gemm_ridge_m(8192, 8192, 2, dev("h100").ridge("fp16-tc"))
    assert m == pytest.approx(272, abs=1)


def test_decode_weights_bound_and_compute_share() -> None:
    """Seed 000 §6: 14.14 GB read per decode step is ≥ 4.58 ms on H100; W/F is 0.018 ms."""
    h100 = dev("h100")
    assert 14.14e9 / h100.B() == pytest.approx(4.58e-3, rel=0.005)
    flops = 2 * 14.14e9 / 2  # one multiply-add per bf16 weight
    assert flops / h100.F("bf16-tc") == pytest.approx(0.018e-3, rel=0.03)


def test_padding_pushes_weak_fp64_past_its_ridge() -> None:
    """Seed 000 §7: RTX 4080 fp64 M = 2 pads to 32 rows and the padded FLOPs set the time;
    fp16 padded to 32 rows stays left of its ridge (158), so no warning."""
    fp64 = analyze(parse_spec("gemm 2 8192 8192 fp64"), dev("rtx4080"))
    assert any(w.startswith("padding:") for w in fp64.warnings)
    fp16 = analyze(parse_spec("gemm 2 8192 8192 fp16"), dev("rtx4080"))
    assert not any(w.startswith("padding:") for w in fp16.warnings)
    # B300 fp32 (ridge 10.7) is padding-bound too (seed 000 §7: M = 2…32 all 0.20 ms)
    b300 = analyze(parse_spec("gemm 2 8192 8192 fp32"), dev("b300"))
    assert any(w.startswith("padding:") for w in b300.warnings)


def test_b300_fp64_whole_m_sweep_is_compute_bound() -> None:
    """Seed 000 §5: B300 fp64 ridge 0.16 < I(M=1) = 0.25, so every M is on the flat."""
    a = analyze(parse_spec("gemm 1 8192 8192 fp64"), dev("b300"))
    assert a.intensity == pytest.approx(0.25, rel=1e-3)
    assert a.regime == "compute"


def test_datasheet_ridges_of_seed_003() -> None:
    """Seed 003 §1.1: dense datasheet ridges H100 BF16 ≈ 295, FP8 ≈ 590, H200 BF16 ≈ 206."""
    assert dev("h100-sxm-ds").ridge("bf16-tc") == pytest.approx(295, rel=0.01)
    assert dev("h100-sxm-ds").ridge("fp8-tc") == pytest.approx(590, rel=0.01)
    assert dev("h200-ds").ridge("bf16-tc") == pytest.approx(206, rel=0.01)


def test_same_kernel_different_path_different_regime() -> None:
    """Seed 000 §3: I = 50 is memory-bound on fp16 tensor cores, compute-bound on fp32 FMA."""
    h100 = dev("h100")
    assert roofline.regime(50, h100.F("fp16-tc"), h100.B()) == "memory"
    assert roofline.regime(50, h100.F("fp32-fma"), h100.B()) == "compute"


def test_batch_one_decode_uses_under_one_percent_of_compute() -> None:
    """Seed 000 §6 / seed 001: a batch-1 decode GEMV is pinned to the memory slope."""
    a = analyze(parse_spec("gemv 3584 3584 bf16"), dev("h100"))
    assert a.regime == "memory"
    assert a.attainable / a.peak < 0.01
    assert math.isclose(a.time_lower_bound, a.time_memory)
