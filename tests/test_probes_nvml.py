"""NVML's one door (probes/nvml.py), as telemetry, devinfo, identify and GPM share it: no GPU here, so pynvml
is a thin fake (tests/fake_nvml.py) and everything else is rooftop's own code, in this process and in a real one."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from fake_nvml import (COPY_GPM, FakeNVML, NVMLError_FunctionNotFound, NVMLError_GpuIsLost, NVMLError_LibraryNotFound,
                       NVMLError_NotSupported)
from rooftop.probes import nvml
from rooftop.probes.devinfo import NvmlFacts, nvml_facts
from rooftop.probes.identify import local_gpus
from rooftop.probes.telemetry import NvmlSource, Sampler

TESTS = Path(__file__).parent


def test_every_probe_shares_one_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rooftop measure` names the GPU (identify), records its facts (devinfo) and samples it (telemetry):
    one nvmlInit for all of them, and none of them shuts NVML down under the others."""
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"], gpm=COPY_GPM)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    assert [name for name, _ in local_gpus()] == ["NVIDIA H200", "NVIDIA H200"]
    assert nvml_facts(0, nv.uuids[1].removeprefix("GPU-")).index == 1
    with Sampler(interval=0.05, cpu=False) as s:
        assert [g.power_w for g in s.sample_once().gpus] == [650, 650]
    assert local_gpus()[1][1]["totalGlobalMem"] == 141 * 10**9
    assert nv.calls["nvmlInit"] == 1 and nv.calls["nvmlDeviceGetCount"] == 1
    assert "nvmlShutdown" not in nv.calls


def test_nvml_is_shut_down_once_at_exit() -> None:
    """A real process: the probes use NVML, the sampler stops, and NVML is shut down once, as the process exits."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from fake_nvml import FakeNVML

        class Fake(FakeNVML):
            def nvmlShutdown(self):
                super().nvmlShutdown()
                print("shutdown", self.calls["nvmlInit"], self.calls["nvmlShutdown"], flush=True)

        sys.modules["pynvml"] = nv = Fake()
        from rooftop.probes.devinfo import nvml_facts
        from rooftop.probes.identify import local_gpus
        from rooftop.probes.telemetry import Sampler
        local_gpus()
        nvml_facts(0, None)
        s = Sampler(interval=0.05, cpu=False)
        s.sample_once()
        s.stop()
        print("stopped", "nvmlShutdown" in nv.calls, flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["stopped False", "shutdown 1 1"]


def test_shutdown_is_once_and_waits_for_no_hung_call() -> None:
    nv = FakeNVML()
    door = nvml.door(nv)
    release = threading.Event()
    nv.hang_on["nvmlDeviceGetPowerUsage"] = release
    (gpu,) = door.gpus
    t = threading.Thread(target=door.query, args=("nvmlDeviceGetPowerUsage", gpu.handle), daemon=True)
    t.start()
    try:
        while nv.calls.get("nvmlDeviceGetPowerUsage") != 1:
            release.wait(0.01)
        door.shutdown()  # a call is still out: shutting down under it could hang the exit
        assert "nvmlShutdown" not in nv.calls
    finally:
        release.set()
        t.join(5)
    door.shutdown()
    door.shutdown()
    assert nv.calls["nvmlShutdown"] == 1
    assert door.query("nvmlDeviceGetPowerUsage", gpu.handle) is None  # shut down: NVML is not asked again
    assert nv.calls["nvmlDeviceGetPowerUsage"] == 1


def test_what_nvml_does_not_support_is_asked_once_for_every_caller() -> None:
    """nvmlDeviceGetPowerUsage NotSupported on GPU 0 of a mixed box: asked once, whoever asks and however often;
    GPU 1, which has it, is still asked at every tick."""
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA A10"])
    nv.raise_on["nvmlDeviceGetPowerUsage:0"] = NVMLError_NotSupported()
    for src in (NvmlSource(nv), NvmlSource(nv)):
        for _ in range(3):
            assert [g.power_w for g in src.read()] == [None, 650]
    assert nv.calls["nvmlDeviceGetPowerUsage"] == 1 + 6


def test_what_nvml_does_not_support_is_remembered_per_argument() -> None:
    """PCIe RX unsupported, TX not: the memo is of the call (function and arguments), not the function."""
    nv = FakeNVML()
    door = nvml.door(nv)
    (gpu,) = door.gpus
    nv.raise_on["nvmlDeviceGetPcieThroughput"] = NVMLError_NotSupported()
    assert door.query("nvmlDeviceGetPcieThroughput", gpu.handle, 1, gpu=0) is None
    del nv.raise_on["nvmlDeviceGetPcieThroughput"]
    assert door.query("nvmlDeviceGetPcieThroughput", gpu.handle, 1, gpu=0) is None  # remembered
    assert door.query("nvmlDeviceGetPcieThroughput", gpu.handle, 0, gpu=0) == 1000  # another call: asked
    assert nv.calls["nvmlDeviceGetPcieThroughput"] == 2


def test_a_missing_function_or_a_lost_gpu_is_known_to_every_caller() -> None:
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"])
    nv.raise_on["nvmlDeviceGetTotalEnergyConsumption"] = NVMLError_FunctionNotFound()
    nv.raise_on["nvmlDeviceGetMemoryInfo:1"] = NVMLError_GpuIsLost()
    first = NvmlSource(nv)
    assert [g.lost for g in first.read()] == [False, True] and first.state == "GPU 1 lost"
    second = NvmlSource(nv)
    g0, g1 = second.read()
    assert g1.lost and second.state == "GPU 1 lost" and g0.power_w == 650
    assert nv.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1  # GPU 0 under the first source: then never again
    assert nv.calls["nvmlDeviceGetMemoryInfo"] == 3  # GPU 0 twice, GPU 1 once: a lost GPU is not asked again


@pytest.mark.parametrize("missing", ["library", "binding"])
def test_no_nvml_is_one_line_the_same_everywhere(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                                                 missing: str) -> None:
    if missing == "library":
        nv = FakeNVML(init_error=NVMLError_LibraryNotFound("NVML Shared Library\n  Not Found"))
        monkeypatch.setitem(sys.modules, "pynvml", nv)
        want = "NVML not available: NVML Shared Library Not Found"
    else:
        monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` fails: nvidia-ml-py not installed
        want = "NVML not available: import of pynvml halted; None in sys.modules"
    caplog.set_level(logging.DEBUG, logger="rooftop.probes")
    state = Sampler(interval=0.05, cpu=False).sample_once().state
    assert local_gpus() == [] and nvml_facts(0, "58f05e46") == NvmlFacts()
    assert state == want
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("NVML not available")]
    assert said == [want, want]  # identify and devinfo say the sampler's reason, word for word
    if missing == "library":
        assert nv.calls["nvmlInit"] == 1  # tried once, for all three


def test_an_init_that_hangs_costs_its_deadline_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler gave up on nvmlInit: picking the default device then does not wait for it again."""
    nv = FakeNVML()
    release = threading.Event()
    nv.hang_on["nvmlInit"] = release
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    try:
        src = NvmlSource(init_timeout_s=0.2)
        assert src.state == "NVML not available: it did not answer within 0.2 s"
        assert local_gpus() == [] and nvml_facts(0, None) == NvmlFacts()  # at once, not after another 10 s
        assert not release.is_set() and nv.calls["nvmlInit"] == 1
    finally:
        release.set()


def test_a_gpu_nvml_cannot_name_leaves_the_others_sampled() -> None:
    """One GPU of two fell off the bus before the sampler started: the other is still sampled."""
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"])
    nv.raise_on["nvmlDeviceGetName:0"] = NVMLError_GpuIsLost()
    src = NvmlSource(nv)
    assert src.state == "ok" and [(g.index, g.power_w) for g in src.read()] == [(1, 650)]
