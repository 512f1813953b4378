"""The CSV pair round trip: export → import gives ONE run equal to the original in all the CSVs carry.

The run here is built the way `rooftop measure` builds one (samples, then
`calibrate` for the stored profile), on real SQLite files in tmp dirs.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from importlib import resources
from pathlib import Path

import pytest

from rooftop.models.calibrate import Hardware, calibrate
from rooftop.models.catalog import catalog, reference_profiles
from rooftop.models.profile import DeviceProfile
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.units import MiB
from rooftop.store import refcsv
from rooftop.store.db import StoreError
from rooftop.store.io import ImportFailed, export_csv, import_file, import_paths
from rooftop.store.runs import Run, Store
from rooftop.tui.cli import main

ROOFS = resources.files("rooftop.models").joinpath("data/reference/roofs.csv")
HW = Hardware(kind="gpu", name="Test GPU, SXM", l2_bytes=50 * MiB)


def timed(t: float, iqr: float = 0.013) -> TimeStats:
    return TimeStats(t, 0.987654321 * t, 1.0234567 * t, 0.97 * t, iqr, 7, 40)


def stream(family: str, arrays: int, ws: float, t: float, iqr: float = 0.013) -> Sample:
    n = int(ws) // (4 * arrays)
    return Sample(family, "fp32", {"n": n, "arrays": arrays}, flops=0.0, bytes=4.0 * arrays * n,
                  footprint_bytes=4.0 * arrays * n, stats=timed(t, iqr), conditions={"working_set": int(ws)})


def gemm(dtype: str, m: int, n: int, k: int, t: float, iqr: float = 0.013, cache: str = "warm") -> Sample:
    size = {"bf16": 2, "fp8": 1}[dtype]
    q = float(size * (m * k + k * n + m * n))
    return Sample("gemm", dtype, {"m": m, "n": n, "k": k}, 2.0 * m * n * k, q, q, cache=cache,
                  path={"bf16": "bf16-tc", "fp8": "fp8-tc"}[dtype], stats=timed(t, iqr), max_error=3.1e-3,
                  conditions={"sweep": "square"})


def measured_samples() -> list[Sample]:
    """A quick plan's worth of points: DRAM and L2 streams, GEMMs (one path only unstable), FMA, launch."""
    fma = lambda reps, t: Sample("fma", "fp32", {"n": 2**26, "reps": reps}, 2.0 * reps * 2**26, 2.0 * 2**26 * 4,  # noqa: E731
                                 2.0 * 2**26 * 4, cache="streaming", path="fp32-fma", stats=timed(t),
                                 conditions={"method": "triton"})
    return [
        stream("read_reduce", 1, 512 * MiB, 0.1789123e-3 * 2),
        stream("copy", 2, 512 * MiB, 0.4012345e-3),
        stream("read_reduce", 1, 4 * MiB, 0.6123e-6),
        stream("copy", 2, 8 * MiB, 0.9e-6, iqr=0.3),
        gemm("bf16", 8192, 8192, 8192, 1.4123456e-3),
        gemm("bf16", 4096, 4096, 4096, 0.1e-3, iqr=0.5),
        gemm("bf16", 8192, 8192, 8192, 1.2e-3, cache="cold"),
        gemm("fp8", 8192, 8192, 8192, 0.8e-3, iqr=0.25),  # fp8's only point is unstable: so is its roof
        fma(1, 0.5e-3),
        fma(64, 0.3e-3),
        Sample("launch", "fp32", {"n": 1}, 1.0, 8.0, 4.0, stats=timed(4.5e-6), conditions={"kernel": "x.add_(1.0)"}),
        Sample("launch_graph", "fp32", {"n": 1, "kernels": 100}, 1.0, 8.0, 4.0, stats=timed(2.1e-6)),
        Sample("gemm", "fp8", {"m": 1, "n": 8, "k": 8}, 1.0, 1.0, path="fp8-tc", skipped="no fp8 here"),
    ]


def measure(store: Store, samples: list[Sample], name: str | None = "lab-a", uuid: str = "GPU-a") -> str:
    """What `rooftop measure` stores: every sample, then the calibrated profile."""
    rid = store.begin_run({"name": HW.name, "uuid": uuid, "l2_bytes": HW.l2_bytes}, "quick", "cuda", {"torch": "2.5"})
    store.add_samples(rid, samples)
    store.set_ceilings(rid, calibrate(samples, HW).profile)
    store.finish_run(rid, "complete")
    if name:
        store.rename(rid, name)
    return rid


def write_export(store: Store, runs: list[Run], folder: Path) -> dict[str, str]:
    files = export_csv(store, runs)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return files


def what_summary_carries(s: Sample) -> tuple[tuple, list[float]]:
    """A sample as summary.csv carries it: the exact fields, and the numbers (ms ↔ s may move the last bit)."""
    st = s.stats
    shape = {k: v for k, v in s.shape.items() if k in refcsv.SHAPE_COLUMNS}
    exact = (s.family, s.dtype, s.cache, shape, s.path, s.flops, s.bytes, s.footprint_bytes, s.max_error, s.stable)
    return exact, [st.median_s, st.p10_s, st.p90_s, st.iqr_ratio]


def ceilings(p: DeviceProfile) -> dict[str, tuple[float, str, bool]]:
    table = {f"B {k}": c for k, c in p.bandwidth.items()} | {f"F {k}": c for k, c in p.peak.items()}
    if p.launch_overhead:
        table["launch"] = p.launch_overhead
    return {k: (c.value, c.case, c.stable) for k, c in table.items()}


def assert_same_ceilings(got: DeviceProfile, want: DeviceProfile) -> None:
    g, w = ceilings(got), ceilings(want)
    assert g.keys() == w.keys()
    for k in w:
        assert g[k][1:] == w[k][1:], k
        assert g[k][0] == pytest.approx(w[k][0], rel=1e-12), k


def assert_same_run(a: Store, rid: str, b: Store, back: Run) -> None:
    """`back` (in b) is the run `rid` (in a) in everything the CSV pair carries."""
    orig = a.run(rid)
    assert back.device_name == orig.device_name and back.samples == len([s for s in a.samples(rid) if s.stats])
    want = [what_summary_carries(s) for s in a.samples(rid) if s.stats]
    got = [what_summary_carries(s) for s in b.samples(back.id)]
    assert [e for e, _ in got] == [e for e, _ in want]
    for (_, g), (_, w) in zip(got, want):
        assert g == pytest.approx(w, rel=1e-12)
    p, q = b.stored_profile(back.id), a.stored_profile(rid)
    assert_same_ceilings(p, q)
    assert (p.name, p.l2_bytes, p.extra.get("unstable"), p.extra.get("launch_graph_s")) == pytest.approx(
        (q.name, q.l2_bytes, q.extra.get("unstable"), q.extra.get("launch_graph_s")), rel=1e-12)
    assert {c.source for c in p.bandwidth.values()} | {c.source for c in p.peak.values()} == {"imported"}


@pytest.mark.parametrize("how", ["folder", "both files", "both files, roofs first", "folder and a file in it"])
def test_csv_round_trip_is_one_run_equal_to_the_original(tmp_path: Path, how: str) -> None:
    a = Store.open(tmp_path / "a.db")
    rid = measure(a, measured_samples())
    out = tmp_path / "export"
    first = write_export(a, [a.run(rid)], out)
    args = {"folder": [out], "both files": [out / "summary.csv", out / "roofs.csv"],
            "both files, roofs first": [out / "roofs.csv", out / "summary.csv"],
            "folder and a file in it": [out, out / "roofs.csv"]}[how]
    with Store.open(tmp_path / "b.db") as b:
        (res,) = import_paths(b, args)
        assert res.kind == "summary.csv + roofs.csv" and res.skipped == [] and res.notes == []
        assert [r.label for r in res.added] == ["lab-a-imported"] and len(b.runs()) == 1
        back = b.run("lab-a-imported")
        assert_same_run(a, rid, b, back)
        # and the CSVs of the imported run are the CSVs it came from (the same target, rows, numbers)
        again = export_csv(b, [back])
        for name in first:
            rows_a = list(csv.reader(io.StringIO(first[name])))
            rows_b = list(csv.reader(io.StringIO(again[name])))
            assert len(rows_a) == len(rows_b)
            for ra, rb in zip(rows_a, rows_b):
                assert [_num(x) for x in rb] == pytest.approx([_num(x) for x in ra], rel=1e-12) \
                    if any(_is_num(x) for x in ra[1:]) else rb == ra
        # importing the same export again, either way, adds nothing
        assert import_paths(b, [out])[0].added == [] and len(b.runs()) == 1
    a.close()


def _is_num(x: str) -> bool:
    try:
        float(x)
    except ValueError:
        return False
    return True


def _num(x: str) -> float | str:
    return float(x) if _is_num(x) else x


def test_the_profile_of_the_round_trip(tmp_path: Path) -> None:
    """The ceilings themselves, spelled out: B per level, F per path with cases, stability, launch."""
    a = Store.open(tmp_path / "a.db")
    rid = measure(a, measured_samples())
    write_export(a, [a.run(rid)], tmp_path / "x")
    with Store.open(tmp_path / "b.db") as b:
        import_file(b, tmp_path / "x")
        p = b.profile("lab-a-imported")
        assert p.levels() == ["dram", "l2"] and p.paths() == ["fp32-fma", "bf16-tc", "fp8-tc"]
        assert p.B("dram") == pytest.approx(512 * MiB / 0.3578246e-3) and p.bandwidth["dram"].case == "read_reduce:536870912"
        assert p.bandwidth["l2"].case == "read_reduce:4194304"
        assert p.peak["bf16-tc"].case == "8192x8192x8192" and p.peak["bf16-tc"].stable
        assert not p.peak["fp8-tc"].stable  # only an unstable point stood behind it, as summary.csv shows
        assert p.launch_overhead.value == pytest.approx(4.5e-6) and p.name == "Test GPU, SXM"
        assert p.source == "imported" and p.l2_bytes == 50 * MiB
    a.close()


def test_roofs_csv_keeps_the_reference_rows_and_adds_rooftops_after(tmp_path: Path) -> None:
    with Store.open(tmp_path / "a.db") as a:
        rid = measure(a, measured_samples())
        roofs = list(csv.DictReader(io.StringIO(export_csv(a, [a.run(rid)])["roofs.csv"])))
        p = a.stored_profile(rid)
    assert [r["dtype"] for r in roofs] == ["bf16", "fp8_e4m3", "fp32-fma", "l2"]
    for r in roofs[:3]:  # a roof: the DRAM slope, the path's peak, the ridge
        assert float(r["bandwidth_gb_s"]) == pytest.approx(p.B("dram") / 1e9)
        assert float(r["ridge_flop_byte"]) == pytest.approx(1000 * float(r["peak_tflop_s"]) / float(r["bandwidth_gb_s"]))
    assert roofs[3]["peak_tflop_s"] == roofs[3]["ridge_flop_byte"] == "" and roofs[3]["bw_case"] == "read_reduce:4194304"
    # a reader of the reference format (the catalog's) takes the reference rows and passes over rooftop's
    (ref,) = reference_profiles(roofs, source="imported")
    assert ref.paths() == ["bf16-tc", "fp8-tc"] and ref.B("dram") == pytest.approx(p.B("dram"))


@pytest.mark.parametrize("only", ["bandwidth", "gemm"])
def test_a_bandwidth_only_or_compute_only_run_keeps_its_ceilings(tmp_path: Path, only: str) -> None:
    keep = {"bandwidth": {"read_reduce", "copy"}, "gemm": {"gemm"}}[only]
    samples = [s for s in measured_samples() if s.family in keep and s.stats]
    with Store.open(tmp_path / "a.db") as a, Store.open(tmp_path / "b.db") as b:
        rid = measure(a, samples, name=None)
        files = write_export(a, [a.run(rid)], tmp_path / "x")
        rows = list(csv.DictReader(io.StringIO(files["roofs.csv"])))
        if only == "bandwidth":
            assert [(r["dtype"], r["peak_tflop_s"]) for r in rows] == [("dram", ""), ("l2", "")]
        else:
            assert [(r["dtype"], r["bandwidth_gb_s"]) for r in rows] == [("bf16", ""), ("fp8_e4m3", "")]
        (res,) = import_paths(b, [tmp_path / "x"])
        assert [r.label for r in res.added] == [f"run-{rid[:8]}-imported"]  # an unnamed run's target is its short id
        assert_same_run(a, rid, b, res.added[0])


def test_reference_pair_import_and_each_file_alone(tmp_path: Path) -> None:
    """The reference's own files: roofs.csv alone and summary.csv alone still work; together they are one run."""
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "roofs.csv").write_bytes(ROOFS.read_bytes())
    from test_store_io import SUMMARY

    (ref / "summary.csv").write_text(SUMMARY.replace("boxa", "h100"))
    with Store.open(tmp_path / "pair.db") as s:
        (res,) = import_paths(s, [ref])
        h100 = s.run("h100-imported")
        assert h100.samples == 8 and h100.device_name == "NVIDIA H100 80GB HBM3"
        p = s.profile("h100-imported")
        assert p.paths() == ["fp64-tc", "fp32-matmul", "tf32-tc", "fp16-tc", "bf16-tc", "fp8-tc"]
        for path in p.paths():  # the published roofs, not the ones the points would give
            assert p.ridge(path) == pytest.approx(catalog()["h100"].ridge(path), rel=1e-12)
        assert p.l2_bytes == 52428800
        targets = list(dict.fromkeys(r["target"] for r in csv.DictReader(io.StringIO(ROOFS.read_text()))))
        assert len(res.added) == len(targets) + 1  # boxb has points only
        assert s.run("boxb-imported").has_ceilings is False
    with Store.open(tmp_path / "alone.db") as s:
        assert import_file(s, ref / "roofs.csv").kind == "roofs.csv"
        assert import_file(s, ref / "summary.csv").kind == "summary.csv"
        assert len(s.runs()) == len(targets) + 2


def test_unknown_dtype_rows_are_left_out_and_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "roofs.csv"
    f.write_text("target,dtype,bandwidth_gb_s,peak_tflop_s\nbox,bf16,3000,800\nbox,mxfp6,3000,900\nbox,mxfp6,3000,901\n")
    assert main(["import", str(f), "--db", str(tmp_path / "r.db")]) == 0
    out = capsys.readouterr().out
    assert "added 1 run [box-imported]" in out and "left out 2 rows of unknown dtype 'mxfp6'" in out
    with Store.open(tmp_path / "r.db") as s:
        assert s.profile("box-imported").paths() == ["bf16-tc"]


def test_runs_sharing_a_target_export_under_distinct_targets(tmp_path: Path) -> None:
    f = tmp_path / "roofs.csv"
    f.write_bytes(ROOFS.read_bytes())
    g = tmp_path / "other" / "roofs.csv"
    g.parent.mkdir()
    g.write_text(ROOFS.read_text().replace("3084.845966636554", "3000"))  # another h100, another file
    with Store.open(tmp_path / "r.db") as s:
        import_paths(s, [f, g])
        h100s = [r for r in s.runs() if r.device.get("target") == "h100"]
        assert len(h100s) == 2
        write_export(s, h100s, tmp_path / "x")
        with Store.open(tmp_path / "b.db") as b:
            (res,) = import_paths(b, [tmp_path / "x"])
            assert len(res.added) == 2  # not merged into one
            assert sorted(b.profile(r.id).B("dram") for r in res.added) == pytest.approx([3e12, 3084.845966636554e9])


def test_two_pairs_in_one_folder_are_refused(tmp_path: Path) -> None:
    with Store.open(tmp_path / "a.db") as a:
        rid = measure(a, measured_samples())
        files = write_export(a, [a.run(rid)], tmp_path / "x")
        shutil.copy(tmp_path / "x" / "summary.csv", tmp_path / "x" / "summary-2.csv")
        with pytest.raises(ImportFailed, match="give one pair at a time"):
            import_paths(a, [tmp_path / "x" / n for n in ("summary.csv", "summary-2.csv", "roofs.csv")])
        assert len(a.runs()) == 1 and files


def test_a_folder_without_the_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    rc = main(["import", str(tmp_path / "empty"), "--db", str(tmp_path / "r.db")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "without summary.csv or roofs.csv" in err
    assert not (tmp_path / "r.db").exists()  # a refused import does not even create the database


def test_a_refused_file_imports_nothing_of_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    with Store.open(db) as a:
        rid = measure(a, measured_samples())
        write_export(a, [a.run(rid)], tmp_path / "x")
        (tmp_path / "runs.json").write_text(json.dumps({"format": "rooftop-runs", "runs": []}))
        before = [r.id for r in a.runs()]
    bad = tmp_path / "bad" / "roofs.csv"
    bad.parent.mkdir()
    bad.write_text("target,dtype,bandwidth_gb_s,peak_tflop_s\nbox,bf16,nan,800\n")
    rc = main(["import", str(tmp_path / "x"), str(tmp_path / "runs.json"), str(bad), "--db", str(db)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and str(bad) in err and "row 2: bandwidth_gb_s = 'nan'" in err
    with Store.open(db) as a:
        assert [r.id for r in a.runs()] == before


def test_a_run_sqlite_refuses_rolls_back_the_whole_import(tmp_path: Path) -> None:
    """The last guard: bad numbers that slip past the readers fail in one StoreError, storing nothing."""
    from rooftop.store.runs import NewRun

    with Store.open(tmp_path / "r.db") as s:
        rid = measure(s, measured_samples())
        good = NewRun(Run("a" * 32, "k", "", {}, "", "", 1.0, "complete", imported_from="x.json"))
        nan = Sample("gemm", "bf16", {}, float("nan"), 1.0)
        bad = NewRun(Run("b" * 32, "k", "", {}, "", "", 1.0, "complete", imported_from="y.json"), [nan])
        with pytest.raises(StoreError, match="bbbbbbbb from y.json cannot be stored"):
            s.insert_runs([good, bad])
        assert [r.id for r in s.runs()] == [rid]


def test_times_survive_ms_conversion(tmp_path: Path) -> None:
    """summary.csv's ms are written at full precision: the seconds come back to the last bit or so."""
    t = 1.2345678901234567e-3
    with Store.open(tmp_path / "a.db") as a, Store.open(tmp_path / "b.db") as b:
        rid = measure(a, [stream("read_reduce", 1, 512 * MiB, t)], name="one")
        write_export(a, [a.run(rid)], tmp_path / "x")
        (res,) = import_paths(b, [tmp_path / "x"])
        (s,) = b.samples(res.added[0].id)
        assert math.isclose(s.stats.median_s, t, rel_tol=1e-15)
