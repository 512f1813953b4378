"""What every --json and every JSON export writes: strict JSON.

Python's json writes NaN and Infinity by default, which no JSON reader accepts (jq, JavaScript);
rooftop writes null for a non-finite number instead (models.plausible.finite says which fields can be).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rooftop.models.plausible import finite


def dumps_json(obj: Any) -> str:
    """Strict JSON (no NaN, no Infinity: those are null), indented, with a newline."""
    return json.dumps(finite(obj), indent=2, allow_nan=False) + "\n"


def print_json(obj: Any) -> None:
    """What every --json prints: `dumps_json` to stdout."""
    sys.stdout.write(dumps_json(obj))
