"""A fleet under torchrun that is stopped or loses a rank: real launchers, real ranks, a real store.

A signal is a stop, not a loss: SIGTERM, SIGINT or SIGHUP to torchrun (which passes it on to every rank)
ends each rank's measurement at its next point, and what each measured is kept as one cancelled fleet run;
each rank exits 128 + N with one line saying what was stopped and what was kept. A rank whose process dies
costs its row only: the others' are kept, and the lost one is named with how it ended. Nothing is left
behind: no process (walked in /proc from the test's own child) and nothing in the temp folder.

Each measures `--only gemm` on one thread (56 points, about 10 s of CPU time), and is stopped once both ranks'
measuring processes have spent 5 s of CPU time (torch's import takes about 2): by then each has points to keep,
however loaded the machine. The rest of the matrix (SIGINT, SIGHUP, the ranks' own exit statuses) is marked
`slow`: `pytest -m slow tests/test_fleet_signals.py`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from helpers.procs import family, finish, none_left
from rooftop.store.fleets import members_of
from rooftop.store.runs import Store

CPU_S = 5.0  # each measuring process's CPU time before the stop


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    (tmp / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "TMPDIR": str(tmp / "tmp"),
            "ROOFTOP_HOME": str(tmp / "home"), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            **extra}


MEASURE = ("rooftop", "measure", "--fleet", "--device", "cpu", "--threads", "1", "--only", "gemm", "--json")


def _torchrun(tmp: Path) -> subprocess.Popen:
    """torchrun as a user types it; its logs in a folder of the test's (without --log-dir torchrun makes a
    torchelastic_* folder in the temp dir for any command, `--no-python true` too)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "--log-dir", str(tmp / "logs"), "--no-python", *MEASURE, "--db", str(tmp / "f.db")]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp))


def _measuring(top: psutil.Process, n: int = 2) -> dict[str, psutil.Process]:
    """Wait until `n` ranks measure (each rank's spawned child, by LOCAL_RANK), each past CPU_S of CPU time."""
    deadline = time.monotonic() + 180
    while True:
        kids = {}
        for proc in top.children(recursive=True):
            try:
                if "spawn_main" in " ".join(proc.cmdline()):
                    t = proc.cpu_times()
                    kids[proc.environ().get("RANK", "")] = (proc, t.user + t.system)
            except psutil.Error:
                continue
        if len(kids) >= n and all(cpu >= CPU_S for _, cpu in kids.values()):
            return {r: p for r, (p, _) in kids.items()}
        assert time.monotonic() < deadline, "the ranks never got to measuring"
        time.sleep(0.1)


def _rooftop_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("rooftop measure:")]


def _kept(tmp: Path, run_id: str) -> tuple[str, list[tuple[int, str, int]]]:
    """The fleet run's status, and each member's rank, status and points as kept."""
    with Store.open(tmp / "f.db") as store:
        fleet = store.run(run_id)
        rows = []
        for m in members_of(fleet):
            kept = store.run(m["run_id"]) if m.get("run_id") else None
            rows.append((m["rank"], m["status"], len(store.samples(kept.id)) if kept else 0))
        return fleet.status, rows


def _shown(tmp: Path, run_id: str, capsys: pytest.CaptureFixture) -> list[str]:
    """`rooftop show FLEET`'s lines (in this process: a second torch-free start would cost seconds)."""
    from rooftop.tui.cli import main

    capsys.readouterr()
    assert main(["show", run_id[:8], "--db", str(tmp / "f.db")]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("sig", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow),
                                 pytest.param(signal.SIGHUP, marks=pytest.mark.slow)], ids=lambda s: s.name)
def test_a_signal_to_torchrun_keeps_what_each_rank_measured(tmp_path, capsys, sig):
    """SIGTERM to torchrun kept nothing (at best an empty failed fleet run headed `None: 2 members`)."""
    launcher = _torchrun(tmp_path)
    try:
        top = psutil.Process(launcher.pid)
        _measuring(top)
        procs = family(top)
        launcher.send_signal(sig)
    finally:
        out, err = finish(launcher)
    doc = json.loads(out)
    name = sig.name
    assert doc["stopped_by"] == name and doc["run_id"], err
    assert [(r["rank"], r["status"]) for r in doc["rows"]] == [(0, "cancelled"), (1, "cancelled")], err
    assert all(r["ceilings"] and f"stopped by {name} after" in r["error"] for r in doc["rows"])
    lines = _rooftop_lines(err)
    (stop,) = [x for x in lines if "fleet of 2 stopped" in x]
    assert stop.startswith(f"rooftop measure: fleet of 2 stopped by {name} after ")
    assert stop.endswith(f"what each member measured is kept as run {doc['run_id'][:8]} (rank 0 stopped, "
                         "rank 1 stopped)")
    (sent,) = [x for x in lines if x.startswith("rooftop measure: rank 1 stopped")]
    assert f"is kept in fleet run {doc['run_id'][:8]}" in sent
    status, members = _kept(tmp_path, doc["run_id"])
    assert status == "cancelled" and [(r, s) for r, s, _ in members] == [(0, "cancelled"), (1, "cancelled")]
    assert all(points > 0 for _, _, points in members)
    assert f"{doc['rows'][0]['model']}: 2 members" in _shown(tmp_path, doc["run_id"], capsys)
    assert none_left(procs) == []
    assert sorted(os.listdir(tmp_path / "tmp")) == []


@pytest.mark.parametrize("dead", [1, pytest.param(0, marks=pytest.mark.slow)])
def test_a_rank_that_dies_costs_its_row_only(tmp_path, capsys, dead):
    """A rank's process SIGKILLed mid-measurement: torchrun stops the other (SIGTERM), which kept nothing; now it
    keeps what it measured, names the dead rank and how it ended, and exits 143 (torchrun's failure table says
    so). Rank 0 dead: rank 1, the lowest rank alive, keeps the fleet."""
    live = 1 - dead
    launcher = _torchrun(tmp_path)
    try:
        top = psutil.Process(launcher.pid)
        children = _measuring(top)
        procs = family(top)
        (rank,) = [p for p in top.children() if p.pid == children[str(dead)].ppid()]
        started = time.monotonic()
        rank.send_signal(signal.SIGKILL)
    finally:
        out, err = finish(launcher)
    doc = json.loads(out)
    rows = doc["rows"]
    assert [(r["rank"], r["status"]) for r in rows] == sorted([(live, "cancelled"), (dead, "lost")]), err
    assert rows[live]["ceilings"] and "stopped by SIGTERM after" in rows[live]["error"]
    assert rows[dead]["error"].startswith("its process ended about ") and "300 s" not in rows[dead]["error"]
    assert doc["wall_s"] < time.monotonic() - started + 120
    status, members = _kept(tmp_path, doc["run_id"])
    assert status == "cancelled" and members[live][1] == "cancelled" and members[live][2] > 0
    assert members[dead] == (dead, "lost", 0)
    (stop,) = [x for x in _rooftop_lines(err) if "stopped by" in x]
    assert stop.endswith(f"(rank 0 {'lost' if dead == 0 else 'stopped'}, rank 1 {'lost' if dead == 1 else 'stopped'})")
    assert "exitcode  : 143" in err  # the live rank: 128 + SIGTERM, in torchrun's own failure table
    shown = _shown(tmp_path, doc["run_id"], capsys)
    assert f"{rows[live]['model']}: 2 members" in shown and not any(line.startswith("None") for line in shown)
    assert none_left(procs) == []
    assert sorted(os.listdir(tmp_path / "tmp")) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_each_stopped_rank_exits_128_plus_n_with_one_line(tmp_path, sig):
    """The ranks as torchrun starts them (its variables; no agent between them and the signal): each exits
    128 + N, rank 0 with the fleet's line, rank 1 with its own."""
    from rooftop.probes.comm import free_port

    port = str(free_port())
    ranks = []
    for r in (0, 1):
        env = _env(tmp_path, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        ranks.append(subprocess.Popen([sys.executable, "-m", "rooftop.tui.cli", *MEASURE[1:], "--db",
                                       str(tmp_path / "f.db")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env))
    try:
        tops = [psutil.Process(p.pid) for p in ranks]
        for top in tops:
            _measuring(top, 1)
        procs = [p for top in tops for p in family(top)]
        for p in ranks:
            p.send_signal(sig)
    finally:
        results = [finish(p) for p in ranks]
    assert [p.returncode for p in ranks] == [128 + sig, 128 + sig], [e for _, e in results]
    (zero,) = _rooftop_lines(results[0][1])[-1:]
    assert f"fleet of 2 stopped by {sig.name}" in zero and "kept as run" in zero
    (one,) = _rooftop_lines(results[1][1])[-1:]
    assert one.startswith(f"rooftop measure: rank 1 stopped by {sig.name}: its row (") and "kept in fleet run" in one
    assert none_left(procs) == []
    assert sorted(os.listdir(tmp_path / "tmp")) == []
