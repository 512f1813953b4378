"""Stored text made safe to print: names and facts from a file or an old store reach a terminal.

A run or device name can hold anything a file said: an escape sequence that clears the
screen, an OSC that retitles the window, a bidi override that reorders the line. Every
view that prints stored text passes it through `safe_text`, which writes each such
character as a visible escape (`\\x1b`, `\\u202e`), so it is shown, never obeyed. Rich
markup (`[/bold]`) is not this module's business: the consoles and widgets that show
stored text do not parse markup (see tui.report.make_console).

Text read from a trace (op, kernel and step names, its device, its distributedInfo, its
collectives' names and groups) is `clean`ed as it is read: the same characters dropped,
so no view, store row or JSON field made from a trace holds one.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, line/paragraph separators, and the bidi embeddings, overrides and isolates
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe_text(value: object) -> str:
    """`value` as text with every control character (cursor moves, escapes, bidi) written visibly."""
    return UNSAFE.sub(_visible, value if isinstance(value, str) else str(value))


def clean(value: str) -> str:
    """Text from a trace with the characters safe_text writes visibly dropped (they mean nothing in a name)."""
    return UNSAFE.sub("", value) if UNSAFE.search(value) else value


TREE_DEPTH = 16  # a trace's distributedInfo nests 3 deep; past this, a hand-made one is cut off


def clean_tree(value: object, depth: int = 0) -> object:
    """A decoded JSON value (a trace's distributedInfo) with every string in it, keys too, `clean`ed; whatever
    nests deeper than TREE_DEPTH is None."""
    if isinstance(value, str):
        return clean(value)
    if depth >= TREE_DEPTH and isinstance(value, (dict, list)):
        return None
    if isinstance(value, dict):
        return {clean(str(k)): clean_tree(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_tree(v, depth + 1) for v in value]
    return value
