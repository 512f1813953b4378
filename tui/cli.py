"""The console script's entry point (`rooftop = rooftop.tui.cli:main`) and `python -m rooftop.tui.cli`.

A thin door: the command line lives in rooftop.tui.commands. Run as `__main__`, this module
defines nothing the commands import, so nothing is loaded twice.
"""

from rooftop.tui.commands import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
