"""The memory hierarchy in calibration: each level from its samples, and the two physical flags."""

from __future__ import annotations

import dataclasses

import pytest

from rooftop.models.calibrate import Hardware, calibrate
from rooftop.models.hierarchy import L1_BYTES_PER_CLOCK, check, l1_limit
from rooftop.models.profile import Ceiling
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.units import KiB, MiB

H200 = Hardware(kind="gpu", name="NVIDIA H200", vendor="nvidia", memory_bytes=141e9, units=132,
                l2_bytes=60 * MiB, max_clock_hz=1.98e9)
CPU = Hardware(kind="cpu", name="AMD EPYC", l2_bytes=32 * MiB, private_cache_bytes=4 * MiB)


def sample(family: str, ws: float, gbps: float, read: float | None = None) -> Sample:
    """A stream point of working set `ws` that read `read` bytes (default: the working set once)."""
    q = read or ws
    t = q / (gbps * 1e9)
    st = TimeStats(median_s=t, p10_s=t, p90_s=t, min_s=t, iqr_ratio=0.01, repeats=7, calls=10)
    return Sample(family, "fp32", {"n": int(ws // 4)}, q / 4, q, ws, stats=st)


def h200_run(l1_gbps: float = 25_000, l2_gbps: float = 9_700) -> list[Sample]:
    return [
        sample("read_reduce", 16 * MiB, 1_061),  # a torch op per working set: launch-bound
        sample("l2_read", 4 * MiB, 10_900, read=4 * 2**30),
        sample("l2_read", 16 * MiB, l2_gbps, read=4 * 2**30),
        sample("l2_read", 120 * MiB, 5_900, read=4 * 2**30),  # past the L2: not an L2 point
        sample("l1_read", 264 * 16 * KiB, l1_gbps, read=4 * 2**30),
        sample("read_reduce", 512 * MiB, 4_300),
    ]


def test_gpu_levels_come_from_the_cache_probes():
    cal = calibrate(h200_run(), H200)
    b = cal.profile.bandwidth
    assert cal.profile.levels() == ["dram", "l2", "l1"]
    assert b["l2"].value == pytest.approx(10_900e9) and b["l2"].case == f"l2_read:{4 * MiB}"
    assert b["l1"].value == pytest.approx(25_000e9) and b["l1"].case == f"l1_read:{264 * 16 * KiB}"
    assert b["dram"].value == pytest.approx(4_300e9)
    assert "flagged" not in cal.profile.extra and cal.notes == ()


def test_the_l1_limit_is_sms_times_128_bytes_times_the_clock():
    assert l1_limit(H200) == pytest.approx(132 * L1_BYTES_PER_CLOCK * 1.98e9)  # 33.45 TB/s
    assert l1_limit(dataclasses.replace(H200, max_clock_hz=None)) is None
    assert l1_limit(CPU) is None


def test_an_l1_above_the_physical_limit_is_flagged_not_a_ceiling():
    cal = calibrate(h200_run(l1_gbps=57_900), H200)  # the naive probe's hoisted loads
    assert "l1" not in cal.profile.bandwidth
    assert cal.profile.bandwidth["l2"].value == pytest.approx(10_900e9)
    flag = cal.profile.extra["flagged"]["l1"]
    assert flag["value"] == pytest.approx(57_900e9) and "above the L1's limit" in flag["why"]
    assert any(n.startswith("B l1 57900 GB/s") and "= 33454 GB/s" in n for n in cal.notes)
    assert "B l1" in cal.profile.notes
    # without a clock there is nothing to hold it against: it stays
    assert "l1" in calibrate(h200_run(l1_gbps=57_900), dataclasses.replace(H200, max_clock_hz=None)).profile.bandwidth


def test_a_level_slower_than_the_level_under_it_is_flagged():
    # only the torch-op sweep: its L2 figure is launch-bound, below HBM (the H200's quick plan before the probes)
    cal = calibrate([sample("read_reduce", 16 * MiB, 1_061), sample("read_reduce", 512 * MiB, 4_580)], H200)
    assert cal.profile.levels() == ["dram"]
    flag = cal.profile.extra["flagged"]["l2"]
    assert flag["case"] == f"read_reduce:{16 * MiB}" and "slower than B dram" in flag["why"]
    assert any(n.startswith("B l2 1061 GB/s") for n in cal.notes)


def test_l1_below_l2_is_flagged_and_l2_is_kept():
    cal = calibrate(h200_run(l1_gbps=8_000), H200)
    assert cal.profile.levels() == ["dram", "l2"]
    assert "slower than B l2" in cal.profile.extra["flagged"]["l1"]["why"]


def test_check_compares_with_the_next_level_that_stands():
    bw = {"dram": Ceiling(4e12, "measured"), "l2": Ceiling(1e12, "measured"), "l1": Ceiling(3e12, "measured")}
    kept, flags = check(bw, H200)
    # l2 is out; l1 is then held against dram, and is slower than it too
    assert list(kept) == ["dram"] and [f.level for f in flags] == ["l2", "l1"]


def test_cpu_levels_private_llc_dram():
    cal = calibrate([
        sample("read_reduce", 1 * MiB, 90),  # ≤ half the private caches: l2
        sample("copy", 8 * MiB, 55),  # above the private caches, ≤ LLC/2: llc
        sample("read_reduce", 32 * MiB, 40),  # neither: the LLC's edge
        sample("read_reduce", 256 * MiB, 20),
    ], CPU)
    b = cal.profile.bandwidth
    assert cal.profile.levels() == ["dram", "llc", "l2"]
    assert (b["l2"].value, b["llc"].value, b["dram"].value) == pytest.approx((90e9, 55e9, 20e9))


def test_cpu_private_level_slower_than_the_llc_is_flagged():
    cal = calibrate([sample("read_reduce", 64 * KiB, 3), sample("copy", 8 * MiB, 55),
                     sample("read_reduce", 256 * MiB, 20)], CPU)
    assert cal.profile.levels() == ["dram", "llc"] and "slower than B llc" in cal.notes[0]
