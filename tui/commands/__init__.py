"""The `rooftop` command line: the parser, and the one map from an exception to an exit status.

Each theme's commands live in a module of their own (analyse, llm, measure, profile, comm,
fleet, store, watch, app), with their argparse and handlers only (job: the distributed-job half of
`rooftop profile`; common: the options and errors they share); what they show comes from
`render`, what they keep and look up from `services`. Imports stay light: `rooftop --help`,
`rooftop op`, `rooftop devices` and `rooftop plot` never load torch (a test checks it).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from typing import Callable, Sequence

from rooftop.models.errors import BadInput
from rooftop.models.safetext import safe_text
from rooftop.store.db import store_error
from rooftop.tui.commands import analyse, comm, fleet, llm, measure, profile, store, watch
from rooftop.tui.commands.app import run_app
from rooftop.tui.commands.common import Parser, add_db_option
from rooftop.tui.services import context


def build_parser() -> Parser:
    p = Parser(
        prog="rooftop",
        description=(
            "rooftop — a terminal roofline lab for GPU servers. It places an op (GEMM, attention, "
            "elementwise, a decode step) on a device's measured or published roofline: the regime that "
            "bounds it, the time it cannot beat, and what to do about it."
        ),
        epilog="With no command, rooftop opens its terminal app:\n"
               "  1–7 switch tabs, m measures this machine, ? lists the keys, q quits\n"
               "Run `rooftop COMMAND --help` for each command's options.",
    )
    p.add_argument("-d", "--device", metavar="ID",
                   help="the app's first device, or the device of op/plot/llm (default: this machine's "
                        "measured profile `local`, else this GPU's reference, else h100)")
    add_db_option(p, top=True)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    # the order of --help's list of commands
    measure.add_measure_command(sub)  # light: torch loads only when measuring
    profile.add_profile_command(sub)  # light: torch loads only to run a program
    comm.add_comm_command(sub)  # light: torch loads only when the ranks start
    fleet.add_check_command(sub)  # light: reads the store only
    analyse.add_analyse_commands(sub)
    llm.add_llm_command(sub)
    watch.add_watch_command(sub)
    store.add_store_commands(sub)
    analyse.add_compare_command(sub)
    return p


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser: `rooftop op: error: unrecognized arguments: …`
        command = getattr(args, "_parser", None) or _subparser(parser, args.command)
        (command or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    func: Callable[[argparse.Namespace], int] = getattr(args, "func", None) or run_app
    args._argv = list(sys.argv[1:] if argv is None else argv)  # what a shared report names as its command
    name = f"rooftop {args.command}" if args.command else "rooftop"
    context.begin_command()
    try:
        return func(args)
    except BaseException as exc:  # every exception gets its exit status here, and only here
        return exit_status(exc, name, args)


def exit_status(exc: BaseException, name: str, args: argparse.Namespace) -> int:
    """The one exception → exit-status map: what the user is told on stderr, and the status.

    2: bad input (one line): every layer's BadInput (UsageError, SpecError, TraceError, StoreError, …), its
    message made safe here, once, for it may quote a path, a stored name or a file's text; 130: Ctrl-C;
    0: a closed pipe (`rooftop devices | head`); 1: a bug (one line, or the traceback with ROOFTOP_DEBUG=1).
    Anything else is re-raised (SystemExit from argparse or a command).
    """
    if isinstance(exc, BadInput):
        msg = exc.args[0] if exc.args else str(exc)
        sys.stderr.write(f"{name}: error: {safe_text(msg)}\n")
        return 2
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C outside a measurement's own handling (e.g. while torch loads)
        sys.stderr.write(f"\n{name}: interrupted\n")
        return 130
    if isinstance(exc, BrokenPipeError):  # stop quietly, and let the exit flush go nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if isinstance(exc, sqlite3.DatabaseError):  # met mid-command outside the Store: said as the store says it
        sys.stderr.write(f"{name}: error: {safe_text(store_error(exc, context.db_file(getattr(args, 'db', None))))}\n")
        return 2
    if isinstance(exc, OSError):  # a path that cannot be read or written (export -o /nonexistent/x.json, …)
        line = f"{name}: error: {exc.strerror or exc}: {exc.filename or ''}".removesuffix(": ")
        sys.stderr.write(safe_text(line) + "\n")  # the path is the user's, bytes and all
        return 2
    if isinstance(exc, Exception):  # a bug, not bad input: one line unless asked for the traceback
        if os.environ.get("ROOFTOP_DEBUG"):
            raise exc
        sys.stderr.write(safe_text(f"{name}: internal error: {exc!r} (set ROOFTOP_DEBUG=1 for the traceback)") + "\n")
        return 1
    raise exc
