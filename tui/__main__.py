"""`python -m rooftop.tui`: the command line, as the `rooftop` script runs it."""

from rooftop.tui.commands import main

if __name__ == "__main__":
    raise SystemExit(main())
