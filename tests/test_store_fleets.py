"""A fleet kept as a run in a real SQLite store: members measured elsewhere kept with their hosts,
members kept as they measured referred to, and each member against the same device measured alone."""

from __future__ import annotations

import json
import sqlite3
import time
from types import SimpleNamespace

import pytest

from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.sample import Sample, TimeStats
from rooftop.store import db as dbmod
from rooftop.store.fleets import fleet_of, is_fleet, member_ids, members_of, save_fleet
from rooftop.store.io import export_json
from rooftop.store.runs import NewRun, Run, Store
from rooftop.tui.cli import main
from rooftop.tui.services.fleet import device_processes


def prof(dram: float) -> DeviceProfile:
    return DeviceProfile("x", "NVIDIA H200", "measured", {"dram": Ceiling(dram, "measured", "read_reduce:1G")}, {},
                         kind="gpu", launch_overhead=Ceiling(5e-6, "measured"))


def sample() -> Sample:
    return Sample(family="read_reduce", dtype="fp32", cache="streaming", shape={"n": 1 << 28}, flops=1 << 28,
                  bytes=1 << 30, footprint_bytes=1 << 30, stats=TimeStats(2e-4, 2e-4, 2e-4, 2e-4, 0.01, 7, 10), conditions={"mean_sm_clock_mhz": 1980.0})


def payload(rank: int, host: str, dram: float, uuid: str) -> dict:
    now = time.time()
    return {"rank": rank, "local_rank": rank % 8, "host": host, "device": f"cuda:{rank % 8}", "model": "NVIDIA H200",
            "status": "complete", "error": "", "run_id": None, "profile": prof(dram).to_dict(),
            "device_info": {"name": "NVIDIA H200", "kind": "gpu", "uuid": uuid}, "plan": "quick",
            "backend": f"cuda:{rank % 8}", "versions": {"torch": "2.5"}, "started_at": now - 60, "ended_at": now,
            "wall_s": 60.0, "processes": [], "throttle": ["power cap"] if rank == 2 else [],
            "samples": [sample().to_dict()], "sm_clock_mhz": 1980.0}


def test_gathered_members_are_kept_with_their_hosts_and_the_fleet_once(tmp_path):
    with Store.open(tmp_path / "f.db") as store:
        ps = [payload(0, "node0", 4.6e12, "GPU-a"), payload(1, "node1", 4.6e12, "GPU-b"),
              payload(2, "node1", 3.9e12, "GPU-c"),
              {"rank": 3, "host": "node2", "device": "", "status": "lost", "error": "no result within 300 s"}]
        fid = save_fleet(store, ps, "torchrun", "quick")
        runs = store.runs()
        fleet = store.run(fid)
        assert is_fleet(fleet) and fleet.status == "complete" and not fleet.has_ceilings
        assert len(runs) == 4 and len(member_ids(store)) == 3  # three members kept, the lost one an entry
        members = {r.host: r for r in runs if not is_fleet(r)}
        assert set(members) == {"node0", "node1"} and all(r.imported_from is None for r in runs)
        assert all(store.samples(r.id) for r in runs if not is_fleet(r))
        report = fleet_of(store, fleet)
    assert [(m.rank, m.host, m.status) for m in report.members] == [
        (0, "node0", "complete"), (1, "node1", "complete"), (2, "node1", "complete"), (3, "node2", "lost")]
    assert [(f.rank, f.ceiling) for f in report.stragglers] == [(2, "B dram")]
    kinds = {(f.rank, f.kind) for f in report.flags}
    assert (2, "power") in kinds and (3, "lost") in kinds


def test_a_member_below_the_same_gpu_measured_alone_is_flagged(tmp_path):
    """Alone = the GPU's latest complete run before, that is no fleet's member (an earlier fleet shared the budget too)."""
    now = time.time()
    with Store.open(tmp_path / "f.db") as store:
        solo = Run(id="a" * 32, device_key="GPU-a", host="node0", device={"name": "NVIDIA H200", "uuid": "GPU-a"},
                   backend="cuda:0", plan="quick", started_at=now - 3600, status="complete", ended_at=now - 3500)
        store.insert_runs([NewRun(solo, [sample()], (), prof(4.6e12), measured=True)])
        earlier = payload(0, "node0", 3.6e12, "GPU-a")
        earlier["started_at"] = now - 1800
        save_fleet(store, [earlier], "all-gpus", "quick")
        together = payload(0, "node0", 3.6e12, "GPU-a")
        together["started_at"] = now
        fid = save_fleet(store, [together], "all-gpus", "quick")
        report = fleet_of(store, store.run(fid))
    (shared,) = [f for f in report.flags if f.kind == "shared"]
    assert shared.ceiling == "B dram" and shared.value == 3.6e12 and shared.reference == 4.6e12
    assert "measured with the others" in shared.text and "alone" in shared.text


def test_the_processes_nvml_names_on_a_gpu_leave_out_the_fleets_own():
    gpus = (SimpleNamespace(index=0, processes=(SimpleNamespace(pid=10, name="python"),
                                                SimpleNamespace(pid=11, name=None))),
            SimpleNamespace(index=1, processes=(SimpleNamespace(pid=12, name="vllm"),)))
    snap = SimpleNamespace(gpus=gpus)
    assert device_processes(snap, 0, skip={10}) == ("11 ?",)
    assert device_processes(snap, 1, skip=set()) == ("12 vllm",)
    assert device_processes(snap, None, skip=set()) == ()


def test_profiles_by_device_key(tmp_path):
    from rooftop.store.fleets import profiles_by_device

    with Store.open(tmp_path / "f.db") as store:
        save_fleet(store, [payload(0, "n", 4.6e12, "GPU-a"), payload(1, "n", 2.3e12, "GPU-b")], "all-gpus", "quick")
        by = profiles_by_device(store)
    assert by["GPU-a"].B("dram") == 4.6e12 and by["GPU-b"].B("dram") == 2.3e12


def _report_rows(report) -> list:
    return [(m.rank, m.host, m.status, m.profile.B("dram") if m.profile else None) for m in report.members]


def test_a_fleet_export_carries_its_members_and_import_restores_the_fleet(tmp_path, capsys, monkeypatch):
    """`rooftop export FLEET` writes the member runs too; importing the file into another store gives the same
    fleet (same report, members listed under it), and exporting it there gives the same document."""
    a, b, f = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "fleet.json"
    with Store.open(a) as store:
        solo = save_fleet(store, [payload(0, "node9", 4.6e12, "GPU-z")], "all-gpus", "quick")  # not exported
        ps = [payload(0, "node0", 4.6e12, "GPU-a"), payload(1, "node1", 3.9e12, "GPU-b"),
              {"rank": 2, "host": "node2", "device": "", "status": "lost", "error": "it died of SIGKILL"}]
        fid = save_fleet(store, ps, "torchrun", "quick")
        member_runs = {str(m["run_id"]) for m in members_of(store.run(fid)) if m.get("run_id")}
        before = fleet_of(store, store.run(fid))
    assert main(["export", fid[:8], "--out", str(f), "--db", str(a)]) == 0
    assert "wrote 3 runs" in (told := capsys.readouterr().out) and "2 of them a fleet's members" in told
    doc = json.loads(f.read_text())
    assert [r["id"] for r in doc["runs"]][-1] == fid and {r["id"] for r in doc["runs"][:-1]} == member_runs
    assert solo not in {r["id"] for r in doc["runs"]}

    assert main(["import", str(f), "--db", str(b)]) == 0
    assert "added 3 runs" in capsys.readouterr().out
    with Store.open(b) as store:
        assert {r.id for r in store.runs()} == {fid, *member_runs}
        after = fleet_of(store, store.run(fid))
        assert member_ids(store) == member_runs and all(store.samples(rid) for rid in member_runs)
        again = export_json(store, [store.run(fid)])
    assert _report_rows(after) == _report_rows(before) and len(member_runs) == 2
    assert [(s.rank, s.ceiling) for s in after.stragglers] == [(1, "B dram")]
    assert _same(again) == _same(doc)
    assert main(["import", str(f), "--db", str(b)]) == 0 and "3 already present" in capsys.readouterr().out

    monkeypatch.setenv("COLUMNS", "120")
    assert main(["runs", "--db", str(b)]) == 0
    rows = [line.split()[:3] for line in capsys.readouterr().out.splitlines()[1:4]]
    assert rows[0] == [fid[:8], "complete", "fleet:"]  # the members listed under their fleet, as where measured
    assert [r[1:] for r in rows[1:]] == [["rank", "0"], ["rank", "1"]]
    assert {r[0] for r in rows[1:]} == {rid[:8] for rid in member_runs}


def _same(doc: dict) -> dict:
    """An export as compared across stores: when it was written and where each run came from aside."""
    return {**doc, "exported_at": None, "runs": [{**r, "imported_from": None} for r in doc["runs"]]}


def _keep_and_report(db, capsys) -> tuple[int, dict, str]:
    """The CLI's end of a fleet run (keep it, then report) in this process, on two gathered rows."""
    from argparse import Namespace

    from rooftop.tui.commands.fleet import _report

    ps = [payload(0, "node0", 4.6e12, "GPU-a"), payload(1, "node1", 2.3e12, "GPU-b")]
    rc = _report(Namespace(db=str(db), no_save=False, json=True), ps, "torchrun", "quick", 1.0)
    out = capsys.readouterr()
    return rc, json.loads(out.out), out.err


def test_a_fleet_is_kept_through_the_run_keeper(tmp_path, capsys):
    rc, doc, err = _keep_and_report(tmp_path / "f.db", capsys)
    assert rc == 0 and f"saved as run {doc['run_id'][:8]}" in err and "warning" not in err
    with Store.open(tmp_path / "f.db") as store:
        assert len(store.runs()) == 3 and store.run(doc["run_id"]).status == "complete"
        fleet = store.run(doc["run_id"])
        assert fleet.host and fleet.imported_from is None and fleet.device["fleet"]["plan"] == "quick"


@pytest.mark.parametrize("failure", ["locked", "foreign"])
def test_a_store_that_fails_keeps_nothing_and_the_report_is_still_printed(tmp_path, capsys, monkeypatch, failure):
    """A locked store, or a file that is not rooftop's: told in one warning line worded as for any run, nothing
    half-kept (no member without its fleet), the report printed whole, and the exit status 1."""
    monkeypatch.setenv("COLUMNS", "300")
    db = tmp_path / "f.db"
    holder = None
    if failure == "locked":
        monkeypatch.setattr(dbmod, "BUSY_TIMEOUT_MS", 100)
        Store.open(db).close()
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
    else:
        db.write_bytes(b"not a database at all\n")
    try:
        rc, doc, err = _keep_and_report(db, capsys)
    finally:
        if holder is not None:
            holder.execute("ROLLBACK")
            holder.close()
    assert rc == 1 and doc["run_id"] is None
    assert [(r["rank"], r["status"]) for r in doc["rows"]] == [(0, "complete"), (1, "complete")]
    assert doc["stragglers"] == [1]  # the report as measured: B dram 2.3 TB/s, its peer's 4.6
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert warning.startswith("rooftop measure: warning: the fleet run is not kept in the store: ") and str(db) in warning
    assert ("is locked" if failure == "locked" else "another kind of file") in warning and "not kept" in err.splitlines()[-1]
    if failure == "locked":
        with Store.open(db) as store:
            assert store.runs() == []  # all or none


def test_a_fleet_tells_a_failing_store_once_and_keeps_what_its_members_could_not(tmp_path, capsys, monkeypatch):
    """--all-gpus members keep their own runs as they measure; when the store failed them, each member's row said
    "the run is not kept in the store: …" beside the fleet's own "the fleet run is not kept …" (and its points were
    lost even once the store was back). Now the member's points travel with its row, the fleet keeps them, and
    a store that fails the fleet is told once, in the one wording (services.fleet.store_warning)."""
    from argparse import Namespace

    from rooftop.tui.commands.fleet import _report
    from rooftop.tui.services.fleet import measure_member

    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr(dbmod, "BUSY_TIMEOUT_MS", 100)
    db = tmp_path / "f.db"
    Store.open(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        job = {"device": "cpu", "threads": 1, "plan": "quick", "only": ["launch"], "db": str(db), "store": True}
        payload = measure_member(0, job)
        assert payload["run_id"] is None and payload["samples"] and "is locked" in payload["store_error"]
        rc = _report(Namespace(db=str(db), no_save=False, json=True), [payload], "all-gpus", "quick", 1.0)
        out = capsys.readouterr()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    doc = json.loads(out.out)
    assert rc == 1 and doc["run_id"] is None and doc["rows"][0]["error"] == ""
    warnings = [line for line in out.err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].startswith("rooftop measure: warning: the fleet run is not kept in the "
                                                         "store: ") and str(db) in warnings[0]
    assert out.err.count("not kept in the store") == 2  # the warning, and the summary's "; not kept in the store"

    rc = _report(Namespace(db=str(db), no_save=False, json=True), [payload], "all-gpus", "quick", 1.0)
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["run_id"]
    with Store.open(db) as store:
        (member,) = members_of(store.run(doc["run_id"]))
        assert len(store.samples(member["run_id"])) == len(payload["samples"]) == 1
