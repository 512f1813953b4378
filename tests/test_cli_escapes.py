"""Text typed on the command line never drives the terminal, in error messages too; negative numbers in
e-notation get the value's own check. Each case is one a hostile hour found printed raw (an OSC retitled
the pane) or answered with argparse's "unrecognized arguments"."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rooftop.models.safetext import UNSAFE
from rooftop.tui.cli import main
from test_input_safe import run  # main(argv), argparse's exit included

OSC = "\x1b]0;p\x07"
DCS = "\x1bPq#0;2;0;0;0\x1b\\"


@pytest.fixture(autouse=True)
def no_user_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ROOFTOP_DB", raising=False)


def raw(text: str) -> bool:
    """A control character (escape, bell, bidi override…) other than the line ends: it would be obeyed."""
    return bool(UNSAFE.search(text.replace("\n", "")))


@pytest.mark.parametrize("argv", [
    ["runs", "\x07"], ["runs", OSC], ["runs", DCS],  # argparse: unrecognized arguments
    ["measure", "--plan", OSC],  # invalid choice
    [OSC],  # an unknown command
    ["op", "gemm", "8", "8", "8", "--measured-ms", OSC],
    ["show", "1", "--rows", OSC],  # a value's type check
])
def test_argparse_errors_show_typed_escapes_never_obey_them(capsys: pytest.CaptureFixture[str],
                                                           argv: list[str]) -> None:
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and err.count("\n") == 1 and not raw(out + err), err
    assert "\\x1b" in err or "\\x07" in err, err  # shown, escaped


def test_llm_parts_names_are_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "llm", "llama-3.1-8b", "-d", "h100", "--parts", f"{OSC}=1,mlp=2")
    assert rc == 0 and not raw(out + err) and "\\x1b]0;p\\x07" in out, out
    rc, out, err = run(capsys, "llm", "llama-3.1-8b", "-d", "h100", "--parts", f"{OSC}1")
    assert rc == 2 and not raw(err) and "NAME=NUMBER" in err, err


def test_paths_in_messages_are_shown_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / f"{OSC}.db")
    rc, out, err = run(capsys, "runs", "--db", db)
    assert rc == 0 and "no runs yet" in out and not raw(out + err) and "\\x1b]0;p\\x07.db" in out, out
    rc, out, err = run(capsys, "show", "abcd", "--db", db)
    assert rc == 2 and not raw(err), err
    rc, out, err = run(capsys, "export", "--all", "-o", str(tmp_path / f"no{OSC}" / "x.json"), "--db", db)
    assert rc == 2 and not raw(err), err


@pytest.mark.parametrize(("argv", "said"), [
    (["op", "gemm", "-1e5", "8", "8"], "m='-1e5' must be at least 1"),
    (["op", "gemm", "8", "-2.5E3", "8"], "must be at least 1"),
    (["op", "gemm", "8", "8", "-1e+2"], "must be at least 1"),
    (["op", "gemm", "8", "8", "-3"], "must be at least 1"),
])
def test_negative_e_notation_is_out_of_range_not_an_unknown_option(capsys: pytest.CaptureFixture[str],
                                                                    argv: list[str], said: str) -> None:
    rc, out, err = run(capsys, *argv, "-d", "h100")
    assert rc == 2 and err.count("\n") == 1 and said in err and "unrecognized" not in err, err


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([["runs"], ["op", "gemm"], ["devices"], ["llm", "--parts"]]),
       st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=3))
@example(["runs"], ["\x1b]0;p\x07"])
@example(["runs"], ["--\x1bP"])
@example(["op", "gemm"], ["-1e5"])
def test_any_typed_words_give_an_answer_or_one_escaped_line(head: list[str], words: list[str]) -> None:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([*head, *words, "--db", "/nonexistent-rooftop/r.db"])
        except SystemExit as exc:
            rc = int(exc.code or 0)
    assert rc in (0, 2), (head, words, err.getvalue())
    assert not raw(out.getvalue() + err.getvalue()), (head, words, out.getvalue(), err.getvalue())
    assert rc == 0 or err.getvalue().count("\n") == 1, (head, words, err.getvalue())


MI250 = Path(__file__).parent / "data" / "real-traces" / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def test_bidi_and_line_separators_in_trace_names_never_reach_the_terminal(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Op, kernel and step names with a right-to-left override, an isolate, a mark and U+2028 (which a terminal
    or Rich takes as a new line): dropped from every line, as escape characters are."""
    import gzip
    import json

    doc = json.loads(gzip.decompress(MI250.read_bytes()))
    for e in doc["traceEvents"]:
        n = e.get("name")
        if e.get("cat") in ("kernel", "cpu_op", "user_annotation") and isinstance(n, str):
            e["name"] = n + "\u202eevil\u2028x" if n.startswith("ProfilerStep") else "\u202e\u2028" + n + "\u2066x\u200f"
    p = tmp_path / "bidi.json"
    p.write_text(json.dumps(doc))
    assert main(["profile", str(p), "--no-save", "-d", "mi210"]) == 0
    out, err = capsys.readouterr()
    assert not raw(out) and not raw(err)
    (step,) = [line for line in out.splitlines() if line.startswith("  ProfilerStep#1evilx ")]  # its line, whole,
    assert step.endswith("s")  # its name without the controls, its figures after it
    assert "aten::addmmx" in out and "\u2028" not in out
