"""Hostile input: malformed imports are refused whole (exit 2) and leave every command working; values an
older rooftop stored read as unknown; stored text never drives the terminal; --json is strict JSON."""

from __future__ import annotations

import copy
import json
import math
import sqlite3
import unicodedata
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.models.plausible import finite, sample_problem
from rooftop.models.safetext import UNSAFE, safe_text
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.spec import SpecError, parse_count, parse_spec
from rooftop.store.io import export_json
from rooftop.tui.cli import main
from test_store_io import filled_store

HOSTILE_NAME = "[/bold]x\x1b]0;pwned\x07\x1b[2J\x9b2J\u202eevil"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[str]]:
    """A rooftop JSON export of two runs (run 2 is the one the cases break)."""
    a, ids = filled_store(tmp_path_factory.mktemp("src") / "a.db")
    doc = json.loads(json.dumps(export_json(a, a.runs())))
    a.close()
    return doc, ids


def _at(*path: Any) -> Callable[[Any], Callable[[dict], None]]:
    def setter(value: Any) -> Callable[[dict], None]:
        def change(doc: dict) -> None:
            node = doc["runs"][1]
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        return change
    return setter


MALFORMED = [
    ("started_at inf", _at("started_at")(math.inf), "started_at = inf"),
    ("started_at 1e300", _at("started_at")(1e300), "not a time between 1970 and 2100"),
    ("started_at 2^64", _at("started_at")(2**64), "20-digit number is not a time"),
    ("started_at text", _at("started_at")("yesterday"), "started_at = 'yesterday'"),
    ("ended_at -inf", _at("ended_at")(-math.inf), "ended_at = -inf"),
    ("l2_bytes text", _at("profile", "l2_bytes")("big"), "l2_bytes = 'big' is not a whole number"),
    ("memory_bytes text", _at("profile", "memory_bytes")("80GB"), "memory_bytes = '80GB'"),
    ("memory_bytes negative", _at("profile", "memory_bytes")(-1), "memory_bytes = -1 is outside"),
    ("power_limit_w text", _at("profile", "power_limit_w")("hot"), "power_limit_w = 'hot' is not a number"),
    ("device l2_bytes text", _at("device", "l2_bytes")("big"), "device l2_bytes = 'big'"),
    ("ceiling 1e308", _at("profile", "bandwidth", "dram")(1e308), "bandwidth dram = 1e+308 is outside [1, 1e+16] B/s"),
    ("ceiling 1e-320", _at("profile", "peak", "bf16-tc")(1e-320), "peak bf16-tc = 1e-320 is outside [1, 1e+18] FLOP/s"),
    ("launch 10 s", _at("profile", "launch_overhead")(10.0), "launch overhead = 10.0 is outside"),
    ("p10_s null", _at("samples", 3, "stats", "p10_s")(None), "sample 4 stats has no p10_s (a number)"),
    ("repeats 2^64", _at("samples", 3, "stats", "repeats")(2**64), "repeats = a 20-digit number is outside"),
    ("shape 2^64", _at("samples", 3, "shape", "m")(2**64), "shape m = a 20-digit number is outside"),
    ("telemetry 2^64", _at("telemetry", 0, "power_w")(2**64), "telemetry row 1.power_w = a 20-digit number"),
    ("device name a list", _at("host")(["a"]), "host = ['a'] is not text"),
    ("extra inf", _at("profile", "extra")({"x": math.inf}), "extra.x = inf"),
]


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))  # Python writes inf as Infinity, which its own reader takes back
    return path


def _commands_work(capsys: pytest.CaptureFixture[str], db: Path, rid: str, out: Path) -> None:
    """Every reading command on the store, each exit 0 with no internal error."""
    for argv in (["runs"], ["runs", "--json"], ["show", rid], ["show", rid, "--json"], ["devices"],
                 ["devices", rid], ["op", "gemm", "1", "8192", "8192", "-d", rid],
                 ["plot", "-d", rid, "--points", "--width", "60", "--height", "15"],
                 ["export", rid, "--format", "csv", "-o", str(out), "--force"], ["compare", "lab-a", rid]):
        rc, stdout, err = run(capsys, *argv, "--db", str(db))
        assert rc == 0 and "internal error" not in err, (argv, err)
        if "--json" in argv:
            json.loads(stdout, parse_constant=lambda c: pytest.fail(f"{argv} printed {c}"))


@pytest.mark.parametrize(("case", "change", "words"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_a_malformed_import_is_refused_whole_and_later_commands_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], good: tuple[dict, list[str]], case: str,
        change: Callable[[dict], None], words: str) -> None:
    doc, ids = good
    db = tmp_path / "s.db"
    assert run(capsys, "import", str(_write(tmp_path / "first.json", {**doc, "runs": doc["runs"][:1]})),
               "--db", str(db))[0] == 0
    bad = copy.deepcopy(doc)
    change(bad)
    rc, _, err = run(capsys, "import", str(_write(tmp_path / "bad.json", bad)), "--db", str(db))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and words in err and "run 2" in err, err
    rc, out, _ = run(capsys, "runs", "--json", "--db", str(db))
    assert [r["id"] for r in json.loads(out)] == [ids[0]]  # nothing of the refused file was stored
    _commands_work(capsys, db, ids[0][:8], tmp_path / "csv")


@pytest.mark.parametrize(("text", "words"), [
    ('{"format": "rooftop-runs", "runs": [' + "[" * 3000 + "]" * 3000 + "]}", "nested too deeply"),
    ('{"format": "rooftop-runs", "format_version": ' + "9" * 5000 + "}", "more than 4300 digits"),
    ('{"format": "rooftop-runs", "runs": [7]}', "run 1 is malformed"),
    ('{"format": "rooftop-runs", "runs": [{"id": 5}]}', "id = 5 is not text"),
])
def test_json_that_python_cannot_take_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             text: str, words: str) -> None:
    f = tmp_path / "x.json"
    f.write_text(text)
    rc, _, err = run(capsys, "import", str(f), "--db", str(tmp_path / "s.db"))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and words in err, err


def test_csv_ceilings_beyond_physical_sense_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "roofs.csv"
    f.write_text("target,dtype,bandwidth_gb_s,peak_tflop_s,ridge_flop_byte,bw_case,compute_case\n"
                 "x,bf16,3000,1e300,,,\n")
    rc, _, err = run(capsys, "import", str(f), "--db", str(tmp_path / "s.db"))
    assert rc == 2 and "row 2: peak_tflop_s = '1e300' is outside physical sense" in err, err
    assert "1e-12 to 1e+06 TFLOP/s" in err, err


hostile = st.sampled_from([math.inf, -math.inf, 1e300, -1.0, 2**64, -(2**70), "x", None, [], {}, True, 1e-320])
fields = st.sampled_from([("started_at",), ("ended_at",), ("profile", "l2_bytes"), ("profile", "memory_bytes"),
                          ("profile", "sm_count"), ("profile", "power_limit_w"), ("profile", "bandwidth", "dram"),
                          ("profile", "peak", "fp8-tc"), ("samples", 0, "flops"), ("samples", 3, "stats", "median_s"),
                          ("samples", 3, "stats", "calls"), ("samples", 0, "shape", "n"), ("telemetry", 1, "t"),
                          ("device", "sm_count"), ("status",), ("name",)])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=fields, value=hostile)
def test_any_hostile_value_is_refused_or_harmless(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  good: tuple[dict, list[str]], field: tuple, value: Any) -> None:
    """Whatever one field says, the import exits 0 or 2 (never 1), and `runs`/`show` still work after it."""
    doc, ids = good
    bad = copy.deepcopy(doc)
    _at(*field)(value)(bad)
    db = tmp_path / f"h{abs(hash((field, repr(value))))}.db"
    rc, _, err = run(capsys, "import", str(_write(tmp_path / "h.json", bad)), "--db", str(db))
    assert rc in (0, 2) and "internal error" not in err, err
    if rc == 0:
        for argv in (["runs"], ["show", ids[1][:8]], ["devices"]):
            rc2, _, err2 = run(capsys, *argv, "--db", str(db))
            assert rc2 == 0 and "internal error" not in err2, (argv, err2)


# -- values an older rooftop stored -------------------------------------------------------------------------


@pytest.fixture
def old_store(tmp_path: Path) -> tuple[Path, list[str]]:
    """A store holding what no import accepts now, written straight into SQLite as an older version could."""
    db = tmp_path / "old.db"
    a, ids = filled_store(db)
    a.close()
    c = sqlite3.connect(db)
    rid = ids[1]
    c.execute("UPDATE runs SET started_at = ?, ended_at = ?, device_json = ? WHERE id = ?",
              (1e300, math.inf, json.dumps({"name": "Test GPU", "uuid": "GPU-b", "l2_bytes": "big"}), rid))
    pj = json.loads(c.execute("SELECT profile_json FROM runs WHERE id = ?", (rid,)).fetchone()[0])
    pj.update(l2_bytes="big", memory_bytes="80GB", power_limit_w="hot")
    c.execute("UPDATE runs SET profile_json = ? WHERE id = ?", (json.dumps(pj), rid))
    c.execute("UPDATE ceilings SET value = 1e-320 WHERE run_id = ? AND key = 'fp8-tc'", (rid,))
    c.execute("UPDATE samples SET p10_s = NULL WHERE run_id = ? AND seq = 3", (rid,))
    c.execute("UPDATE runs SET started_at = 'yesterday' WHERE id = ?", (ids[0],))
    c.commit()
    c.close()
    return db, ids


def test_impossible_values_already_stored_read_as_unknown(old_store: tuple[Path, list[str]], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    db, ids = old_store
    rid = ids[1][:8]
    _commands_work(capsys, db, rid, tmp_path / "csv")
    rc, out, err = run(capsys, "show", rid, "--db", str(db))
    assert rc == 0 and "unknown" in out and "fp8-tc" not in out, out
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and rid in warnings[0] and "started_at = 1e+300" in warnings[0], err
    rc, out, err = run(capsys, "runs", "--json", "--db", str(db))
    assert [r["started_at"] for r in json.loads(out)] == [None, None]
    rc, out, err = run(capsys, "plot", "-d", rid, "--points", "--width", "60", "--height", "15", "--db", str(db))
    assert rc == 0 and len([line for line in err.splitlines() if "warning" in line]) == 1, err


async def test_the_app_starts_on_a_store_with_impossible_values(old_store: tuple[Path, list[str]]) -> None:
    from rooftop.tui.app import AppConfig, create_app
    from tui_helpers import screen_lines

    db, ids = old_store
    app = create_app(AppConfig(device="h100", sampler=None, db_path=db))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("5")  # History
        await pilot.pause()
        lines = "\n".join(screen_lines(app))
        assert ids[1][:8] in lines and "unknown" in lines, lines
    assert app.return_code in (0, None)


# -- stored text on a terminal ------------------------------------------------------------------------------


def _hostile_store(db: Path) -> str:
    a, ids = filled_store(db)
    a.close()
    c = sqlite3.connect(db)
    rid = ids[1]
    c.execute("UPDATE runs SET name = ?, plan = ?, device_json = ? WHERE id = ?",
              (HOSTILE_NAME, "[bold]", json.dumps({"name": HOSTILE_NAME, "uuid": "GPU-b"}), rid))
    pj = json.loads(c.execute("SELECT profile_json FROM runs WHERE id = ?", (rid,)).fetchone()[0])
    pj["name"] = HOSTILE_NAME
    c.execute("UPDATE runs SET profile_json = ? WHERE id = ?", (json.dumps(pj), rid))
    c.execute("UPDATE ceilings SET case_ = ? WHERE run_id = ?", (HOSTILE_NAME, rid))
    c.commit()
    c.close()
    return rid[:8]


def test_stored_names_never_drive_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    rid = _hostile_store(db)
    for argv in (["runs"], ["show", rid], ["devices"], ["devices", rid], ["compare", "lab-a", rid],
                 ["op", "gemm", "1", "8192", "8192", "-d", f"lab-a,{rid}"],
                 ["plot", "-d", rid, "--points", "--width", "60", "--height", "15"],
                 ["export", rid, "--format", "csv", "-o", str(tmp_path / "c")], ["delete", rid]):
        rc, out, err = run(capsys, *argv, "--db", str(db))
        assert rc == 0, (argv, err)
        assert not UNSAFE.search(out.replace("\n", "") + err.replace("\n", "")), (argv, out, err)
        if argv[0] in ("show", "devices", "delete"):
            assert "[/bold]x\\x1b]0;pwned\\x07" in out, (argv, out)  # shown as written, escaped
        elif argv[0] == "runs":
            assert "[/bold]" in out and "[bold]" in out, out  # the name and the plan (wrapped in the table)


def test_a_markup_name_in_an_error_is_printed_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    rid = _hostile_store(db)
    rc, _, err = run(capsys, "op", "gemm", "1", "8", "8", "int8", "-d", rid, "--db", str(db))
    assert rc == 2 and "\x1b" not in err and "\\x1b" in err, err


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_safe_text_leaves_nothing_that_moves_the_cursor(text: str) -> None:
    shown = safe_text(text)
    assert not any(unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029\u202e\u2066" for ch in shown)
    if not UNSAFE.search(text):
        assert shown == text


# -- JSON ---------------------------------------------------------------------------------------------------


def test_json_never_prints_infinity(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "llm", "qwen2.5-7b", "-d", "h100", "--parts", "attention=1,mlp=2",
                       "--speedup", "attention=1e-320", "--json")
    assert rc == 0, err
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"printed {c}"))
    assert doc["amdahl"]["after_ms"]["attention"] is None and doc["amdahl"]["after_ms"]["mlp"] == 2


def test_finite_turns_only_nan_and_inf_into_null() -> None:
    assert finite({"a": [1, math.inf, (-math.inf, math.nan)], "b": 2.5, "c": "inf"}) == \
        {"a": [1, None, [None, None]], "b": 2.5, "c": "inf"}


def test_an_infinite_iqr_survives_an_export_and_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rooftop.store.runs import Store

    db = tmp_path / "a.db"
    with Store.open(db) as s:
        rid = s.begin_run({"name": "zero"}, "quick", "cpu")
        s.add_sample(rid, Sample("copy", "fp32", {"n": 4}, 0.0, 32.0, stats=TimeStats(0.0, 0.0, 0.0, 0.0, math.inf, 7, 1)))
        s.finish_run(rid, "complete")
    rc, out, _ = run(capsys, "export", rid[:8], "--db", str(db))
    assert rc == 0 and "Infinity" not in out and '"iqr_ratio": null' in out
    (tmp_path / "x.json").write_text(out)
    assert run(capsys, "import", str(tmp_path / "x.json"), "--db", str(tmp_path / "b.db"))[0] == 0
    with Store.open(tmp_path / "b.db") as b:
        (sample,) = b.samples(rid)
        assert sample.stats.iqr_ratio == math.inf and not sample.stable


def test_sample_rules_accept_what_a_probe_measures() -> None:
    s = Sample("gemm", "bf16", {"m": 1, "n": 8192, "k": 8192}, 2.0 * 8192**2, 2.0 * 8192**2,
               stats=TimeStats(1e-5, 9e-6, 1.1e-5, 9e-6, 0.02, 7, 100), max_error=1e-3)
    assert sample_problem(s) is None


# -- the command line's smaller messages ---------------------------------------------------------------------


@pytest.mark.parametrize(("text", "value"), [("1E9", 10**9), ("1e9", 10**9), ("2E3", 2000), ("8k", 8192)])
def test_exponents_in_either_case(text: str, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize(("text", "words"), [
    ("-4096", "must be at least 1"), ("0", "must be at least 1"), ("-1e3", "must be at least 1"),
    ("9" * 5000, "is too large"), ("9" * 5000 + "^2", "is too large"), ("2^" + "9" * 5000, "is too large"),
    ("1e99999", "is too large"),
])
def test_counts_out_of_range_are_told_why(text: str, words: str) -> None:
    with pytest.raises(SpecError, match=words) as exc:
        parse_count(text, "m")
    assert len(str(exc.value)) < 120  # a pasted 5000-digit number is not echoed whole


def test_a_negative_size_in_a_spec_is_too_small_not_unreadable() -> None:
    with pytest.raises(SpecError, match="m='-4096' must be at least 1"):
        parse_spec("gemm -4096 4096 4096")


def test_causal_attention_needs_no_more_queries_than_keys() -> None:
    with pytest.raises(SpecError, match="causal needs q ≤ t"):
        parse_spec("attn b=1 h=8 q=4096 t=1024 causal")
    assert parse_spec("attn b=1 h=8 q=1024 t=4096 causal").causal


@pytest.mark.parametrize(("argv", "words"), [
    (["op", "gemm", "1", "2", "3", "-d", ""], "-d '': an empty device id"),
    (["-d", "", "op", "gemm", "1", "2", "3"], "-d '': an empty device id"),
    (["op", "gemm", "1", "2", "3", "-d", "h100,"], "an empty device id"),
    (["compare", "h100", ""], "DEVICE '': an empty device id"),
    (["plot", "-d", "h100", "--paths", ""], "--paths '': an empty path name"),
    (["op", "gemm", "2^" + "9" * 5000, "1", "1", "-d", "h100"], "is too large"),
    (["op", "gemm", "-4096", "1", "1", "-d", "h100"], "must be at least 1"),
])
def test_empty_and_out_of_range_options_are_refused(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                   words: str) -> None:
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and words in err, err


def test_an_empty_device_never_opens_the_app(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import rooftop.tui.app as app

    monkeypatch.setattr(app, "create_app", lambda *a, **k: pytest.fail("the app opened on -d ''"))
    rc, _, err = run(capsys, "-d", "")
    assert rc == 2 and "-d '': an empty device id" in err, err


def test_llm_on_a_folder_without_config_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "llm", str(tmp_path), "-d", "h100")
    assert rc == 2 and f"{tmp_path} has no config.json" in err, err


async def test_the_app_shows_stored_names_without_sending_them(tmp_path: Path) -> None:
    """A run named with markup and escape sequences, chosen on every tab: shown escaped, never crashing."""
    from rooftop.tui.app import AppConfig, create_app
    from tui_helpers import screen_lines

    db = tmp_path / "s.db"
    _hostile_store(db)
    app = create_app(AppConfig(device=safe_text(HOSTILE_NAME), sampler=None, db_path=db))
    async with app.run_test(size=(120, 40)) as pilot:
        for tab in "23456":
            await pilot.press(tab)
            await pilot.pause()
            lines = screen_lines(app)
            assert not any(UNSAFE.search(line) for line in lines), (tab, [line for line in lines if UNSAFE.search(line)])
        assert any("[/bold]x" in line for line in lines)  # History: the name, as written


def test_a_5000_digit_csv_number_is_refused_briefly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "summary.csv"
    f.write_text("family,dtype,bytes,flops,target,median_ms,m\ngemm,bf16,8,1,x,1," + "9" * 5000 + "\n")
    rc, _, err = run(capsys, "import", str(f), "--db", str(tmp_path / "s.db"))
    assert rc == 2 and "row 2: m = '999" in err and len(err) < 300, err
