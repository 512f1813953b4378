"""`rooftop profile` says what it is doing while it reads and places a trace (a million events take seconds):
a line on stderr with the file's MiB read, then each stage, gone when the report comes. Only where stderr is a
terminal: piped, nothing is written for it and the report is the same."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from rooftop.models.units import MiB
from rooftop.store.tracefile import load_trace
from rooftop.tui.commands import progress
from terminal import Terminal

DATA = Path(__file__).parent / "data"
QWEN = DATA / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
RANKS = [DATA / "real-traces" / f"trace_filter_sampled_rank-{r}.json.gz" for r in (0, 1)]
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _counted(p: Path) -> list[tuple[int, int]]:
    seen: list[tuple[int, int]] = []
    load_trace(p, lambda done, size: seen.append((done, size)))
    return seen


@pytest.mark.parametrize("gz", [False, True], ids=["json", "gz"])
def test_the_files_own_bytes_are_counted_as_it_is_read(tmp_path, gz):
    """The count is of the file on disk (a .gz file's compressed bytes): it only grows, in many steps, and ends at
    the size stat gives; the trace read is the one read without a count."""
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    text = gzip.decompress(QWEN.read_bytes())
    p.write_bytes(gzip.compress(text) if gz else text)
    seen = _counted(p)
    size = p.stat().st_size
    assert {s for _, s in seen} == {size}
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == size and len(set(done)) > 3
    assert load_trace(p, lambda *_: None) == load_trace(p)


def test_a_file_read_again_whole_is_counted_once_whole(tmp_path):
    """Text that is not strict JSON (a NaN) is read again whole, leniently: the count ends at the file's size."""
    p = tmp_path / "nan.json"
    doc = json.loads(gzip.decompress(QWEN.read_bytes()))
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": float("nan"),
                               "dur": 1.0})
    p.write_text(json.dumps(doc))
    seen = _counted(p)
    assert seen[-1] == (p.stat().st_size, p.stat().st_size)


def _frames(monkeypatch: pytest.MonkeyPatch, steps) -> str:
    """What a StageLine draws on a terminal (a Rich console that says it is one) while `steps(line)` runs, as
    plain text: its last frame is drawn as the line goes."""
    out = io.StringIO()
    monkeypatch.setattr(progress, "make_console", lambda stderr=False: Console(
        file=out, force_terminal=True, width=120, color_system=None))
    with progress.StageLine() as line:
        steps(line)
    return CSI.sub("", out.getvalue())


def test_the_line_shows_the_mib_read_then_the_linking_then_each_stage(monkeypatch):
    def half(line):
        line.reading("big.trace.json")(5 * MiB, 10 * MiB)

    assert "reading big.trace.json" in (shown := _frames(monkeypatch, half)) and "5 / 10 MiB" in shown

    def all_read(line):
        line.reading("big.trace.json", "reading 2/8")(10 * MiB, 10 * MiB)

    shown = _frames(monkeypatch, all_read)
    assert "linking the kernels to their ops" in shown and "10 MiB" in shown
    assert "reading 2/8" not in shown.splitlines()[-1]

    def staged(line):
        line.reading("a.json")(1, 2)
        line.stage("the critical path and its what-ifs")

    shown = _frames(monkeypatch, staged)
    assert "the critical path and its what-ifs" in shown and "MiB" not in shown.splitlines()[-1]


def test_a_long_name_keeps_the_line_within_80_columns(monkeypatch):
    """Its middle goes: the bar, the MiB and the clock still fit an 80-column terminal."""
    out = io.StringIO()
    monkeypatch.setattr(progress, "make_console", lambda stderr=False: Console(
        file=out, force_terminal=True, width=80, color_system=None))
    with progress.StageLine() as line:
        line.reading("vllm-decode-full-mi300x-tp8-rank-0-of-8.replay.trace.json", "reading 1/8")(99 * MiB, 315 * MiB)
    last = CSI.sub("", out.getvalue()).replace("\r", "\n").strip().splitlines()[-1]
    assert "vllm-decode-full-mi30" in last and "replay.trace.json" not in last and ".json" in last
    assert "99 / 315 MiB" in last and "0:00:0" in last and "━" in last


def test_a_file_name_is_shown_as_named_never_obeyed(monkeypatch):
    """Rich markup in a name is printed as text; a control character is shown escaped, not sent."""
    shown = _frames(monkeypatch, lambda line: line.reading("[bold]x\x1b]0;pwned\x07.json")(1, 2))
    assert "[bold]x" in shown and "\x07" not in shown and "\x1b]" not in shown


def test_without_a_terminal_nothing_is_drawn(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress, "make_console", lambda stderr=False: Console(file=out, force_terminal=False))
    with progress.StageLine() as line:
        assert line.reading("a.json") is None
        line.stage("anything")
    assert out.getvalue() == ""


def _on_a_terminal(argv: list[str], tmp_path: Path) -> tuple[int, str, str]:
    """`rooftop ARGV` with stderr on a pseudo-terminal (as in a shell, with the report piped on): its exit status,
    stdout, and what the terminal was sent."""
    env = {**os.environ, "TERM": "xterm-256color", "ROOFTOP_HOME": str(tmp_path / "home"), "COLUMNS": "100"}
    with Terminal(24, 100) as term:
        proc = subprocess.Popen([sys.executable, "-m", "rooftop.tui.cli", *argv], stdout=subprocess.PIPE,
                                stderr=term.slave, stdin=subprocess.DEVNULL, env=env)
        term.started()
        try:
            stdout, _ = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
    return proc.returncode, stdout.decode(), CSI.sub("", term.text())


def test_on_a_terminal_the_stages_are_shown_and_the_report_is_unchanged(tmp_path, capsys):
    from rooftop.tui.cli import main

    argv = ["profile", "--trace", str(QWEN), "-d", "h200", "--json", "--no-save"]
    rc, stdout, screen = _on_a_terminal(argv, tmp_path)
    assert rc == 0 and "Traceback" not in screen
    assert "the critical path and its what-ifs" in screen  # the last frame, drawn as the line goes
    assert main(argv) == 0
    piped = capsys.readouterr()
    assert json.loads(stdout) == json.loads(piped.out)
    assert "what-ifs" not in piped.err and "MiB" not in piped.err  # piped: no line, no residue


def test_a_jobs_ranks_are_read_on_the_line_too(tmp_path):
    rc, stdout, screen = _on_a_terminal(["profile", "--trace", *map(str, RANKS), "--json", "--no-save"], tmp_path)
    assert rc == 0 and "Traceback" not in screen
    assert "the job's critical path and its what-ifs" in screen
    assert len(json.loads(stdout)["ranks"]) == 2
