"""--all-gpus's process layout on a CPU: one spawned process per device of a (fake) device list.

The device list is CPUs here (there is no GPU); the processes, the queue, the lifeline, the bounded
wait and the store are the real ones. A rank that dies or hangs is named; the others' rows are kept.
"""

from __future__ import annotations

import time

import psutil
import pytest

import fleet_targets
from rooftop.probes.fleet import RankEnv, FleetError, cpu_share, run_local


def _no_children_left() -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        kids = [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE
                and "resource_tracker" not in " ".join(p.cmdline())]  # multiprocessing's own helper, not a rank
        if not kids:
            return True
        time.sleep(0.1)
    return False


def test_one_process_per_device_at_once():
    jobs = [{"device": "cpu"}, {"device": "cpu"}, {"device": "cpu"}]
    out = run_local(fleet_targets.quick, jobs, wait_s=60)
    assert [p["rank"] for p in out] == [0, 1, 2] and all(p["status"] == "complete" for p in out)
    assert len({p["pid"] for p in out}) == 3  # three processes, not one
    assert _no_children_left()


def test_a_rank_that_dies_is_named_and_the_others_kept():
    out = run_local(fleet_targets.rank1_dies, [{"device": "cpu"}] * 3, wait_s=60)
    assert [p["status"] for p in out] == ["complete", "lost", "complete"]
    assert "exited with status 7" in out[1]["error"] and out[1]["host"]
    assert _no_children_left()


def test_a_rank_that_hangs_is_stopped_after_the_bounded_wait():
    t0 = time.monotonic()
    out = run_local(fleet_targets.rank1_hangs, [{"device": "cpu"}] * 2, wait_s=2)
    assert time.monotonic() - t0 < 60  # not the 600 s it would sleep
    assert out[0]["status"] == "complete" and out[1]["status"] == "lost"
    assert "no result within 2 s" in out[1]["error"]
    assert _no_children_left()


def test_a_lone_rank_that_hangs_is_stopped_once_its_peers_elsewhere_are_done():
    """A torchrun rank measures in one child: the bounded wait starts when a peer rank (another process, another
    host) says it is done, so a stuck measurement is stopped and reported instead of holding the job."""
    asked: list[float] = []

    def peers_done() -> bool:
        asked.append(time.monotonic())
        return len(asked) >= 2  # the peers finish while this rank still measures

    t0 = time.monotonic()
    (out,) = run_local(fleet_targets.hangs, [{"device": "cpu"}], wait_s=1, peers_done=peers_done)
    assert time.monotonic() - t0 < 60 and out["status"] == "lost" and "no result within 1 s" in out["error"]
    assert len(asked) == 2  # asked once a second until they were done, then no more
    assert _no_children_left()


def test_a_rank_that_raises_reports_its_error():
    out = run_local(fleet_targets.rank0_raises, [{"device": "cpu"}] * 2, wait_s=60)
    assert out[0]["status"] == "failed" and "illegal memory access" in out[0]["error"]
    assert out[1]["status"] == "complete"


def test_cpu_shares_are_disjoint_and_cover_the_cores():
    shares = [cpu_share(r, 4, list(range(16))) for r in range(4)]
    assert shares == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert cpu_share(1, 2, [3, 5]) == [5]
    assert cpu_share(2, 3, [0, 1]) == [0]  # more ranks than CPUs: they share, each has one


def test_rank_env_from_torchrun_variables():
    assert RankEnv.from_env({}) is None
    e = RankEnv.from_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert (e.rank, e.world, e.local_rank, e.local_world) == (3, 8, 1, 2)
    with pytest.raises(FleetError, match="whole numbers"):
        RankEnv.from_env({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(FleetError, match="not a place"):
        RankEnv.from_env({"RANK": "2", "WORLD_SIZE": "2"})


def test_real_measurements_kept_as_measured_then_one_fleet_run(tmp_path):
    """Two CPU 'devices' measured at once by the real rank body, each run kept as it measures."""
    from rooftop.store.fleets import fleet_of, save_fleet
    from rooftop.store.runs import Store
    from rooftop.tui.services.fleet import measure_member

    db = tmp_path / "f.db"
    jobs = [{"device": "cpu", "plan": "quick", "only": ["launch"], "db": str(db), "store": True, "threads": 1,
             "cpus": [c], "local_rank": i} for i, c in enumerate(sorted(psutil.Process().cpu_affinity())[:1] * 2)]
    out = run_local(measure_member, jobs, wait_s=120)
    assert [p["status"] for p in out] == ["complete", "complete"], out
    with Store.open(db) as store:
        kept = {r.id for r in store.runs()}
        assert {p["run_id"] for p in out} <= kept  # each rank kept its own run as it measured
        fid = save_fleet(store, out, "all-gpus", "quick")
        report = fleet_of(store, store.run(fid))
        assert len(store.runs()) == 3  # no member stored twice
    assert [m.rank for m in report.members] == [0, 1]
    assert all(m.profile is not None and m.profile.launch_overhead for m in report.members)


def test_ranks_end_with_a_sigkilled_parent(tmp_path):
    """rooftop killed outright (SIGKILL: no cleanup runs) takes its ranks with it: the lifeline."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys; sys.path.insert(0, sys.argv[1]); import fleet_targets\n"
            "from rooftop.probes.fleet import run_local\n"
            "run_local(fleet_targets.tell_and_hang, [{'device': 'cpu', 'dir': sys.argv[2]}] * 2, wait_s=600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent), str(tmp_path)])
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("*.pid"))) < 2:
            assert time.monotonic() < deadline and parent.poll() is None, "the ranks did not start"
            time.sleep(0.2)
        pids = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
            assert time.monotonic() < deadline, f"ranks {pids} outlived their parent"
            time.sleep(0.1)
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.parametrize("hang", [False, True])
def test_rank0_gathers_every_row_or_names_the_rank_that_hung(hang):
    """The gloo gather torchrun's ranks use (gather_object), started here as torchrun would start them."""
    from rooftop.probes.comm import free_port

    # a row as big as a full plan's samples can be: over the 8 MiB the job's store takes in one value
    job = {"device": "cpu", "port": free_port(), "world": 3, "wait_s": 4, "hang": hang, "blob": 9 << 20}
    out = run_local(fleet_targets.torchrun_rank, [job] * 3, wait_s=30 if not hang else 8)
    rows = out[0]["gathered"]
    assert [r["rank"] for r in rows] == [0, 1, 2]
    if not hang:
        assert all(r["status"] == "complete" and len(r["blob"]) == 9 << 20 for r in rows)
        assert out[1]["gathered"] is None and out[2]["gathered"] is None  # only rank 0 holds the fleet
    else:
        assert [r["status"] for r in rows] == ["complete", "lost", "complete"]  # the others' rows kept
        assert "it hung: nothing within 4 s of rank 0's result" in rows[1]["error"] and rows[1]["host"]
        assert out[1]["status"] == "lost"  # and the hung process itself was stopped
    assert _no_children_left()


def _wait_for_pids(folder, n: int) -> list[int]:
    deadline = time.monotonic() + 120
    while len(list(folder.glob("*.pid"))) < n:
        assert time.monotonic() < deadline, "the ranks did not start"
        time.sleep(0.1)
    time.sleep(0.3)  # each has measured a few points
    return [int(p.read_text()) for p in folder.glob("*.pid")]


def test_a_stop_lets_each_rank_hand_in_what_it_measured(tmp_path):
    """A stop (--all-gpus's SIGTERM/SIGINT/SIGHUP, a torchrun rank's) killed each rank's process outright, so what
    it had measured was lost: each is now asked to stop and hands in its points."""
    import threading

    cancel = threading.Event()
    got: list = []
    threading.Thread(target=lambda: got.append(run_local(fleet_targets.until_stopped, [{"device": "cpu",
                     "dir": str(tmp_path)}] * 2, wait_s=60, cancel=cancel)), daemon=True).start()
    _wait_for_pids(tmp_path, 2)
    t0 = time.monotonic()
    cancel.set()
    deadline = time.monotonic() + 60
    while not got:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (out,) = got
    assert [(p["rank"], p["status"]) for p in out] == [(0, "cancelled"), (1, "cancelled")]
    assert all(p["points"] > 0 for p in out)
    assert time.monotonic() - t0 < 30  # handed in at once, not after the grace
    assert _no_children_left()
