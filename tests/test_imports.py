"""Layering (docs/architecture.md): models and store load neither torch nor textual; probes
load torch only when measuring; `rooftop --help` and `rooftop op` never load torch.

Each check runs in a fresh interpreter so earlier imports cannot hide a leak.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def loaded_after(code: str) -> set[str]:
    script = code + "\nimport sys, json\nprint(json.dumps(sorted(m for m in ('torch', 'textual', 'plotext') if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


WALK = """
import importlib, pkgutil
import rooftop.{pkg} as pkg
for m in pkgutil.walk_packages(pkg.__path__, 'rooftop.{pkg}.'):
    importlib.import_module(m.name)
"""


@pytest.mark.parametrize("pkg", ["models", "store"])
def test_pure_packages_load_no_torch_or_textual(pkg: str) -> None:
    assert loaded_after(WALK.format(pkg=pkg)) == set()


def test_probes_import_torch_lazily_and_never_textual() -> None:
    assert loaded_after(WALK.format(pkg="probes")) & {"torch", "textual"} == set()


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["op", "gemm", "1", "8192", "8192", "bf16", "-d", "h100"], ["op", "attn b=8 h=32 t=8192 decode", "--json"],
     ["devices"]],
)
def test_cli_commands_do_not_load_torch(argv: list[str]) -> None:
    code = f"from rooftop.tui.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    assert "torch" not in loaded_after(code)


def installed_script(name: str) -> Path:
    """Where the installed distribution put its console script, as its RECORD says.

    Not next to sys.executable: a system Python (/usr/bin/python3) installs scripts into
    /usr/local/bin or ~/.local/bin, so that guess failed on a GPU server after the README's install.
    """
    from importlib.metadata import distributions

    # Every installed copy: a checkout's own rooftop.egg-info (left by `pip install -e`, found through
    # the test's working directory) lists sources only; the install's dist-info lists the script.
    dists = list(distributions(name="rooftop"))
    if not dists:
        pytest.skip("rooftop is not installed as a distribution (run from a checkout); "
                    "`pip install -e '.[test]'` installs the `rooftop` command this checks")
    declared = {ep.name for d in dists for ep in d.entry_points if ep.group == "console_scripts"}
    assert name in declared, f"pyproject declares no `{name}` console script: {sorted(declared)}"
    scripts = [Path(str(d.locate_file(f))).resolve() for d in dists for f in d.files or ()
               if f.name in (name, f"{name}.exe") and f.parent.name in ("bin", "Scripts")]
    assert scripts, f"no installed rooftop ({', '.join(d.version for d in dists)}) lists a `{name}` script in its RECORD"
    return scripts[0]


def test_console_script_is_installed() -> None:
    script = installed_script("rooftop")
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "roofline" in out.stdout


def test_no_top_level_models_or_store_module() -> None:
    code = "import importlib.util as u; print([n for n in ('models', 'store', 'probes', 'tui') if u.find_spec(n)])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"
