"""--all-gpus on real GPUs (marked `gpu`, with the fleet stage of scripts/gpu-check.sh). Skipped without CUDA.

The wall-time target (at most 1.2× one GPU's quick plan) is a benchmark: `-m "gpu and bench"` prints it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

ENV = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}


def rooftop(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rooftop.tui.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def test_all_gpus_one_row_per_gpu(tmp_path):
    out = rooftop("measure", "--all-gpus", "--only", "launch,bandwidth", "--json", "--db", str(tmp_path / "f.db"))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    n = torch.cuda.device_count()
    assert [r["device"] for r in doc["rows"]] == [f"cuda:{i}" for i in range(n)]
    assert all(r["ceilings"].get("B dram", 0) > 0 and r["ceilings"].get("launch", 0) > 0 for r in doc["rows"])
    assert all(r["run_id"] for r in doc["rows"])  # each GPU's run kept as it measured


@pytest.mark.bench
def test_bench_all_gpus_wall_time_against_one_gpu(tmp_path):
    db = str(tmp_path / "f.db")
    one = json.loads(rooftop("measure", "--device", "cuda:0", "--json", "--db", db).stdout)
    every = json.loads(rooftop("measure", "--all-gpus", "--json", "--db", db).stdout)
    ratio = every["wall_s"] / one["wall_s"]
    shared = [f["text"] for f in every["flags"] if f["kind"] == "shared"]
    print(f"\n--all-gpus on {len(every['rows'])} GPUs: {every['wall_s']:.1f} s; one GPU's quick plan "
          f"{one['wall_s']:.1f} s: {ratio:.2f}x (target 1.2x); lowered by sharing: {shared or 'nothing'}")
    assert one["wall_s"] > 0 and every["wall_s"] > 0  # both plans ran; the ratio is a figure, not a gate
    assert len(every["rows"]) == torch.cuda.device_count()
    assert not [f for f in every["flags"] if f["kind"] in ("lost", "failed")]  # every GPU gave its row


def test_all_gpus_stopped_by_sigterm_keeps_what_each_gpu_measured(tmp_path):
    """SIGTERM mid-measurement: each GPU's process hands in what it measured (its run kept cancelled, with its
    points), rooftop exits 143 with one line saying so, and no GPU process is left."""
    import signal
    import time

    import psutil

    from helpers.procs import family, finish, none_left

    db = tmp_path / "f.db"
    proc = subprocess.Popen([sys.executable, "-m", "rooftop.tui.cli", "measure", "--all-gpus", "--plan", "full",
                             "--json", "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    try:
        top = psutil.Process(proc.pid)
        deadline = time.monotonic() + 300
        while len([k for k in top.children() if "spawn_main" in " ".join(k.cmdline())]) < torch.cuda.device_count():
            assert proc.poll() is None and time.monotonic() < deadline, "the GPUs' processes never started"
            time.sleep(0.2)
        time.sleep(20)  # torch and CUDA start in ~5 s; the full plan runs for minutes: each GPU has points by now
        everything = family(top)
        proc.send_signal(signal.SIGTERM)
    finally:
        out, err = finish(proc)
    assert proc.returncode == 128 + signal.SIGTERM, err
    doc = json.loads(out)
    assert doc["stopped_by"] == "SIGTERM" and doc["run_id"]
    assert all(r["status"] == "cancelled" and r["run_id"] for r in doc["rows"])
    (line,) = [x for x in err.splitlines() if "stopped by SIGTERM" in x]
    assert f"kept as run {doc['run_id'][:8]}" in line
    assert none_left(everything) == []
