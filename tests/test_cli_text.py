"""What the command line writes, as text: every line within 80 columns, clean when piped to a file."""

from __future__ import annotations

import pytest

from rooftop.tui.cli import build_parser, main

WIDTH = 80


def subcommands() -> list[str]:
    """Every subcommand the parser has (so a new one is checked without editing this file)."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.choices and a.dest == "command"]  # argparse keeps them here
    return sorted(sub.choices)


def help_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def too_wide(text: str) -> list[str]:
    return [f"{len(line)}: {line}" for line in text.splitlines() if len(line) > WIDTH]


@pytest.mark.parametrize("columns", ["80", "200"])
@pytest.mark.parametrize("command", [None, *subcommands()])
def test_every_help_fits_80_columns(command: str | None, columns: str, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """On an 80-column terminal and on a wide one (help is no wider there: long lines are hard to read)."""
    monkeypatch.setenv("COLUMNS", columns)
    text = help_text([command] if command else [], capsys)
    assert not too_wide(text), "\n".join(too_wide(text))


def test_help_keeps_the_example_blocks_as_written(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lines = help_text(["llm"], capsys).splitlines()
    i = lines.index("examples:")
    assert lines[i + 1:i + 3] == ["  rooftop llm qwen2.5-7b --device h100 --batch 1,8,16 \\",
                                  "      --measured-ms 11.56,11.9,12.5"]
    lines = help_text(["op"], capsys).splitlines()
    assert "  gemv N K [dtype]                           a GEMM with M = 1 (batch-1 decode)" in lines
    # the prose around them is wrapped, not left as one long line
    top = help_text([], capsys)
    assert "rooftop — a terminal roofline lab for GPU servers. It places an op (GEMM," in top.splitlines()
