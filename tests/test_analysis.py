"""analyze(): regime, the two time terms, advice per regime and op, warnings."""

from __future__ import annotations

import pytest

from rooftop.models.analysis import analyze
from rooftop.models.catalog import lookup_device
from rooftop.models.profile import Ceiling, DeviceProfile, NoRoof
from rooftop.models.spec import parse_spec


def toy(**peaks: float) -> DeviceProfile:
    """A device with round numbers: 1 TB/s, L2 40 MiB, peaks in TFLOP/s."""
    return DeviceProfile(
        id="toy", name="Toy GPU", source="datasheet",
        bandwidth={"dram": Ceiling(1e12, "datasheet")},
        peak={k.replace("_", "-"): Ceiling(v * 1e12, "datasheet") for k, v in peaks.items()},
        l2_bytes=40 * 2**20,
    )


TOY = toy(fp32_matmul=10, tf32_tc=80, bf16_tc=100, fp8_tc=200, fp32_fma=20, fp64_fma=5, fp64_tc=10)


def test_time_bound_is_the_larger_term() -> None:
    a = analyze(parse_spec("gemm 1024 1024 1024 bf16"), TOY)
    w, q = 2 * 1024**3, 2 * 3 * 1024**2
    assert a.flops == w and a.bytes == q
    assert a.time_compute == pytest.approx(w / 100e12)
    assert a.time_memory == pytest.approx(q / 1e12)
    assert a.time_lower_bound == max(a.time_compute, a.time_memory)
    assert a.ridge == pytest.approx(100)
    assert a.intensity == pytest.approx(2 * 1024 / 6)
    assert a.regime == "compute"
    assert a.attainable == pytest.approx(100e12)


def test_memory_bound_gemm_advice_names_the_ridge_m_and_lower_precision() -> None:
    a = analyze(parse_spec("gemm 1 8192 8192 bf16"), TOY)
    assert a.regime == "memory"
    text = " ".join(a.advice)
    assert "memory-bound" in a.advice[0]
    assert "from M ≈ 103 tokens" in text  # 100·2·8192²/(2·8192² − 100·2·16384) = 102.5 → 103
    assert "fp8" in text and "×2" in text


def test_compute_bound_gemm_advice_lists_higher_roofs_with_factors() -> None:
    a = analyze(parse_spec("gemm 4096 4096 4096 fp32"), TOY)
    assert a.path == "fp32-matmul" and a.regime == "compute"
    higher = [s for s in a.advice if s.startswith("higher roof")]
    assert higher[0].startswith("higher roof: tf32-tc is ×8.0")
    assert "allow_tf32" in higher[0]
    assert any("bf16-tc is ×10.0" in s for s in higher)


def test_top_roof_says_there_is_none_higher() -> None:
    a = analyze(parse_spec("gemm 8192 8192 8192 fp8"), TOY)
    assert any(s.startswith("no higher matmul roof") for s in a.advice)


def test_elementwise_is_memory_bound_and_advises_fusion() -> None:
    a = analyze(parse_spec("ew n=1e8 bf16"), TOY)
    assert a.path == "fp32-fma" and a.regime == "memory"
    assert any("fuse" in s for s in a.advice)


def test_fma_sweep_advice_gives_the_ridge_r() -> None:
    a = analyze(parse_spec("fma 4 fp32"), TOY)
    assert any("R ≥ 80" in s for s in a.advice)  # I* = 20 FLOP/B × 4 bytes
    top = analyze(parse_spec("fma 2048 fp32"), TOY)
    assert top.regime == "compute"
    assert any("only a matmul reaches them" in s for s in top.advice)


def test_naive_attention_advice_points_to_flash() -> None:
    a = analyze(parse_spec("attn b=1 h=8 d=128 t=8192 naive"), TOY)
    assert any("FlashAttention" in s for s in a.advice)


def test_near_ridge_note() -> None:
    # I = 100 on a ridge of 100
    a = analyze(parse_spec("fma 400 fp32"), toy(fp32_fma=100))
    assert any(s.startswith("near the ridge") for s in a.advice)


def test_measured_time_fraction_and_above_roof_l2_warning() -> None:
    op = parse_spec("gemm 1 4096 4096 bf16")  # 32 MiB of weights: fits the toy's 40 MiB L2
    bound = analyze(op, TOY).time_lower_bound
    fast = analyze(op, TOY, measured_time=bound / 1.8)
    assert fast.measured.fraction_of_roof == pytest.approx(1.8)
    assert fast.measured.achieved_bandwidth == pytest.approx(1.8e12)
    assert any(w.startswith("above the roof") and "fits in L2" in w for w in fast.warnings)
    ok = analyze(op, TOY, measured_time=bound / 0.9)
    assert ok.measured.fraction_of_roof == pytest.approx(0.9)
    assert not any(w.startswith("above the roof") for w in ok.warnings)
    slow = analyze(op, TOY, measured_time=bound * 4)
    assert any(w.startswith("far below the roof") for w in slow.warnings)


def test_above_roof_without_l2_residency_blames_the_counting() -> None:
    op = parse_spec("gemm 1 16384 16384 bf16")  # 512 MiB: far above L2
    a = analyze(op, TOY, measured_time=analyze(op, TOY).time_lower_bound / 1.5)
    assert any(w.startswith("above the roof") and "under-counted" in w for w in a.warnings)


def test_tiny_kernel_warnings() -> None:
    a = analyze(parse_spec("gemm 256 256 256 fp16"), lookup_device("h100"))
    assert any(w.startswith("tiny kernel") and "4.50 µs" in w for w in a.warnings)  # H100's launch from seed 000 §5
    t = analyze(parse_spec("gemm 256 256 256 fp16"), lookup_device("h100"), measured_time=4.5e-6)
    assert any(w.startswith("launch-bound") for w in t.warnings)


def test_small_m_and_alignment_warnings() -> None:
    a = analyze(parse_spec("gemm 4 8200 8192 bf16"), TOY)
    assert any(w.startswith("small M") for w in a.warnings)
    assert any(w.startswith("alignment") for w in a.warnings)
    b = analyze(parse_spec("gemm 8 8192 8192 bf16"), TOY)
    assert not any(w.startswith(("small M", "alignment")) for w in b.warnings)


def test_missing_roof_names_what_the_device_has() -> None:
    with pytest.raises(NoRoof) as err:
        analyze(parse_spec("gemm 1 8192 8192 fp8"), lookup_device("v100-32"))
    msg = str(err.value)
    assert "v100-32 has no fp8-tc roof" in msg and "fp16-tc" in msg
    with pytest.raises(NoRoof, match="no l2 bandwidth"):
        analyze(parse_spec("gemm 1 8192 8192 bf16 level=l2"), lookup_device("h100"))


def test_bad_measured_time_is_rejected() -> None:
    with pytest.raises(ValueError):
        analyze(parse_spec("gemm 1 2 3"), TOY, measured_time=0)


def test_json_form_is_si_and_complete() -> None:
    d = analyze(parse_spec("gemm 1 8192 8192 bf16"), lookup_device("h100"), measured_time=50e-6).to_dict()
    for key in ("op", "device", "path", "flops", "bytes", "intensity", "peak_flops", "bandwidth", "ridge",
                "regime", "attainable_flops", "time_lower_bound_s", "advice", "warnings", "measured"):
        assert key in d
    assert d["regime"] == "memory"
    assert d["bandwidth"] == pytest.approx(3084.845966636554e9)
    assert set(d["measured"]) == {"time_s", "achieved_flops", "achieved_bandwidth", "fraction_of_roof"}
    assert d["measured"]["time_s"] == 50e-6
