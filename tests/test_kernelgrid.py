"""A trace with no deviceProperties still says its GPU's SM count: CUPTI's blocks per SM is a kernel's grid
blocks ÷ the SM count. The 2023 A100 job's traces (no deviceProperties) read 108 SMs, an A100; before, they
got h100's roofs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from rooftop.models.trace.kernelgrid import grid_blocks, units_of
from rooftop.store.tracefile import load_trace
from rooftop.tui.cli import main

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("grid", "blocks"), [([2400, 1, 1], 2400), ([8, 4, 2], 64), ([7], 7), ([0, 1, 1], None),
                                              ([1.5, 1, 1], None), ("2400", None), ([True, 1, 1], None),
                                              ([1, 1, 1, 1], None), (None, None)])
def test_grid_blocks(grid, blocks):
    assert grid_blocks(grid) == blocks


def test_the_count_the_kernels_agree_on():
    a100 = [([2400, 1, 1], 22.222221), ([320, 1, 1], 2.9629629), ([1, 1, 1], 0.009259259)]
    assert units_of(a100) == 108
    assert units_of(a100 * 9 + [([132, 1, 1], 1.0)]) == 108  # 27 of 28 agree
    assert units_of(a100 + [([132, 1, 1], 1.0)] * 2) is None  # two devices, or records that are not CUPTI's
    assert units_of([([10, 1, 1], 0.0), ([10, 1, 1], "x"), ("bad", 1.0), ([10, 1, 1], 1e-9)]) is None
    assert units_of([]) is None


@pytest.mark.parametrize("rank", [0, 1])
def test_the_a100_jobs_traces_read_108_sms(rank):
    assert load_trace(DATA / "real-traces" / f"trace_filter_sampled_rank-{rank}.json.gz").kernel_units == 108


def test_a_trace_with_device_properties_reads_the_same_count_from_its_kernels():
    for name in ("real-traces/nccl_parser_config_nccl_data.json.gz", "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz",
                 "real-traces/more/v100-resnet50-train-2021-legacy.json.gz"):
        t = load_trace(DATA / name)
        assert t.kernel_units == t.device_props["numSms"], name


def _trace(tmp_path: Path, sms: int, props: bool) -> Path:
    kernel = {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
              "args": {"stream": 7, "correlation": 1, "grid": [4 * sms, 1, 1], "block": [256, 1, 1],
                       "blocks per SM": 4.0}}
    doc = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 8,
                            "args": {"External id": 1}},
                           {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2,
                            "dur": 2, "args": {"correlation": 1, "External id": 1}}, kernel]}
    if props:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H200", "numSms": 132}]
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return p


def test_profile_places_a_trace_by_its_kernels_sm_count_and_says_how(tmp_path, capsys):
    assert main(["profile", "--trace", str(_trace(tmp_path, 108, False)), "--json", "--no-save"]) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)["summary"]
    assert summary["device"] == "a100"
    assert "its SM count is its kernels' (launch grid ÷ blocks per SM)" in summary["device_note"]
    assert "108 SMs fit a100, a100-80g-ds, a800-ds; placed on a100" in summary["device_note"]
    assert "rooftop profile: using a100: " in cap.err


def test_device_properties_win_over_the_kernels_count(tmp_path, capsys):
    assert main(["profile", "--trace", str(_trace(tmp_path, 108, True)), "--json", "--no-save"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["device"] == "h200"


def test_a_count_no_gpu_has_is_an_unknown_gpu_refused_in_one_line(tmp_path, capsys):
    assert main(["profile", "--trace", str(_trace(tmp_path, 7, False)), "--json", "--no-save"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "7 SMs" in err and "give -d ID" in err


def test_the_placement_rule_by_sm_count_is_pure():
    from rooftop.models.devicefamily import place_by_units

    a100 = place_by_units(108)
    assert a100.profile is not None and a100.profile.id == "a100" and "a800-ds" in a100.note
    unknown = place_by_units(7)
    assert unknown.profile is None and unknown.closest
