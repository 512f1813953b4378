"""A measurement ended from outside, in a real subprocess on the CPU: SIGHUP (the SSH session
closing) and SIGTERM end `rooftop measure` as Ctrl-C does, and the app's run as `c` then `q`;
SIGKILL loses at most the last second of telemetry.

The quick bandwidth plan takes a few seconds here (36 points); each test watches the store from
this process and signals the child once it has stored what the check needs.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rooftop.store.runs import Store
from terminal import Terminal


def start_measure(db: Path) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "rooftop.tui.cli", "measure", "--device", "cpu", "--only", "bandwidth",
            "--threads", "1", "--json", "--db", str(db)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NO_COLOR": "1"})


SAMPLES = "SELECT COUNT(*) FROM samples"
TELEMETRY = "SELECT COUNT(*) FROM telemetry"
# points past the CPU's private caches: the first that calibrate makes a bandwidth ceiling of (a level)
BEYOND_PRIVATE_CACHE = ("SELECT COUNT(*) FROM samples s JOIN runs r ON r.id = s.run_id WHERE s.footprint_bytes >"
                        " COALESCE(json_extract(r.device_json, '$.private_cache_bytes'), 0)")


def count(db: Path, sql: str) -> int:
    """A count read as another process would (0 before the file or its schema exists)."""
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:  # no such table yet
        return 0
    finally:
        conn.close()


def wait_for(proc: subprocess.Popen[str], db: Path, sql: str, n: int, limit_s: float = 120) -> None:
    """Until `sql` counts `n` in the child's store, failing if the child ends first (too quick to catch)."""
    deadline = time.monotonic() + limit_s
    while count(db, sql) < n:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"measure ended ({proc.returncode}) before {sql!r} counted {n}: {err[-800:]}")
        assert time.monotonic() < deadline, f"{sql!r} did not count {n} in {limit_s} s"
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_a_stop_signal_mid_measure_ends_it_as_ctrl_c(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "m.db"
    proc = start_measure(db)
    wait_for(proc, db, BEYOND_PRIVATE_CACHE, 1)  # so the run has a bandwidth ceiling to keep
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err  # as a shell reports it; Ctrl-C's is 130
    assert "Traceback" not in err and f"stopped by {sig.name}, showing what was measured" in " ".join(err.split())
    doc = json.loads(out)
    assert doc["status"] == "cancelled" and doc["interrupted"] is True and doc["stopped_by"] == sig.name
    assert count(db, SAMPLES) == len(doc["samples"]) < 36  # stopped mid-plan, every stored point reported
    assert doc["profile"]["bandwidth"]
    with Store.open(db) as store:
        assert store.interrupted == []  # it ended itself: nothing left running
        run = store.run(doc["run_id"])
        assert run.status == "cancelled" and run.has_ceilings and run.samples == len(doc["samples"])
        assert set(store.stored_profile(run.id).bandwidth) == set(doc["profile"]["bandwidth"])
        assert store.telemetry(run.id)


def test_sigkill_mid_measure_keeps_the_telemetry_taken_so_far(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    proc = start_measure(db)
    wait_for(proc, db, SAMPLES, 1)
    wait_for(proc, db, TELEMETRY, 1)  # stored while the run goes on, not at its end
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    kept = count(db, TELEMETRY)
    with Store.open(db) as store:
        [run] = store.runs()
        assert store.interrupted == [run.id] and run.samples >= 1
        rows = store.telemetry(run.id)
        assert len(rows) == kept >= 1
        assert all(r["cpu"] is not None and r["t"] > run.started_at - 1 for r in rows)


def test_a_hangup_mid_measure_in_the_app_keeps_the_run(tmp_path: Path) -> None:
    """`rooftop` on an empty store measures at once; its terminal closes, as when sshd ends the session,
    and SIGHUP arrives: the run is cancelled and keeps its ceilings, and the app exits 129.
    (SIGTERM takes the same path without the terminal's part.) The CPU is measured, GPU or not."""
    sig = signal.SIGHUP
    db = tmp_path / "app.db"
    env = {**os.environ, "TERM": "xterm-256color", "CUDA_VISIBLE_DEVICES": ""}  # torch sees no GPU
    with Terminal(24, 80) as term:
        proc = subprocess.Popen([sys.executable, "-m", "rooftop.tui.cli", "--db", str(db)], stdin=term.slave,
                                stdout=term.slave, stderr=term.slave, start_new_session=True, env=env)
        term.started()
        try:
            wait_for(proc, db, BEYOND_PRIVATE_CACHE, 1)
            term.hang_up()  # the terminal goes first
            proc.send_signal(sig)
            assert proc.wait(timeout=120) == 128 + sig
        finally:
            if proc.poll() is None:
                proc.kill()
    assert b"Traceback" not in term.screen
    with Store.open(db) as store:
        assert store.interrupted == []
        [run] = store.runs()
        assert run.status == "cancelled" and run.has_ceilings and run.samples >= 1
        assert store.stored_profile(run.id).bandwidth and store.telemetry(run.id)


def test_a_stop_signal_while_torch_loads_measures_nothing(tmp_path: Path) -> None:
    """SIGTERM while the device is being chosen (torch loading, seconds): no run is begun, one line, 143."""
    db = tmp_path / "n.db"
    code = ("import os, signal\n"
            "from rooftop.probes import backend\n"
            "real = backend.select_backend\n"
            "def loading(*args):\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    return real(*args)\n"
            "backend.select_backend = loading\n"
            "from rooftop.tui.cli import main\n"
            f"raise SystemExit(main(['measure', '--device', 'cpu', '--only', 'launch', '--json', '--db', {str(db)!r}]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 128 + signal.SIGTERM, out.stderr
    assert out.stderr == "rooftop measure: stopped by SIGTERM before the measurement began\n" and out.stdout == ""
    assert not db.exists()
