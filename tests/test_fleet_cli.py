"""`torchrun … rooftop measure --fleet` and `rooftop check` end to end: real ranks, a real store, real imports."""

from __future__ import annotations

import copy
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from helpers.procs import finish
from rooftop.models.fleet import STRAGGLER_RATIO, short_of
from rooftop.store.fleets import members_of
from rooftop.store.runs import Store

ENV = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1",
       "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
DATA = Path(__file__).parent / "data"


def rooftop(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rooftop.tui.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def torchrun(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """torchrun as the user types it (`--no-python rooftop …`); its module, so the venv's torch runs it."""
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", *args],
                          capture_output=True, text=True, timeout=timeout, env=ENV)


def test_torchrun_fleet_two_cpu_ranks(tmp_path):
    db = tmp_path / "f.db"
    out = torchrun("--nproc-per-node", "2", "--no-python", "rooftop", "measure", "--fleet", "--device", "cpu",
                   "--only", "launch", "--json", "--db", str(db))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)  # rank 0 alone prints: one document
    rows = doc["rows"]
    assert [r["rank"] for r in rows] == [0, 1] and all(r["status"] == "complete" for r in rows)
    assert all(r["host"] and r["ceilings"]["launch"] > 0 for r in rows)
    (model,) = doc["median"]
    launches = [r["ceilings"]["launch"] for r in rows]
    assert doc["median"][model]["launch"] == pytest.approx(statistics.median(launches))
    # the straggler rule, applied to the figures it reports: a rank is flagged iff it is short of its peer
    expected = {r["rank"] for r, peer in ((rows[0], rows[1]), (rows[1], rows[0]))
                if short_of("launch", r["ceilings"]["launch"], peer["ceilings"]["launch"], STRAGGLER_RATIO)}
    assert set(doc["stragglers"]) == expected and doc["straggler_ratio"] == STRAGGLER_RATIO
    assert "rank 0 of 2" in out.stderr and "rank 1 of 2" in out.stderr

    listed = json.loads(rooftop("runs", "--json", "--db", str(db)).stdout)
    fleets = [r for r in listed if r["plan"] == "fleet"]
    assert len(fleets) == 1 and fleets[0]["id"] == doc["run_id"]
    members = fleets[0]["device"]["fleet"]["members"]
    assert {m["run_id"] for m in members} == {r["run_id"] for r in rows}
    assert {r["id"] for r in listed} == {doc["run_id"], *(r["run_id"] for r in rows)}  # members kept as runs
    assert all(r["imported_from"] is None for r in listed)  # measured, not imported
    text = rooftop("runs", "--db", str(db)).stdout
    assert text.count("torchrun fleet") == 1 and "rank 0" in text and "rank 1" in text

    # the fleet run is gated against its own median (and a launch floor 1000× faster than any CPU's fails)
    ok = rooftop("check", "--db", str(db), "--tolerance", "0.5")
    assert ok.returncode in (0, 1) and "ceiling checks" in ok.stdout
    member = json.loads(rooftop("export", rows[0]["run_id"], "--db", str(db)).stdout)["runs"][0]
    assert member["profile"] is None  # a launch floor alone is no device profile, as `rooftop measure` keeps it
    member["profile"] = {"id": "x", "name": model, "source": "measured", "kind": "cpu", "bandwidth": {}, "peak": {},
                         "launch_overhead": rows[0]["ceilings"]["launch"]}
    base = _doc_run(member, "fastlaunch", launch=lambda v: v / 1000)
    imported = _import(tmp_path, db, base)
    bad = rooftop("check", doc["run_id"], "--against", imported, "--db", str(db))
    assert bad.returncode == 1 and "launch" in bad.stdout and "SHORT" in bad.stdout


def _measuring_child(launcher: psutil.Process, local_rank: str) -> psutil.Process | None:
    """The process rank `local_rank` measures in: the rank's spawned child (not multiprocessing's tracker)."""
    for proc in launcher.children(recursive=True):
        try:
            if proc.environ().get("LOCAL_RANK") != local_rank or "measure" not in proc.cmdline():
                continue
            kids = [k for k in proc.children() if "spawn_main" in " ".join(k.cmdline())]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if kids:
            return kids[0]
    return None


def test_torchrun_fleet_keeps_the_rows_of_a_rank_whose_measurement_dies(tmp_path):
    """Rank 1's measuring process is SIGKILLed (as a segfault or the OOM killer would end it): rank 1 lives on to
    say so, rank 0's gather completes, and the fleet is kept with rank 0's row; the exit status says one was lost."""
    db = tmp_path / "f.db"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "--no-python",
           "rooftop", "measure", "--fleet", "--device", "cpu", "--only", "launch", "--json", "--wait", "60",
           "--db", str(db)]
    launcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        deadline = time.monotonic() + 120
        while (child := _measuring_child(psutil.Process(launcher.pid), "1")) is None:
            assert launcher.poll() is None and time.monotonic() < deadline, "rank 1 never started measuring"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        out, err = finish(launcher, timeout=240)
    assert launcher.returncode != 0, err  # a member was lost, as for a rank that hangs
    doc = json.loads(out)
    rows = doc["rows"]
    assert [(r["rank"], r["status"]) for r in rows] == [(0, "complete"), (1, "lost")]
    assert rows[0]["ceilings"]["launch"] > 0 and rows[1]["host"] and "SIGKILL" in rows[1]["error"]
    assert "1 without a result" in err and "rank 1: no result: it died of SIGKILL" in err
    assert doc["run_id"] is not None and any(f["rank"] == 1 and f["kind"] == "lost" for f in doc["flags"])
    with Store.open(db) as store:
        fleet = store.run(doc["run_id"])
        members = members_of(fleet)
        assert [(m["rank"], m["status"]) for m in members] == [(0, "complete"), (1, "lost")]
        assert store.run(members[0]["run_id"]).status == "complete" and members[1]["run_id"] is None
        assert len(store.runs()) == 2  # the fleet and rank 0's run


def _doc_run(run: dict, name: str, dram=None, launch=None) -> dict:
    """A copy of an exported run under a new id and name, its B dram / launch floor changed."""
    run = copy.deepcopy(run)
    run["id"] = (run["id"][:-6] + "abcdef") if not run["id"].endswith("abcdef") else run["id"][:-6] + "fedcba"
    run["name"] = name
    if dram:
        run["profile"]["bandwidth"]["dram"] = dram(run["profile"]["bandwidth"]["dram"])
    if launch:
        run["profile"]["launch_overhead"] = launch(run["profile"]["launch_overhead"])
    return run


def _import(tmp_path: Path, db: Path, run: dict) -> str:
    f = tmp_path / f"{run['name']}.json"
    f.write_text(json.dumps({"format": "rooftop-runs", "format_version": 1, "runs": [run]}))
    r = rooftop("import", str(f), "--db", str(db))
    assert r.returncode == 0, r.stderr
    return run["name"]


def _h200_run() -> dict:
    prof = json.loads((DATA / "h200-measured-2026-11-30.profile.json").read_text())
    return {"id": "0123456789abcdef0123456789a00000", "name": "node7", "device_key": "GPU-h200-node7",
            "host": "node7", "device": {"name": prof["name"], "kind": "gpu"}, "backend": "cuda:0", "versions": {},
            "plan": "quick", "started_at": 1.8e9, "ended_at": 1.8e9 + 60, "status": "complete",
            "profile": prof, "samples": [], "telemetry": []}


def test_check_against_imported_baselines(tmp_path):
    db = tmp_path / "c.db"
    run = _h200_run()
    _import(tmp_path, db, run)
    same = _import(tmp_path, db, _doc_run(run, "golden"))
    double = _import(tmp_path, db, _doc_run(_doc_run(run, "x"), "fastdram", dram=lambda v: 2 * v))

    ok = rooftop("check", "node7", "--against", same, "--db", str(db))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip().endswith("ceiling checks hold")

    short = rooftop("check", "node7", "--against", double, "--db", str(db))
    assert short.returncode == 1, short.stdout + short.stderr
    dram = run["profile"]["bandwidth"]["dram"]
    (line,) = [x for x in short.stdout.splitlines() if "SHORT" in x]
    assert "B dram" in line and f"{dram / 1e9:.4g} GB/s" in line and f"{2 * dram / 1e9:.4g} GB/s" in line
    assert "0.50×" in line

    js = json.loads(rooftop("check", "node7", "--against", double, "--json", "--db", str(db)).stdout)
    assert js["ok"] is False and [f["ceiling"] for f in js["failures"]] == ["B dram"]
    assert js["failures"][0]["value"] == pytest.approx(dram) and js["failures"][0]["reference"] == pytest.approx(2 * dram)

    assert rooftop("check", "node7", "--against", "h200", "--db", str(db)).returncode in (0, 1)  # a catalog device


@pytest.mark.parametrize("args, words", [
    (("--tolerance", "1.5"), "--tolerance 1.5"),
    (("--against", "nosuchdevice"), "nosuchdevice"),
    (("nosuchrun", "--against", "h200"), "nosuchrun"),
])
def test_check_bad_input_is_one_line_exit_2(tmp_path, args, words):
    db = tmp_path / "c.db"
    _import(tmp_path, db, _h200_run())
    r = rooftop("check", *args, "--db", str(db))
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


def test_check_tells_what_the_run_did_not_measure_and_a_run_that_did_not_complete(tmp_path, capsys):
    """A run with two of h100's ten ceilings said `ok: 2 of 2` and nothing else; a cancelled run passed unremarked.
    Still told, not failed: a run of `--only launch` is no regression."""
    from rooftop.models.profile import Ceiling, DeviceProfile
    from rooftop.tui.cli import main

    db = str(tmp_path / "r.db")
    roofs = tmp_path / "roofs.csv"
    roofs.write_text("target,dtype,bandwidth_gb_s,peak_tflop_s,ridge_flop_byte,bw_case,compute_case\n"
                     "tinybox,fp64,3084.8,64.2,20.8,read_reduce:134217728,8192x8192x8192\n")
    assert main(["import", str(roofs), "--db", db]) == 0
    capsys.readouterr()
    assert main(["check", "tinybox-imported", "--against", "h100", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "not measured in this run, so not checked: F fp64-fma" in out and "F bf16-tc" in out and "launch" in out
    assert "ok: 2 of 2 ceiling checks hold" in out
    with Store.open(tmp_path / "r.db") as store:
        rid = store.begin_run({"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-cut"}, "quick", "cuda")
        store.set_ceilings(rid, DeviceProfile(id="local", name="NVIDIA H100 80GB HBM3", source="measured",
                                              bandwidth={"dram": Ceiling(3.1e12, "measured", "read_reduce:1")}, peak={}))
        store.finish_run(rid, "cancelled")
    assert main(["check", rid[:8], "--against", "h100", "--json", "--db", db]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and any(f"run {rid[:8]} is cancelled: only what it measured is checked" in n for n in doc["notes"])


def test_fleet_outside_torchrun_and_all_gpus_without_gpus(tmp_path):
    r = rooftop("measure", "--fleet", "--device", "cpu", "--db", str(tmp_path / "x.db"))
    assert r.returncode == 2 and "torchrun" in r.stderr and "--all-gpus" in r.stderr
    env = {k: v for k, v in ENV.items()}
    env["CUDA_VISIBLE_DEVICES"] = ""
    r = subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "measure", "--all-gpus", "--db",
                        str(tmp_path / "x.db")], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and "no CUDA GPU" in r.stderr
    r = rooftop("measure", "--all-gpus", "--fleet")
    assert r.returncode == 2 and "not allowed with" in r.stderr


def _member_payload(rank: int, dram: float | None, model: str = "AMD EPYC 9654", status: str = "complete") -> dict:
    """A rank's payload as the ranks send it: its ceilings, or (dram None) none, lost."""
    from rooftop.models.profile import Ceiling, DeviceProfile

    if dram is None:
        return {"rank": rank, "host": "node0", "device": "", "status": "lost",
                "error": "its process ended about 19 s into the run: no sign of life for 10 s"}
    prof = DeviceProfile("x", model, "measured", {"dram": Ceiling(dram, "measured", "read_reduce:1G")},
                         {"fp32-fma": Ceiling(2e12, "measured")}, kind="cpu", launch_overhead=Ceiling(5e-6, "measured"))
    now = time.time()
    return {"rank": rank, "local_rank": rank, "host": "node0", "device": "cpu", "model": model, "status": status,
            "error": "", "run_id": None, "profile": prof.to_dict(), "device_info": {"name": model, "kind": "cpu"},
            "plan": "quick", "backend": "cpu", "versions": {}, "started_at": now - 60, "ended_at": now,
            "wall_s": 60.0, "processes": [], "throttle": [], "samples": []}


def _kept_fleet(db: Path, payloads: list[dict]) -> str:
    from rooftop.store.fleets import save_fleet

    with Store.open(db) as store:
        return save_fleet(store, payloads, "torchrun", "quick")


@pytest.mark.parametrize("share, fine", [(0.91, True), (0.89, False)])
def test_the_fleet_report_and_check_agree_on_a_member(tmp_path, share, fine):
    """The report said "no straggler: every ceiling is within 0.9× its peers' median" of a member at 0.91×
    that `rooftop check` (no baseline) then failed; at 0.89× both fail it. Both name the one rule."""
    db = tmp_path / "f.db"
    fid = _kept_fleet(db, [_member_payload(0, 100e9), _member_payload(1, 100e9), _member_payload(2, share * 100e9)])
    report = rooftop("show", fid[:8], "--db", str(db))
    check = rooftop("check", fid[:8], "--db", str(db))
    assert report.returncode == 0, report.stderr
    rule = "0.9× its peers' median"
    assert rule in check.stdout and rule in report.stdout
    if fine:
        assert "no straggler: every ceiling is within 0.9× its peers' median" in report.stdout
        assert check.returncode == 0 and "SHORT" not in check.stdout and check.stdout.strip().startswith(
            "each member is held to"), check.stdout
    else:
        assert "! rank 2 (node0 cpu): B dram 89 GB/s is below 0.9× its peers' median 100 GB/s" in report.stdout
        assert check.returncode == 1
        (short,) = [line for line in check.stdout.splitlines() if "SHORT" in line]
        assert short.startswith("rank 2 (node0 cpu): B dram 89 GB/s vs 100 GB/s (peers' median, 0.89×")


def test_check_of_a_fleet_with_a_lost_member_fails_naming_the_rank(tmp_path):
    """No baseline, one member measured, one lost: check exited 2 blaming --only."""
    db = tmp_path / "f.db"
    fid = _kept_fleet(db, [_member_payload(0, 100e9), _member_payload(1, None)])
    r = rooftop("check", fid[:8], "--db", str(db))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--only" not in r.stdout + r.stderr and not r.stderr
    assert "! rank 1 (node0): no result (its process ended about 19 s into the run" in r.stdout
    assert r.stdout.strip().splitlines()[-1] == "FAILED: 0 of 0 ceiling checks hold; 1 member gave no result"
    doc = json.loads(rooftop("check", fid[:8], "--json", "--db", str(db)).stdout)
    assert doc["ok"] is False and len(doc["lost"]) == 1 and doc["lost"][0].startswith("rank 1 (node0)")
    # one member and nobody lost: nothing to hold it to, and it says so (bad input, exit 2)
    lone = _kept_fleet(db, [_member_payload(0, 100e9)])
    r = rooftop("check", lone[:8], "--db", str(db))
    assert r.returncode == 2 and "fewer than two members" in r.stderr and "--against" in r.stderr


def test_check_against_another_device_model_says_so(tmp_path):
    """An H200 run against h100 gave SHORT or ok with no word about the mismatch."""
    db = tmp_path / "c.db"
    _import(tmp_path, db, _h200_run())
    other = rooftop("check", "node7", "--against", "h100", "--db", str(db))
    assert other.returncode in (0, 1)
    (line,) = [x for x in other.stdout.splitlines() if "another device model" in x]
    assert line.startswith("the baseline h100 is NVIDIA H100 80GB HBM3, this is NVIDIA H200: another device model")
    same = rooftop("check", "node7", "--against", "h200-ds", "--db", str(db))  # the datasheet names it otherwise
    assert same.returncode in (0, 1) and "another device model" not in same.stdout


def test_a_zero_launch_floor_is_refused_at_import_and_check_says_what_it_left_out(tmp_path):
    """`"launch_overhead": 0` was read as "no launch": imported, then skipped by check without a word."""
    db = tmp_path / "c.db"
    zero = _h200_run()
    zero["profile"]["launch_overhead"] = 0
    f = tmp_path / "zero.json"
    f.write_text(json.dumps({"format": "rooftop-runs", "format_version": 1, "runs": [zero]}))
    r = rooftop("import", str(f), "--db", str(db))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "launch overhead = 0" in r.stderr
    assert not db.exists() or not json.loads(rooftop("runs", "--json", "--db", str(db)).stdout)
    # a baseline without a launch floor: the run's is not checked, and check says so
    run = _h200_run()
    run["profile"]["launch_overhead"] = 5e-6
    _import(tmp_path, db, run)
    nolaunch = _doc_run(_h200_run(), "nolaunch")
    nolaunch["profile"]["launch_overhead"] = None
    _import(tmp_path, db, nolaunch)
    r = rooftop("check", "node7", "--against", "nolaunch", "--db", str(db))
    assert "not in the baseline nolaunch, so not checked: launch" in r.stdout, r.stdout
