"""One error base: every layer's "the input cannot be used" error is a models.errors.BadInput, the exit map knows
them by that one class (exit 2, one line, the message made safe there, once), and no command re-raises one by
hand as a UsageError of its text. Before, the map listed 7 classes and 17 sites in commands/ re-raised the rest
as UsageError(str(exc)), 5 of them dropping a control character the others showed escaped."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from rooftop.models.errors import BadInput, BadValue
from rooftop.tui.commands import exit_status
from test_input_safe import run  # main(argv), argparse's exit included

ROOT = Path(__file__).resolve().parents[1]
OSC = "\x1b]0;p\x07"
SHOWN = "\\x1b]0;p\\x07"  # the escape as safe_text writes it: shown, never obeyed
CSI = "\x1b[2J"  # for an op spec, whose words a ';' would split

# every exception class of the package that means bad input, and the builtin base a caller may still catch it by
BAD_INPUT = {
    "models.errors.BadInput": Exception,
    "models.spec.SpecError": ValueError,  # the exit map's 7 …
    "models.profile.NoRoof": LookupError,
    "models.catalog.UnknownDevice": LookupError,
    "tui.commands.common.UsageError": Exception,
    "models.errors.ModelError": ValueError,
    "store.db.StoreError": Exception,
    "tui.services.context.NotAProfile": Exception,
    "tui.services.workloads.NoRoofs": Exception,
    "tui.share.files.OutError": ValueError,  # --out: an unknown extension, a missing or read-only folder
    "models.llm.expertparallel.ExpertParallelError": ValueError,  # --ep: N not dividing the experts, a dense model
    "models.trace.read.TraceError": ValueError,  # … and those commands/ re-raised by hand as UsageError
    "models.trace.read.EmptyTrace": ValueError,
    "models.trace.capture.CaptureError": ValueError,
    "models.program.critpath.WindowError": ValueError,
    "models.ncu.NcuError": ValueError,
    "models.check.CheckError": ValueError,
    "models.errors.BadValue": ValueError,  # parse_dtype's and parallel_comm's, plain ValueErrors before
    "probes.comm.CommError": Exception,
    "probes.backend.BackendError": Exception,
    "probes.plan.PlanError": ValueError,
    "probes.fleet.FleetError": Exception,
    "probes.profiler.NotPython": ValueError,
    "probes.profiler.ProgramFailed": Exception,
    "store.runs.UnknownRun": LookupError,  # StoreError's own
    "store.runs.ReadOnlyStore": Exception,
    "store.runs.BadName": ValueError,
    "store.io.ImportFailed": Exception,
}
# the package's other exception classes, and why none is bad input the user is told of as such
NOT_BAD_INPUT = {
    "models.program.opcost.base.BadShape": "a recorded call's shapes describe no tensors: the op is left uncosted",
    "models.ncu._BadRow": "one CSV row skipped and counted in the export's warning",
    "store.refcsv.CsvFormatError": "caught by the import and said as an ImportFailed naming the file",
    "store.io.Malformed": "caught by the import and said as an ImportFailed naming the run",
    "store.tracefile.Unstreamable": "the streamed read falls back to reading the trace whole",
    "probes.backend.Unsupported": "a point that cannot run here is a skipped sample with its reason",
    "probes.timing.TooSlow": "a point over its time budget is a skipped sample",
    "probes.timing.Cancelled": "a stop asked for: the run ends cancelled, what was measured kept",
    "probes.torchrun.Stopped": "a stop signal: its own exit status, 128 + the signal",
    "probes.nvml._Never": "stands for an error class the NVML binding lacks: never raised",
}


def _exception_classes() -> set[str]:
    """Every class in the package's source whose bases name an exception (…Error, …Exception, BadInput, a
    class of this set), found by reading the files, not importing them."""
    found: dict[str, list[str]] = {}
    for path in sorted(ROOT.glob("*/**/*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in ("models", "probes", "store", "tui"):
            continue
        mod = ".".join(rel.with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found[f"{mod}.{node.name}"] = [ast.unparse(b).split(".")[-1] for b in node.bases]
    names = {q.rsplit(".", 1)[1] for q in found}
    out = {q for q, bases in found.items() if any(re.search(r"(Error|Exception|BadInput)$", b) for b in bases)}
    grew = True
    while grew:  # a subclass of a class found (EmptyTrace(TraceError) is found anyway; this catches the rest)
        known = {q.rsplit(".", 1)[1] for q in out}
        more = {q for q, bases in found.items() if any(b in known and b in names for b in bases)} - out
        out |= more
        grew = bool(more)
    return out


def _cls(qual: str) -> type:
    mod, name = qual.rsplit(".", 1)
    return getattr(importlib.import_module(f"rooftop.{mod}"), name)


def test_every_error_class_is_sorted_as_bad_input_or_not():
    found = _exception_classes()
    assert found == set(BAD_INPUT) | set(NOT_BAD_INPUT), (found - set(BAD_INPUT) - set(NOT_BAD_INPUT),
                                                          set(BAD_INPUT) | set(NOT_BAD_INPUT) - found)


@pytest.mark.parametrize("qual", sorted(BAD_INPUT))
def test_each_bad_input_error_is_a_bad_input_and_keeps_its_builtin_base(qual: str):
    cls = _cls(qual)
    assert issubclass(cls, BadInput), qual
    assert issubclass(cls, BAD_INPUT[qual]), qual  # an `except ValueError` / `except LookupError` still catches it


@pytest.mark.parametrize("qual", sorted(NOT_BAD_INPUT))
def test_the_others_are_not_bad_input(qual: str):
    assert not issubclass(_cls(qual), BadInput), qual


def test_bad_input_is_no_value_error_so_no_except_catches_more_than_it_did():
    from rooftop.store.db import StoreError

    assert not issubclass(BadInput, ValueError) and not issubclass(StoreError, (ValueError, LookupError))
    assert issubclass(BadValue, ValueError)


def test_the_plain_value_errors_of_a_dtype_and_a_parallel_degree_are_bad_input():
    from rooftop.models.dtypes import parse_dtype
    from rooftop.models.llm.parallel import parallel_comm

    with pytest.raises(BadValue, match="unknown dtype 'fp7'"):
        parse_dtype("fp7")
    with pytest.raises(BadValue, match="degrees start at 1"):
        parallel_comm(32, 4096, "bf16", 8, 1e12, 1e-3, 0, 1)


def test_no_command_re_raises_an_error_as_a_usage_error_of_its_text():
    """The 17 hand translations (`raise UsageError(str(exc))`, `ProfileError(clean(str(exc)))`, …) are gone; a
    re-raise that adds the option the message came from (`--window NAME: …`) stays."""
    hand = re.compile(r"raise \w+Error\((clean\()?str\(exc\)\)?\)")
    sites = [f"{p.name}:{i}" for p in sorted((ROOT / "tui" / "commands").glob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if hand.search(line) and "ArgumentTypeError" not in line]  # argparse's own type-check protocol
    assert sites == []


def test_the_exit_map_says_any_bad_input_in_one_line_with_status_2(capsys: pytest.CaptureFixture[str]):
    class Mine(BadInput):
        pass

    import argparse

    assert exit_status(Mine(f"a name {OSC} from a file"), "rooftop x", argparse.Namespace(db=None)) == 2
    err = capsys.readouterr().err
    assert err == f"rooftop x: error: a name {SHOWN} from a file\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOFTOP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ROOFTOP_DB", raising=False)
    return tmp_path


def _said_once(rc: int, err: str, shown: str = SHOWN, times: int = 1) -> None:
    """Exit 2, one line, the escape shown as written (neither obeyed, nor dropped, nor escaped twice)."""
    assert rc == 2 and err.count("\n") == 1, err
    assert "\x1b" not in err and "\x07" not in err and err.count(shown) == times, err


TRACE = str(ROOT / "tests" / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz")
RANK0 = str(ROOT / "tests" / "data" / "real-traces" / "trace_filter_sampled_rank-0.json.gz")


@pytest.mark.parametrize("case", [
    "trace",  # TraceError from the store's trace reader (was clean()ed: the escape dropped from the path)
    "trace folder",  # TraceError from a folder with no trace, read as a job (was a FileNotFoundError, clean()ed)
    "capture folder",  # the same, said with --graph-capture
    "window",  # WindowError, said with --window
    "ncu",  # NcuError, said with its file
    "run",  # UnknownRun (a StoreError)
    "dtype",  # parse_dtype's BadValue
    "max-size",  # CommError
    "only",  # PlanError
    "device",  # BackendError
    "spec",  # SpecError
])
def test_a_control_character_in_each_path_is_shown_escaped_once(case: str, home: Path,
                                                                capsys: pytest.CaptureFixture[str]):
    empty = home / f"empty{OSC}"
    empty.mkdir()
    ncu = home / f"k{OSC}.csv"
    ncu.write_text("a,b\n1,2\n")
    argv = {
        "trace": ["profile", "--trace", str(home / f"nope{OSC}.json")],
        "trace folder": ["profile", "--trace", str(empty), TRACE],
        "capture folder": ["profile", "--trace", TRACE, "--graph-capture", str(empty)],
        "window": ["profile", "--no-save", "-d", "h100", "--trace", RANK0, "--window", f"w{OSC}"],
        "ncu": ["profile", "--ncu", str(ncu)],
        "run": ["show", f"zz{OSC}", "--db", str(home / "s.db")],
        "dtype": ["llm", "llama-3.1-8b", "-d", "h100", "--dtype", f"x{OSC}"],
        "max-size": ["comm", "--max-size", f"1{OSC}", "--no-save"],
        "only": ["measure", "--only", f"zz{OSC}", "--no-plot"],
        "device": ["measure", "--device", f"tpu{OSC}", "--no-plot"],
        "spec": ["op", "gemm", "8", "8", f"8{CSI}", "-d", "h100"],
    }[case]
    if case == "run":  # an empty store, so the run is what is unknown
        from rooftop.tui.services.context import open_db

        open_db(home / "s.db").close()
    rc, _, err = run(capsys, *argv)
    # the window's name is said twice: after the option, and quoted in WindowError's own words
    _said_once(rc, err, "\\x1b[2J" if case == "spec" else SHOWN, 2 if case == "window" else 1)
    if case == "window":
        assert err.startswith(f"rooftop profile: error: --window w{SHOWN}: the trace has no annotation named "), err


def test_a_program_that_fails_is_said_with_its_path_escaped(home: Path, capsys: pytest.CaptureFixture[str]):
    pytest.importorskip("torch")
    script = home / f"fail{OSC}.py"
    script.write_text("import sys\nsys.exit(3)\n")
    rc, _, err = run(capsys, "profile", "--no-save", "-d", "cpu", "--", "python", str(script))
    _said_once(rc, err)
    assert "exited with status 3; nothing to show" in err
