"""No function or method in rooftop's packages, scripts or tests is over 100 lines (scripts/longest_functions.py
measures them: from the `def` to its last line). A longer one does several jobs; split it where a step ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "longest_functions.py"


def test_no_function_is_over_100_lines():
    r = subprocess.run([sys.executable, str(SCRIPT), "--over", "100"], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and r.stdout == "", f"functions over 100 lines:\n{r.stdout}{r.stderr}"


def test_the_measure_counts_a_def_to_its_last_line(tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from longest_functions import functions
    finally:
        sys.path.remove(str(SCRIPT.parent))
    src = tmp_path / "m.py"
    src.write_text("class A:\n    @staticmethod\n    def f():\n        def g():\n            return 1\n"
                   "        return g\n\n\ndef h():\n    pass\n")
    assert sorted(functions(src)) == [(2, "A.f.g", 4), (2, "h", 9), (4, "A.f", 3)]
