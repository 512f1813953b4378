"""An import refuses, in one line naming the field, what no view can show: a malformed profile run, a field of
the wrong type, a family, level or path rooftop does not define, times out of order. Real exports, real stores."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.store.io import read_sources
from rooftop.store.runs import Store
from rooftop.tui.cli import main

TRACE = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
INTERNALS = ("TypeError", "AttributeError", "ValueError", "KeyError", "object has no attribute", "int() argument",
             "could not convert", "not iterable", "Traceback")


@pytest.fixture(scope="module")
def profile_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`rooftop profile TRACE -d h200`, kept as a run and exported as JSON."""
    d = tmp_path_factory.mktemp("profile")
    db, out = d / "p.db", d / "exp.json"
    assert main(["profile", str(TRACE), "-d", "h200", "--db", str(db)]) == 0
    with Store.open(db) as s:
        rid = s.runs()[0].id
    assert main(["export", rid, "-o", str(out), "--db", str(db)]) == 0
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def measured_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A complete measurement with samples and ceilings, exported as JSON."""
    d = tmp_path_factory.mktemp("measured")
    db, out = d / "m.db", d / "exp.json"
    with Store.open(db) as s:
        rid = s.begin_run({"name": "Synthetic GPU", "uuid": "GPU-synthetic"}, "quick", "synthetic")
        s.add_samples(rid, [synthetic_sample(i) for i in range(3)])
        s.set_ceilings(rid, DeviceProfile(id="local", name="Synthetic GPU", source="measured",
                                          bandwidth={"dram": Ceiling(1e12, "measured", "read_reduce:1024")},
                                          peak={"fp32-fma": Ceiling(2e13, "measured", "fma:fp32:1024")}))
        s.finish_run(rid, "complete")
    assert main(["export", rid, "-o", str(out), "--db", str(db)]) == 0
    return json.loads(out.read_text())


def _changed(doc: dict[str, Any], change: Callable[[dict[str, Any]], None], path: Path) -> Path:
    doc = copy.deepcopy(doc)
    change(doc["runs"][0])
    path.write_text(json.dumps(doc))
    return path


def _refused(tmp_path: Path, f: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Import `f` into a new store: refused in one line, naming the file, with no Python internals; nothing kept."""
    db = tmp_path / "into.db"
    rc = main(["import", str(f), "--db", str(db)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and str(f) in err, err
    assert not any(word in err for word in INTERNALS), err
    assert not db.exists() or Store.open(db).runs() == []
    return err


def _set(*path: Any, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(run: dict[str, Any]) -> None:
        node = run
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


PROFILE_CASES = [
    (_set("samples", 0, "conditions", "profile", value="hello"), "sample 1 conditions.profile = 'hello' is not an object"),
    (_set("device", "profile", "rows", "steps", value=5), "device.profile rows.steps = 5 is not a list"),
    (_set("device", "profile", "device_busy_s", value=100), "device_busy_s = 100 s is longer than the span_s"),
    (_set("device", "profile", "rows", "top_kernels", 0, value="k"), "rows.top_kernels[0] = 'k' is not a row"),
    (_set("samples", 1, "conditions", "profile", "shape", value=[1]), "sample 2 conditions.profile is not an op group"),
    (_set("device", "profile", value="split"), "device.profile = 'split' is not an object"),
    (_set("samples", 0, "family", value="gemm"), "unknown family 'gemm' (a profile run's are: profile)"),
    (_set("device", "profile", "shares", "idle", value=3.0), "device.profile shares.idle = 3.0 is outside [0, 1"),
    (_set("device", "profile", "span_s", value=-5.0), "device.profile span_s = -5.0 is outside [0,"),
    (_set("device", "profile", "rows", "launch_queue", value={"per_stream": "x"}),
     "device.profile rows.launch_queue = {'per_stream': 'x'} is not the launch queue"),
]


@pytest.mark.parametrize("change, match", PROFILE_CASES)
def test_a_malformed_profile_run_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], profile_doc: dict[str, Any], change, match: str
) -> None:
    err = _refused(tmp_path, _changed(profile_doc, change, tmp_path / "exp.json"), capsys)
    assert match in err, err


@pytest.mark.parametrize("change", [lambda run: None, _set("device", "profile", "mfu_path", value=None),
                                    _set("device", "profile", "mfu", value=None)])
def test_the_profile_export_itself_imports(tmp_path: Path, profile_doc: dict[str, Any], change) -> None:
    """As written, and with what a trace with no matmul writes (no MFU path: null)."""
    f = _changed(profile_doc, change, tmp_path / "exp.json")
    assert [len(s.runs) for s in read_sources([f])] == [1]


@pytest.mark.parametrize("change, match", PROFILE_CASES[:5])
def test_show_and_compare_of_a_stored_malformed_profile_say_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], profile_doc: dict[str, Any], change, match: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store written before imports were checked: `show` lists the op groups, says why in one line."""
    from rooftop.store import io

    f = _changed(profile_doc, change, tmp_path / "exp.json")
    monkeypatch.setattr(io, "run_problem", lambda item: None)  # as an older rooftop let it in
    db = tmp_path / "old.db"
    with Store.open(db) as s:
        io.import_paths(s, [f])
        rid = s.runs()[0].id
    monkeypatch.undo()
    capsys.readouterr()
    rc = main(["show", rid[:8], "--db", str(db)])
    out, err = capsys.readouterr()
    assert rc == 0 and err.count("\n") == 1 and "malformed" in err and match.split(" = ")[0] in err, err
    assert not any(word in err + out for word in INTERNALS), err
    assert "busy 100 s" not in out and ("mm bf16" in out or "profile bf16 m=8" in out), out  # the groups, as stored
    rc = main(["profile", "--compare", rid[:8], rid[:8], "--db", str(db)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "malformed" in err and "cannot be compared" in err, err


MEASURED_CASES = [
    (_set("samples", 0, "shape", "n", value=[1, 2]), "sample 1 shape n = [1, 2] is not a whole number"),
    (_set("profile", "ceilings", value="x"), "profile ceilings = 'x' is not an object"),
    (_set("profile", "ceilings", "bandwidth", value={"dram": 3}), "profile ceilings bandwidth = {'dram': 3} is not"),
    (_set("samples", 1, "flops", value="fast"), "sample 2 flops = 'fast' is not a number"),
    (_set("samples", 0, "family", value=7), "sample 1 family = 7 is not text"),
    (_set("samples", 0, "stats", "speed", value=1.0), "sample 1 stats has an unknown field 'speed'"),
    (_set("samples", 0, "conditions", value=[]), "sample 1 conditions = [] is not an object"),
    (_set("profile", "peak", value=[]), "profile peak = [] is not an object"),
    (_set("profile", "bandwidth", "dram", value="fast"), "profile bandwidth dram = 'fast' is not a number"),
    (_set("samples", 0, "family", value="warp"), "unknown family 'warp' (a measurement run's are: read_reduce, copy"),
    (_set("samples", 0, "path", value="warp-tc"), "unknown compute path 'warp-tc' (one of: fp64-fma"),
    (_set("profile", "bandwidth", "l7", value=1e12), "unknown memory level 'l7' (one of: dram, llc, l2, l1, nvlink"),
    (_set("profile", "peak", "warp-tc", value=1e14), "peak of an unknown compute path 'warp-tc'"),
    (_set("samples", 0, "stats", value={"median_s": 0.2, "p10_s": 0.3, "p90_s": 0.1, "min_s": 0.1,
                                          "iqr_ratio": 0.0, "repeats": 7, "calls": 1}),
     "p10_s = 0.3 is more than median_s = 0.2"),
]


@pytest.mark.parametrize("change, match", MEASURED_CASES)
def test_a_field_of_the_wrong_kind_or_unknown_to_rooftop_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], measured_doc: dict[str, Any], change, match: str
) -> None:
    err = _refused(tmp_path, _changed(measured_doc, change, tmp_path / "exp.json"), capsys)
    assert match in err, err


def test_a_name_that_breaks_the_rule_is_dropped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], measured_doc: dict[str, Any]
) -> None:
    f = _changed(measured_doc, _set("name", value="9 lives"), tmp_path / "exp.json")
    db = tmp_path / "into.db"
    assert main(["import", str(f), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "name '9 lives' dropped (a name must start with a letter" in out, out
    with Store.open(db) as s:
        [run] = s.runs()
    assert run.name is None and run.samples == 3 and run.has_ceilings


def test_a_name_another_run_has_is_dropped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], measured_doc: dict[str, Any]
) -> None:
    db = tmp_path / "into.db"
    first = _changed(measured_doc, _set("name", value="lab"), tmp_path / "a.json")
    second = _changed(measured_doc, lambda r: r.update(name="lab", id="f" * 32), tmp_path / "b.json")
    assert main(["import", str(first), "--db", str(db)]) == 0
    assert main(["import", str(second), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "run ffffffff: name 'lab' dropped (another run has it)" in out, out
    with Store.open(db) as s:
        assert s.run("f" * 8).name is None and s.run("lab").id != "f" * 32


def test_a_comm_run_imports_and_one_with_a_kernel_family_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rooftop.models.sample import Sample, TimeStats
    from rooftop.store.comms import begin_comm, comm_device_info

    db = tmp_path / "c.db"
    with Store.open(db) as s:
        rid = begin_comm(s, comm_device_info("gloo", 2, "cpu", "quick"), "gloo")
        s.add_samples(rid, [Sample(c, "fp32", {"bytes": 1024, "world": 2}, flops=0, bytes=1024,
                                   stats=TimeStats(1e-4, 1e-4, 1e-4, 1e-4, 0.0, 7, 1),
                                   conditions={"comm": {"collective": c, "world": 2}})
                            for c in ("allreduce", "h2d_pinned")])
        s.finish_run(rid, "complete")
    out = tmp_path / "c.json"
    assert main(["export", rid, "-o", str(out), "--db", str(db)]) == 0
    doc = json.loads(out.read_text())
    assert [len(s.runs) for s in read_sources([out])] == [1]
    err = _refused(tmp_path, _changed(doc, _set("samples", 1, "family", value="copy"), tmp_path / "bad.json"), capsys)
    assert "sample 2 has an unknown family 'copy' (a comm run's are: allreduce, allgather" in err, err
