"""`rooftop profile`, `op` and the app put a GPU on its own roofs, found by its name and properties; a GPU no
profile fits is never given another GPU's roofs silently: one line says so and names -d and the closest."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fake_nvml import FakeNVML
from rooftop.models.catalog import lookup_device
from rooftop.tui.cli import main

DATA = Path(__file__).parent / "data"
MIB = 2**20
M = N = K = 4096
W = 2 * M * N * K  # the one GEMM's FLOPs


def kineto_cuda_props(name: str, sms: int, mem: int, major: int, minor: int) -> dict:
    """A CUDA device's deviceProperties as Kineto writes them (the fields of the real H100 trace)."""
    return {"id": 0, "name": name, "totalGlobalMem": mem, "computeMajor": major, "computeMinor": minor,
            "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 1536 if major >= 8 else 1024,
            "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": sms,
            "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 101376, "sharedMemPerMultiprocessor": 102400}


def write_trace(path: Path, props: dict, runtime: dict | None = None) -> Path:
    """A one-step fp16 GEMM (4096³, compute-bound on any GPU) and its kernel, with `props` as its device."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 9000.0,
         "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1010.0, "dur": 40.0,
         "args": {"External id": 1, "Input Dims": [[M, K], [K, N]], "Input type": ["c10::Half", "c10::Half"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1030.0, "dur": 8.0,
         "args": {"External id": 1, "correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn", "pid": 0, "tid": 7,
         "ts": 1050.0, "dur": 8000.0, "args": {"External id": 1, "correlation": 1, "device": 0, "stream": 7}},
    ]
    doc = {"schemaVersion": 1, "deviceProperties": [props], "record_shapes": 1, "displayTimeUnit": "ms",
           "baseTimeNanoseconds": 1700000000000000000, "traceEvents": events,
           **(runtime if runtime is not None else {"cuda_runtime_version": 12040, "cupti_version": 22})}
    path.write_text(json.dumps(doc))
    return path


RTX2080TI = kineto_cuda_props("NVIDIA GeForce RTX 2080 Ti", 68, 11019 * MIB, 7, 5)
RTX4090 = kineto_cuda_props("NVIDIA GeForce RTX 4090", 128, 24564 * MIB, 8, 9)
L4 = kineto_cuda_props("NVIDIA L4", 58, 23034 * MIB, 8, 9)
MADE_UP = kineto_cuda_props("NVIDIA Frobnicator X9", 77, 40 * 1024 * MIB, 9, 7)


def profile(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["profile", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_nameless_mi300x_trace_is_an_mi300x(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM's MI300X trace names its device "" (304 CUs, warp 64, 192 GiB, gfx 9.4, HIP): it was put on h100."""
    rc, out, err = profile(capsys, "--trace", str(DATA / "real-traces/more/vllm-decode-full-mi300x.replay.json.gz"),
                           "--json", "--no-save", "--db", str(tmp_path / "r.db"))
    assert rc == 0
    s = json.loads(out)["summary"]
    assert s["device"] == "mi300x-ds"
    assert all(w in s["device_note"] for w in ("304 compute units", "192 GiB", "gfx 9.4", "HIP runtime"))
    assert "using mi300x-ds" in err and "h100" not in err


@pytest.mark.parametrize(("props", "want"), [
    (RTX2080TI, "rtx2080ti-ds"),
    ({**RTX2080TI, "name": "GeForce RTX 2080 Ti"}, "rtx2080ti-ds"),  # the name before driver 460 says no NVIDIA
    (RTX4090, "rtx4090-ds"),
    (L4, "l4-ds"),
])
def test_a_trace_of_a_catalog_gpu_gets_its_own_roofs(props: dict, want: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.json", props)
    rc, out, err = profile(capsys, "--trace", str(trace), "--json", "--no-save", "--db", str(tmp_path / "r.db"))
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["summary"]["device"] == want and f"using {want}" in err and "h100" not in err
    (mm,) = [g for g in doc["ops"] if g["op"] == "aten::mm"]
    assert mm["flops"] == W and mm["bound_s"] == pytest.approx(W / lookup_device(want).F("fp16-tc"))


def test_a_geforce_fp16_gemm_is_bound_by_the_fp32_accumulate_roof(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The 2080 Ti trace was placed on h100 (roofs 5–7× too high); its fp16 GEMM's bound is now W / 53.8 TFLOP/s,
    the FP32-accumulate figure PyTorch's GEMM runs at, not the 107.6 of FP16 accumulate."""
    trace = write_trace(tmp_path / "t.json", RTX2080TI)
    rc, out, _ = profile(capsys, "--trace", str(trace), "--json", "--no-save", "--db", str(tmp_path / "r.db"))
    (mm,) = [g for g in json.loads(out)["ops"] if g["op"] == "aten::mm"]
    assert mm["regime"] == "compute"
    assert mm["bound_s"] == pytest.approx(W / 53.8e12)
    assert mm["fraction_of_roof"] == pytest.approx(W / 53.8e12 / 8000e-6, rel=1e-6)  # 32% of its roof, not 6%


@pytest.mark.parametrize(("props", "runtime", "named"), [
    (MADE_UP, None, ["NVIDIA Frobnicator X9", "77 SMs", "compute capability 9.7"]),
    ({"id": 0, "name": "", "totalGlobalMem": 192 * 1024 * MIB, "computeMajor": 9, "computeMinor": 4, "warpSize": 64,
      "numSms": 80}, {"hip_runtime_version": 70051831}, ["nameless GPU", "80 compute units", "gfx 9.4", "mi300x-ds"]),
])
def test_an_unknown_gpu_is_refused_in_one_line_naming_d(props: dict, runtime: dict | None, named: list[str],
                                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No report on another GPU's roofs: exit 2, one line that names the GPU, -d and the closest profiles."""
    trace = write_trace(tmp_path / "t.json", props, runtime)
    db = tmp_path / "r.db"
    rc, out, err = profile(capsys, "--trace", str(trace), "--db", str(db))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("rooftop profile: error: rooftop has no profile for the trace's")
    assert "give -d ID" in err and "closest: " in err and "`rooftop measure`" in err
    assert all(w in err for w in named), err
    assert not db.exists()  # nothing kept as a profile of that GPU
    rc, out, err = profile(capsys, "--trace", str(trace), "--json", "--no-save", "--db", str(db), "-d", "h100")
    assert rc == 0 and json.loads(out)["summary"]["device"] == "h100"  # -d as the line says


def test_an_unknown_gpu_measured_here_gets_this_machines_roofs(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The line's other way out: measured on that machine, the trace of that very card is placed on `local`."""
    from rooftop.models.profile import Ceiling, DeviceProfile
    from rooftop.store.runs import Store

    db = tmp_path / "r.db"
    with Store.open(db) as store:
        rid = store.begin_run({"name": MADE_UP["name"], "uuid": "GPU-x9"}, "quick", "cuda")
        store.set_ceilings(rid, DeviceProfile(
            id="local", name=MADE_UP["name"], source="measured", sm_count=77,
            bandwidth={"dram": Ceiling(1.5e12, "measured", "read_reduce:134217728")},
            peak={"fp16-tc": Ceiling(2e14, "measured", "4096x4096x4096")}))
        store.finish_run(rid, "complete")
    trace = write_trace(tmp_path / "t.json", MADE_UP)
    rc, out, err = profile(capsys, "--trace", str(trace), "--json", "--no-save", "--db", str(db))
    assert rc == 0, err
    s = json.loads(out)["summary"]
    assert s["device"] == "local" and "this machine's measured profile of that card" in s["device_note"]
    other = write_trace(tmp_path / "o.json", {**MADE_UP, "numSms": 60})  # another card of that name: not its roofs
    assert profile(capsys, "--trace", str(other), "--no-save", "--db", str(db))[0] == 2


def test_a_program_is_not_run_on_an_unknown_gpu_it_could_not_be_placed_on(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before the program runs (it may run for minutes), not after."""
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(names=["NVIDIA GeForce GTX 1080"]))
    marker = tmp_path / "ran"
    script = tmp_path / "job.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    rc, out, err = profile(capsys, "--no-save", "--db", str(tmp_path / "r.db"), "--", "python", str(script))
    assert rc == 2 and not marker.exists()
    assert "this machine's NVIDIA GeForce GTX 1080" in err and "give -d ID" in err and err.count("\n") == 1


def test_op_on_an_unknown_gpu_says_whose_roofs_it_shows(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeNVML(names=["NVIDIA GeForce GTX 1080"])
    fake.values[("nvmlDeviceGetMemoryInfo", 0)] = SimpleNamespace(total=8 * 2**30, used=0, free=8 * 2**30)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    rc = main(["op", "gemv", "4096", "4096"])
    out, err = capsys.readouterr()
    assert rc == 0 and "h100 (ref)" in out  # op's report names the device it is on
    assert err.count("\n") == 1
    assert "this machine's NVIDIA GeForce GTX 1080" in err and "not in rooftop's catalog" in err
    assert "roofs shown are h100's, not its own" in err and "give -d ID (closest: " in err
    assert "no known GPU found" not in err


def test_op_on_a_catalog_gpu_uses_its_datasheet(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """An L4 box: the L4's datasheet profile (was h100's reference: only measured cards were looked up)."""
    fake = FakeNVML(names=["NVIDIA L4"])
    fake.values[("nvmlDeviceGetMemoryInfo", 0)] = SimpleNamespace(total=23034 * MIB, used=0, free=23034 * MIB)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    rc = main(["op", "gemv", "4096", "4096"])
    out, err = capsys.readouterr()
    assert rc == 0 and "using l4-ds, the datasheet profile for this machine's NVIDIA L4" in err
    assert "l4-ds" in out and "h100" not in out


async def test_the_app_on_an_unknown_gpu_says_so_and_names_d(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    from rooftop.tui.app import AppConfig, create_app

    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(names=["NVIDIA GeForce GTX 1080"]))
    app = create_app(AppConfig(sampler=None, db_path=tmp_path / "r.db"))
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        notes = [str(n.message) for n in app._notifications]
        assert app.device_id == "h100"
        assert any("this machine's NVIDIA GeForce GTX 1080" in n and "not its own" in n and "-d ID" in n
                   for n in notes), notes
