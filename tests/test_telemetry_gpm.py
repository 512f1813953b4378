"""Live against the measured roofs: GPM through a thin fake NVML, the processes on each GPU, and
NVML calls that hang or answer nonsense (no GPU here; the H200 figures are reference gpm.txt's)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from fake_nvml import COPY_GPM, FakeNVML, NVMLError_FunctionNotFound, NVMLError_Unknown
from probe_fixtures import cpu_backend  # noqa: F401 - a fixture
from rooftop.models.catalog import find_by_name
from rooftop.probes.gpm import NO_GPM_API, NOT_SUPPORTED, dram_peak_bytes_s, dram_roof
from rooftop.probes.telemetry import WATCH_KEYS, NvmlSource, Sampler, Snapshot, watch_dict

H200_B = find_by_name("NVIDIA H200").B("dram")  # the reference profile's measured DRAM bandwidth
GPM_FIELDS = ("sm_active", "sm_occupancy", "tensor_active", "hmma_active", "dram_active", "dram_bandwidth",
              "dram_fraction_of_roof")


def test_the_dram_peak_nvml_implies_is_gpms_100_percent() -> None:
    """H200: 3201 MHz × 6016 bits × 2 = 4.81 TB/s, and 87.8% of it is the 4227 GB/s copy GPM was read under."""
    peak = dram_peak_bytes_s(3201, 6016)
    assert peak == pytest.approx(4.814e12, rel=1e-3)
    assert 0.878 * peak == pytest.approx(4227.3e9, rel=2e-3)
    assert dram_peak_bytes_s(None, 6016) is None and dram_peak_bytes_s(3201, 0) is None


def test_gpm_present_gives_bandwidth_against_the_measured_roof() -> None:
    nv = FakeNVML(gpm=COPY_GPM)
    src = NvmlSource(nv)
    (first,) = src.read()  # one sample so far: no pair yet
    assert all(getattr(first, f) is None for f in GPM_FIELDS) and first.gpm_note is None
    (g,) = src.read()
    assert g.dram_active == pytest.approx(0.878)
    assert g.dram_peak == pytest.approx(4.814e12, rel=1e-3)
    assert g.dram_bandwidth == pytest.approx(4227e9, rel=1e-3)
    assert (g.dram_roof, g.dram_roof_source) == (H200_B, "h200")
    assert g.dram_fraction_of_roof == pytest.approx(g.dram_bandwidth / H200_B)
    assert (g.sm_active, g.sm_occupancy, g.tensor_active) == pytest.approx((0.983, 0.793, 0.0))
    assert g.pcie_tx_bytes_s == 10 * 2**20  # GPM's PCIe counters, not the 20 ms nvmlDeviceGetPcieThroughput
    assert nv.calls["nvmlGpmSampleGet"] == 2 and nv.calls["nvmlGpmMetricsGet"] == 1
    assert g.power_w == 650  # the rest as before


def test_local_measurement_is_the_roof_where_it_is_this_gpu() -> None:
    ref = find_by_name("NVIDIA H200")
    dram = dataclasses.replace(ref.bandwidth["dram"], value=4.0e12)
    local = dataclasses.replace(ref, id="local", bandwidth={"dram": dram})
    assert dram_roof("NVIDIA H200", local).source == "local"
    assert dram_roof("NVIDIA H100 80GB HBM3", local).source != "local"  # measured on another GPU: not its roof
    s = Sampler(interval=0.05, nvml=FakeNVML(gpm=COPY_GPM), cpu=False, local=local)
    s.sample_once()
    (g,) = s.sample_once().gpus
    assert g.dram_roof_source == "local" and g.dram_fraction_of_roof == pytest.approx(g.dram_bandwidth / 4.0e12)
    s.set_local(None)  # e.g. the store had no complete run yet; then one finishes:
    assert s.sample_once().gpus[0].dram_roof_source == "h200"
    s.set_local(local)
    assert s.sample_once().gpus[0].dram_roof == 4.0e12


def test_gpu_without_gpm_has_null_fields_and_one_note() -> None:
    nv = FakeNVML(names=["Tesla V100-SXM2-16GB"], gpm=None)  # nvmlGpmQueryDeviceSupport: isSupportedDevice 0
    src = NvmlSource(nv)
    for _ in range(2):
        (g,) = src.read()
        assert all(getattr(g, f) is None for f in GPM_FIELDS)
        assert g.gpm_note == NOT_SUPPORTED
        assert g.power_w == 650 and g.pcie_rx_bytes_s == 2000 * 1024  # nothing else changes
    assert "nvmlGpmSampleGet" not in nv.calls and nv.calls["nvmlGpmQueryDeviceSupport"] == 1


def test_nvml_without_gpm_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    old_driver = FakeNVML(gpm=COPY_GPM)
    old_driver.raise_on["nvmlGpmQueryDeviceSupport"] = NVMLError_FunctionNotFound()
    (g,) = NvmlSource(old_driver).read()
    assert g.gpm_note == NO_GPM_API and g.temperature_c == 71
    monkeypatch.delattr(FakeNVML, "nvmlGpmQueryDeviceSupport")  # a binding from before GPM
    src = NvmlSource(FakeNVML(gpm=COPY_GPM))
    src.read()
    (g,) = src.read()
    assert g.gpm_note == NO_GPM_API and g.dram_bandwidth is None


def test_gpm_failing_costs_its_fields_for_a_tick_then_a_new_pair() -> None:
    nv = FakeNVML(gpm=COPY_GPM)
    src = NvmlSource(nv)
    src.read()
    assert src.read()[0].dram_bandwidth is not None
    nv.raise_on["nvmlGpmSampleGet"] = NVMLError_Unknown()
    (g,) = src.read()
    assert g.dram_bandwidth is None and g.tensor_active is None and g.power_w == 650
    del nv.raise_on["nvmlGpmSampleGet"]
    assert src.read()[0].dram_bandwidth is None  # the pair starts again: one sample
    assert src.read()[0].dram_bandwidth is not None
    nv.raise_on["nvmlGpmMetricsGet"] = NVMLError_Unknown()
    assert src.read()[0].sm_active is None
    del nv.raise_on["nvmlGpmMetricsGet"]
    assert src.read()[0].sm_active == pytest.approx(0.983)


def test_one_metric_gpm_cannot_give_costs_that_metric_only() -> None:
    no_tensor = {k: v for k, v in COPY_GPM.items() if k != 5}
    src = NvmlSource(FakeNVML(gpm={**no_tensor, 2: float("nan")}))
    src.read()
    (g,) = src.read()
    assert g.tensor_active is None and g.sm_active is None  # not given, and NaN
    assert g.dram_bandwidth == pytest.approx(4227e9, rel=1e-3)


def test_processes_with_their_names_and_memory() -> None:
    nv = FakeNVML()
    nv.processes[0] = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=12 * 2**30),
                       SimpleNamespace(pid=2**22 + 7, usedGpuMemory=None),  # not visible here (another namespace)
                       SimpleNamespace(pid="?", usedGpuMemory=1)]  # nonsense: left out
    src = NvmlSource(nv)
    (g,) = src.read()
    mine, other = g.processes
    assert (mine.pid, mine.memory_bytes) == (os.getpid(), 12 * 2**30) and mine.name
    assert (other.name, other.memory_bytes) == (None, None)
    src.read()
    assert nv.calls["nvmlDeviceGetComputeRunningProcesses"] == 1  # re-read once a second, not each tick
    d = watch_dict(Snapshot(time=0.0, gpus=(g,)))
    assert d["processes"][0] == {"gpu": 0, "pid": os.getpid(), "name": mine.name, "memory_bytes": 12 * 2**30}
    json.dumps(d)


def test_one_bad_value_on_one_gpu_does_not_drop_the_others() -> None:
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"])
    nv.values[("nvmlDeviceGetPowerUsage", 1)] = "650 W"  # not a number
    nv.values[("nvmlDeviceGetCurrentClocksEventReasons", 1)] = object()  # not a bit mask
    nv.values[("nvmlDeviceGetMemoryInfo", 1)] = None
    snap = Sampler(interval=0.05, nvml=nv, cpu=False).sample_once()
    g0, g1 = snap.gpus
    assert g0.power_w == 650 and g0.clock_events == ("power cap",)
    assert g1.power_w is None and g1.clock_events == () and g1.memory_used_bytes is None
    assert g1.temperature_c == 71 and g1.sm_clock_mhz == 1980  # the rest of that GPU too


def test_a_hung_call_costs_one_gpus_fields_and_the_sampler_keeps_ticking() -> None:
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"], gpm=COPY_GPM)
    release = threading.Event()
    got: list[Snapshot] = []
    with Sampler(interval=0.1, nvml=nv, cpu=False, on_snapshot=got.append):
        _wait_for(lambda: len(got) >= 2)
        nv.hang_on["nvmlDeviceGetPowerUsage:1"] = release  # GPU 1's driver call stops answering
        n = len(got)
        _wait_for(lambda: len(got) >= n + 4)
        hung = [s for s in got[n:] if s.gpus[1].note]
        assert len(hung) >= 3
        assert all(s.gpus[0].power_w == 650 and s.gpus[0].note is None for s in hung)  # GPU 0 carries on
        assert all(s.gpus[1].power_w is None for s in hung)
        assert "did not answer" in hung[0].gpus[1].note and "nvmlDeviceGetPowerUsage" in hung[0].gpus[1].note
        assert all("skipped" in s.gpus[1].note for s in hung[1:])  # not asked again while the call is out
        calls = nv.calls["nvmlDeviceGetUtilizationRates"]
        release.set()
        del nv.hang_on["nvmlDeviceGetPowerUsage:1"]
        _wait_for(lambda: got[-1].gpus[1].power_w == 650)
        assert nv.calls["nvmlDeviceGetUtilizationRates"] > calls
    assert got[-1].gpus[1].note is None


def test_nvml_init_that_hangs_falls_back_to_the_cpu() -> None:
    nv = FakeNVML()
    release = threading.Event()
    nv.hang_on["nvmlInit"] = release
    try:
        src = NvmlSource(nv, init_timeout_s=0.2)
        assert not src.available and "did not answer within 0.2 s" in src.state
        assert src.read() == ()
    finally:
        release.set()
    time.sleep(0.05)
    assert not src.available  # what the late answer found is not used


def test_watch_dict_has_the_keys_as_null_without_a_gpu() -> None:
    d = watch_dict(Snapshot(time=0.0))
    assert all(d[k] is None for k in WATCH_KEYS) and d["processes"] == []


def test_watch_json_here_carries_the_keys_as_null(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "--db", str(tmp_path / "r.db"), "watch",
                          "--count", "2", "--interval", "0.1", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for line in out.stdout.splitlines():
        d = json.loads(line)
        assert {k: d[k] for k in WATCH_KEYS} == dict.fromkeys(WATCH_KEYS)
        assert d["processes"] == []


def _wait_for(cond, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# -- the Live tab ----------------------------------------------------------------------


@pytest.mark.parametrize("gpm", [COPY_GPM, None], ids=["gpm", "no-gpm"])
async def test_live_tab_shows_bandwidth_against_its_roof_and_the_processes(gpm) -> None:
    from textual.widgets import Static

    from test_tui import app
    from tui_helpers import assert_visible, screen_lines

    nv = FakeNVML(gpm=gpm)
    nv.processes[0] = [SimpleNamespace(pid=4242, usedGpuMemory=12 * 2**30)]
    a = app(initial_tab="live", sampler=lambda: Sampler(interval=0.05, nvml=nv, cpu=False))
    async with a.run_test(size=(100, 32)) as pilot:
        for _ in range(60):
            await pilot.pause(0.05)
            if "procs 4242" in "".join(screen_lines(a)) and (gpm is None or "DRAM 4,227" in "".join(screen_lines(a))):
                break
        assert_visible(a, "procs 4242 ")
        if gpm is None:
            assert_visible(a, NOT_SUPPORTED)
            assert not a.query_one("#tr-dram").display and not a.query_one("#tr-tensor").display
        else:
            assert_visible(a, f"DRAM 4,227 GB/s = {100 * 4227e9 / H200_B:.0f}% of B h200 ref.", "tensor 0% active",
                           "SM 98% active", "4,227 GB/s")
            assert a.query_one("#tr-dram").display
        assert "12.0 GiB" in str(a.query_one("#tel-procs", Static).render())


# -- rooftop watch (text) ----------------------------------------------------------------


def test_watch_text_has_bandwidth_against_the_roof_and_the_processes(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     tmp_path) -> None:
    from rooftop.tui.cli import main

    nv = FakeNVML(names=["NVIDIA H200", "Tesla V100-SXM2-16GB"], gpm=COPY_GPM)
    nv.gpm_supported = True
    nv.values[("nvmlGpmQueryDeviceSupport", 1)] = SimpleNamespace(isSupportedDevice=0)  # the V100: no GPM
    nv.processes[0] = [SimpleNamespace(pid=4000 + i, usedGpuMemory=2**30) for i in range(12)]
    nv.processes[0][0].pid, nv.processes[0][0].usedGpuMemory = os.getpid(), 12 * 2**30
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    assert main(["--db", str(tmp_path / "r.db"), "watch", "--interval", "0.05", "--count", "3"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"rooftop watch: gpu1: {NOT_SUPPORTED}"]  # once, for the GPU without GPM
    assert all(len(line) <= 80 for line in out.splitlines()), out
    gpm = [line for line in out.splitlines() if "DRAM" in line]
    assert len(gpm) == 2  # from the second line on: a pair of samples; and only for gpu0
    assert gpm[0].strip().startswith("DRAM 4,227 GB/s = 98% of B h200 ref.  tensor 0% active  SM 98% active")
    procs = [line for line in out.splitlines() if "procs" in line]
    assert procs and procs[0].strip().startswith(f"procs {os.getpid()} ") and "more" in procs[0]


def test_watch_text_says_why_a_gpus_fields_are_missing(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    from rooftop.tui.cli import main

    nv = FakeNVML()
    release = threading.Event()
    nv.hang_on["nvmlDeviceGetTemperatureV"] = release
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    try:
        assert main(["--db", str(tmp_path / "r.db"), "watch", "--interval", "0.1", "--count", "2"]) == 0
    finally:
        release.set()
    lines = capsys.readouterr().out.splitlines()
    notes = [line.strip() for line in lines if "NVML" in line]
    assert "util N/A" in lines[0] and notes[0] == "NVML did not answer within 0.1 s (nvmlDeviceGetTemperatureV)"
    assert notes[1].startswith("NVML has not answered for ") and notes[1].endswith("skipped")
    assert sum(" cpu " in line for line in lines) == 2  # the CPU carries on


# -- runs keep them --------------------------------------------------------------------


def test_a_run_keeps_the_gpm_fields_with_its_telemetry(cpu_backend, tmp_path) -> None:
    from probe_fixtures import tiny_sizes
    from rooftop.probes.plan import build_plan
    from rooftop.store.runs import Store
    from rooftop.tui.services.measure import measure_run

    plan = build_plan(cpu_backend, "quick", "bandwidth", sizes=tiny_sizes())
    nv = FakeNVML(gpm=COPY_GPM)
    nv.processes[0] = [SimpleNamespace(pid=4242, usedGpuMemory=2**30)]
    with Sampler(interval=0.05, nvml=nv, cpu=False) as sampler:
        _wait_for(lambda: len(sampler.history()) >= 2)
        result = measure_run(plan, tmp_path / "r.db", sampler=sampler)
    with Store.open(tmp_path / "r.db") as store:
        rows = [g for t in store.telemetry(result.run_id) for g in t["gpus"]]
    paired = [g for g in rows if g["dram_bandwidth"] is not None]
    assert paired, rows[:1]
    assert paired[0]["dram_bandwidth"] == pytest.approx(4227e9, rel=1e-3)
    assert paired[0]["dram_roof_source"] == "h200" and paired[0]["tensor_active"] == 0.0
    assert paired[0]["processes"] == [{"pid": 4242, "name": paired[0]["processes"][0]["name"], "memory_bytes": 2**30}]


def test_gpm_fills_the_real_bindings_structure() -> None:
    """The request is built in nvidia-ml-py's own ctypes structure (version, numMetrics, sample1/2, metricId),
    and read back from it (nvmlReturn, value): only the driver call is faked."""
    pynvml = pytest.importorskip("pynvml")

    class Binding(FakeNVML):
        c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t
        NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION

        def nvmlGpmSampleAlloc(self):
            return pynvml.c_nvmlGpmSample_t()

        def nvmlGpmMetricsGet(self, get):
            self.seen = (get.version, get.numMetrics)
            for i in range(get.numMetrics):
                m = get.metrics[i]
                m.nvmlReturn, m.value = (0, self.gpm[m.metricId]) if m.metricId in self.gpm else (3, 0.0)
            return get

    nv = Binding(gpm=COPY_GPM)
    src = NvmlSource(nv)
    src.read()
    (g,) = src.read()
    assert nv.seen == (pynvml.NVML_GPM_METRICS_GET_VERSION, 12)
    assert g.dram_bandwidth == pytest.approx(4227e9, rel=1e-3) and g.sm_active == pytest.approx(0.983)
    from rooftop.probes.gpm import GPM_METRICS

    names = {"SM_UTIL": "sm_active", "SM_OCCUPANCY": "sm_occupancy", "ANY_TENSOR_UTIL": "tensor_active",
             "HMMA_TENSOR_UTIL": "hmma_active", "DMMA_TENSOR_UTIL": "dmma_active", "IMMA_TENSOR_UTIL": "imma_active",
             "DRAM_BW_UTIL": "dram_active", "FP64_UTIL": "fp64_active", "FP32_UTIL": "fp32_active",
             "FP16_UTIL": "fp16_active", "PCIE_TX_PER_SEC": "pcie_tx_bytes_s", "PCIE_RX_PER_SEC": "pcie_rx_bytes_s"}
    assert GPM_METRICS == {getattr(pynvml, f"NVML_GPM_METRIC_{k}"): v for k, v in names.items()}
