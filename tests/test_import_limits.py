"""What one import may hold, and `rooftop show` of a large run: real JSON files, a real store, the command's main.

Each case is one a hostile hour found: a whole number past 2^63 in a REAL field (max_error) was an
internal error; an empty or `null` .json got the CSV's "unrecognised columns"; 300k samples were taken
and `show` then printed every one (over a minute).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.models.sample import TimeStats
from rooftop.store import io as storeio
from rooftop.store.io import export_json
from rooftop.store.runs import Store
from rooftop.tui.cli import main


@pytest.fixture(autouse=True)
def no_user_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ROOFTOP_DB", raising=False)


def export_of(tmp_path: Path, n: int = 3) -> dict:
    with Store.open(tmp_path / "src.db") as s:
        rid = s.begin_run({"name": "Lab GPU", "uuid": "GPU-1"}, "quick", "cuda")
        s.add_samples(rid, [synthetic_sample(i) for i in range(n)])
        s.finish_run(rid)
        return export_json(s, s.runs())


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse's refusal of an option's value
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_whole_number_past_sqlites_integers_in_a_real_field_is_stored(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    doc = export_of(tmp_path)
    doc["runs"][0]["samples"][0]["max_error"] = 10**20  # JSON's integer; the column is REAL
    f = tmp_path / "big.json"
    f.write_text(json.dumps(doc))
    db = tmp_path / "r.db"
    rc, out, err = cli(capsys, "import", str(f), "--db", str(db))
    assert rc == 0 and "added 1 run" in out, err  # was exit 1, "internal error: OverflowError"
    with Store.open(db) as s:
        assert s.samples(s.runs()[0].id)[0].max_error == pytest.approx(1e20)


def test_a_whole_number_past_the_bounds_names_its_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = export_of(tmp_path)
    doc["runs"][0]["samples"][1]["max_error"] = 10**40
    f = tmp_path / "bigger.json"
    f.write_text(json.dumps(doc))
    rc, out, err = cli(capsys, "import", str(f), "--db", str(tmp_path / "r.db"))
    assert rc == 2 and err.count("\n") == 1 and "sample 2" in err and "max_error" in err, err


@pytest.mark.parametrize(("text", "said"), [("", "the file is empty"), ("  \n", "the file is empty"),
                                            ("null", "the JSON is null"), ("[]", "the JSON is a list"),
                                            ("7", "the JSON is a number"), ('"x"', "the JSON is a string")])
def test_an_empty_or_null_json_file_gets_jsons_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      text: str, said: str) -> None:
    f = tmp_path / "runs.json"
    f.write_text(text)
    rc, out, err = cli(capsys, "import", str(f), "--db", str(tmp_path / "r.db"))
    assert rc == 2 and err.count("\n") == 1 and said in err and "unrecognised columns" not in err, err
    assert not (tmp_path / "r.db").exists()


def test_an_import_past_the_sample_limit_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storeio, "MAX_IMPORT_SAMPLES", 5)  # the real limit is 100,000: the rule, made cheap
    doc = export_of(tmp_path, n=6)
    f = tmp_path / "six.json"
    f.write_text(json.dumps(doc))
    rc, out, err = cli(capsys, "import", str(f), "--db", str(tmp_path / "r.db"))
    assert rc == 2 and err.count("\n") == 1 and "6 samples" in err and "at most 5 samples" in err, err
    assert not (tmp_path / "r.db").exists()
    two = tmp_path / "three.json"  # two files of 3 are 6 together: the limit is per import
    doc3 = export_of(tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path, n=3)
    two.write_text(json.dumps(doc3))
    half = tmp_path / "other.json"
    doc["runs"][0]["samples"] = doc["runs"][0]["samples"][:3]
    half.write_text(json.dumps(doc))
    rc, out, err = cli(capsys, "import", str(two), str(half), "--db", str(tmp_path / "r.db"))
    assert rc == 2 and "6 samples" in err and "at most 5" in err, err


def test_the_import_help_says_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    assert "at most 100,000 samples" in " ".join(capsys.readouterr().out.split())


def large_run(path: Path, n: int) -> str:
    with Store.open(path) as s:
        rid = s.begin_run({"name": "Lab GPU", "uuid": "GPU-1"}, "quick", "cuda")
        samples = [synthetic_sample(i) for i in range(n)]
        samples[7] = dataclasses.replace(samples[7], stats=None, skipped="out of memory")
        st = samples[9].stats
        samples[9] = dataclasses.replace(samples[9], stats=TimeStats(st.median_s, st.p10_s, st.p90_s, st.min_s,
                                                                     0.5, st.repeats, st.calls))
        s.add_samples(rid, samples)
        s.finish_run(rid)
    return rid


def rows_of(out: str) -> list[int]:
    return [int(line.split()[0]) for line in out.splitlines() if line.strip() and line.split()[0].isdigit()
            and "read_reduce" in line and "," not in line.split()[0]]


def test_show_pages_a_large_run_and_counts_it_in_sql(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    rid = large_run(db, 120)
    with Store.open(db) as s:
        (g,) = s.sample_groups(rid)
        assert (g.family, g.dtype, g.count, g.skipped, g.unstable) == ("read_reduce", "fp32", 120, 1, 1)
        assert [x.shape["n"] for x in s.samples(rid, 2, 100)] == [101 * 1024, 102 * 1024]
    rc, out, err = cli(capsys, "show", rid[:8], "--db", str(db))
    flat = " ".join(out.split())
    assert rc == 0 and rows_of(out) == list(range(50)), err
    assert "120" in flat and "70 after these not shown" in flat and "--page 2" in flat and "--all" in flat
    rc, out, _ = cli(capsys, "show", rid[:8], "--db", str(db), "--page", "3")
    assert rc == 0 and rows_of(out) == list(range(100, 120)) and "samples 100–119 of 120" in " ".join(out.split())
    rc, out, _ = cli(capsys, "show", rid[:8], "--db", str(db), "--all")
    assert rc == 0 and rows_of(out) == list(range(120)) and "not shown" not in out
    rc, out, err = cli(capsys, "show", rid[:8], "--db", str(db), "--page", "4")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--page 1 to 3" in err, err
    rc, out, err = cli(capsys, "show", rid[:8], "--db", str(db), "--rows", "-1e5")
    assert rc == 2 and err.count("\n") == 1 and "at least 1" in err, err
    rc, out, err = cli(capsys, "show", rid[:8], "--db", str(db), "--all", "--page", "2")  # the page was ignored
    assert rc == 2 and out == "" and err.count("\n") == 1 and "give one" in err, err


def test_show_of_a_small_run_lists_it_all_without_paging_words(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    rid = large_run(db, 12)
    rc, out, _ = cli(capsys, "show", rid[:8], "--db", str(db))
    assert rc == 0 and rows_of(out) == list(range(12)) and "not shown" not in out and "listed" not in out
