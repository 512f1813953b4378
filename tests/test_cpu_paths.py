"""A CPU's compute roofs are named for what they are (`bf16-matmul`, not `bf16-tc`: a CPU has no tensor
cores), and the GPU names still find them: in older stored runs, imported files, `--paths` and the op
language's dtypes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rooftop.models.analysis import analyze
from rooftop.models.calibrate import calibrate
from rooftop.models.hardware import Hardware
from rooftop.models.paths import PATHS, distinct_paths, matmul_path, path_for, same_path
from rooftop.models.profile import Ceiling, DeviceProfile, NoRoof
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.spec import parse_spec
from rooftop.store.io import export_json, import_file
from rooftop.store.refcsv import roof_dtype
from rooftop.store.runs import Store
from rooftop.tui.cli import main

# This 2-core VM's quick CPU run (1 thread): B dram 16.8 GB/s, F in FLOP/s
CPU_PEAKS = {"fp64": 16.06e9, "fp32": 33.84e9, "fp16": 0.9491e9, "bf16": 0.8982e9, "int8": 1.461e9}
OLD = {"fp64": "fp64-tc", "fp32": "fp32-matmul", "fp16": "fp16-tc", "bf16": "bf16-tc", "int8": "int8-tc"}


def stats(t: float) -> TimeStats:
    return TimeStats(median_s=t, p10_s=t * 0.98, p90_s=t * 1.02, min_s=t * 0.97, iqr_ratio=0.02, repeats=7, calls=3)


def cpu_samples(names: dict[str, str]) -> list[Sample]:
    """A CPU run's stream and GEMM points, each GEMM under the path name `names` gives its dtype."""
    n = 2**28
    out = [Sample("triad", "fp32", {"n": n}, flops=2.0 * n, bytes=12.0 * n, footprint_bytes=12.0 * n,
                  stats=stats(12.0 * n / 16.8e9), path="fp32-fma")]
    for dtype, rate in CPU_PEAKS.items():
        w = 2.0 * 512**3
        out.append(Sample("gemm", dtype, {"m": 512, "n": 512, "k": 512}, flops=w, bytes=3.0 * 512**2 * 4,
                          footprint_bytes=3.0 * 512**2 * 4, stats=stats(w / rate), path=names[dtype]))
    return out


CPU = Hardware(kind="cpu", name="AMD EPYC 7763 64-Core Processor", l2_bytes=32 * 2**20, units=1)


def cpu_profile() -> DeviceProfile:
    return calibrate(cpu_samples({d: matmul_path(d, "cpu") for d in CPU_PEAKS}), CPU, "epyc").profile


def test_new_cpu_gemm_points_and_roofs_are_named_matmul() -> None:
    from rooftop.probes.backend import select_backend
    from rooftop.probes.gemm import GemmProbe, GemmSweeps

    sweeps = GemmSweeps(squares=(64,), nk=64, ms=(), dtypes=("fp64", "fp32", "fp16", "bf16", "int8"))
    probe = GemmProbe(select_backend("cpu"), sweeps)
    assert sorted(s.template.path for s in probe.steps()) == [
        "bf16-matmul", "fp16-matmul", "fp32-matmul", "fp64-matmul", "int8-matmul"]
    prof = cpu_profile()
    assert prof.paths() == ["fp64-matmul", "fp32-matmul", "fp16-matmul", "bf16-matmul", "int8-matmul"]
    assert all(PATHS[p].unit == "matmul" for p in prof.paths())
    assert prof.F("bf16-matmul") == pytest.approx(0.8982e9, rel=1e-6)


def test_a_gpu_keeps_its_tensor_core_names() -> None:
    gpu = calibrate(cpu_samples(OLD), Hardware(kind="gpu", name="NVIDIA H100", l2_bytes=50 * 2**20)).profile
    assert "bf16-tc" in list(gpu.peak) and "bf16-matmul" not in list(gpu.peak)
    assert [matmul_path(d) for d in ("bf16", "fp32", "tf32")] == ["bf16-tc", "fp32-matmul", "tf32-tc"]
    from rooftop.probes.gemm import template

    assert template("bf16", 64, 64, 64, "warm", "square", "cuda").path == "bf16-tc"  # a CUDA backend's kind


def test_points_of_an_older_cpu_run_make_matmul_roofs() -> None:
    """A CPU run measured before the rename has bf16-tc points: calibrated again, its roofs are -matmul."""
    old = calibrate(cpu_samples(OLD), CPU, "epyc").profile
    assert old.paths() == cpu_profile().paths()
    assert old.peak["bf16-tc"] is old.peak["bf16-matmul"]  # the old name still reads


def test_gpu_names_find_a_cpu_roof() -> None:
    prof = cpu_profile()
    assert "bf16-tc" in prof.peak and prof.F("bf16-tc") == prof.F("bf16-matmul")
    assert prof.path_name("bf16-tc") == "bf16-matmul" and prof.path_name("fp32-fma") == "fp32-fma"
    assert prof.is_roofline()
    with pytest.raises(NoRoof, match="epyc has no fp8-matmul roof"):
        prof.F("fp8-tc")
    a = analyze(parse_spec("gemm 4096 4096 4096 bf16"), prof)  # the op language's dtype: bf16 → bf16-tc
    assert a.path == "bf16-matmul" and a.peak == prof.F("bf16-matmul") and a.regime == "compute"
    assert not any("tensor" in line or "CUDA" in line for line in a.advice + a.warnings), a.advice + a.warnings


def test_a_file_holding_both_names_keeps_the_kinds_own() -> None:
    both = DeviceProfile("x", "x", "imported", {}, {"bf16-tc": Ceiling(1e9, "imported"),
                                                    "bf16-matmul": Ceiling(2e9, "imported")}, kind="cpu")
    assert list(both.peak) == ["bf16-matmul"] and both.F("bf16-tc") == 2e9


def test_path_names_pair_up() -> None:
    for gpu in ("fp64-tc", "fp16-tc", "bf16-tc", "fp8-tc", "int8-tc"):
        cpu = path_for(gpu, "cpu")
        assert cpu.endswith("-matmul") and cpu in PATHS and path_for(cpu, "gpu") == gpu and same_path(gpu, cpu)
    assert path_for("fp32-matmul", "cpu") == path_for("fp32-matmul", "gpu") == "fp32-matmul"
    assert path_for("tf32-tc", "cpu") == "tf32-tc"  # a CPU has no TF32: no CPU name for it
    assert distinct_paths(["bf16-matmul", "fp32-fma", "bf16-tc", "fp8-tc"]) == ["bf16-matmul", "fp32-fma", "fp8-tc"]
    assert roof_dtype("bf16-matmul") == roof_dtype("bf16-tc") == "bf16"  # the reference CSV's row


def stored_cpu_run(db: Path) -> str:
    with Store.open(db) as store:
        rid = store.begin_run({"name": CPU.name, "index": 0, "units": 1}, "quick", "cpu")
        for s in cpu_samples(OLD):
            store.add_sample(rid, s)
        store.set_ceilings(rid, cpu_profile())
        store.finish_run(rid, "complete")
        store.rename(rid, "epyc")
    return rid


def test_an_older_stored_cpu_run_reads_under_the_new_names(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    rid = stored_cpu_run(db)
    with sqlite3.connect(db) as c:  # as a store written before the rename holds it
        for new, old in (("bf16-matmul", "bf16-tc"), ("fp16-matmul", "fp16-tc"), ("fp64-matmul", "fp64-tc"),
                         ("int8-matmul", "int8-tc")):
            c.execute("UPDATE ceilings SET key = ? WHERE run_id = ? AND key = ?", (old, rid, new))
        assert c.execute("SELECT COUNT(*) FROM ceilings WHERE key LIKE '%-tc'").fetchone()[0] == 4
    with Store.open(db) as store:
        prof = store.profile("epyc")
    assert prof.paths() == cpu_profile().paths()
    assert prof.F("bf16-tc") == pytest.approx(0.8982e9, rel=1e-6)


def test_an_imported_cpu_file_with_tc_names_reads_under_the_new_names(tmp_path: Path) -> None:
    with Store.open(tmp_path / "a.db") as a:
        stored_cpu_run(tmp_path / "a.db")
        doc = export_json(a, a.runs())
    peak = doc["runs"][0]["profile"]["peak"]
    assert "bf16-matmul" in peak  # exported as measured
    for dtype in ("fp64", "fp16", "bf16", "int8"):  # and as an older rooftop wrote it
        peak[OLD[dtype]] = peak.pop(matmul_path(dtype, "cpu"))
    f = tmp_path / "old.json"
    f.write_text(json.dumps(doc))
    with Store.open(tmp_path / "b.db") as b:
        import_file(b, f)
        prof = b.profile("epyc")
    assert prof.paths() == cpu_profile().paths()


def test_the_command_line_finds_a_cpu_roof_by_either_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    stored_cpu_run(db)
    assert main(["--db", str(db), "plot", "-d", "epyc", "--paths", "bf16-tc,fp32-matmul"]) == 0
    out = capsys.readouterr().out
    assert "epyc bf16-matmul" in out and "bf16-tc" not in out
    assert main(["--db", str(db), "op", "gemm", "4096", "4096", "4096", "bf16", "-d", "epyc", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["path"] == "bf16-matmul"
    assert main(["--db", str(db), "compare", "epyc", "h100"]) == 0
    rows = [line.split()[:2] for line in capsys.readouterr().out.splitlines() if line.startswith("F ")]
    assert ["F", "bf16-matmul"] in rows and ["F", "bf16-tc"] not in rows  # one row: the same path on both


def test_cpu_advice_names_vector_units_and_matmul_roofs() -> None:
    prof = DeviceProfile("epyc", CPU.name, "measured", {"dram": Ceiling(16.8e9, "measured")},
                         {"fp32-fma": Ceiling(6.2e9, "measured"), "bf16-tc": Ceiling(33.8e9, "measured")}, kind="cpu")
    a = analyze(parse_spec("fma 4096 fp32"), prof)
    assert a.regime == "compute"
    assert a.advice[1].startswith("on the vector units: fewer FLOPs per element (cheaper math) help; the matmul "
                                  "roofs are higher (bf16-matmul ×5)"), a.advice


def test_a_cpu_fleet_members_line_shows_its_bf16_matmul_roof() -> None:
    from rooftop.models.fleet import Member, fleet_report
    from rooftop.tui.render.fleet import member_lines

    prof = DeviceProfile("n0", CPU.name, "measured", {"dram": Ceiling(16.8e9, "measured")},
                         {"bf16-tc": Ceiling(0.9e9, "measured"), "fp64-tc": Ceiling(16e9, "measured"),
                          "int8-tc": Ceiling(1.5e9, "measured")}, kind="cpu")
    line, = member_lines(fleet_report([Member(0, "node0", "cpu", CPU.name, prof)]))
    assert "F bf16-matmul" in line and "-tc" not in line, line


def test_fma_paths_are_named_for_cpus_too() -> None:
    """A CPU's FMA roofs run on its vector units: their labels do not call them CUDA cores alone."""
    from rooftop.models.paths import PATHS

    fma = [p for p in PATHS.values() if p.unit == "fma"]
    assert fma and all("vector units" in p.label for p in fma)
