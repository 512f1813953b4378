"""What each ceiling was measured under: the winning point's clock and throttling, said in one line."""

from __future__ import annotations

import dataclasses

from rooftop.models.calibrate import calibrate
from rooftop.models.conditions import capped_line, causes
from rooftop.models.units import MiB

from test_calibrate import CPU, GPU, gemm, stream


def ran(sample, mhz: float, throttle: list[str] = (), snapshots: int = 2):
    """The sample with the conditions the telemetry sampler attaches (an H200 capped at 700 W)."""
    telemetry = {"snapshots": snapshots, "mean_sm_clock_mhz": mhz, "sm_clock_max_mhz": 1980.0,
                 "max_temperature_c": 58.0, "mean_power_w": 620.0, "power_limit_w": 700.0, "throttle": list(throttle)}
    return dataclasses.replace(sample, conditions={**telemetry, **sample.conditions})


def h200_run():
    return [
        ran(gemm("bf16", 2048, 8192, 8192, 689, "bf16-tc"), 1747.5, ["power cap"]),
        ran(gemm("bf16", 8192, 8192, 8192, 650, "bf16-tc"), 1590.0, ["power cap"]),  # capped, but not the winner
        ran(gemm("fp8", 2048, 8192, 8192, 1297, "fp8-tc"), 1627.5, ["power cap"]),
        ran(gemm("fp64", 8192, 8192, 8192, 55.4, "fp64-tc"), 1980.0),
        ran(gemm("tf32", 8192, 8192, 8192, 351, "tf32-tc"), 1410.0, ["hw thermal", "power cap"]),
        ran(stream("read_reduce", 512 * MiB, 4363), 1980.0),
    ]


def test_each_ceiling_keeps_the_conditions_of_the_point_that_set_it():
    p = calibrate(h200_run(), GPU).profile
    conds = p.extra["ceiling_conditions"]
    assert conds["bf16-tc"]["mean_sm_clock_mhz"] == 1747.5 and conds["bf16-tc"]["throttle"] == ["power cap"]
    assert conds["fp8-tc"]["power_limit_w"] == 700.0
    assert conds["dram"] == {k: v for k, v in conds["fp64-tc"].items()}  # both at full clock, not throttled
    assert "throttle" not in conds["dram"]  # an empty list is not kept
    assert p.to_dict()["extra"]["ceiling_conditions"] == conds  # in the JSON and the store


def test_one_line_names_the_capped_ceilings_and_their_clocks():
    p = calibrate(h200_run(), GPU).profile
    assert capped_line(p) == (  # in the profile's order of paths
        "tf32-tc measured power-capped and thermally capped (700 W) at 1.41 GHz SM (max 1.98 GHz); "
        "bf16-tc, fp8-tc measured power-capped (700 W) at 1.63–1.75 GHz SM (max 1.98 GHz)"
    )
    assert causes({"throttle": ["sw thermal", "hw thermal"]}) == ("thermally capped",)


def test_nothing_to_say_without_gpu_telemetry_or_throttling():
    cpu = calibrate([ran(stream("read_reduce", 256 * MiB, 30), 0.0, snapshots=0)], CPU).profile
    assert "ceiling_conditions" not in cpu.extra and capped_line(cpu) == ""
    calm = calibrate([ran(gemm("bf16", 8192, 8192, 8192, 700, "bf16-tc"), 1980.0)], GPU).profile
    assert calm.extra["ceiling_conditions"]["bf16-tc"]["mean_sm_clock_mhz"] == 1980.0
    assert capped_line(calm) == ""
