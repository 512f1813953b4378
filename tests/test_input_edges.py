"""Edges a demanding user hit (review of the first build): each gives one clear line, never a crash."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rooftop.models.llm.step import ModelError, arch_from_config
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.store.io import ImportFailed, export_json, import_file
from rooftop.store.runs import Store
from rooftop.tui.cli import main
from test_store_io import filled_store


def assert_one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], words: tuple[str, ...]) -> None:
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "internal error" not in err, err
    for w in words:
        assert w in err


def test_an_import_never_shadows_a_catalog_device(tmp_path: Path) -> None:
    a, ids = filled_store(tmp_path / "a.db")
    doc = export_json(a, [a.run(ids[1])])
    doc["runs"][0]["name"] = "h100"
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(doc))
    with Store.open(tmp_path / "b.db") as b:
        import_file(b, f)
        assert b.run(ids[1]).name is None
        assert "h100" not in b.profiles()
    a.close()


def test_an_import_never_takes_a_name_that_reads_as_a_run_id(tmp_path: Path) -> None:
    a, ids = filled_store(tmp_path / "a.db")
    doc = export_json(a, [a.run(ids[1])])
    doc["runs"][0]["name"] = ids[0][:4]
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(doc))
    with Store.open(tmp_path / "b.db") as b:
        import_file(b, f)
        assert b.run(ids[1]).name is None
    a.close()


@pytest.mark.parametrize(("value", "why"), [
    (-1.0, "peak bf16-tc = -1.0 is outside"), (0.0, "peak bf16-tc = 0.0 is outside"),
    (float("nan"), "peak bf16-tc = nan is not a finite number"), (float("inf"), "peak bf16-tc = inf is not a finite"), (True, "peak bf16-tc = True is not a number"), ("fast", "runs.json"), (None, "runs.json"),
    ([1.0], r"peak bf16-tc = \[1.0\] is not a number"),
])
def test_impossible_ceilings_are_refused_on_import(tmp_path: Path, value: object, why: str) -> None:
    a, ids = filled_store(tmp_path / "a.db")
    doc = export_json(a, [a.run(ids[1])])
    doc["runs"][0]["profile"]["peak"]["bf16-tc"] = value
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(doc))
    with Store.open(tmp_path / "b.db") as b:
        with pytest.raises(ImportFailed, match=why):
            import_file(b, f)
        assert b.runs() == []
    a.close()


def test_reading_commands_leave_an_empty_file_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert_one_line_error(capsys, ["runs", "--db", str(empty)], ("empty file",))
    assert main(["devices", "--db", str(empty)]) == 0
    capsys.readouterr()
    assert empty.read_bytes() == b""


def test_export_to_a_path_that_cannot_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = filled_store(tmp_path / "a.db")
    a.close()
    assert_one_line_error(capsys, ["export", "--all", "--db", str(tmp_path / "a.db"), "-o", str(tmp_path / "no" / "x.json")],
                   ("No such file or directory",))


def test_model_configs_that_cannot_be(tmp_path: Path) -> None:
    base = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 100}
    with pytest.raises(ModelError, match="num_experts_per_tok = 5"):
        arch_from_config({**base, "num_local_experts": 2, "num_experts_per_tok": 5})
    with pytest.raises(ModelError, match="not a multiple"):
        arch_from_config({**base, "num_attention_heads": 5})
    assert arch_from_config({**base, "num_attention_heads": 5, "head_dim": 16}).head_dim == 16


@pytest.mark.parametrize(
    "argv,words",
    [
        (["watch", "--interval", "inf", "--count", "1"], ("--interval inf", "3600")),
        (["watch", "--interval", "1e300"], ("3600",)),
        (["watch", "--gpu", "-5", "--count", "1"], ("start at 0",)),
        (["plot", "-d", "h100", "--height", "100000"], ("--height: 100000", "10 to 1000")),
        (["measure", "--threads", "100000", "--only", "launch", "--no-save"], ("--threads 100000",)),
    ],
)
def test_out_of_range_options(argv: list[str], words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(capsys, argv, words)


def test_a_bandwidth_only_local_run_is_not_the_default_device(no_gpu: None, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        rid = store.begin_run({"name": "Test CPU"}, "quick", "cpu")
        store.set_ceilings(rid, DeviceProfile("x", "Test CPU", "measured", {"dram": Ceiling(2e10, "measured")}, {}))
        store.finish_run(rid, "complete")
    assert main(["op", "gemm", "1", "2", "3", "--db", str(db)]) == 0
    assert "using h100" in capsys.readouterr().err


def test_piping_into_head_is_quiet() -> None:
    p = subprocess.run(f"{sys.executable} -m rooftop.tui.cli devices | head -1", shell=True, capture_output=True,
                       text=True)
    assert p.returncode == 0 and p.stderr == "" and p.stdout.startswith("id")

