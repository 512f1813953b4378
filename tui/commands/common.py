"""What every command shares: the parser and its help layout, --db and --device, UsageError,
and the parsers of option values (lists of ids, counts, times, NAME=NUMBER pairs)."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import sys
import textwrap
from typing import Any, NoReturn

from rooftop.models.errors import BadInput
from rooftop.models.safetext import safe_text
from rooftop.models.spec import SpecError, parse_count
from rooftop.models.units import fmt_count


HELP_WIDTH = 80  # columns: --help fits an 80-column terminal, and is no wider on a larger one


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Wraps the prose of descriptions and epilogs, keeps indented lines (example blocks) as written.

    argparse either wraps everything (and flattens the examples) or nothing (and a
    long paragraph runs off an 80-column screen); here a line that starts at the
    margin is prose, joined with its neighbours and wrapped, and an indented one is
    layout. The width is the terminal's, at most HELP_WIDTH.
    """

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("width", min(shutil.get_terminal_size().columns, HELP_WIDTH) - 2)
        super().__init__(prog, **kwargs)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        prose: list[str] = []

        def wrap_prose() -> None:
            if prose:
                out.extend(textwrap.wrap(" ".join(prose), width, initial_indent=indent, subsequent_indent=indent,
                                         break_on_hyphens=False))
                prose.clear()

        for line in text.splitlines():
            if line.strip() and not line[0].isspace():
                prose.append(line.strip())
                continue
            wrap_prose()
            out.append(indent + line if line.strip() else "")
        wrap_prose()
        return "\n".join(out)


# A negative number as argparse should know one: with e-notation (-1e5, -2.5E-3), so that `gemm -1e5 8 8` reaches
# the value's own check ("must be at least 1") instead of reading as an unknown option.
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


class Parser(argparse.ArgumentParser):
    """argparse that reports bad input in one line and exits with 2, and whose help fits 80 columns.

    Its error text quotes what was typed ("unrecognized arguments: …", "invalid choice: …"), so it
    goes through safe_text: an escape sequence in an argument is shown, never obeyed.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(safe_text(f"{self.prog}: error: {message} (see {self.prog} --help)") + "\n")
        raise SystemExit(2)


class UsageError(BadInput):
    """Bad input found after parsing; reported in one line with exit code 2."""


def _device_list(values: str | list[str] | None, what: str = "-d") -> list[str]:
    """--device values (repeated, comma-separated; or one string from `rooftop -d ID COMMAND`) as ids.

    An empty one is refused, not skipped: `-d ''` (an unset shell variable) must not quietly mean
    the default device.
    """
    raws = [values] if isinstance(values, str) else values or []
    for raw in raws:
        if not all(v.strip() for v in raw.split(",")):
            raise UsageError(f"{what} {safe_text(raw)!r}: an empty device id; give ids from `rooftop devices` "
                             "(or run names), comma-separated" + (", or leave out -d for the default" if what == "-d" else ""))
    return [v.strip() for raw in raws for v in raw.split(",")]


def _measured_times(raw: str | None, n_ops: int, flag: str = "--measured-ms", unit: str = "ms") -> list[float | None]:
    """Measured figures, one for all or one per op: milliseconds (returned in seconds), or with `unit`
    another positive rate (tok/s, returned as given)."""
    if raw is None:
        return [None] * n_ops
    what, noun = ("milliseconds", "time") if unit == "ms" else (unit, "value")
    try:
        vals = [float(v) for v in raw.split(",")]
    except ValueError:
        raise UsageError(f"{flag} {safe_text(raw)!r}: expected {what}, e.g. 0.55 or 0.55,1.2 (one per op)") from None
    if any(not (v > 0 and v < float("inf")) for v in vals):
        raise UsageError(f"{flag} {safe_text(raw)!r}: {noun}s must be positive {what}")
    if len(vals) == 1:
        vals = vals * n_ops
    if len(vals) != n_ops:
        raise UsageError(f"{flag} gives {fmt_count(len(vals), noun)} for {fmt_count(n_ops, 'op')}: "
                         "give one, or one per op")
    return [v / 1e3 for v in vals] if unit == "ms" else list(vals)


def _path_list(raw: str) -> list[str]:
    """--paths: compute path names, comma-separated, or 'all'; an empty one is refused."""
    items = [v.strip() for v in raw.split(",")]
    if not all(items):
        raise UsageError(f"--paths {safe_text(raw)!r}: an empty path name; give paths such as bf16-tc,fp32-fma "
                         "(`rooftop devices ID` lists a device's), or 'all'")
    return items


def _int_list(raw: str, what: str, one: bool = False) -> list[int]:
    """Comma-separated counts (`one`: a single count); an empty item is an error, not skipped:
    `--batch 1,,2` is more likely a lost number than a wish for two batches."""
    items = [v.strip() for v in raw.split(",")]
    if one and (len(items) > 1 or not items[0]):
        raise UsageError(f"--{what} {raw!r}: give one number, e.g. 128")
    if not all(items):
        raise UsageError(f"--{what} {raw!r}: an empty item; give numbers separated by commas, e.g. 1,8,16")
    try:
        return [parse_count(v, what) for v in items]
    except SpecError as exc:
        raise UsageError(f"--{what} {raw!r}: {exc}") from None


def _named_values(raw: str | None, what: str) -> dict[str, float]:
    """NAME=NUMBER,… as a dict; an empty item, an empty name or a name given twice is an error, as in
    `_int_list` (`a=2,a=3` kept the last and `=1` a part with no name)."""
    out: dict[str, float] = {}
    if raw is None:
        return out
    for item in raw.split(","):
        if not item.strip():
            raise UsageError(f"--{what} {safe_text(raw)!r}: an empty item; give NAME=NUMBER items separated by commas")
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            if not sep or not name:
                raise ValueError
            number = float(value)
        except ValueError:
            raise UsageError(f"--{what}: {safe_text(item)!r} is not NAME=NUMBER (e.g. attention=17.6,mlp=24)") from None
        if name in out:
            raise UsageError(f"--{what}: {safe_text(name)!r} is given twice; give each name once")
        out[name] = number
    return out


DB_HELP = "the rooftop database file (default: $ROOFTOP_DB, else rooftop.db in the user data directory)"


def plot_size(text: str) -> int:
    """argparse type of --width / --height (a chart's size): a whole number of characters, 10 to 1000."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of characters") from None
    if not 10 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{value}: give 10 to 1000 characters")
    return value


def add_db_option(p: argparse.ArgumentParser, top: bool = False) -> None:
    """--db PATH on every command that reads or writes the store, and before the command.

    A command's own --db is left out of the namespace when not given, so that it does not
    overwrite `rooftop --db PATH COMMAND`'s (argparse's subparser defaults would).
    """
    p.add_argument("--db", metavar="PATH", type=_db_option, help=DB_HELP,
                   default=None if top else argparse.SUPPRESS)


def add_wide_option(p: argparse.ArgumentParser) -> None:
    """--wide on the commands that print a profile's tables: every row whole, however long (as `ps ww` and
    `kubectl -o wide`); without it a row is one line cropped to the width (80 columns when piped)."""
    p.add_argument("--wide", action="store_true",
                   help="a profile's tables whole: op names, shapes and kernel names uncut, every column, one line "
                        "a row however long (without it a row is cropped to the terminal, 80 columns when piped)")


def add_out_option(p: argparse.ArgumentParser, what: str) -> None:
    """--out FILE: the result written to a file as well, its format by the extension (`what`: what each holds)."""
    p.add_argument("--out", metavar="FILE",
                   help=f"write the result to FILE too, by its extension: {what}; written whole or not at all "
                        "(.svg/.png need matplotlib: pip install 'rooftop[share]')")


def command_text(args: argparse.Namespace) -> str:
    """The command line that made a result, as a report names it (the words main() was given)."""
    words = getattr(args, "_argv", None) or [str(getattr(args, "command", "") or "")]
    return shlex.join(["rooftop", *words])


def _db_option(text: str) -> str:
    """argparse type of --db: a path; an empty one (an unset shell variable) is refused, not read as the default."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; give the database file, or leave --db out for the default "
                                         "store")
    return text


def add_device_option(p: argparse.ArgumentParser, help: str) -> None:  # noqa: A002 - argparse's word
    """-d/--device on a command, repeatable; left out of the namespace when not given, so that it does
    not overwrite `rooftop -d ID COMMAND`'s (as add_db_option does for --db)."""
    p.add_argument("-d", "--device", action="append", metavar="ID", default=argparse.SUPPRESS, help=help)
