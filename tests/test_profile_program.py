"""`rooftop profile -- python script.py` on this CPU, end to end, and the Python API (real torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inprocess import run_main

DATA = Path(__file__).parent / "data"
TINY = DATA / "tiny_model.py"


def rooftop(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rooftop.tui.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "100", "NO_COLOR": "1", **env})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[dict, subprocess.CompletedProcess, Path]:
    db = tmp_path_factory.mktemp("profile") / "p.db"
    out = rooftop("profile", "-d", "h100", "--steps", "2", "--json", "--db", str(db), "--",
                  "python", str(TINY), "6")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), out, db


def test_tiny_model_gemms_with_exact_flops(tiny):
    doc, _, _ = tiny
    gemms = {tuple(o["shapes"][1]): o for o in doc["ops"] if o["op"] == "aten::addmm"}
    # two Linear layers, x 64×256: 256→512 and 512→128; each group is 2 recorded steps' calls
    first, second = gemms[(64, 256)], gemms[(64, 512)]
    assert first["calls"] == second["calls"] == 2
    assert first["flops"] == 2 * (2 * 64 * 256 * 512)
    assert second["flops"] == 2 * (2 * 64 * 512 * 128)
    # x, W and the bias read once (addmm's bias is an input like the others), the output written once
    assert first["bytes"] == 2 * 4 * (64 * 256 + 256 * 512 + 512 + 64 * 512)
    for g in (first, second):
        assert g["regime"] in ("memory", "compute") and g["bound_s"] > 0 and g["time_s"] > 0
        assert g["intensity"] == pytest.approx(g["flops"] / g["bytes"])
        assert 0 < g["fraction_of_roof"]
    names = {o["op"] for o in doc["ops"]}
    assert {"aten::native_layer_norm", "aten::gelu", "aten::_softmax"} <= names
    assert "aten::linear" not in names  # dispatch around the GEMM, not a second one


def test_tiny_model_json_shape_and_split(tiny):
    doc, out, _ = tiny
    assert set(doc["summary"]) >= {"span_s", "device_busy_s", "idle_s", "bound_s", "mfu"}
    s = doc["summary"]
    assert not s["on_device"] and s["kernels"] == 0 and s["device"] == "h100"
    assert s["idle_s"] == pytest.approx(s["span_s"] - s["device_busy_s"])
    assert s["mfu_path"] == "fp32-matmul" and s["mfu"] > 0
    assert "tiny_model: 6 steps" in out.stderr or "tiny_model: 6 steps" in out.stdout  # its output passes through
    assert "USDT" not in out.stderr  # the profiler's own log lines are not the program's


def test_tiny_model_is_kept_as_a_run(tiny):
    from rooftop.store.runs import Store

    doc, _, db = tiny
    with Store.open(db) as store:
        run = store.run(doc["run_id"])
        assert run.plan == "profile" and run.backend == "torch.profiler"
        assert run.device["kind"] == "cpu"
        assert len(store.samples(run.id)) == len(doc["ops"])


def test_failing_program_one_line_and_exit_2():
    out = run_main("profile", "-d", "h100", "--no-save", "--", "python", str(TINY), "2", "--fail")
    assert out.returncode == 2
    assert "RuntimeError: asked to fail" in out.stderr  # the program's own traceback, as Python prints it
    assert "rooftop/probes" not in out.stderr and "runpy" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("rooftop profile: error:") and "exited with status 1" in last


def test_exit_status_of_the_program_is_reported(tmp_path):
    script = tmp_path / "quits.py"
    script.write_text("import sys\nprint('bye')\nsys.exit(3)\n")
    out = run_main("profile", "-d", "h100", "--no-save", "--", "python", str(script))
    assert out.returncode == 2 and "bye" in out.stdout
    assert out.stderr.strip().splitlines()[-1].endswith("exited with status 3; nothing to show")


def test_not_a_python_program_and_missing_script(tmp_path):
    out = run_main("profile", "--no-save", "--", "ls", "-l")
    assert out.returncode == 2 and "runs Python programs" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    out = run_main("profile", "--no-save", "--", "python", str(tmp_path / "missing.py"))
    assert out.returncode == 2 and "no such script" in out.stderr


def test_python_api_context_manager_and_decorator(tmp_path):
    import torch

    from rooftop.models.catalog import lookup_device
    from rooftop.models.program.workload import build_workload
    from rooftop.probes.profiler import profile
    from rooftop.store.tracefile import load_trace

    model = torch.nn.Linear(32, 16)
    x = torch.randn(4, 32)
    with profile(steps=2, trace=tmp_path / "cm.json") as p:
        for _ in range(5):
            model(x)
            p.step()
    assert p.recording.steps_kept == 2 and p.recording.steps_seen == 5
    assert load_trace(tmp_path / "cm.json").cpu_threads == torch.get_num_threads()  # for the threads flag
    work = build_workload(load_trace(tmp_path / "cm.json"), lookup_device("h100"))
    [g] = [g for g in work.groups if g.op == "aten::addmm"]
    assert g.calls == 2 and g.flops == 2 * (2 * 4 * 32 * 16)

    @profile(steps=3, trace=tmp_path / "deco.json")
    def step(v):
        return model(v)

    for _ in range(6):
        step(x)
    rec = step.profiler.recording
    assert rec is not None and rec.steps_kept == 3
    work = build_workload(load_trace(tmp_path / "deco.json"), lookup_device("h100"))
    [g] = [g for g in work.groups if g.op == "aten::addmm"]
    assert g.calls == 3


def test_a_program_that_never_uses_torch(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("print('hello, no torch here')\n")
    out = run_main("profile", "-d", "h100", "--no-save", "--", "python", str(script))
    assert out.returncode == 2 and "hello, no torch here" in out.stdout
    assert out.stderr.strip().splitlines() == [
        f"rooftop profile: error: python {script} ran no torch ops: nothing to place on the roofline"]


def test_convolution_flops_from_shapes_and_arguments(tmp_path):
    import torch

    from rooftop.models.catalog import lookup_device
    from rooftop.models.program.workload import build_workload
    from rooftop.probes.profiler import profile
    from rooftop.store.tracefile import load_trace

    conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    x = torch.randn(2, 3, 16, 16)
    with profile(steps=1, trace=tmp_path / "conv.json") as p:
        for _ in range(3):
            conv(x)
            p.step()
    work = build_workload(load_trace(tmp_path / "conv.json"), lookup_device("h100"))
    [g] = [g for g in work.groups if g.model == "conv"]
    assert g.calls == 1 and g.shape["out0"] == g.shape["out1"] == 8  # (16 + 2 − 3) // 2 + 1
    assert g.flops == 2 * 2 * 8 * 8 * 8 * 3 * 3 * 3  # 2·N·O·Ho·Wo·C·kh·kw
    assert g.path == "fp32-matmul"


def test_python_target_reads_the_command(tmp_path):
    from rooftop.probes.profiler import NotPython, python_target

    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    assert python_target(["--", "python3", "-u", str(script), "--lr", "1"]) == ("path", str(script), ["--lr", "1"])
    assert python_target([str(script)]) == ("path", str(script), [])
    assert python_target(["python", "-m", "pkg.mod", "x"]) == ("module", "pkg.mod", ["x"])
    shell = tmp_path / "run.sh"
    shell.write_text("#!/bin/sh\necho hi\n")
    tool = tmp_path / "tool"
    tool.write_text("#!/usr/bin/env python3\nprint(1)\n")
    assert python_target([str(tool)]) == ("path", str(tool), [])
    for bad in ([str(shell)], ["ls", "-l"], ["python"], ["python", "-c", "print(1)"], []):
        with pytest.raises(NotPython):
            python_target(bad)


def test_a_program_of_one_step_keeps_that_step(tmp_path):
    import torch

    from rooftop.probes.profiler import Recorder
    from rooftop.store.tracefile import load_trace

    rec = Recorder(tmp_path / "one.json", steps=3)
    model = torch.nn.Linear(16, 8)
    rec.start()
    model(torch.randn(2, 16))
    rec.step()  # the warm-up step, and the program's only one
    got = rec.stop()
    assert got.warmup_only and got.steps_seen == 1 and got.steps_kept == 0
    assert any(o.name == "aten::addmm" for o in load_trace(got.trace_path).ops)
