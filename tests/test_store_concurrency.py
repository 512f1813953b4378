"""Real processes on one file: SIGKILL mid-run, and concurrent writers and readers."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.store.runs import Store
from rooftop.tui.cli import main

WRITER = Path(__file__).parent / "helpers" / "store_writer.py"


def writer(db: Path, n: int, pause: float, finish: bool = False) -> subprocess.Popen[str]:
    args = [sys.executable, str(WRITER), str(db), str(n), str(pause)] + (["finish"] if finish else [])
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_mid_run_keeps_every_finished_sample(tmp_path: Path) -> None:
    db = tmp_path / "rooftop.db"
    proc = writer(db, 10_000, 0.002)
    assert proc.stdout is not None
    first = proc.stdout.readline().split()
    assert first[0] == "begun", proc.stderr.read() if proc.stderr else ""
    run_id = first[1]
    finished = -1
    while finished < 30:  # let it commit a few dozen samples, then kill it without warning
        finished = int(proc.stdout.readline().split()[1])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    # anything printed before the kill is a finished sample
    finished = max([finished] + [int(line.split()[1]) for line in proc.stdout.read().splitlines()
                                 if line.startswith("sample")])
    assert proc.returncode == -signal.SIGKILL

    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    raw.close()
    with Store.open(db) as store:
        assert store.interrupted == [run_id]
        run = store.run(run_id)
        assert run.status == "interrupted"
        samples = store.samples(run_id)
        # every finished sample is there, at most the one in flight besides, each intact
        assert finished + 1 <= len(samples) <= finished + 2
        assert samples == [synthetic_sample(i) for i in range(len(samples))]
        assert store.integrity_check() == "ok"
    with Store.open(db) as store:  # marking happens once
        assert store.interrupted == []


def test_two_writers_and_a_reader_never_see_database_is_locked(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    n = 150
    procs = [writer(db, n, 0.0, finish=True) for _ in range(2)]
    reads = 0
    while any(p.poll() is None for p in procs):  # this process reads all the while
        with Store.open(db) as store:
            for run in store.runs():
                store.samples(run.id)
            store.profiles()
        reads += 1
    outs = [p.communicate(timeout=30) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "locked" not in err
        assert out.splitlines()[-1] == "done"
    with Store.open(db) as store:
        runs = store.runs()
        assert len(runs) == 2 and all(r.status == "complete" for r in runs)
        for r in runs:
            assert store.samples(r.id) == [synthetic_sample(i) for i in range(n)]
        assert store.integrity_check() == "ok"
    assert reads > 0


def test_two_processes_creating_the_same_new_file(tmp_path: Path) -> None:
    """Both start on a file that does not exist yet: one creates the schema, neither fails."""
    db = tmp_path / "fresh.db"
    procs = [writer(db, 5, 0.0, finish=True) for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
    with Store.open(db) as store:
        assert len(store.runs()) == 3


def test_a_reader_racing_the_first_write_never_finds_an_empty_file(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`rooftop runs` over and over while another process creates the store: it reads "no database
    yet" or the store, never an empty or half-made file (the schema is linked into place whole)."""
    seen: Counter[str] = Counter()
    for i in range(10):
        db = tmp_path / f"new{i}.db"
        proc = writer(db, 1, 0.0, finish=True)
        while True:
            finished = proc.poll() is not None
            rc = main(["runs", "--db", str(db)])
            out, err = capsys.readouterr()
            assert rc == 0, err
            seen["absent" if f"no runs yet: {db} does not exist" in out else "read"] += 1
            if finished:
                break
        assert proc.communicate(timeout=30)[0].splitlines()[-1] == "done"
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
    assert seen["absent"] and seen["read"]


def _measure_launch(capsys: pytest.CaptureFixture[str], db: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    from probe_fixtures import tiny_sizes
    from rooftop.probes import plan as planmod

    real = planmod.build_plan
    monkeypatch.setattr(planmod, "build_plan", lambda b, name="quick", only=None, sizes=None:
                        real(b, name, only, sizes=tiny_sizes()))
    assert main(["measure", "--device", "cpu", "--only", "launch", "--json", "--db", str(db)]) == 0
    return " ".join(capsys.readouterr().err.split())  # the console wraps the warning at its width


def test_a_second_measurement_into_a_store_is_warned_of_the_first_and_a_crashed_one_is_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two measurements ran into one store at once with no word. The first one's `running` row, with its pid and
    start token, is the lease: a second one is warned in one line (and still kept); once the first has crashed
    (SIGKILL) its mark reads dead, and nothing is said."""
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    db = tmp_path / "rooftop.db"
    first = writer(db, 100_000, 0.05)  # a measurement in another process, adding a sample every 50 ms
    try:
        assert first.stdout is not None
        begun = first.stdout.readline().split()
        assert begun[0] == "begun", first.stderr.read() if first.stderr else ""
        err = _measure_launch(capsys, db, monkeypatch)
        assert err.count("running into this store") == 1, err
        assert (f"warning: another measurement is running into this store: run {begun[1][:8]} (test on Synthetic "
                f"GPU, pid {first.pid}, since ") in err, err
        assert "both are kept" in err and "saved as run" in err, err
    finally:
        first.kill()
        first.wait(timeout=10)
    err = _measure_launch(capsys, db, monkeypatch)  # the first crashed: its lease is stale
    assert "running into this store" not in err and "saved as run" in err, err
    with Store.open(db) as s:
        assert s.run(begun[1]).status == "interrupted"  # marked by the measurement's own open


def test_a_run_of_another_host_counts_while_it_is_recent(tmp_path: Path) -> None:
    """Another host's process cannot be seen from here: its run counts as running while it added a sample within
    ACTIVE_S, so a mark a crash left there goes quiet."""
    import time

    from rooftop.store.runs import ACTIVE_S

    with Store.open(tmp_path / "r.db") as s:
        rid = s.begin_run({"name": "far GPU"}, "quick", "cuda")
        s.add_sample(rid, synthetic_sample(0))
        s.conn.execute("UPDATE runs SET host = 'node7', pid = 1 WHERE id = ?", (rid,))
        assert [(r.id, r.host) for r, _ in s.running_beside()] == [(rid, "node7")]
        old = time.time() - ACTIVE_S - 60
        s.conn.execute("UPDATE runs SET started_at = ? WHERE id = ?", (old, rid))
        s.conn.execute("UPDATE samples SET created_at = ? WHERE run_id = ?", (old, rid))
        assert s.running_beside() == []
        mine = s.begin_run({"name": "this GPU"}, "quick", "cuda")
        assert s.running_beside() == [] and s.running_beside(own=mine) == []  # this process's own run is not another
