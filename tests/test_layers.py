"""The package's import graph, read from the source with `ast`: no cycle, and each layer and room
imports only what docs/architecture.md allows.

Every import statement counts: at module level, inside functions (a function-level import is
how a cycle hides: it runs later, but it still runs), and under `if TYPE_CHECKING:` (a type that
needs a cycle to be named is a type in the wrong module). The checks read files, not
sys.modules, so nothing here imports the app.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "probes", "store", "tui")  # folder = rooftop.<folder> (pyproject's package-dir)


def module_files() -> dict[str, Path]:
    """Every module of the distribution, by dotted name."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = ["rooftop", *rel.parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in `tree`, wherever it stands."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def import_graph() -> dict[str, set[str]]:
    """module → the rooftop modules it imports (a `from pkg import name` that is a module counts as that module)."""
    files = module_files()
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files and "." in t:  # `import rooftop.models.units as u` and the like
                    t = t.rpartition(".")[0]
                if t in files and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_whole_package_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (module- and function-level imports): " + "; ".join(
        " ↔ ".join(c) for c in found)


def test_the_graph_reader_finds_every_import() -> None:
    """The reader itself: a cycle made only of a function-level import is found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b"]]
    tree = ast.parse("import x\nif TYPE_CHECKING:\n    import y\ndef f():\n    from . import z\n")
    assert sorted(n.names[0].name for n in _imports(tree)) == ["x", "y", "z"]


def room(mod: str) -> str:
    """The layer, or inside tui the room, a module lives in: models, probes, store, tui.commands, …"""
    parts = mod.split(".")
    if parts[1] != "tui" or len(parts) < 3:
        return ".".join(parts[:2])
    return ".".join(parts[:3])


# Who may import whom (besides itself). The tui rooms run commands → app → render, services.
ALLOWED = {
    "rooftop.models": set(),
    "rooftop.probes": {"rooftop.models"},
    "rooftop.store": {"rooftop.models"},
    "rooftop.tui.services": {"rooftop.models", "rooftop.probes", "rooftop.store"},
    "rooftop.tui.render": {"rooftop.models", "rooftop.probes", "rooftop.store"},
    # the files a result is shared as (SVG, PNG, HTML): drawn from the layers' data, with render's words
    "rooftop.tui.share": {"rooftop.models", "rooftop.probes", "rooftop.store", "rooftop.tui.render"},
    "rooftop.tui.app": {"rooftop.models", "rooftop.probes", "rooftop.store", "rooftop.tui.services",
                        "rooftop.tui.render", "rooftop.tui.share"},
    "rooftop.tui.commands": {"rooftop.models", "rooftop.probes", "rooftop.store", "rooftop.tui.services",
                             "rooftop.tui.render", "rooftop.tui.app", "rooftop.tui.share"},
    # the entry points: `python -m rooftop.tui` and the console script's old path
    "rooftop.tui.__main__": {"rooftop.tui.commands"},
    "rooftop.tui.cli": {"rooftop.tui.commands"},
}


def test_every_module_lives_in_a_known_room() -> None:
    strays = sorted(m for m in import_graph() if room(m) not in ALLOWED and m != "rooftop.tui")
    assert not strays, f"modules outside the rooms of docs/architecture.md: {strays}"


def test_layers_and_rooms_import_only_downwards() -> None:
    bad = sorted(f"{m} → {t}" for m, targets in import_graph().items() for t in targets
                 if room(m) != room(t) and room(t) not in ALLOWED.get(room(m), set()))
    assert not bad, "imports against the rooms (docs/architecture.md):\n" + "\n".join(bad)


# The rooms of models/: its core (units, profiles, the catalog, the roofline, op specs) at the bottom; reading a trace
# (`trace`) and an LLM step (`llm`) on it, each knowing nothing of the other; a profiled program's op costs, groups,
# job and critical path (`program`) over both. Reading a trace imports no op-cost model.
MODEL_ROOMS = ("trace", "program", "llm")
MODELS_ALLOWED = {
    "core": set(),
    "trace": {"core"},
    "llm": {"core"},
    "program": {"core", "trace", "llm"},  # llm: a MoE layer's expected experts hit (llm.step.expected_experts)
}


def models_room(mod: str) -> str:
    """The room of models/ a module of it lives in: core, trace, program or llm."""
    parts = mod.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in MODEL_ROOMS else "core"


def test_models_has_its_rooms() -> None:
    mods = [m for m in module_files() if room(m) == "rooftop.models"]
    for r in MODEL_ROOMS:
        inside = [m for m in mods if models_room(m) == r]
        assert f"rooftop.models.{r}" in inside and len(inside) > 2, f"models/{r}/ is not a room of its own: {inside}"
    # the chains live in their rooms, not in the core
    for m in ("trace.read", "trace.capture", "program.workload", "program.critpath", "program.opcost.base",
              "llm.step", "llm.parallel"):
        assert f"rooftop.models.{m}" in mods, m


def test_models_rooms_import_only_downwards() -> None:
    graph = import_graph()
    bad = sorted(f"{m} → {t}" for m, targets in graph.items() if room(m) == "rooftop.models" for t in targets
                 if room(t) == "rooftop.models" and models_room(t) != models_room(m)
                 and models_room(t) not in MODELS_ALLOWED[models_room(m)])
    assert not bad, "imports against the rooms of models/ (docs/architecture.md):\n" + "\n".join(bad)
    reading = [m for m in graph if models_room(m) == "trace"]
    assert not [t for m in reading for t in graph[m] if ".opcost" in t or ".shapecost" in t], \
        "reading a trace imports an op-cost model"


def third_party(mod: str) -> set[str]:
    """The top-level names of everything `mod` imports (module and function level, TYPE_CHECKING too)."""
    path = module_files()[mod]
    out: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("rooms,banned", [
    (("rooftop.tui.render", "rooftop.tui.services"), {"textual", "textual_plotext"}),
    (("rooftop.tui.services",), {"rich", "plotext"}),
    (("rooftop.models", "rooftop.store"), {"torch", "textual", "rich", "plotext"}),
    # services take values, not a command's options: what they need is passed to them, by name and type
    (("rooftop.tui.services", "rooftop.tui.render", "rooftop.tui.app"), {"argparse"}),
    (("rooftop.tui.share",), {"textual", "textual_plotext", "argparse"}),
    # matplotlib draws only the shared files (and is an optional extra: see the test below)
    (("rooftop.models", "rooftop.probes", "rooftop.store", "rooftop.tui.services", "rooftop.tui.render",
      "rooftop.tui.app", "rooftop.tui.commands"), {"matplotlib"}),
])
def test_rooms_keep_their_libraries_out(rooms: tuple[str, ...], banned: set[str]) -> None:
    bad = sorted(f"{m} imports {', '.join(sorted(third_party(m) & banned))}" for m in module_files()
                 if room(m) in rooms and third_party(m) & banned)
    assert not bad, "\n".join(bad)


def test_matplotlib_is_imported_inside_functions_only() -> None:
    """The `share` extra is optional: importing any module must work without it, so no module imports it at
    module level (nor under TYPE_CHECKING, which a reader of the code would take for a dependency)."""
    bad = []
    for mod, path in module_files().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for n in ast.walk(f)}
        for node in _imports(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n.split(".")[0] == "matplotlib" for n in names) and id(node) not in inside:
                bad.append(f"{mod}:{node.lineno}")
    assert not bad, f"matplotlib imported at module level: {bad}"


# A function-level import is kept only where it defers something heavy (torch, triton, matplotlib the optional
# extra, plotext, pynvml, psutil, …) or a cycle; anything else is imported at the top of its module. Each one kept
# says what it defers in a `# deferred:` comment: at the end of its line, or on the line above it (above the run
# of imports it stands in, so one comment heads `import torch` and `import torch.distributed as dist`).


def undeferred(source: str) -> list[int]:
    """The first lines of the function-level imports in `source` that say nothing of what they defer."""
    lines = source.splitlines()
    tree = ast.parse(source)
    inside = {id(n): n for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in _imports(f)}
    start_of = {n.end_lineno: n.lineno for n in inside.values()}  # an import's last line → its first
    bad = []
    for n in inside.values():
        own = any("# deferred:" in lines[i - 1] for i in range(n.lineno, (n.end_lineno or n.lineno) + 1))
        above = n.lineno - 1
        while above in start_of:  # up the run of imports this one stands in
            above = start_of[above] - 1
        if not own and not (above >= 1 and lines[above - 1].strip().startswith("# deferred:")):
            bad.append(n.lineno)
    return sorted(bad)


def test_the_deferred_reader_finds_an_import_without_its_reason() -> None:
    source = ("import os\n"
              "def f():\n"
              "    import a  # deferred: a, only in f\n"
              "    # deferred: b and c, only in f\n"
              "    import b\n"
              "    from c import (\n"
              "        d,\n"
              "    )\n"
              "\n"
              "    import e\n"
              "    x = 1\n"
              "    # deferred: g\n"
              "    x = 2\n"
              "    import g\n"
              "    def h():\n"
              "        import i\n")
    assert undeferred(source) == [10, 14, 16]


def test_every_function_level_import_says_what_it_defers() -> None:
    bad = []
    for mod, path in module_files().items():
        rel = path.relative_to(ROOT).as_posix()
        bad += [f"{rel}:{line}" for line in undeferred(path.read_text(encoding="utf-8"))]
    assert not bad, ("function-level imports without a `# deferred:` comment (import them at the top of the "
                     f"module, or say what they defer): {bad}")


def test_pyproject_installs_every_subpackage() -> None:
    """`pip install .` is not editable: a subpackage missing from [tool.setuptools] packages would not ship."""
    import re

    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"\[tool\.setuptools\][^\[]*packages = \[(.*?)\]", text, re.S)
    assert block, "pyproject.toml lists no [tool.setuptools] packages"
    listed = set(re.findall(r'"(rooftop(?:\.\w+)+)"', block.group(1)))
    packages = {m for m, p in module_files().items() if p.name == "__init__.py"}
    assert packages <= listed, f"not in pyproject's packages: {sorted(packages - listed)}"
    assert '"rooftop.tui.app" = ["*.tcss"]' in text and (ROOT / "tui" / "app" / "app.tcss").is_file()


def test_both_module_entries_run_the_one_command_line() -> None:
    """`python -m rooftop.tui` and `python -m rooftop.tui.cli` are the same command line (cli.py is a door)."""
    import subprocess
    import sys

    argv = ["op", "fma 64 fp32", "-d", "h100", "--json"]
    outs = [subprocess.run([sys.executable, "-m", entry, *argv], capture_output=True, text=True, timeout=120)
            for entry in ("rooftop.tui", "rooftop.tui.cli")]
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert outs[0].stdout == outs[1].stdout and '"regime"' in outs[0].stdout
