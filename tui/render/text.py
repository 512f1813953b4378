"""Text from outside made safe for a terminal, in one place: every front end's sanitisers.

Three kinds of outside text, three treatments, each kept as the views have always shown it:
- `safe_text` (models.safetext): stored names and facts (a run's name, a file's device), every
  control character written visibly (`\\x1b`), so it is shown and never obeyed;
- `clean`: names from a trace or a profiler (op and kernel names), control characters dropped;
- `printable`: names from /proc (a process's), non-printing characters as '?', cut to a width.
"""

from __future__ import annotations

import unicodedata

from rooftop.models.safetext import clean, safe_text

__all__ = ["clean", "printable", "safe_text"]


def printable(text: str, limit: int = 24) -> str:
    """A name from outside (a process's, read from /proc) made safe for a terminal: control and other
    non-printing characters become '?', and it is cut to `limit` characters."""
    clean = "".join("?" if unicodedata.category(ch).startswith("C") else ch for ch in str(text))
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"
