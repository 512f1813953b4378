"""Import and export: rooftop JSON round trips, and the reference repository's roofs.csv / summary.csv."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from importlib import resources
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.models.catalog import catalog
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.units import MiB
from rooftop.store import refcsv
from rooftop.store.io import ImportFailed, export_csv, export_json, import_file
from rooftop.store.runs import Store
from rooftop.tui.cli import main

ROOFS = resources.files("rooftop.models").joinpath("data/reference/roofs.csv")


def profile(bw: float = 3e12) -> DeviceProfile:
    return DeviceProfile(
        id="local", name="Test GPU", source="measured", l2_bytes=50 * MiB,
        bandwidth={"dram": Ceiling(bw, "measured", "read_reduce:134217728")},
        peak={"bf16-tc": Ceiling(7.5e14, "measured", "4096x8192x8192"),
              "fp8-tc": Ceiling(1.3e15, "measured", "2048x8192x8192"),
              "fp32-fma": Ceiling(6e13, "measured", "fma:fp32:reps=64:1048576")},
        launch_overhead=Ceiling(4.5e-6, "measured", "launch"),
    )


def gemm(m: int, n: int, k: int, t: float, dtype: str = "bf16", iqr: float = 0.01, cache: str = "warm") -> Sample:
    return Sample(family="gemm", dtype=dtype, shape={"m": m, "n": n, "k": k}, flops=2.0 * m * n * k,
                  bytes=2.0 * (m * k + k * n + m * n), footprint_bytes=2.0 * (m * k + k * n + m * n), cache=cache,
                  path={"bf16": "bf16-tc", "fp8": "fp8-tc"}[dtype],
                  stats=TimeStats(t, 0.98 * t, 1.03 * t, 0.97 * t, iqr, 7, 40), max_error=1e-3)


def filled_store(path: Path) -> tuple[Store, list[str]]:
    store = Store.open(path)
    ids = []
    for i, uuid in enumerate(("GPU-a", "GPU-b")):
        rid = store.begin_run({"name": "Test GPU", "uuid": uuid, "l2_bytes": 50 * MiB}, "quick", "cuda",
                              {"torch": "2.5.1"})
        for j in range(3):
            store.add_sample(rid, synthetic_sample(j))
        store.add_sample(rid, gemm(4096, 8192, 8192, 1.5e-3))
        store.add_sample(rid, Sample("gemm", "fp8", {"m": 1, "n": 8, "k": 8}, 1.0, 1.0, skipped="no fp8 here"))
        store.add_telemetry(rid, [{"t": 10.0 + j, "power_w": 500.0 + j} for j in range(3)])
        store.set_ceilings(rid, profile(3e12 + i))
        store.finish_run(rid, "complete")
        ids.append(rid)
    store.rename(ids[0], "lab-a")
    return store, ids


def comparable(doc: dict) -> dict:
    """An export without what legitimately differs between stores: when it was written, where runs came from."""
    return {**doc, "exported_at": None, "runs": [{**r, "imported_from": None} for r in doc["runs"]]}


def test_json_export_import_round_trip_is_equal(tmp_path: Path) -> None:
    a, ids = filled_store(tmp_path / "a.db")
    doc = export_json(a, a.runs())
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(doc))
    with Store.open(tmp_path / "b.db") as b:
        res = import_file(b, f)
        assert [r.id for r in res.added] == ids and res.skipped == []
        again = export_json(b, b.runs())
        assert comparable(again) == comparable(json.loads(json.dumps(doc)))
        for rid in ids:
            assert b.samples(rid) == a.samples(rid)
            assert b.stored_profile(rid) == a.stored_profile(rid)
            assert b.telemetry(rid) == a.telemetry(rid)
        # on the other machine the profile is imported, not measured here
        p = b.profile("lab-a")
        assert p.source == "imported" and p.peak["bf16-tc"].source == "imported"
        assert p.B("dram") == a.profile("lab-a").B("dram")
        assert b.run(ids[0]).imported_from == "runs.json"
    a.close()


def test_importing_twice_or_into_the_origin_duplicates_nothing(tmp_path: Path) -> None:
    a, ids = filled_store(tmp_path / "a.db")
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(export_json(a, a.runs())))
    res = import_file(a, f)  # into the store it came from
    assert res.added == [] and sorted(res.skipped) == sorted(ids)
    with Store.open(tmp_path / "b.db") as b:
        import_file(b, f)
        res = import_file(b, f)
        assert res.added == [] and len(res.skipped) == 2
        assert len(b.runs()) == 2
        assert b.conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 10
        assert b.conn.execute("SELECT COUNT(*) FROM telemetry").fetchone()[0] == 6
    a.close()


def test_imported_name_that_is_taken_is_dropped(tmp_path: Path) -> None:
    a, ids = filled_store(tmp_path / "a.db")
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(export_json(a, [a.run(ids[0])])))
    with Store.open(tmp_path / "b.db") as b:
        local = b.begin_run({"name": "x"}, "quick", "cuda")
        b.rename(local, "lab-a")
        import_file(b, f)
        assert b.run("lab-a").id == local
        assert b.run(ids[0]).name is None
    a.close()


def test_reference_roofs_csv_import_gives_the_catalogs_ridges(tmp_path: Path) -> None:
    f = tmp_path / "roofs.csv"
    f.write_bytes(ROOFS.read_bytes())
    with Store.open(tmp_path / "r.db") as store:
        res = import_file(store, f)
        assert res.kind == "roofs.csv"
        targets = list(dict.fromkeys(r["target"] for r in csv.DictReader(io.StringIO(ROOFS.read_text()))))
        assert len(res.added) == len(targets)
        profiles = store.profiles()
        cat = catalog()
        for t in targets:
            imported = profiles[f"{t}-imported"]
            assert imported.source == "imported"
            assert imported.B("dram") == pytest.approx(cat[t].B("dram"), rel=1e-12)
            assert imported.paths()  # every target has roofs
            for path in imported.paths():
                assert imported.ridge(path) == pytest.approx(cat[t].ridge(path), rel=1e-12)
                assert imported.peak[path].source == "imported"
                assert imported.peak[path].case == cat[t].peak[path].case
        again = import_file(store, f)
        assert again.added == [] and len(again.skipped) == len(targets)
        assert len(store.runs()) == len(targets)


SUMMARY = """family,dtype,cache,m,n,k,reps,bytes,flops,footprint_bytes,target,median_ms,p10_ms,p90_ms,iqr_ratio,gb_s,tflop_s,ai,max_error,l2_bytes,device
read_reduce,fp32,streaming,,134217728,,,536870912,134217728,536870912,boxa,0.18,0.179,0.181,0.004,2982.6,0.745,0.25,,52428800,NVIDIA H100 80GB HBM3
read_reduce,fp32,streaming,,1048576,,,4194304,1048576,4194304,boxa,0.0005,0.0005,0.0005,0.01,8388.6,2.1,0.25,,52428800,NVIDIA H100 80GB HBM3
copy,fp32,streaming,,134217728,,,1073741824,0,1073741824,boxa,0.40,0.39,0.41,0.20,2684.4,0,0,,52428800,NVIDIA H100 80GB HBM3
gemm,bf16,warm,8192,8192,8192,,402653184,1099511627776,402653184,boxa,1.4,1.39,1.41,0.005,287.6,785.4,2730.7,0.001,52428800,NVIDIA H100 80GB HBM3
gemm,bf16,warm,4096,4096,4096,,100663296,137438953472,100663296,boxa,0.10,0.09,0.2,0.5,1006.6,1374.4,1365.3,0.001,52428800,NVIDIA H100 80GB HBM3
gemm,bf16,cold,8192,8192,8192,,402653184,1099511627776,402653184,boxa,1.2,1.19,1.21,0.005,335.5,916.3,2730.7,0.001,52428800,NVIDIA H100 80GB HBM3
gemm,fp8_e4m3,warm,8192,8192,8192,,201326592,1099511627776,201326592,boxa,0.8,0.79,0.81,0.01,251.7,1374.4,5461.3,,52428800,NVIDIA H100 80GB HBM3
fma,fp32,streaming,,134217728,,64,1073741824,17179869184,1073741824,boxa,0.30,0.29,0.31,0.01,3579.1,57.3,16,,52428800,NVIDIA H100 80GB HBM3
read_reduce,fp32,streaming,,134217728,,,536870912,134217728,536870912,boxb,0.125,0.124,0.126,0.004,4295.0,1.07,0.25,,62914560,NVIDIA H200
"""


def test_summary_csv_import_gives_points_and_reference_ceilings(tmp_path: Path) -> None:
    f = tmp_path / "summary.csv"
    f.write_text(SUMMARY)
    with Store.open(tmp_path / "s.db") as store:
        res = import_file(store, f)
        assert res.kind == "summary.csv" and [r.label for r in res.added] == ["boxa-imported", "boxb-imported"]
        a = store.run("boxa-imported")
        assert a.device_name == "NVIDIA H100 80GB HBM3" and a.samples == 8
        samples = store.samples(a.id)
        g = samples[3]
        assert (g.family, g.dtype, g.cache, dict(g.shape), g.path) == ("gemm", "bf16", "warm",
                                                                       {"m": 8192, "n": 8192, "k": 8192}, "bf16-tc")
        assert g.stats.median_s == pytest.approx(1.4e-3) and g.max_error == 0.001
        assert samples[6].dtype == "fp8" and samples[6].path == "fp8-tc"
        assert samples[7].shape == {"n": 134217728, "reps": 64} and samples[7].path == "fp32-fma"
        p = store.profile("boxa-imported")
        # B: the stable data-moving kernel over ≥ 256 MiB (not the 4 MiB cache hit, not the unstable copy)
        assert p.B("dram") == pytest.approx(536870912 / 0.18e-3)
        assert p.bandwidth["dram"].case == "read_reduce:134217728"
        # F: the best stable warm GEMM (not the unstable 4096³, not the cold one)
        assert p.F("bf16-tc") == pytest.approx(1099511627776 / 1.4e-3)
        assert p.peak["bf16-tc"].case == "8192x8192x8192"
        assert p.F("fp8-tc") == pytest.approx(1099511627776 / 0.8e-3)
        assert p.F("fp32-fma") == pytest.approx(17179869184 / 0.3e-3)
        assert p.source == "imported" and p.l2_bytes == 52428800
        assert store.profile("boxb-imported").paths() == []
        assert import_file(store, f).added == []


def test_csv_export_writes_the_reference_columns_and_reimports(tmp_path: Path) -> None:
    a, ids = filled_store(tmp_path / "a.db")
    files = export_csv(a, [a.run(ids[0])])
    summary = list(csv.DictReader(io.StringIO(files["summary.csv"])))
    roofs = list(csv.DictReader(io.StringIO(files["roofs.csv"])))
    assert files["summary.csv"].splitlines()[0] == ",".join(refcsv.SUMMARY_COLUMNS)
    assert files["roofs.csv"].splitlines()[0] == ",".join(refcsv.ROOFS_COLUMNS)
    assert len(summary) == 4  # the skipped point has no time to write
    g = summary[3]
    assert (g["family"], g["m"], g["n"], g["k"], g["target"], g["device"]) == ("gemm", "4096", "8192", "8192",
                                                                                "lab-a", "Test GPU")
    assert float(g["median_ms"]) == pytest.approx(1.5)
    assert float(g["tflop_s"]) == pytest.approx(2 * 4096 * 8192 * 8192 / 1.5e-3 / 1e12)
    assert [r["dtype"] for r in roofs] == ["bf16", "fp8_e4m3", "fp32-fma"]  # the reference's rows, then rooftop's
    for r in roofs:
        assert float(r["ridge_flop_byte"]) == pytest.approx(1000 * float(r["peak_tflop_s"]) / float(r["bandwidth_gb_s"]))
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with Store.open(tmp_path / "b.db") as b:  # each file on its own: one run of ceilings, one of points
        import_file(b, tmp_path / "roofs.csv")
        import_file(b, tmp_path / "summary.csv")
        back = b.stored_profile(b.runs()[0].id)
        orig = a.stored_profile(ids[0])
        for path in ("bf16-tc", "fp8-tc"):
            assert back.ridge(path) == pytest.approx(orig.ridge(path), rel=1e-12)
        points = b.samples(b.runs()[1].id)
        want = [s for s in a.samples(ids[0]) if s.stats]
        assert [(s.family, dict(s.shape), s.flops, s.bytes) for s in points] == \
               [(s.family, dict(s.shape), s.flops, s.bytes) for s in want]
        assert all(math.isclose(p.stats.median_s, w.stats.median_s, rel_tol=1e-12) for p, w in zip(points, want))
    a.close()


def test_reference_import_exports_under_its_own_target(tmp_path: Path) -> None:
    f = tmp_path / "roofs.csv"
    f.write_bytes(ROOFS.read_bytes())
    with Store.open(tmp_path / "r.db") as store:
        import_file(store, f)
        rows = list(csv.DictReader(io.StringIO(export_csv(store, [store.run("h100-imported")])["roofs.csv"])))
        ref = [r for r in csv.DictReader(io.StringIO(ROOFS.read_text())) if r["target"] == "h100"]
        assert [(r["target"], r["dtype"]) for r in rows] == [(r["target"], r["dtype"]) for r in ref]
        for got, want in zip(rows, ref):
            assert float(got["ridge_flop_byte"]) == pytest.approx(float(want["ridge_flop_byte"]), rel=1e-12)


ROOFS_HEAD = "target,dtype,bandwidth_gb_s,peak_tflop_s\n"
SUMMARY_HEAD = "family,dtype,m,bytes,flops,target,median_ms\n"
BAD_FILES = [
    ("x.json", '{"format": "something-else"}', "not a rooftop export"),
    ("x.json", '{"format": "rooftop-runs", "format_version": 99, "runs": []}', "newer rooftop"),
    ("x.json", '{"format": "rooftop-runs", "format_version": "x", "runs": []}', "format_version 'x' is not a whole"),
    ("x.json", '{"format": "rooftop-runs", "runs": {"a": 1}}', '"runs" must be a list'),
    ("x.json", '{"format": "rooftop-runs", "runs": [{"id": "zz"}]}', "malformed"),
    ("x.json", "{not json", "invalid JSON"),
    ("x.csv", "a,b,c\n1,2,3\n", "unrecognised columns"),
    ("x.csv", ROOFS_HEAD + 'h1,bf16,4,"' + "x" * 200_000 + '"\n', "not a readable CSV"),
    ("r.csv", ROOFS_HEAD + "h1,bf16,fast,3\n", "row 2: bandwidth_gb_s"),
    ("r.csv", ROOFS_HEAD + "h1,bf16,3000,800\nh1,bf16,nan,3\n", "row 3: bandwidth_gb_s = 'nan' is not a positive"),
    ("r.csv", ROOFS_HEAD + "h1,bf16,-4,3\n", "bandwidth_gb_s = '-4' is not a positive number"),
    ("r.csv", ROOFS_HEAD + "h1,bf16,4,0\n", "peak_tflop_s = '0' is not a positive number"),
    ("r.csv", ROOFS_HEAD + "h1,bf16,4,1e400\n", "peak_tflop_s = '1e400' is not a positive number"),
    ("r.csv", ROOFS_HEAD + "h1,l2,4,3\n", "row 2: a l2 row is a memory level's bandwidth; peak_tflop_s must be empty"),
    ("r.csv", ROOFS_HEAD + "h1,,4,3\n", "row 2: dtype is empty"),
    ("s.csv", SUMMARY_HEAD + "gemm,bf16,8,1,2,t,\n", "row 2: median_ms is empty"),
    ("s.csv", SUMMARY_HEAD + "gemm,bf16,8,1,2,t,0\n", "row 2: median_ms = '0' is not a positive number"),
    ("s.csv", SUMMARY_HEAD + "gemm,bf16,8,1,2,t,-1\n", "median_ms = '-1' is not a positive number"),
    ("s.csv", SUMMARY_HEAD + "gemm,bf16,8,1,2,t,inf\n", "median_ms = 'inf' is not a positive number"),
    ("s.csv", SUMMARY_HEAD + "gemm,bf16,nan,1,2,t,1\n", "m = 'nan' is not a number ≥ 0"),
    ("s.csv", SUMMARY_HEAD + "gemm,bf16,1e400,1,2,t,1\n", "m = '1e400' is not a number ≥ 0"),
    ("s.csv", SUMMARY_HEAD + "gemm,bf16,1.5,1,2,t,1\n", "m = '1.5' is not a whole number"),
    ("s.csv", SUMMARY_HEAD + "gemm,bf16,8,nan,2,t,1\n", "bytes = 'nan' is not a number ≥ 0"),
    ("b.bin", b"\xff\xfe\x00\x81binary", "not a text file"),
]


@pytest.mark.parametrize("name, content, match", BAD_FILES)
def test_bad_files_are_refused_in_one_line_and_change_nothing(tmp_path: Path, name: str, content, match: str) -> None:
    f = tmp_path / name
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    with Store.open(tmp_path / "s.db") as store:
        with pytest.raises(ImportFailed, match=re.escape(match)) as exc:
            import_file(store, f)
        assert str(f) in str(exc.value) and "\n" not in str(exc.value)
        assert store.runs() == []


def _set(path: tuple, value: object):  # a doc mutator
    def change(doc: dict) -> None:
        node = doc["runs"][0]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


@pytest.mark.parametrize(
    "change, match",
    [
        (_set(("samples", 0, "flops"), float("nan")), "sample 1 has an impossible value: flops = nan"),
        (_set(("samples", 1, "bytes"), -1.0), "sample 2 has an impossible value: bytes = -1.0"),
        (_set(("samples", 0, "stats", "median_s"), "fast"), "sample 1 stats median_s = 'fast' is not a number"),
        (_set(("samples", 0, "max_error"), "tiny"), "sample 1 max_error = 'tiny' is not a number"),
        (_set(("samples", 0, "shape", "n"), 1e400), "sample 1 shape n = inf is not a whole number"),
        (_set(("telemetry", 0, "t"), "noon"), "telemetry row 1 t = 'noon' is not a time"),
        (_set(("profile", "launch_overhead"), -1.0), "impossible value: launch overhead = -1.0 is outside [1e-09, 1] s"),
        (_set(("status",), "paused"), "unknown status 'paused'"),
    ],
)
def test_impossible_json_runs_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], change, match: str) -> None:
    a, ids = filled_store(tmp_path / "a.db")
    doc = export_json(a, [a.run(ids[0])])
    a.close()
    change(doc)
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(doc))  # NaN as the literal Python's json reads back
    db = tmp_path / "b.db"
    rc = main(["import", str(f), "--db", str(db)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and match in err and str(f) in err, err
    with Store.open(db) as b:
        assert b.runs() == []


@pytest.mark.parametrize("name, content, match", BAD_FILES)
def test_bad_files_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content,
                                   match: str) -> None:
    f = tmp_path / name
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    rc = main(["import", str(f), "--db", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and match in err, err
    assert "damaged" not in err and "internal error" not in err


def test_missing_file(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.db") as store:
        with pytest.raises(ImportFailed, match="cannot read"):
            import_file(store, tmp_path / "nope.csv")
