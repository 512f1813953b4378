"""Hostile imports (`rooftop import FILE`): a real export (JSON, and the CSV pair) with one value changed to
something generated gives an answer or one line with exit 2, never a traceback or an internal error (exit 1);
an import that is taken leaves a store `rooftop show` and `rooftop runs` can read. Failing examples are pinned."""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rooftop.store.io import export_csv, export_json
from rooftop.tui.cli import main
from test_store_io import filled_store

HOSTILE_TEXT = ["", "nan", "inf", "-inf", "-1", "0", "1e400", "-1e5", "99999999999999999999999", "1" * 40, "0x10",
                "1_000", " 5 ", "\x1b]0;p\x07", "\u202e", "a,b", '"', "\n", "NULL", "true", "[1]", "{}"]
leaves = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([2**63, -2**63 - 1, 10**20]),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=10), st.sampled_from(HOSTILE_TEXT))
values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=5)


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict[str, str]]:
    """A rooftop JSON export of two measured runs, and the same runs as the reference CSV pair."""
    store, _ = filled_store(tmp_path_factory.mktemp("src") / "a.db")
    doc = json.loads(json.dumps(export_json(store, store.runs())))
    pair = export_csv(store, store.runs())
    store.close()
    return doc, pair


def paths_in(node: Any, at: tuple = ()) -> list[tuple]:
    """Every place in a document a value could be changed: each key and index, nested."""
    out = [at] if at else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths_in(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths_in(v, (*at, i))
    return out


def changed(doc: dict, path: tuple, value: Any) -> dict:
    new = copy.deepcopy(doc)
    node = new
    for key in path[:-1]:
        node = node[key]
    if value == "<drop>" and isinstance(node, dict):
        node.pop(path[-1])
    else:
        node[path[-1]] = value
    return new


def commands(files: dict[str, str], *argv: str) -> list[tuple[list[str], int, str, str]]:
    """`rooftop import` of the files (written to a fresh folder, each as named), then, if it took them,
    `runs` and `show` of each run; every command's status and output."""
    done = []
    with tempfile.TemporaryDirectory() as folder:
        for name, text in files.items():
            (Path(folder) / name).write_text(text, encoding="utf-8")
        db = str(Path(folder) / "r.db")
        runs = [["import", *[str(Path(folder) / n) for n in files], *argv]]
        while runs:
            args = runs.pop(0)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    rc = main([*args, "--db", db])
                except SystemExit as exc:
                    rc = int(exc.code or 0)
            done.append((args, rc, out.getvalue(), err.getvalue()))
            if args[0] == "import" and rc == 0:
                runs += [["runs", "--json"]]
            elif args[0] == "runs" and rc == 0:
                runs += [["show", r["id"][:8]] for r in json.loads(out.getvalue())]
    return done


def check(files: dict[str, str]) -> None:
    for args, rc, out, err in commands(files):
        assert rc in (0, 2), (args[0], err)
        assert "internal error" not in err and "Traceback" not in err, (args[0], err)
        if rc == 2:
            assert err.count("\n") == 1, (args[0], err)


def test_the_exports_import_whole(exports: tuple[dict, dict[str, str]]) -> None:
    doc, pair = exports
    for files in ({"runs.json": json.dumps(doc)}, pair):
        done = commands(files)
        assert [rc for _, rc, _, _ in done] == [0, 0, 0, 0], done


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10**6), st.one_of(values, st.just("<drop>")))
@example(pick=-1, value=None)
@example(pick=-1, value="<drop>")
def test_a_changed_json_export_is_taken_or_refused_in_one_line(exports: tuple[dict, dict[str, str]], pick: int,
                                                               value: Any) -> None:
    doc, _ = exports
    places = paths_in(doc)
    check({"runs.json": json.dumps(changed(doc, places[pick % len(places)], value))})


@pytest.mark.parametrize(("path", "value"), [
    (("runs", 1, "samples", 0, "max_error"), 10**20),  # was exit 1: OverflowError binding a REAL
    (("runs", 1, "samples", 3, "max_error"), 2**63),
    (("runs", 1, "samples", 0, "flops"), 2**64),
    (("runs",), None),
    (("runs",), [None]),
    (("runs", 0, "samples"), {}),
])
def test_json_cases_found_by_the_fuzzer(exports: tuple[dict, dict[str, str]], path: tuple, value: Any) -> None:
    doc, _ = exports
    check({"runs.json": json.dumps(changed(doc, path, value))})


def csv_changed(text: str, row: int, col: int, cell: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    r = rows[row % len(rows)]
    if r:
        r[col % len(r)] = cell
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["summary.csv", "roofs.csv"]), st.integers(0, 20), st.integers(0, 30),
       st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=12)), st.booleans())
@example("summary.csv", 1, 11, "1e400", True)  # median_ms infinite
@example("summary.csv", 1, 5, "99999999999999999999999", True)  # a shape past 2^62
@example("summary.csv", 1, 18, "99999999999999999999999", False)  # max_error past 2^63, as CSV text
@example("roofs.csv", 1, 2, "nan", True)
@example("summary.csv", 0, 10, "", True)  # the target column's name gone
def test_a_changed_csv_export_is_taken_or_refused_in_one_line(exports: tuple[dict, dict[str, str]], name: str,
                                                              row: int, col: int, cell: str, both: bool) -> None:
    _, pair = exports
    files = {**pair, name: csv_changed(pair[name], row, col, cell)}
    check(files if both else {name: files[name]})
