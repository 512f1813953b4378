"""List the longest functions and methods in rooftop's packages, longest first.

Why: the project keeps every function under 100 lines; this is the measure, so anyone can re-run it.
A function's length is its source lines from the `def` (decorators not counted) to its last line, nested
functions included in their parent's count and also listed on their own.

    python3 scripts/longest_functions.py            # the 15 longest
    python3 scripts/longest_functions.py -n 40      # more
    python3 scripts/longest_functions.py --over 100 # only those over 100 lines (exit 1 if any)
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("models", "probes", "store", "tui", "scripts", "tests")


def functions(path: Path) -> list[tuple[int, str, int]]:
    """(length, qualified name, first line) of every def in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                found.append((end - child.lineno + 1, name, child.lineno))
                walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def main(argv: list[str] | None = None) -> int:
    """Print the table; with --over, exit 1 when any function is longer than the limit."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="how many to list (default 15)")
    parser.add_argument("--over", type=int, default=None, help="list only functions longer than this")
    args = parser.parse_args(argv)
    rows: list[tuple[int, str]] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            for length, name, line in functions(path):
                rows.append((length, f"{rel}:{line} {name}"))
    rows.sort(key=lambda row: (-row[0], row[1]))
    if args.over is not None:
        rows = [row for row in rows if row[0] > args.over]
    else:
        rows = rows[: args.n]
    for length, where in rows:
        print(f"{length:5d}  {where}")
    return 1 if args.over is not None and rows else 0


if __name__ == "__main__":
    sys.exit(main())
