"""What export and the store options refuse or keep safe: CSV cells a spreadsheet or terminal would obey, a CSV
export to stdout or of a run the CSVs cannot carry, a --db whose folder is missing; and where a run works as
--device. Real stores, real exports made by the code, read back by rooftop's own import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.store.runs import Store
from rooftop.tui.cli import main

TRACE = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
NASTY = '=HYPERLINK("http://x")\x1b]0;pwned\x07'  # a formula, and an OSC that retitles the terminal


def measured(db: Path, device: str = "Synthetic GPU", max_error: float | None = None) -> str:
    """A complete measurement with three points and ceilings; its id."""
    import dataclasses

    with Store.open(db) as s:
        rid = s.begin_run({"name": device, "uuid": f"GPU-{device}"}, "quick", "synthetic")
        s.add_samples(rid, [dataclasses.replace(synthetic_sample(i), max_error=max_error) for i in range(3)])
        s.set_ceilings(rid, DeviceProfile(id="local", name=device, source="measured",
                                          bandwidth={"dram": Ceiling(1e12, "measured", "read_reduce:1024")},
                                          peak={"fp32-fma": Ceiling(2e13, "measured", "fma:fp32:1024")}))
        s.finish_run(rid, "complete")
    return rid


def profiled(db: Path) -> str:
    """`rooftop profile TRACE -d h200` kept as a run; its id."""
    assert main(["profile", str(TRACE), "-d", "h200", "--db", str(db)]) == 0
    with Store.open(db) as s:
        return next(r.id for r in s.runs() if r.kind == "profile")


def one_error(capsys: pytest.CaptureFixture[str], argv: list[str], *words: str) -> str:
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own one-line error
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err and all(w in err for w in words), err
    return err


# -- CSV cells ------------------------------------------------------------------------


def test_csv_export_shows_control_characters_and_quotes_formulas_and_reads_back_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, again = tmp_path / "a.db", tmp_path / "b.db"
    rid = measured(db, device=NASTY, max_error=-0.5)
    assert main(["export", rid, "--format", "csv", "-o", str(tmp_path / "one"), "--db", str(db)]) == 0
    text = (tmp_path / "one" / "summary.csv").read_text()
    assert "\x1b" not in text and "\x07" not in text
    assert ',"\'=HYPERLINK(""http://x"")\\x1b]0;pwned\\x07"\n' in text  # the device, last column: quoted, shown
    assert ",-0.5," in text and ",'-0.5," not in text  # a negative number stays a number
    assert main(["import", str(tmp_path / "one"), "--db", str(again)]) == 0
    with Store.open(again) as s:
        [run] = s.runs()
        assert run.device_name == '=HYPERLINK("http://x")\\x1b]0;pwned\\x07'
        assert [x.max_error for x in s.samples(run.id)] == [-0.5] * 3
    assert main(["export", run.id, "--format", "csv", "-o", str(tmp_path / "two"), "--db", str(again)]) == 0
    for name in ("summary.csv", "roofs.csv"):
        assert (tmp_path / "two" / name).read_text() == (tmp_path / "one" / name).read_text(), name


def test_a_summary_csv_family_rooftop_does_not_know_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "summary.csv"
    f.write_text("family,dtype,bytes,flops,target,median_ms\ncopy,fp32,4096,0,x,0.01\n"
                 "\"=cmd|' /C calc'!A0\",fp32,4096,0,x,0.01\n")
    err = one_error(capsys, ["import", str(f), "--db", str(tmp_path / "s.db")])
    assert "row 3: family = \"=cmd|' /C calc'!A0\" is not a kernel family rooftop knows (one of: read_reduce, copy" in err
    with Store.open(tmp_path / "s.db") as s:  # nothing of the file was kept
        assert s.runs() == []


ROOFS_HEAD = "target,dtype,bandwidth_gb_s,peak_tflop_s,ridge_flop_byte,bw_case,compute_case\n"


def test_two_roofs_csv_rows_that_disagree_are_refused_naming_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "roofs.csv"
    f.write_text(ROOFS_HEAD + "h,bf16,3350,989,295,,\nh,fp16,3350,989,295,,\nh,bf16,3350,500,149,,\n")
    err = one_error(capsys, ["import", str(f), "--db", str(tmp_path / "s.db")])
    assert "rows 2 and 4 give target 'h' two different bf16-tc roofs" in err and "989 and 3350, 500" in err, err


def test_the_same_roofs_csv_row_twice_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "roofs.csv"
    f.write_text(ROOFS_HEAD + "h,bf16,3350,989,295,,\nh,bf16,3350.0,989.0,295,,\n")
    assert main(["import", str(f), "--db", str(tmp_path / "s.db")]) == 0
    with Store.open(tmp_path / "s.db") as s:
        assert s.profile(s.runs()[0].id).F("bf16-tc") == pytest.approx(989e12)


# -- what a CSV export refuses -------------------------------------------------------------


def test_csv_export_to_stdout_is_refused_and_writes_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "a.db"
    rid = measured(db)
    monkeypatch.chdir(tmp_path)
    one_error(capsys, ["export", rid, "--format", "csv", "-o", "-", "--db", str(db)], "--out -", "--format json")
    assert not (tmp_path / "-").exists()


def test_csv_export_of_a_profile_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "a.db"
    rid = profiled(db)
    one_error(capsys, ["export", rid[:8], "--format", "csv", "-o", str(tmp_path / "out"), "--db", str(db)],
              f"{rid[:8]} (profile)", "--format json")
    assert not (tmp_path / "out").exists()


def test_csv_export_of_all_leaves_the_profile_run_out_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "a.db"
    rid, pid = measured(db), profiled(db)
    capsys.readouterr()
    assert main(["export", "--all", "--format", "csv", "-o", str(tmp_path / "out"), "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"left out 1 run the CSVs cannot carry, {pid[:8]} (profile)" in err, err
    rows = (tmp_path / "out" / "summary.csv").read_text().splitlines()[1:]
    assert len(rows) == 3 and all(r.endswith(",Synthetic GPU") and rid[:8] in r for r in rows)


# -- --db ------------------------------------------------------------------------------------


def test_a_db_in_a_missing_folder_is_refused_and_no_folder_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "a.db"
    rid = measured(src)
    doc = tmp_path / "e.json"
    assert main(["export", rid, "-o", str(doc), "--db", str(src)]) == 0
    one_error(capsys, ["--db", str(tmp_path / "no" / "dir" / "x.db"), "import", str(doc)],
              f"folder {tmp_path / 'no' / 'dir'} does not exist; create it or give another --db")
    monkeypatch.setenv("ROOFTOP_DB", str(tmp_path / "gone" / "x.db"))
    one_error(capsys, ["import", str(doc)], f"folder {tmp_path / 'gone'} does not exist")
    assert main(["runs", "--db", str(tmp_path / "no" / "x.db")]) == 0
    assert f"its folder {tmp_path / 'no'} does not exist: create it" in " ".join(capsys.readouterr().out.split())
    assert not (tmp_path / "no").exists() and not (tmp_path / "gone").exists()
    monkeypatch.delenv("ROOFTOP_DB")
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home" / "deep"))  # the default place is made as before
    assert main(["import", str(doc)]) == 0
    assert (tmp_path / "home" / "deep" / "rooftop.db").is_file()


def test_an_empty_db_is_refused_not_read_as_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    src = tmp_path / "a.db"
    doc = tmp_path / "e.json"
    assert main(["export", measured(src), "-o", str(doc), "--db", str(src)]) == 0
    one_error(capsys, ["import", str(doc), "--db", ""], "argument --db: an empty path")
    one_error(capsys, ["--db", " ", "runs"], "argument --db: an empty path")
    assert not (tmp_path / "home").exists()


# -- what works as --device ----------------------------------------------------------------


def test_rename_and_runs_say_device_only_for_a_run_with_roofs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "a.db"
    pid = profiled(db)
    capsys.readouterr()
    assert main(["rename", pid[:8], "prog", "--db", str(db)]) == 0
    assert capsys.readouterr().out == f"run {pid[:8]} is now prog\n"
    assert main(["runs", "--db", str(db)]) == 0
    assert "--device" not in capsys.readouterr().out
    rid = measured(db)
    assert main(["rename", rid[:8], "lab", "--db", str(db)]) == 0
    assert capsys.readouterr().out == f"run {rid[:8]} is now lab; use it as --device lab\n"
    assert main(["devices", "lab", "--db", str(db)]) == 0
    assert main(["runs", "--db", str(db)]) == 0
    assert "Complete runs with roofs work as --device" in " ".join(capsys.readouterr().out.split())


def test_the_json_export_of_a_profile_run_still_works(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    pid = profiled(db)
    assert main(["export", pid, "-o", str(tmp_path / "p.json"), "--db", str(db)]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["runs"][0]["plan"] == "profile"
