"""The store's commands: runs, show, rename, delete, export, import, compare, and --device NAME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from helpers.store_writer import damage_pages, synthetic_sample
from rooftop.models.catalog import catalog
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.store.runs import Store
from rooftop.tui.cli import main

ROOFS = resources.files("rooftop.models").joinpath("data/reference/roofs.csv")


@pytest.fixture(autouse=True)
def no_user_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a test forgets, rooftop never reaches the user's own database."""
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ROOFTOP_DB", raising=False)


def measured(path: Path, name: str | None = "labbox", bw: float = 2.0e12, complete: bool = True) -> str:
    with Store.open(path) as s:
        rid = s.begin_run({"name": "Lab GPU", "uuid": f"GPU-{bw}"}, "quick", "cuda", {"torch": "2.5.1"})
        for i in range(3):
            s.add_sample(rid, synthetic_sample(i))
        s.set_ceilings(rid, DeviceProfile(
            id="local", name="Lab GPU", source="measured",
            bandwidth={"dram": Ceiling(bw, "measured", "read_reduce:134217728")},
            peak={"bf16-tc": Ceiling(4.0e14, "measured", "8192x8192x8192"),
                  "fp32-fma": Ceiling(3.0e13, "measured", "fma:fp32:reps=64:1048576")},
        ))
        if complete:
            s.finish_run(rid, "complete")
        if name:
            s.rename(rid, name)
    return rid


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_runs_show_rename_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    rc, out, _ = run_cli(capsys, "runs", "--db", db)
    assert rc == 0 and "no runs" in out
    rid = measured(Path(db), name=None)
    rc, out, _ = run_cli(capsys, "runs", "--db", db)
    assert rc == 0 and rid[:8] in out and "complete" in out
    rc, out, _ = run_cli(capsys, "runs", "--db", db, "--json")
    assert json.loads(out)[0]["id"] == rid and json.loads(out)[0]["samples"] == 3
    rc, out, _ = run_cli(capsys, "show", rid[:6], "--db", db)
    assert rc == 0 and rid in out and "read_reduce" in out and "bf16-tc" in out and "Lab GPU" in out
    rc, out, _ = run_cli(capsys, "show", rid[:6], "--db", db, "--json")
    assert json.loads(out)["id"] == rid and len(json.loads(out)["samples"]) == 3
    rc, out, _ = run_cli(capsys, "rename", rid[:6], "lab-box", "--db", db)
    assert rc == 0 and "--device lab-box" in out
    rc, out, _ = run_cli(capsys, "delete", "lab-box", "--db", db)
    assert rc == 0 and "3 samples" in out
    rc, _, err = run_cli(capsys, "show", "lab-box", "--db", db)
    assert rc == 2 and err.count("\n") == 1 and "no run 'lab-box'" in err and "rooftop runs" in err


def test_show_gives_write_beside_b_and_the_capped_ceilings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    with Store.open(db) as s:
        rid = s.begin_run({"name": "NVIDIA H200", "uuid": "GPU-1"}, "quick", "cuda", {"torch": "2.11"})
        capped = {"mean_sm_clock_mhz": 1747.5, "sm_clock_max_mhz": 1980.0, "power_limit_w": 700.0,
                  "throttle": ["power cap"]}
        s.set_ceilings(rid, DeviceProfile(
            id="local", name="NVIDIA H200", source="measured", kind="gpu",
            bandwidth={"dram": Ceiling(4.363e12, "measured", "read_reduce:536870912")},
            peak={"bf16-tc": Ceiling(6.89e14, "measured", "2048x8192x8192")},
            extra={"write_bandwidth": 4.58e12, "write_case": "write:536870912", "write_stable": True,
                   "ceiling_conditions": {"bf16-tc": capped, "dram": {"mean_sm_clock_mhz": 1980.0}}},
        ))
        s.finish_run(rid, "complete")
    rc, out, _ = run_cli(capsys, "show", rid[:6], "--db", str(db))
    lines = out.splitlines()
    assert rc == 0 and any(line.startswith("B dram") and "4363 GB/s" in line for line in lines)
    assert any(line.startswith("write") and "4580 GB/s" in line and "write:536870912" in line for line in lines)
    assert "bf16-tc measured power-capped (700 W) at 1.75 GHz SM (max 1.98 GHz)" in " ".join(out.split())
    rc, out, _ = run_cli(capsys, "show", rid[:6], "--db", str(db), "--json")
    extra = json.loads(out)["profile"]["extra"]
    assert extra["write_bandwidth"] == 4.58e12 and extra["ceiling_conditions"]["bf16-tc"]["throttle"] == ["power cap"]


def test_show_survives_a_malformed_write_figure_or_conditions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    with Store.open(db) as s:
        rid = s.begin_run({"name": "GPU"}, "quick", "cuda", {})
        s.set_ceilings(rid, DeviceProfile(
            id="local", name="GPU", source="measured", bandwidth={"dram": Ceiling(1e12, "measured", "copy:1")}, peak={},
            extra={"write_bandwidth": "[red]fast", "ceiling_conditions": {"dram": {"throttle": "power cap",
                                                                                   "mean_sm_clock_mhz": "x"}}},
        ))
        s.finish_run(rid, "complete")
    rc, out, _ = run_cli(capsys, "show", rid[:6], "--db", str(db))
    assert rc == 0 and "B dram" in out and not any(line.startswith("write") for line in out.splitlines())
    assert "capped" not in out and "fast" not in out


def test_bad_input_is_one_line_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    rid = measured(Path(db))
    for argv, needle in [
        (("rename", rid, "h100"), "already a device id"),
        (("rename", rid, "9x"), "start with a letter"),
        (("rename", rid, "abc1"), "hex digits only"),
        (("delete", "ffff"), "no run 'ffff'"),
        (("export", "--db", db), "--all"),
        (("import", str(tmp_path / "missing.json")), "cannot read"),
        (("compare", "h100"), "at least two"),
        (("compare", "h100", "nosuch"), "unknown device 'nosuch'"),
    ]:
        rc, out, err = run_cli(capsys, *argv, "--db", db)
        assert rc == 2, (argv, err)
        assert needle in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    with pytest.raises(SystemExit) as exc:  # argparse: a format that does not exist
        main(["export", rid, "--format", "xml", "--db", db])
    assert exc.value.code == 2
    assert "json" in capsys.readouterr().err


def test_measured_profile_in_devices_and_as_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    rid = measured(Path(db))
    rc, out, _ = run_cli(capsys, "devices", "--db", db)
    assert rc == 0 and "labbox" in out and "measured" in out and "h100" in out
    rc, out, _ = run_cli(capsys, "devices", "labbox", "--db", db, "--json")
    d = json.loads(out)[0]
    assert d["id"] == "labbox" and d["source"] == "measured" and d["ridge"]["bf16-tc"] == pytest.approx(200.0)
    rc, out, _ = run_cli(capsys, "op", "gemm", "1", "8192", "8192", "bf16", "--device", "labbox", "--device", "h100",
                         "--json", "--db", db)
    assert rc == 0
    res = json.loads(out)
    assert [r["device"] if isinstance(r["device"], str) else r["device"]["id"] for r in res] == ["labbox", "h100"]
    # any run with ceilings can be named by id prefix
    rc, out, _ = run_cli(capsys, "op", "gemm", "1", "8192", "8192", "bf16", "--device", rid[:6], "--json",
                         "--db", db)
    assert rc == 0, capsys.readouterr().err


def test_incomplete_run_is_not_a_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    measured(Path(db), name=None, complete=False)
    rc, out, _ = run_cli(capsys, "devices", "--db", db, "--json")
    assert all(d["source"] != "measured" for d in json.loads(out))


def test_export_import_via_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    rid = measured(Path(a))
    out_json = tmp_path / "run.json"
    rc, _, err = run_cli(capsys, "export", "labbox", "--format", "json", "-o", str(out_json), "--db", a)
    assert rc == 0, err
    rc, _, err = run_cli(capsys, "export", "labbox", "-o", str(out_json), "--db", a)
    assert rc == 2 and "--force" in err  # never overwrites silently
    rc, out, _ = run_cli(capsys, "export", "labbox", "--db", a)  # json to stdout
    assert json.loads(out)["runs"][0]["id"] == rid
    folder = tmp_path / "csv"
    rc, out, err = run_cli(capsys, "export", rid[:8], "--format", "csv", "-o", str(folder), "--db", a)
    assert rc == 0, err
    assert (folder / "summary.csv").read_text().startswith("family,dtype,cache,m,n,k,reps,bytes,flops")
    assert (folder / "roofs.csv").read_text().startswith("target,dtype,bandwidth_gb_s")
    rc, out, _ = run_cli(capsys, "import", str(out_json), "--db", b)
    assert rc == 0 and "added 1 run" in out
    rc, out, _ = run_cli(capsys, "import", str(out_json), "--db", b)
    assert rc == 0 and "added 0 runs" in out and "1 already present" in out
    rc, out, _ = run_cli(capsys, "devices", "labbox", "--db", b, "--json")
    assert json.loads(out)[0]["source"] == "imported"


def test_import_reference_roofs_and_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    f = tmp_path / "roofs.csv"
    f.write_bytes(ROOFS.read_bytes())
    rc, out, _ = run_cli(capsys, "import", str(f), "--db", db)
    assert rc == 0 and "h100-imported" in out
    rc, out, _ = run_cli(capsys, "compare", "h100", "h200-imported", "--json", "--db", db)
    assert rc == 0
    res = json.loads(out)
    fp16 = next(p for p in res["pairs"] if p["path"] == "fp16-tc")
    h100, h200 = catalog()["h100"], catalog()["h200"]
    # the bandwidth-rich H200 flattens at its F while the H100 is still on its slope (seed 000 §3: I ≈ 245)
    assert fp16["crossover"] == pytest.approx(h200.F("fp16-tc") / h100.B("dram"))
    assert 240 < fp16["crossover"] < 250
    assert (fp16["higher_below"], fp16["higher_above"]) == ("h200-imported", "h100")
    assert res["devices"][1]["ridge"]["bf16-tc"] == pytest.approx(h200.ridge("bf16-tc"))
    rc, out, _ = run_cli(capsys, "compare", "h100", "h200", "b300", "--db", db)
    assert rc == 0 and "crossover" in out and "I* bf16-tc" in out and "h200 vs b300" in out


def test_corrupt_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "rooftop.db"
    db.write_bytes(b"definitely not sqlite\n" * 50)
    before = db.read_bytes()
    for argv in (("runs",), ("import", str(tmp_path / "x.json")), ("show", "abcd")):
        rc, _, err = run_cli(capsys, *argv, "--db", str(db))
        assert rc == 2 and str(db) in err and err.count("\n") == 1 and "--db" in err
    # the catalog still works, with a warning about the store
    rc, out, err = run_cli(capsys, "op", "gemm", "1", "8192", "8192", "bf16", "--device", "h100", "--db", str(db))
    assert rc == 0 and "warning" in err and str(db) in err
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rooftop.db"]


def test_subprocess_with_rooftop_db(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    rid = measured(db)
    env = {**os.environ, "ROOFTOP_DB": str(db), "ROOFTOP_HOME": str(tmp_path / "home")}
    r = subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "runs", "--json"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [x["id"] for x in json.loads(r.stdout)] == [rid]
    r = subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "show", "nothing"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_store_imports_neither_torch_nor_textual() -> None:
    code = (
        "import sys, rooftop.store, rooftop.store.runs, rooftop.store.io, rooftop.store.refcsv, rooftop.store.db;"
        "bad = [m for m in ('torch', 'textual', 'rooftop.tui', 'rooftop.probes') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_reading_commands_do_not_create_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "none.db"
    rc, out, _ = run_cli(capsys, "runs", "--db", str(db))
    assert rc == 0 and "no runs yet" in out
    for argv in (("show", "abcd"), ("export", "--all"), ("delete", "abcd")):
        rc, _, err = run_cli(capsys, *argv, "--db", str(db))
        assert rc == 2 and "no rooftop database" in err and err.count("\n") == 1
    rc, _, _ = run_cli(capsys, "devices", "--db", str(db))
    assert rc == 0
    assert not db.exists()


def test_plot_draws_imported_sample_points(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_store_io import SUMMARY

    db = str(tmp_path / "p.db")
    f = tmp_path / "summary.csv"
    f.write_text(SUMMARY)
    assert run_cli(capsys, "import", str(f), "--db", db)[0] == 0
    rc, out, err = run_cli(capsys, "plot", "-d", "boxa-imported", "--points", "--width", "100", "--height", "30",
                           "--db", db)
    assert rc == 0, err
    assert "boxa-imported gemm" in out and "boxa-imported unstable" in out


def test_sample_series_places_points_at_intensity_and_rate() -> None:
    from rooftop.models.plotdata import sample_series
    from rooftop.models.sample import Sample, TimeStats

    st = TimeStats(1e-3, 1e-3, 1e-3, 1e-3, 0.01, 7, 10)
    pts = [
        Sample("gemm", "bf16", {"m": 1}, flops=2e12, bytes=1e9, stats=st),
        Sample("fma", "fp32", {"n": 1}, flops=4e9, bytes=1e9, stats=TimeStats(1e-3, 1e-3, 1e-3, 1e-3, 0.5, 7, 10)),
        Sample("copy", "fp32", {"n": 1}, flops=0.0, bytes=1e9, stats=st),  # no FLOPs: off a log chart
        Sample("gemm", "fp8", {"m": 1}, flops=1.0, bytes=1.0, skipped="unsupported"),
    ]
    series = {s.label: s for s in sample_series(pts, "dev")}
    assert set(series) == {"dev gemm", "dev unstable"}
    assert series["dev gemm"].xs == (2000.0,) and series["dev gemm"].ys == (2e15,)
    assert series["dev unstable"].xs == (4.0,)


def test_a_run_without_ceilings_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    with Store.open(db) as s:
        rid = s.begin_run({"name": "g"}, "quick", "cuda")
    rc, _, err = run_cli(capsys, "op", "gemm", "1", "8192", "8192", "bf16", "-d", rid[:8], "--db", str(db))
    assert rc == 2 and "has no ceilings" in err and err.count("\n") == 1


def test_rooftop_database_damaged_inside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A valid header over damaged pages: reading commands fail in one line; the catalog still answers."""
    db = tmp_path / "rooftop.db"
    f = tmp_path / "roofs.csv"
    f.write_bytes(ROOFS.read_bytes())
    assert run_cli(capsys, "import", str(f), "--db", str(db))[0] == 0
    damage_pages(db)
    rc, _, err = run_cli(capsys, "runs", "--db", str(db))
    assert rc == 2 and "damaged" in err and str(db) in err and err.count("\n") == 1
    rc, out, err = run_cli(capsys, "devices", "--db", str(db), "--json")
    assert rc == 0 and "warning" in err and any(d["id"] == "h100" for d in json.loads(out))


def test_local_is_the_latest_run_measured_here(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    rc, _, err = run_cli(capsys, "devices", "local", "--db", str(db))
    assert rc == 2 and "unknown device 'local'" in err  # no database at all: just not a device
    measured(db, name=None, bw=1e12)
    newest = measured(db, name=None, bw=2e12)
    measured(db, name=None, bw=3e12, complete=False)
    rc, out, err = run_cli(capsys, "devices", "local", "--db", str(db), "--json")
    assert rc == 0, err
    d = json.loads(out)[0]
    assert d["id"] == "local" and d["extra"]["run_id"] == newest and d["bandwidth"]["dram"] == 2e12
    rc, _, err = run_cli(capsys, "rename", newest, "local", "--db", str(db))
    assert rc == 2


def test_no_local_run_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    measured(db, name=None, complete=False)
    rc, _, err = run_cli(capsys, "op", "gemm", "1", "8192", "8192", "bf16", "-d", "local", "--db", str(db))
    assert rc == 2 and "no complete run measured on this host" in err


def test_runs_list_fits_80_columns_and_an_import_has_no_made_up_duration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "csv"
    src.mkdir()
    (src / "roofs.csv").write_text(
        "target,dtype,bandwidth_gb_s,peak_tflop_s,ridge_flop_per_byte,bw_case,peak_case\n"
        "some-gpu-with-a-rather-long-name,bf16,3000,900,300,read_reduce:1073741824,8192x8192x8192\n"
    )
    db = str(tmp_path / "r.db")
    assert main(["import", str(src / "roofs.csv"), "--db", db]) == 0
    capsys.readouterr()
    assert main(["runs", "--db", db]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "1 run in" in out and "imported" in out
    assert main(["show", out.split()[8], "--db", db]) == 0  # the first row's run id
    assert "took" not in capsys.readouterr().out


def test_op_pinned_analyses_the_apps_pins_and_db_before_the_command_counts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        store.save_op("gemm m=1 n=8192 k=8192 bf16", "gemm m=1 n=8192 k=8192 bf16", ["h100"])
    assert main(["--db", str(db), "op", "--pinned", "ew n=1e9 fp32", "-d", "h100", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["regime"] for r in rows] == ["memory", "memory"]
    assert rows[1]["op"] == "gemm m=1 n=8192 k=8192 bf16"  # the pinned GEMV, after the given op
    assert rows[1]["time_lower_bound_s"] == pytest.approx(43.5e-6, rel=0.01)


def test_a_bad_or_roofless_pin_is_left_out_and_said_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        for spec in ("gemm m=4096 n=4096 k=4096 fp9", "gemm m=1 n=8192 k=8192 fp8", "gemm m=1 n=8192 k=8192 fp16"):
            store.save_op(spec, spec, ["h100"])
    assert main(["--db", str(db), "-d", "v100-16", "op", "--pinned", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [r["op"] for r in json.loads(out)] == ["gemm m=1 n=8192 k=8192 fp16"]
    assert "left out the saved pin 'gemm m=4096 n=4096 k=4096 fp9'" in err
    assert "left out the pin 'gemm m=1 n=8192 k=8192 fp8' on v100-16" in err
    # an op the user typed still fails in one line
    assert main(["--db", str(db), "op", "gemm 1 8192 8192 fp8", "-d", "v100-16"]) == 2
