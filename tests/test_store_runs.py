"""Runs, samples, ceilings, telemetry, profiles and recovery, against real SQLite files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.models.catalog import catalog
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.sample import Sample
from rooftop.store.db import StoreError
from rooftop.store.process import host_name, is_alive, process_token
from rooftop.store.runs import BadName, Store, UnknownRun


def measured_profile(bw: float = 2e12, peak: float = 5e14) -> DeviceProfile:
    return DeviceProfile(
        id="local", name="Test GPU", source="measured", memory_bytes=8e10, l2_bytes=5e7, sm_count=100,
        bandwidth={"dram": Ceiling(bw, "measured", "read_reduce:134217728"), "l2": Ceiling(8e12, "measured", "l2")},
        peak={"bf16-tc": Ceiling(peak, "measured", "4096x4096x4096"),
              "fp32-fma": Ceiling(4e13, "measured", "fma:fp32:reps=64:1048576", stable=False)},
        launch_overhead=Ceiling(4e-6, "measured", "launch"),
        extra={"clock_mhz": 1980},
    )


def full_run(store: Store, device: dict, bw: float = 2e12, n: int = 3, status: str = "complete") -> str:
    rid = store.begin_run(device, "quick", "cuda", {"torch": "2.5"})
    for i in range(n):
        store.add_sample(rid, synthetic_sample(i))
    store.set_ceilings(rid, measured_profile(bw))
    store.finish_run(rid, status)
    return rid


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "rooftop.db") as s:
        yield s


def test_a_run_keeps_everything_it_was_given(store: Store) -> None:
    dev = {"name": "Test GPU", "uuid": "GPU-1", "memory_bytes": 8e10}
    rid = store.begin_run(dev, "full", "cuda", {"torch": "2.5.1", "cuda": "12.4"})
    run = store.run(rid)
    assert (run.status, run.host, run.backend, run.plan, run.device_key) == ("running", host_name(), "cuda", "full", "GPU-1")
    assert run.versions["torch"] == "2.5.1" and run.versions["python"]
    samples = [synthetic_sample(i) for i in range(4)]
    skipped = Sample(family="gemm", dtype="fp8", shape={"m": 8192, "n": 8192, "k": 8192}, flops=1.0, bytes=1.0,
                     path="fp8-tc", skipped="unsupported dtype on this GPU", conditions={"sm_clock_mhz": 1755})
    samples.append(skipped)
    assert [store.add_sample(rid, s) for s in samples] == [0, 1, 2, 3, 4]
    assert store.samples(rid) == samples
    rows = [{"t": 1.0, "power_w": 300.5, "temp_c": 61}, {"t": 2.0, "power_w": 310.0}]
    assert store.add_telemetry(rid, rows) == 2
    assert store.telemetry(rid) == rows
    prof = measured_profile()
    store.set_ceilings(rid, prof)
    assert store.stored_profile(rid) == prof
    store.finish_run(rid, "complete")
    run = store.run(rid)
    assert run.status == "complete" and run.ended_at >= run.started_at
    assert run.samples == 5 and run.has_ceilings


def test_set_ceilings_replaces_the_earlier_profile(store: Store) -> None:
    rid = store.begin_run({"name": "g"}, "quick", "cuda")
    store.set_ceilings(rid, measured_profile(bw=1e12))
    store.set_ceilings(rid, measured_profile(bw=3e12))
    assert store.stored_profile(rid).B("dram") == 3e12


def test_writes_to_unknown_run_and_bad_final_status_are_refused(store: Store) -> None:
    with pytest.raises(UnknownRun):
        store.add_sample("0" * 32, synthetic_sample(0))
    rid = store.begin_run({"name": "g"}, "quick", "cuda")
    with pytest.raises(StoreError, match="complete, cancelled, failed"):
        store.finish_run(rid, "interrupted")


def test_profile_is_latest_complete_run_per_device(store: Store) -> None:
    a_old = full_run(store, {"name": "A", "uuid": "GPU-A"}, bw=1e12)
    time.sleep(0.01)
    a_new = full_run(store, {"name": "A", "uuid": "GPU-A"}, bw=2e12)
    time.sleep(0.01)
    full_run(store, {"name": "A", "uuid": "GPU-A"}, bw=9e12, status="failed")  # not complete: ignored
    b = full_run(store, {"name": "B", "uuid": "GPU-B"}, bw=3e12)
    running = store.begin_run({"name": "A", "uuid": "GPU-A"}, "quick", "cuda")
    store.set_ceilings(running, measured_profile(bw=7e12))  # still running: ignored
    profiles = store.profiles()
    assert set(profiles) == {a_new[:8], b[:8]}
    assert profiles[a_new[:8]].B("dram") == 2e12
    p = profiles[b[:8]]
    assert p.source == "measured" and p.peak["bf16-tc"].source == "measured"
    assert p.extra["run_id"] == b and p.extra["clock_mhz"] == 1980
    # an older run is still a profile when named explicitly, and a named run is listed
    assert store.profile(a_old[:6]).B("dram") == 1e12
    store.rename(a_old, "a-baseline")
    assert set(store.profiles()) == {a_new[:8], b[:8], "a-baseline"}
    with pytest.raises(UnknownRun, match="no ceilings"):
        store.profile(store.begin_run({"name": "C"}, "quick", "cuda"))


def test_runs_are_found_by_name_id_or_prefix(store: Store) -> None:
    ids = [full_run(store, {"name": f"G{i}"}) for i in range(3)]
    assert store.run(ids[0]).id == ids[0]
    assert store.run(ids[1][:5].upper()).id == ids[1]
    store.rename(ids[2], "Box-7")
    assert store.run("box-7").id == ids[2]
    with pytest.raises(UnknownRun, match="rooftop runs"):
        store.run("nothing")
    with pytest.raises(UnknownRun):
        store.run(ids[0][:3])  # too short to be a prefix


def test_ambiguous_prefix_is_reported(store: Store) -> None:
    store.begin_run({"name": "g"}, "quick", "cuda")
    store.begin_run({"name": "g"}, "quick", "cuda")
    store.conn.execute("UPDATE runs SET id = 'abcd' || substr(id, 5)")  # two ids sharing a prefix
    with pytest.raises(UnknownRun, match="ambiguous"):
        store.run("abcd")


def test_rename_rules(store: Store) -> None:
    a = full_run(store, {"name": "A"})
    b = full_run(store, {"name": "B"})
    store.rename(a, "lab-h100")
    with pytest.raises(BadName, match="taken"):
        store.rename(b, "LAB-H100")
    with pytest.raises(BadName, match="already a device id"):
        store.rename(b, "h100")
    for bad in ("", "9lives", "has space", "x" * 65):
        with pytest.raises(BadName):
            store.rename(b, bad)
    store.rename(a, "lab-h100")  # renaming to its own name is fine
    assert store.run(a).name == "lab-h100"


@pytest.mark.parametrize("name", ["abc1", "dead", "BEEF", "cafe0123", "deadbeefdeadbeefdeadbeefdeadbeef"])
def test_a_name_that_reads_as_a_run_id_is_refused(store: Store, name: str) -> None:
    a = full_run(store, {"name": "A"})
    with pytest.raises(BadName, match=r"hex digits only \(0-9, a-f\) would read as a run id prefix"):
        store.rename(a, name)
    assert store.run(a).name is None


@pytest.mark.parametrize("name", ["abcg", "dead-1", "a.b", "fab_lab", "box4090", "a", "fab"])
def test_names_with_something_besides_hex_are_fine(store: Store, name: str) -> None:
    """…or too short to be an id prefix (4 hex digits at least)."""
    a = full_run(store, {"name": "A"})
    assert store.rename(a, name).name == name and store.run(name).id == a


def test_a_legacy_hex_name_that_is_also_an_id_prefix_is_ambiguous(store: Store) -> None:
    """A name given before the rule, equal to another run's id prefix: neither run is guessed."""
    a = full_run(store, {"name": "A"})
    b = full_run(store, {"name": "B"})
    store.conn.execute("UPDATE runs SET name = ? WHERE id = ?", (b[:6], a))
    with pytest.raises(UnknownRun, match="ambiguous"):
        store.run(b[:6])
    assert store.run(b[:8]).id == b and store.run(a).id == a
    store.conn.execute("UPDATE runs SET name = 'feed' WHERE id = ?", (a,))
    assert store.run("feed").id == a  # no other run's id starts so: the name still works


def test_delete_removes_run_samples_ceilings_telemetry(store: Store) -> None:
    keep = full_run(store, {"name": "A"})
    gone = full_run(store, {"name": "B"})
    store.add_telemetry(gone, [{"t": 1.0}])
    store.delete(gone)
    for table in ("samples", "ceilings", "telemetry"):
        assert store.conn.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (gone,)).fetchone()[0] == 0
    assert [r.id for r in store.runs()] == [keep]
    assert len(store.samples(keep)) == 3


def test_delete_refuses_a_run_being_measured(store: Store) -> None:
    rid = store.begin_run({"name": "g"}, "quick", "cuda")  # owned by this live process
    with pytest.raises(StoreError, match="being measured"):
        store.delete(rid)


def _orphan(store: Store, pid: int, token: str, host: str | None = None) -> str:
    rid = store.begin_run({"name": "g"}, "quick", "cuda")
    store.add_sample(rid, synthetic_sample(0))
    store.conn.execute("UPDATE runs SET pid = ?, proc_token = ?, host = ? WHERE id = ?",
                       (pid, token, host or host_name(), rid))
    return rid


def test_open_marks_runs_of_dead_processes_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    with Store.open(path) as s:
        gone = _orphan(s, dead_pid, "123")
        reused = _orphan(s, os.getpid(), "not-my-start-time")  # pid reused by another process
        mine = _orphan(s, os.getpid(), process_token(os.getpid()))
        elsewhere = _orphan(s, dead_pid, "123", host="another-host")
    with Store.open(path) as s:
        assert sorted(s.interrupted) == sorted([gone, reused])
        status = {r.id: r.status for r in s.runs()}
        assert status == {gone: "interrupted", reused: "interrupted", mine: "running", elsewhere: "running"}
        assert len(s.samples(gone)) == 1
        assert s.run(gone).ended_at is not None


def test_process_liveness() -> None:
    me = os.getpid()
    assert is_alive(me, process_token(me))
    assert not is_alive(0)
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not is_alive(p.pid)


def test_saved_ops(store: Store) -> None:
    store.save_op("decode", "gemm 1 8192 8192 bf16", ["h100", "h200"], note="llama proj")
    store.save_op("prefill", "gemm 4096 8192 8192 bf16")
    store.save_op("decode", "gemm 1 8192 28672 bf16", ["h100"])  # replaces
    ops = store.saved_ops()
    assert [o["name"] for o in ops] == ["decode", "prefill"]
    assert ops[0]["spec"] == "gemm 1 8192 28672 bf16" and ops[0]["devices"] == ["h100"]
    assert store.delete_op("prefill") and not store.delete_op("prefill")


def test_measured_profile_resolves_beside_catalog(store: Store) -> None:
    from rooftop.models.catalog import lookup_device

    rid = full_run(store, {"name": "A"})
    store.rename(rid, "mybox")
    extra = store.profiles()
    assert lookup_device("MYBOX", extra).B("dram") == 2e12
    assert lookup_device("h100", extra) == catalog()["h100"]


def test_an_import_cut_off_half_way_leaves_nothing(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    import rooftop.store.runs as runs_mod

    rid = full_run(store, {"name": "A"})
    run = dataclasses.replace(store.run(rid), id="f" * 32, name=None)

    def broken(*args: object) -> int:
        raise RuntimeError("disk full")

    monkeypatch.setattr(runs_mod, "_insert_telemetry", broken)
    with pytest.raises(RuntimeError):
        store.insert_run(run, store.samples(rid), [{"t": 1.0}], store.stored_profile(rid))
    assert [r.id for r in store.runs()] == [rid]
    assert store.conn.execute("SELECT COUNT(*) FROM samples WHERE run_id = ?", (run.id,)).fetchone()[0] == 0
    monkeypatch.undo()
    assert store.insert_run(run, store.samples(rid), [{"t": 1.0}], store.stored_profile(rid))
    assert store.run(run.id).samples == 3


def test_open_existing_never_creates(tmp_path: Path) -> None:
    assert Store.open_existing(tmp_path / "absent.db") is None
    assert not (tmp_path / "absent.db").exists()
    Store.open(tmp_path / "there.db").close()
    with Store.open_existing(tmp_path / "there.db") as s:
        assert s.runs() == []


def test_runs_of_a_kind_and_status_and_the_latest(store: Store) -> None:
    """The one filter over runs: each kind by its plan (a measurement: every other plan), each status; the
    newest that passes, or None."""
    from rooftop.store.runs import COMM_PLAN, FLEET_PLAN, PROFILE_PLAN

    first = full_run(store, {"name": "A", "uuid": "GPU-a"})
    failed = full_run(store, {"name": "A", "uuid": "GPU-a"}, status="failed")
    kinds = {}
    for plan in (PROFILE_PLAN, COMM_PLAN, FLEET_PLAN, "full"):
        kinds[plan] = store.begin_run({"name": "B"}, plan, "cpu")
        store.finish_run(kinds[plan], "complete")
    running = store.begin_run({"name": "B"}, PROFILE_PLAN, "cpu")
    ids = lambda runs: [r.id for r in runs]  # noqa: E731
    assert ids(store.runs(kind="measurement")) == [first, failed, kinds["full"]]
    assert ids(store.runs(kind="profile")) == [kinds[PROFILE_PLAN], running]
    assert ids(store.runs(kind="profile", status="complete")) == [kinds[PROFILE_PLAN]]
    assert ids(store.runs(kind="comm")) == [kinds[COMM_PLAN]] and ids(store.runs(kind="fleet")) == [kinds[FLEET_PLAN]]
    assert ids(store.runs(status="failed")) == [failed]
    assert ids(store.runs("GPU-a", status="complete")) == [first]
    assert sorted(ids(store.runs(kind=k)) for k in ("measurement", "profile", "comm", "fleet")) == \
        sorted([[first, failed, kinds["full"]], [kinds[PROFILE_PLAN], running], [kinds[COMM_PLAN]], [kinds[FLEET_PLAN]]])
    assert store.latest().id == running and store.latest(kind="profile", status="complete").id == kinds[PROFILE_PLAN]
    assert store.latest(kind="measurement", where=lambda r: r.has_ceilings).id == failed
    assert store.latest(kind="measurement", status="complete", where=lambda r: r.has_ceilings).id == first
    assert store.latest(kind="comm", status="failed") is None
