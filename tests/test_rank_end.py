"""A profiled script's objects outlive its end, however it ends, and the process groups it destroys outlive
it, until its rank leaves by os._exit.

The hang this guards against: a 2-rank gloo DDP script ending with `dist.destroy_process_group()`. Freed as
`run_script` returned (runpy's copy of the globals dropped), or by the script's own `main()` returning, the
model held the destroyed group's last reference; the group's destructor joined its worker thread with the GIL
held while that thread waited for the GIL, and the rank never exited (a third of the runs under load). The
loop that shows it on real ranks is tests/test_bench_torchrun_hang.py; these check, with real torch, that
nothing the script made is freed when it ends, in each way it can end, as a path and as a module, and that
a rank frees no group its script destroys.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import types
import weakref
from pathlib import Path

import pytest

from rooftop.probes.profiler import ProgramFailed, run_script

# A model as a global, no function nor class defined (nothing else holds the module's globals), then the end.
GLOBAL_MODEL = """
import sys, weakref
import torch
import made_refs
model = torch.nn.Linear(4, 4)
made_refs.refs.append(weakref.ref(model))
model(torch.ones(2, 4))
{end}
"""
# A model as a local of main(): it is held only by main's frame, which the exception's traceback holds.
LOCAL_MODEL = """
import sys, weakref
import torch
import made_refs
def main():
    model = torch.nn.Linear(4, 4)
    made_refs.refs.append(weakref.ref(model))
    model(torch.ones(2, 4))
    {end}
main()
"""
ENDS = {"return": ("pass", 0), "sys.exit(0)": ("sys.exit(0)", 0), "sys.exit(3)": ("sys.exit(3)", 3),
        "raise": ("raise RuntimeError('the script failed')", 1)}


@pytest.fixture
def refs(monkeypatch) -> list[weakref.ref]:
    """A module the script imports to hand back weak references to what it made."""
    mod = types.ModuleType("made_refs")
    mod.refs = []
    monkeypatch.setitem(sys.modules, "made_refs", mod)
    return mod.refs


def run(tmp_path: Path, monkeypatch, source: str, kind: str, end: str, keep: list | None) -> int:
    """Run the script as `python script.py` or `python -m name`; its exit status."""
    name = f"made_{kind}_{abs(hash((source, end))) % 10**8}"
    script = tmp_path / f"{name}.py"
    script.write_text(source.format(end=ENDS[end][0]))
    monkeypatch.chdir(tmp_path)  # `-m name` is found from the working directory, as python -m does
    argv = ["python", str(script)] if kind == "path" else ["python", "-m", name]
    try:
        run_script(argv, tmp_path / "t.json", steps=1, keep=keep)
    except ProgramFailed as exc:
        return exc.status
    return 0


@pytest.mark.parametrize("kind", ["path", "module"])
@pytest.mark.parametrize("end", list(ENDS))
def test_the_scripts_globals_outlive_its_end_until_the_rank_leaves(tmp_path, monkeypatch, refs, kind, end):
    keep: list = []
    assert run(tmp_path, monkeypatch, GLOBAL_MODEL, kind, end, keep) == ENDS[end][1]
    gc.collect()
    [ref] = refs
    assert ref() is not None, f"the model was freed as the script ended ({end}, run as a {kind})"
    keep.clear()  # the rank's os._exit frees nothing; here, letting go shows the reference was the one kept
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("kind", ["path", "module"])
@pytest.mark.parametrize("end", ["raise", "sys.exit(3)"])
def test_a_functions_locals_outlive_an_exception_that_ends_the_script(tmp_path, monkeypatch, refs, kind, end):
    keep: list = []
    assert run(tmp_path, monkeypatch, LOCAL_MODEL, kind, end, keep) == ENDS[end][1]
    gc.collect()
    assert refs[0]() is not None, f"main()'s model was freed as the script ended ({end}, run as a {kind})"


def test_without_keep_the_script_is_freed_when_it_ends(tmp_path, monkeypatch, refs):
    """`rooftop profile -- python script.py` (one process, no rank) goes on after the script: its objects go."""
    assert run(tmp_path, monkeypatch, GLOBAL_MODEL, "path", "return", None) == 0
    gc.collect()
    assert refs[0]() is None


RANK_SCRIPT = """
import atexit, gc, sys, weakref
import torch
refs = []
def report():
    gc.collect()
    print("model " + ("alive" if refs[0]() is not None else "freed"), flush=True)
atexit.register(report)  # run by the rank's leave, after the script ended
def main():
    model = torch.nn.Linear(4, 4)
    refs.append(weakref.ref(model))
    model(torch.ones(2, 4))
    raise RuntimeError("the script failed")
main()
"""


def test_a_rank_keeps_what_its_script_made_until_it_leaves(tmp_path):
    """Through the rank's own entry point (`python -m rooftop.probes.rankrun`), as torchrun starts it."""
    script = tmp_path / "fails.py"
    script.write_text(RANK_SCRIPT)
    out = subprocess.run([sys.executable, "-m", "rooftop.probes.rankrun", str(tmp_path / "t"), "1", str(script)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "RANK": "0"})
    assert out.returncode == 1 and "RuntimeError: the script failed" in out.stderr
    assert out.stdout.splitlines()[-1] == "model alive"


DESTROYS_ITS_GROUP = """
import atexit, gc, os, sys
import torch
import torch.distributed as dist
from torch.distributed import destroy_process_group  # bound as the script starts, as scripts do

def gloo_workers():
    tasks = os.listdir("/proc/self/task")
    return sum(open(f"/proc/self/task/{t}/comm").read().strip() == "pt_gloo_runloop" for t in tasks)

def main():
    dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
    dist.all_reduce(torch.ones(4))
    print("workers", gloo_workers(), flush=True)
    destroy_process_group()  # then nothing of the script's holds the group

main()
gc.collect()
atexit.register(lambda: print("after", gloo_workers(), flush=True))
"""


def test_a_rank_frees_no_process_group_its_script_destroys(tmp_path):
    """A gloo group freed in a rank joins its worker threads with the GIL held (the hang with a DDP model that
    a script's main() frees as it returns, after destroy_process_group): the rank holds each destroyed group
    until it leaves, so the group's workers are still there at its exit handlers."""
    script = tmp_path / "destroys.py"
    script.write_text(DESTROYS_ITS_GROUP)
    out = subprocess.run([sys.executable, "-m", "rooftop.probes.rankrun", str(tmp_path / "t"), "1", str(script),
                          str(tmp_path / "store")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "RANK": "0"})
    assert out.returncode == 0, out.stderr
    workers, after = out.stdout.splitlines()[-2:]
    assert workers.startswith("workers ") and int(workers.split()[1]) >= 1
    # none of the group's workers freed before the exit handlers (the old code: 0 left); gloo may have started
    # another run loop meanwhile (a full CI run once saw 2 after 1), which frees nothing
    assert after.startswith("after ") and int(after.split()[1]) >= int(workers.split()[1])
