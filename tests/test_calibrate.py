"""Calibration from synthetic samples: the reference's definitions of B and F."""

from __future__ import annotations

import pytest

from rooftop.models.calibrate import Hardware, calibrate, case_of, windows
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.units import KiB, MiB

GPU = Hardware(kind="gpu", name="NVIDIA H200", vendor="nvidia", memory_bytes=141e9, units=132, l2_bytes=60 * MiB)
CPU = Hardware(kind="cpu", name="AMD EPYC", l2_bytes=32 * MiB, private_cache_bytes=1 * MiB)


def stats(t: float, iqr: float = 0.01) -> TimeStats:
    return TimeStats(median_s=t, p10_s=t * 0.99, p90_s=t * 1.01, min_s=t * 0.98, iqr_ratio=iqr, repeats=7, calls=10)


def stream(family: str, ws: float, gbps: float, iqr: float = 0.01) -> Sample:
    return Sample(family, "fp32", {"n": int(ws // 4)}, 0.0, ws, ws, stats=stats(ws / (gbps * 1e9), iqr))


def gemm(dtype: str, m: int, n: int, k: int, tflops: float, path: str, iqr: float = 0.01, cache: str = "warm") -> Sample:
    w = 2.0 * m * n * k
    q = 2.0 * (m * k + k * n + m * n)
    return Sample("gemm", dtype, {"m": m, "n": n, "k": k}, w, q, q, cache, stats(w / (tflops * 1e12), iqr), path)


def fma(dtype: str, reps: int, n: int, tflops: float, method: str = "triton") -> Sample:
    size = 4 if dtype == "fp32" else 8
    w = 2.0 * reps * n
    q = 2.0 * n * size
    return Sample("fma", dtype, {"n": n, "reps": reps}, w, q, q, "streaming", stats(w / (tflops * 1e12)),
                  f"{dtype}-fma", conditions={"method": method})


def test_windows_follow_the_reference():
    g = windows(GPU)
    assert g.dram_min == 256 * MiB and g.cache_max == 30 * MiB
    assert windows(Hardware("gpu", "B300", l2_bytes=126.5 * MiB)).dram_min == 4 * 126.5 * MiB
    c = windows(CPU)
    assert c.dram_min == 128 * MiB and c.cache_min == MiB and c.cache_max == 16 * MiB


def test_bandwidth_levels_from_the_sweep():
    samples = [
        stream("read_reduce", 4 * KiB, 2),  # launch-overhead region
        stream("read_reduce", 8 * MiB, 9000),  # L2 plateau
        stream("copy", 16 * MiB, 9500),
        stream("read_reduce", 128 * MiB, 5200),  # above L2 but below the 256 MiB floor: not DRAM
        stream("read_reduce", 512 * MiB, 4295),
        stream("copy", 512 * MiB, 3900),
        stream("triad", 512 * MiB, 4400, iqr=0.3),  # unstable: left out
    ]
    cal = calibrate(samples, GPU)
    b = cal.profile.bandwidth
    assert b["dram"].value == pytest.approx(4295e9) and b["dram"].case == f"read_reduce:{512 * MiB}"
    assert b["dram"].source == "measured" and b["dram"].stable
    assert b["l2"].value == pytest.approx(9500e9) and b["l2"].case == f"copy:{16 * MiB}"
    assert [case_of(s) for s in cal.unstable] == [f"triad:{512 * MiB}"]
    assert cal.profile.extra["unstable"] == [f"triad:{512 * MiB}"]


def test_only_unstable_points_give_a_ceiling_marked_unstable():
    cal = calibrate([stream("read_reduce", 512 * MiB, 4000, iqr=0.2)], GPU)
    assert cal.profile.bandwidth["dram"].value == pytest.approx(4000e9)
    assert not cal.profile.bandwidth["dram"].stable


def test_peaks_per_path_from_gemms_and_fma_plateaus():
    samples = [
        gemm("bf16", 8192, 8192, 8192, 790, "bf16-tc"),
        gemm("bf16", 2048, 8192, 8192, 815, "bf16-tc"),
        gemm("bf16", 4096, 4096, 4096, 900, "bf16-tc", iqr=0.5),  # unstable
        gemm("bf16", 4096, 4096, 4096, 950, "bf16-tc", cache="cold"),  # cold: not a warm ceiling
        gemm("fp32", 8192, 8192, 8192, 51, "fp32-matmul"),
        fma("fp32", 1, 1 << 26, 1.0),
        fma("fp32", 256, 1 << 26, 60.1),
        fma("fp32", 1024, 1 << 26, 62.2),
        fma("fp64", 1024, 1 << 25, 32.9),
    ]
    cal = calibrate(samples, GPU)
    p = cal.profile
    assert p.source == "measured" and p.kind == "gpu" and p.l2_bytes == 60 * MiB
    assert p.F("bf16-tc") == pytest.approx(815e12) and p.peak["bf16-tc"].case == "2048x8192x8192"
    assert p.F("fp32-matmul") == pytest.approx(51e12)
    assert p.F("fp32-fma") == pytest.approx(62.2e12) and p.peak["fp32-fma"].case == f"fma:fp32:reps=1024:{1 << 26}"
    assert p.F("fp64-fma") == pytest.approx(32.9e12)
    assert not cal.notes  # the Triton sweep measures the FMA units: nothing to caveat


def test_fma_at_r1_counts_as_a_data_moving_kernel():
    n = 1 << 26  # 512 MiB read + written in fp32
    s = fma("fp32", 1, n, 4300e9 * 2 / 8 / 1e12)  # 2 FLOP per 8 bytes at 4300 GB/s
    cal = calibrate([s, stream("copy", 512 * MiB, 3900)], GPU)
    assert cal.profile.B("dram") == pytest.approx(4300e9)
    assert cal.profile.bandwidth["dram"].case.startswith("fma:fp32:reps=1:")


def test_cpu_chain_sweep_is_named_and_caveated():
    chain_r1 = fma("fp32", 1, 1 << 25, 0.01, method="torch-chain")  # 40 GB/s from cache-sized chunks
    cal = calibrate([fma("fp32", 16, 1 << 24, 0.02, method="torch-chain"), chain_r1,
                     stream("read_reduce", 256 * MiB, 20)], CPU)
    assert cal.profile.B("dram") == pytest.approx(20e9)  # the chain is no DRAM candidate
    assert cal.profile.peak["fp32-fma"].case == f"fma-torch-chain:fp32:reps=16:{1 << 24}"
    assert any("not the cores' FMA peak" in n for n in cal.notes)
    assert "not the cores' FMA peak" in cal.profile.notes


def test_cpu_dram_needs_four_times_the_llc_else_says_so():
    cal = calibrate([stream("read_reduce", 4 * MiB, 60), stream("read_reduce", 128 * MiB, 20)], CPU)
    assert cal.profile.B("dram") == pytest.approx(20e9) and cal.profile.B("llc") == pytest.approx(60e9)
    short = calibrate([stream("read_reduce", 64 * MiB, 25)], CPU)
    assert short.profile.B("dram") == pytest.approx(25e9)
    assert "below the 128 MiB" in short.notes[0]
    assert "dram" not in calibrate([stream("read_reduce", 8 * MiB, 60)], CPU).profile.bandwidth


def test_write_is_never_b_and_is_reported_beside_it():
    """An H200's quick run: the memset wrote at 4580 GB/s, the best read was 4363 (the reference's B)."""
    samples = [
        stream("write", 512 * MiB, 4580), stream("read_reduce", 512 * MiB, 4363), stream("copy", 512 * MiB, 4200),
        stream("write", 8 * MiB, 1061), stream("read_reduce", 8 * MiB, 9000),
        stream("write", 16 * MiB, 12000),  # inside the cache, but a write: neither B l2 nor the write figure
    ]
    p = calibrate(samples, GPU).profile
    assert p.B("dram") == pytest.approx(4363e9) and p.bandwidth["dram"].case == f"read_reduce:{512 * MiB}"
    assert p.bandwidth["l2"].case == f"read_reduce:{8 * MiB}"
    assert p.extra["write_bandwidth"] == pytest.approx(4580e9)
    assert p.extra["write_case"] == f"write:{512 * MiB}" and p.extra["write_stable"] is True
    only_write = calibrate([stream("write", 512 * MiB, 4580)], GPU).profile
    assert "dram" not in only_write.bandwidth and only_write.extra["write_bandwidth"] == pytest.approx(4580e9)
    assert "write_bandwidth" not in calibrate([stream("read_reduce", 512 * MiB, 4363)], GPU).profile.extra


def test_cpu_dram_points_a_host_cache_still_holds_are_not_b():
    """A VM reports 32 MiB of LLC over a far larger host cache: 1 GiB can still run from cache. B dram
    comes from the two largest working sets when they agree within 10%; else from the largest alone,
    said to be an upper estimate."""
    samples = [
        stream("read_reduce", 256 * MiB, 95), stream("triad", 256 * MiB, 80),  # the host's cache
        stream("read_reduce", 1024 * MiB, 47),  # the plateau: within 10% of the largest set
        stream("read_reduce", 4096 * MiB, 45), stream("triad", 4096 * MiB, 49),
        stream("write", 256 * MiB, 70), stream("write", 4096 * MiB, 20),
    ]
    cal = calibrate(samples, CPU)
    p = cal.profile
    assert p.B("dram") == pytest.approx(49e9) and p.bandwidth["dram"].case == f"triad:{4096 * MiB}"
    assert "dram_upper_estimate" not in p.extra and not any("upper estimate" in n for n in cal.notes)
    assert p.extra["write_bandwidth"] == pytest.approx(20e9)


def test_cpu_write_figure_comes_from_the_sets_b_came_from():
    """A CPU quick run writes no larger than 256 MiB, which a VM's host cache can serve: that memset is
    not shown beside a B taken at 1 and 4 GiB. Where the full plan wrote at B's sets, that is the figure."""
    quick = [
        stream("write", 256 * MiB, 70), stream("read_reduce", 256 * MiB, 95),
        stream("read_reduce", 1024 * MiB, 47), stream("triad", 1024 * MiB, 46),
        stream("read_reduce", 4096 * MiB, 45), stream("triad", 4096 * MiB, 49),
    ]
    p = calibrate(quick, CPU).profile
    assert p.B("dram") == pytest.approx(49e9) and "write_bandwidth" not in p.extra
    full = calibrate(quick + [stream("write", 1024 * MiB, 24), stream("write", 4096 * MiB, 21)], CPU).profile
    assert full.extra["write_bandwidth"] == pytest.approx(24e9) and full.extra["write_case"] == f"write:{1024 * MiB}"
    only_write = calibrate([stream("write", 256 * MiB, 70)], CPU).profile  # no B: write's own window
    assert only_write.extra["write_bandwidth"] == pytest.approx(70e9)


def test_cpu_dram_from_a_curve_still_falling_is_an_upper_estimate():
    """The review's run: the 1 GiB sets ran at 75 GB/s from the host's cache, 4 GiB at 49. B is the
    largest set's, and the run says it is an upper estimate (a larger set might be slower still)."""
    samples = [stream("triad", 1024 * MiB, 75), stream("read_reduce", 4096 * MiB, 49)]
    cal = calibrate(samples, CPU)
    assert cal.profile.B("dram") == pytest.approx(49e9)
    assert cal.profile.extra["dram_upper_estimate"] is True
    (note,) = [n for n in cal.notes if "upper estimate" in n]
    assert "4096 MiB at 49.0 GB/s" in note and "1024 MiB at 75.0 GB/s" in note
    # one set alone: nothing to agree with, and nothing flagged
    assert "dram_upper_estimate" not in calibrate(samples[1:], CPU).profile.extra


def test_cpu_dram_larger_set_faster_is_a_busy_machine_not_a_cache():
    """A run on this VM: 4 GiB at 29.9 GB/s, 1 GiB at 26.4. A cache makes the smaller set faster, never the
    larger: B is the largest set's, not called an upper estimate, and the note says the machine was busy."""
    cal = calibrate([stream("copy", 1024 * MiB, 26.4), stream("copy", 4096 * MiB, 29.9)], CPU)
    assert cal.profile.B("dram") == pytest.approx(29.9e9)
    assert "dram_upper_estimate" not in cal.profile.extra
    (note,) = [n for n in cal.notes if "B dram from the largest" in n]
    assert "the larger faster" in note and "busy" in note and "upper estimate" not in note


def test_skipped_launch_and_points_above_the_roof():
    skipped = Sample("gemm", "fp8", {"m": 1, "n": 8192, "k": 8192}, 1.0, 1.0, skipped="fp8 needs cc ≥ 8.9")
    launch = Sample("launch", "fp32", {"n": 1}, 1.0, 8.0, 4.0, stats=stats(4.5e-6))
    # a GEMV at I ≈ 1 FLOP/B running at 5 TFLOP/s on a 4.3 TB/s slope: above B·I → flagged
    small = gemm("bf16", 1, 8192, 8192, 5.0, "bf16-tc")
    cal = calibrate([skipped, launch, small, gemm("bf16", 8192, 8192, 8192, 800, "bf16-tc"),
                     stream("read_reduce", 512 * MiB, 4300)], GPU)
    assert cal.skipped == (skipped,)
    assert cal.profile.launch_overhead.value == pytest.approx(4.5e-6)
    assert cal.profile.launch_overhead.case == "launch:fp32:n=1"
    assert cal.above_roof == (small,)
    d = cal.profile.to_dict()
    assert set(d["bandwidth"]) == {"dram"} and set(d["peak"]) == {"bf16-tc"}


def test_a_stable_point_on_the_slope_never_stands_for_the_fma_roof():
    """The review's CPU run: R = 1 stable at 2.1 GFLOP/s, the plateau (R ≥ 16) all noisy."""
    n = 1 << 23

    def noisy(reps: int, gflops: float) -> Sample:
        s = fma("fp64", reps, n, gflops / 1e3, method="torch-chain")
        return Sample(s.family, s.dtype, s.shape, s.flops, s.bytes, s.footprint_bytes, s.cache,
                      stats(s.stats.median_s, iqr=0.2), s.path, conditions=s.conditions)

    samples = [fma("fp64", 1, n, 2.14e-3, method="torch-chain"), noisy(4, 4.9), noisy(16, 8.7), noisy(64, 9.26)]
    roof = calibrate(samples, CPU).profile.peak["fp64-fma"]
    assert roof.value == pytest.approx(9.26e9) and roof.case.endswith(f"reps=64:{n}") and not roof.stable
    # with a stable plateau point, that one is the roof, stable
    samples.append(fma("fp64", 32, n, 8.5e-3, method="torch-chain"))
    roof = calibrate(samples, CPU).profile.peak["fp64-fma"]
    assert roof.value == pytest.approx(8.5e9) and roof.stable


def test_a_noisy_spike_on_the_plateau_does_not_push_its_stable_points_out():
    """Review: stable R = 16…64 at 50–51 GFLOP/s and one noisy R = 128 at 60 give the stable 51."""
    n = 1 << 24
    spike = fma("fp32", 128, n, 60e-3, method="torch-chain")
    spike = Sample(spike.family, spike.dtype, spike.shape, spike.flops, spike.bytes, spike.footprint_bytes,
                   spike.cache, stats(spike.stats.median_s, iqr=0.3), spike.path, conditions=spike.conditions)
    samples = [fma("fp32", 1, n, 2e-3, method="torch-chain"), fma("fp32", 16, n, 50e-3, method="torch-chain"),
               fma("fp32", 32, n, 51e-3, method="torch-chain"), fma("fp32", 64, n, 50.5e-3, method="torch-chain"),
               spike]
    roof = calibrate(samples, CPU).profile.peak["fp32-fma"]
    assert roof.value == pytest.approx(51e9) and roof.stable and "reps=32" in roof.case
