"""`rooftop comm` end to end: real gloo ranks started by torch's launcher, a real store, real signals."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from ctrlc import popen_kwargs

from rooftop.models.comm import bus_factor
from rooftop.probes.comm import CommError, build_comm_plan, max_world
from rooftop.store.runs import Store

from inprocess import run_main

ENV = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}


def rooftop(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rooftop.tui.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


@pytest.fixture(scope="module")
def comm_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, object]:
    """One real `rooftop comm --json` of 2 gloo ranks (8 B and 1 KiB), kept in its own store: the run that
    the JSON test and the `rooftop show` test both read (each start of the ranks costs seconds)."""
    db = tmp_path_factory.mktemp("comm") / "r.db"
    out = rooftop("comm", "--backend", "gloo", "--world", "2", "--max-size", "1K", "--json", "--db", str(db))
    assert out.returncode == 0, out.stderr
    return out, json.loads(out.stdout), db


def test_comm_json_ratios_fit_and_run_kept(comm_run):
    out, doc, db = comm_run
    assert doc["world"] == 2 and doc["backend"] == "gloo"
    colls = {p["collective"] for p in doc["points"]}
    assert colls == {"allreduce", "allgather", "reducescatter", "broadcast", "sendrecv"}
    for p in doc["points"]:
        assert p["time_s"] > 0, p
        assert p["algbw"] == pytest.approx(p["size_bytes"] / p["time_s"])
        assert p["busbw"] / p["algbw"] == pytest.approx(bus_factor(p["collective"], 2))
    for coll in colls:
        fit = doc["fits"][coll]
        assert fit["alpha_s"] >= 0 and fit["points"] == 2  # 8 B and 1 KiB
    assert "[1/10] allreduce" in out.stderr  # progress on stderr
    with Store.open(db) as store:
        [run] = store.runs()
        assert run.plan == "comm" and run.status == "complete" and run.samples == 10
        assert run.id == doc["run_id"] and run.device["comm"]["world"] == 2
        kept = store.samples(run.id)
    from rooftop.models.comm import comm_points, fit_points
    assert set(fit_points(comm_points(kept))) == colls  # the fits follow from the kept samples
    assert {s.family for s in kept} == colls


def test_comm_table_no_save(tmp_path):
    db = tmp_path / "r.db"
    out = rooftop("comm", "--world", "2", "--max-size", "8", "--no-save", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert "allreduce (gloo, 2 ranks; busbw = algbw × 1)" in out.stdout
    assert "α-β fit: fewer than two sizes measured" in out.stdout  # one size: no fit claimed
    assert not db.exists()


@pytest.mark.parametrize("args, words", [
    (("--world", "999"), "more ranks than allowed: 2 … "),
    (("--world", "1"), "at least 2 ranks"),
    (("--backend", "nccl"), "nccl needs CUDA GPUs"),
    (("--max-size", "huge"), "is not a size"),
    (("--port", "70000"), "is not a TCP port"),
])
def test_comm_bad_input_one_line_exit_2(args, words, no_gpu_env):
    out = run_main("comm", *args, "--no-save")
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and words in out.stderr and "Traceback" not in out.stderr


@pytest.fixture
def no_gpu_env():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: nccl is allowed")


def test_comm_rendezvous_that_cannot_start_exit_2():
    with socket.socket() as held:  # the port is taken: rank 0's store cannot listen on it
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        out = rooftop("comm", "--world", "2", "--max-size", "8", "--port", str(port), "--no-save")
    assert out.returncode == 2, out.stderr
    assert f"could not meet on 127.0.0.1:{port}" in out.stderr
    assert "Traceback" not in out.stderr and "Terminating process" not in out.stderr
    assert [line for line in out.stderr.splitlines() if "error" in line] == [out.stderr.splitlines()[-1]]


def test_world_limits():
    assert max_world("gloo", 0, 2) == 4 and max_world("gloo", 0, 500) == 64 and max_world("nccl", 8, 2) == 8
    with pytest.raises(CommError, match=r"2 … 8 \(one rank per GPU, 8 here\)"):
        build_comm_plan("nccl", 9, gpus=8)
    assert build_comm_plan("gloo", None, cpus=2).world == 2
    assert build_comm_plan("gloo", 4, "full", cpus=2, max_size="1M").sizes[-1] == 2**19  # 8·4^8


def _alive(pids):
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def start_measuring_ranks(tmp_path):
    """`rooftop comm` with 2 gloo ranks, once its first point is measured; the process and its ranks' pids."""
    proc = subprocess.Popen([sys.executable, "-m", "rooftop.tui.cli", "comm", "--world", "2", "--plan", "full",
                             "--db", str(tmp_path / "r.db")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, **popen_kwargs())
    line = ""
    deadline = time.monotonic() + 90
    while "[1/" not in line and time.monotonic() < deadline:  # the ranks are up and measuring
        line = proc.stderr.readline()
    ranks = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    return proc, ranks, "[1/" in line


def test_ctrl_c_leaves_no_rank_behind(tmp_path):
    proc, ranks, measuring = start_measuring_ranks(tmp_path)
    try:
        assert measuring, "no point measured"
        assert len(ranks) >= 2
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        assert proc.returncode == 130
        time.sleep(0.5)
        assert _alive(ranks) == []
        assert "interrupted; the ranks are stopped" in proc.stderr.read()
        with Store.open(tmp_path / "r.db") as store:  # what was measured is kept, the run cancelled
            [run] = store.runs()
            assert run.status == "cancelled" and run.samples >= 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("status, error, want", [
    ("cancelled", "", " — cancelled; saved as run c0ffee00"),  # a stop (SIGTERM) tells no error: was "cancelled: ;"
    ("failed", "rank 1 exited with code 1", " — failed: rank 1 exited with code 1; saved as run c0ffee00"),
])
def test_a_stopped_comm_run_says_how_it_ended_with_nothing_empty(status, error, want, capsys):
    import argparse

    from rooftop.probes.comm import CommResult
    from rooftop.tui.commands.comm import _report
    from rooftop.tui.render.layout import make_console

    plan = build_comm_plan("gloo", 2, "quick", max_size="8")
    result = CommResult(plan, status=status, error=error, wall_s=1.5)
    code = _report(argparse.Namespace(json=True), plan, result, make_console(stderr=True), "c0ffee00" * 4)
    line = " ".join(capsys.readouterr().err.split())  # the console wraps at its width
    assert line == "rooftop comm: 0 points in 1.5 s" + want and code == (130 if status == "cancelled" else 1)


def test_sigkill_of_comm_takes_its_ranks_with_it(tmp_path):
    proc, ranks, measuring = start_measuring_ranks(tmp_path)
    try:
        assert measuring, "no point measured"
        assert len(ranks) >= 2
        proc.kill()  # SIGKILL: the parent runs no cleanup at all
        proc.wait(timeout=30)
        deadline = time.monotonic() + 5  # without a lifeline they lingered until their collectives timed out
        while _alive(ranks) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(ranks) == []
    finally:
        for pid in _alive([proc.pid, *ranks]):
            psutil.Process(pid).kill()
        proc.wait()


def test_one_gpu_runs_host_device_copies_only():
    plan = build_comm_plan("nccl", None, gpus=1)
    assert plan.collectives == () and plan.copies and plan.world == 1
    assert "no peer" in plan.notes[0] and plan.points == 4 * len(plan.sizes)
    with pytest.raises(CommError, match="allowed: 2 … 4"):
        build_comm_plan("gloo", 1, cpus=2)


def test_host_device_copies_on_a_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    from rooftop.models.comm import comm_points
    from rooftop.probes.comm import host_device_sweep

    plan = build_comm_plan("nccl", 1, max_size="1M", gpus=1)
    points = comm_points(host_device_sweep(plan))
    assert {p.collective for p in points} == {"h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable"}
    assert all(p.time_s and p.algbw == p.busbw for p in points)


def test_show_a_comm_run_as_comm_shows_it(comm_run):
    """`rooftop show` on a comm run: per collective size, time, algbw, busbw and the α-β fit (not kernels with
    TFLOP/s and I), and --json with the points and fits `rooftop comm --json` gave."""
    _, doc, db = comm_run
    shown = run_main("show", doc["run_id"][:8], "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    for coll, factor in (("allreduce", "1"), ("allgather", "0.5"), ("sendrecv", "1")):
        assert f"{coll} (gloo, 2 ranks; busbw = algbw × {factor})" in shown.stdout
    assert shown.stdout.count("α-β fit:") == 5 and "busbw" in shown.stdout
    assert "FLOP/s" not in shown.stdout and "kernel" not in shown.stdout
    as_json = run_main("show", doc["run_id"][:8], "--db", str(db), "--json")
    mine = json.loads(as_json.stdout)
    assert mine["points"] == doc["points"] and mine["fits"] == doc["fits"]
    assert len(mine["samples"]) == 10  # still the whole run document


def test_comm_fit_note_hangs_under_itself_at_80_columns():
    """A fit note longer than the line wraps under its own text, not at the left edge."""
    import io

    from rich.console import Console

    from rooftop.models.comm import CommPoint, fit_points
    from rooftop.tui.render.comm import comm_report

    points = [CommPoint("allreduce", 2, s, 20e-6 + s / 5e9, 20e-6, 30e-6, 0.1) for s in (8.0, 2.0**20, 2.0**24)]
    console = Console(file=io.StringIO(), width=80, no_color=True)
    console.print(comm_report(points, fit_points(points), "gloo"))
    lines = console.file.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  α-β fit: α = "))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    note = lines[start:end]
    assert len(note) > 1 and all(len(line) <= 80 for line in note)
    assert all(line.startswith(" " * len("  α-β fit: ")) and line.strip() for line in note[1:]), note


def test_show_a_comm_run_with_a_malformed_point_says_so_in_one_line(tmp_path, capsys):
    """An edited import naming no known collective: one line on stderr, the samples as stored, no traceback."""
    from rooftop.models.sample import Sample, TimeStats
    from rooftop.store.comms import begin_comm, comm_device_info
    from rooftop.tui.cli import main

    db = tmp_path / "r.db"
    with Store.open(db) as store:
        rid = begin_comm(store, comm_device_info("gloo", 2, "cpu", "quick"), "gloo")
        for size in (8, 1024):
            store.add_sample(rid, Sample("allreduce", "fp32", {"n": size // 4}, flops=0, bytes=size,
                                         stats=TimeStats(1e-4, 1e-4, 1e-4, 1e-4, 0.0, 7, 1),
                                         conditions={"comm": {"collective": "bogus", "world": 2}}))
        store.finish_run(rid, "complete")
    assert main(["show", rid[:8], "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert "a stored collective is malformed" in err and len(err.strip().splitlines()) == 1
    assert "allreduce" in out  # the samples table
    assert main(["show", rid[:8], "--db", str(db), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["samples"]) == 2
