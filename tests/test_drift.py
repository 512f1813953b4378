"""Docs that say what the code is: a cited document exists, a package's docstring names its modules, and the
architecture note names every module of the rooms of `tui/`. Each had drifted (five files cited a design card
the repository does not have, probes' and store's docstrings named half their modules, the architecture note
left out commands/job.py and render/job.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("models", "probes", "store", "tui")
# A document named bare (no folder before it): README.md, architecture.md. A path such as nccl-tests'
# doc/PERFORMANCE.md is another repository's and is not looked for here.
CITED = re.compile(r"(?<![\w/.\\-])([A-Za-z][\w-]*\.md)\b")


def _modules(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def _sources() -> list[Path]:
    files = [p for pkg in (*PACKAGES, "tests", "scripts") for p in (ROOT / pkg).rglob("*.py")]
    return sorted(files + [ROOT / "pyproject.toml", *(ROOT / "scripts").glob("*.sh")])


def test_every_document_the_code_cites_is_in_the_repository() -> None:
    have = {"README.md"} | {p.name for p in (ROOT / "docs").glob("*.md")}
    cited = {(str(p.relative_to(ROOT)), name) for p in _sources()
             for name in CITED.findall(p.read_text(encoding="utf-8")) if name not in have}
    assert not cited, f"cited but not in the repository (README.md, docs/): {sorted(cited)}"


@pytest.mark.parametrize("package", ["probes", "store"])
def test_a_package_docstring_names_each_of_its_modules(package: str) -> None:
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8"))) or ""
    missing = [m for m in _modules(ROOT / package) if not re.search(rf"\b{m}\b", doc)]
    assert not missing, f"{package}/__init__.py's docstring does not name {missing}"


def test_the_architecture_note_names_every_module_of_the_rooms() -> None:
    note = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rooms = note[note.index("## The rooms of `tui/`"):note.index("## Where a new thing goes")]
    missing = [f"{room}/{m}" for room in ("commands", "services", "render", "app")
               for m in _modules(ROOT / "tui" / room) if not re.search(rf"\b{m}\b", rooms)]
    assert not missing, f"docs/architecture.md's rooms of tui/ leave out {missing}"
