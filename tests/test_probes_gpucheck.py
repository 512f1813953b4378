"""scripts/gpu-check.sh and its Python half, on the CPU: stages that fail or time out do not cost the figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu-check.sh"
HELPER = ROOT / "scripts" / "gpu_check.py"

sys.path.insert(0, str(HELPER.parent))
import gpu_check  # noqa: E402 - the script's helper, imported by path
from inprocess import run_main  # noqa: E402


def test_a_failing_or_hanging_stage_does_not_stop_the_script_or_cost_the_figures(tmp_path):
    """The measurement outlives its limit (SIGTERM → like Ctrl-C): its JSON still comes, the table shows
    what was measured, the later stages run, the pytest stage fails, and the exit status says so."""
    env = {
        **os.environ,
        "ROOFTOP_GPU_CHECK_OUT": str(tmp_path / "measure.json"),
        "ROOFTOP_GPU_CHECK_MEASURE_S": "8",
        "ROOFTOP_GPU_CHECK_MEASURE_ARGS": "--device cpu --plan full --only bandwidth,gemm",  # minutes on a CPU
        "ROOFTOP_GPU_CHECK_PYTEST_ARGS": "-m gpu tests/no_such_test_file.py",
    }
    run = subprocess.run(["bash", str(SCRIPT), sys.executable], env=env, capture_output=True, text=True, timeout=240)
    out = run.stdout
    assert run.returncode == 1, run.stderr[-2000:]
    summary = out[out.index("== summary"):]
    for name in ("preflight", "measure", "protocol", "report", "watch", "nvml", "gpm", "pytest"):
        assert f"\n{name}" in summary, summary
    assert "protocol   FAILED (exit 1)" in summary  # plain torch's read_reduce needs a GPU
    assert "plain torch read_reduce: not measured" in out
    assert "measure    TIMED OUT after 8 s" in summary
    assert "report     ok" in summary and "pytest     FAILED (exit 4)" in summary
    doc = json.loads((tmp_path / "measure.json").read_text())
    assert doc["status"] == "cancelled" and doc["interrupted"] and doc["samples"]
    assert "run: cancelled" in out and "cut short" in out
    assert f"{len(doc['samples'])} samples, " in out  # the table is built from the points measured in time


def _measure_cpu_launch(tmp_path: Path) -> tuple[Path, Path]:
    """`rooftop measure --json` of the launch overhead (in this process: the report reads only its files)."""
    db, js = tmp_path / "rooftop.db", tmp_path / "measure.json"
    out = run_main("measure", "--device", "cpu", "--only", "launch", "--json", "--db", str(db))
    assert out.returncode == 0, out.stderr
    js.write_text(out.stdout)
    return js, db


def test_report_reads_the_measure_json_else_the_store(tmp_path, capsys):
    js, db = _measure_cpu_launch(tmp_path)
    assert gpu_check.report(str(js), str(db)) == 0
    out = capsys.readouterr().out
    assert "run: complete" in out and "launch overhead" in out and "1 samples, 0 skipped" in out
    # killed outright: no JSON, but the store has the samples, committed one by one
    assert gpu_check.report(str(tmp_path / "never-written.json"), str(db)) == 1
    out = capsys.readouterr().out
    assert "no measure output to read" in out and "from the store: run" in out
    assert gpu_check.report(str(tmp_path / "never-written.json"), str(tmp_path / "empty.db")) == 1
    assert "has no run either" in capsys.readouterr().out


def test_table_against_the_h200_reference():
    doc = {
        "status": "complete", "wall_s": 21.5, "interrupted": False, "throttled": [],
        "device_info": {"name": "NVIDIA H200", "compute_capability": "9.0", "l2_bytes": 62914560},
        "profile": {
            "bandwidth": {"dram": 4.2e12}, "peak": {"bf16-tc": 8.0e14, "fp8-tc": 1.2e15},
            "launch_overhead": 6.5e-6, "extra": {"launch_graph_s": 1.5e-6},
            "ceilings": {"bandwidth": {"dram": {"case": "read_reduce:536870912", "stable": True}},
                         "peak": {"bf16-tc": {"case": "8192x8192x8192", "stable": True},
                                  "fp8-tc": {"case": "8192x8192x8192", "stable": False}}},
        },
        "samples": [{"skipped": None}, {"skipped": "torch._int_mm needs M > 16 and K, N multiples of 8"}],
    }
    text = "\n".join(gpu_check.table(doc))
    assert "reference profile: h200" in text
    assert "B dram                 4200.0       4295.1   0.978  read_reduce:536870912  [GB/s]" in text
    assert "F bf16-tc               800.0        815.0   0.982  8192x8192x8192  [TFLOP/s]" in text
    assert "(unstable)" in text
    assert "goal ≥ 0.97 of the reference: B 0.978 ok, bf16 F 0.982 ok" in text
    assert "launch overhead 6.50 µs; graph 1.50 µs per kernel" in text
    assert "2 samples, 1 skipped" in text and "  - torch._int_mm needs M > 16" in text
    partial = gpu_check.table({"status": "cancelled", "interrupted": True, "device_info": {"name": "NVIDIA H200"}})
    assert any("cut short" in line for line in partial)
    assert any("goal: not judged" in line for line in partial)


def test_the_hierarchy_against_plain_torch_read_reduce_and_the_goals(tmp_path, capsys):
    """The H200 of the reference session: B dram 4363 GB/s from a reading kernel against plain torch's
    read_reduce at 2 GiB (4363: 1.000, within 0.97–1.06), l2 10.9 TB/s (≥ 9), l1 25.9 TB/s within
    20 TB/s and the physical limit (132 SMs × 128 B × 1980 MHz = 33.45 TB/s), and a flagged level."""
    doc = {
        "status": "complete", "device_info": {"name": "NVIDIA H200", "units": 132, "clocks_mhz": {"sm_max": 1980.0}},
        "profile": {"bandwidth": {"dram": 4.363e12, "l2": 10.9e12, "l1": 25.9e12},
                    "extra": {"flagged": {"llc": {"value": 1e12, "case": "read_reduce:1", "why": "slower"}}}},
    }
    proto = {"read_reduce": {"1073741824": 4.276e12, "2147483648": 4.363e12}, "best": 4.363e12}
    text = "\n".join(gpu_check.table(doc, proto))
    assert "B dram 4.363 / plain torch read_reduce ≥ 1 GiB 4.363 = 1.000 (goal 0.97–1.06: ok)" in text
    assert "B l2 10.900 (goal ≥ 9: ok)" in text and "B l1 25.900 (goal 20–33.4: ok)" in text
    assert "flagged: B llc 1.000 (read_reduce:1): slower" in text
    # the quick plan before the cache probes: B dram from a memset, the L2 launch-bound, no L1
    doc["profile"] = {"bandwidth": {"dram": 4.58e12, "l2": 1.06e12}}
    text = "\n".join(gpu_check.table(doc, proto))
    assert "= 1.050 (goal 0.97–1.06: ok)" in text and "B l2 1.060 (goal ≥ 9: OUTSIDE)" in text
    assert "B l1 - (goal 20–33.4: not measured)" in text
    # another card: the L1 is held against its physical limit only
    other = {"device_info": {"name": "Lab GPU", "units": 100, "clocks_mhz": {"sm_max": 1000.0}},
             "profile": {"bandwidth": {"l1": 13e12}}}
    text = "\n".join(gpu_check.table(other))
    assert "B l1 13.000 (goal ≤ 12.8 (SMs × 128 B × clock): OUTSIDE)" in text
    assert "plain torch read_reduce: not measured (no protocol run)" in text
    # the report reads the protocol's file, and says so in one line when it cannot
    js = tmp_path / "m.json"
    js.write_text(json.dumps(doc))
    (tmp_path / "p.json").write_text(json.dumps(proto))
    assert gpu_check.report(str(js), None, str(tmp_path / "p.json")) == 0
    assert "plain torch read_reduce ≥ 1 GiB 4.363" in capsys.readouterr().out
    assert gpu_check.report(str(js), None, str(tmp_path / "missing.json")) == 0
    assert "no reference-protocol output to read" in capsys.readouterr().out


def test_the_protocol_needs_a_gpu(tmp_path, capsys):
    assert gpu_check.protocol(str(tmp_path / "p.json")) == 1
    assert "no CUDA device" in capsys.readouterr().out and not (tmp_path / "p.json").exists()


def test_ctrl_c_stops_the_script_at_once_with_the_figures_so_far(tmp_path):
    """Each stage runs in its own process group (timeout's), so the script passes Ctrl-C on: the
    measurement stops like a timeout, the table is printed, the later stages are skipped, nothing is left."""
    import signal
    import time

    env = {**os.environ, "ROOFTOP_GPU_CHECK_OUT": str(tmp_path / "measure.json"), "TMPDIR": str(tmp_path),
           "ROOFTOP_GPU_CHECK_MEASURE_ARGS": "--device cpu --plan full --only bandwidth,gemm"}  # minutes on a CPU
    from ctrlc import popen_kwargs

    proc = subprocess.Popen(["bash", str(SCRIPT), sys.executable], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, **popen_kwargs())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the measurement has begun once its scratch store exists
        if list(tmp_path.glob("rooftop-gpu-check-*/rooftop.db")):
            break
        time.sleep(0.5)
    time.sleep(3)  # a few points
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    summary = out[out.index("== summary"):]
    assert "interrupted" in summary and "\nwatch" not in summary and "\npytest" not in summary
    doc = json.loads((tmp_path / "measure.json").read_text())
    assert doc["status"] == "cancelled" and doc["samples"]
    assert "run: cancelled" in out


def test_fleet_report_rows_wall_ratio_and_shared_budget(tmp_path, capsys):
    """The fleet stage's report, from a fleet report as `measure --all-gpus --json` prints it."""
    from rooftop.models.fleet import Member, fleet_report
    from rooftop.models.profile import Ceiling, DeviceProfile

    def prof(dram: float) -> DeviceProfile:
        return DeviceProfile("g", "NVIDIA H200", "measured", {"dram": Ceiling(dram, "measured")}, {})

    members = [Member(i, "node", f"cuda:{i}", "NVIDIA H200", prof(4.6e12 if i else 3.9e12),
                      alone=prof(4.6e12)) for i in range(4)]
    doc = {"wall_s": 110.0, "run_id": "f" * 32, **fleet_report(members).to_dict()}
    (tmp_path / "fleet.json").write_text(json.dumps(doc))
    (tmp_path / "one.json").write_text(json.dumps({"wall_s": 100.0}))
    assert gpu_check.fleet(str(tmp_path / "fleet.json"), str(tmp_path / "one.json")) == 0
    out = capsys.readouterr().out
    assert out.count("  rank ") == 4 and "1.10x (within 1.2x)" in out
    assert "1 ceilings lower than the same GPU measured alone" in out and "rank 0" in out
    (tmp_path / "one.json").write_text(json.dumps({"wall_s": 50.0}))
    assert gpu_check.fleet(str(tmp_path / "fleet.json"), str(tmp_path / "one.json")) == 1  # 2.2x: over
