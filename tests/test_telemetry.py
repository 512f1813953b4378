"""The sampler: NVML through a thin fake (no GPU here), the CPU path for real."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from fake_nvml import FakeNVML, NVMLError_FunctionNotFound, NVMLError_LibraryNotFound, NVMLError_NotSupported, NVMLError_Unknown
from rooftop.probes.telemetry import NvmlSource, Sampler, Snapshot, conditions, decode_clock_events


def test_supported_fields_in_si_units() -> None:
    (g,) = NvmlSource(FakeNVML()).read()
    assert g.name == "NVIDIA H200"
    assert (g.gpu_util_pct, g.mem_util_pct) == (97, 41)
    assert (g.sm_clock_mhz, g.mem_clock_mhz, g.sm_clock_max_mhz) == (1980, 3201, 1980)
    assert g.power_w == 650 and g.power_limit_w == 700
    assert g.energy_j == 5000
    assert g.temperature_c == 71
    assert g.memory_used_bytes == 12 * 2**30
    assert g.pcie_tx_bytes_s == 1000 * 1024 and g.pcie_rx_bytes_s == 2000 * 1024
    assert g.clock_events == ("power cap",)
    assert g.throttling == ("power cap",)
    assert not g.lost


def test_unsupported_field_reads_as_none_and_the_rest_survive() -> None:
    nv = FakeNVML()
    nv.raise_on["nvmlDeviceGetPowerUsage"] = NVMLError_NotSupported()
    nv.raise_on["nvmlDeviceGetPcieThroughput"] = NVMLError_NotSupported()
    (g,) = NvmlSource(nv).read()
    assert g.power_w is None and g.pcie_tx_bytes_s is None
    assert g.temperature_c == 71 and g.sm_clock_mhz == 1980


def test_pcie_throughput_is_read_at_most_once_a_second(monkeypatch) -> None:
    """Each nvmlDeviceGetPcieThroughput call takes 20 ms (it counts bytes over that interval)."""
    from rooftop.probes import telemetry

    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"])
    src = NvmlSource(nv)
    for _ in range(3):
        assert [g.pcie_rx_bytes_s for g in src.read()] == [2000 * 1024, 2000 * 1024]
    assert nv.calls["nvmlDeviceGetPcieThroughput"] == 2 * 2  # TX and RX, per GPU, once
    monkeypatch.setattr(telemetry, "PCIE_EVERY_S", 0.0)
    src.read()
    assert nv.calls["nvmlDeviceGetPcieThroughput"] == 2 * 2 * 2


def test_function_missing_from_the_driver_is_asked_once() -> None:
    nv = FakeNVML()
    nv.raise_on["nvmlDeviceGetTotalEnergyConsumption"] = NVMLError_FunctionNotFound()
    src = NvmlSource(nv)
    for _ in range(3):
        (g,) = src.read()
        assert g.energy_j is None
    assert nv.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1


def test_current_nvml_names_first_then_the_deprecated_ones(monkeypatch) -> None:
    """A driver before 535 has no ClocksEventReasons, an older one no TemperatureV (FunctionNotFound);
    a future binding may drop nvmlDeviceGetTemperature (AttributeError). The field is still read."""
    nv = FakeNVML()
    (g,) = NvmlSource(nv).read()
    assert g.temperature_c == 71 and "nvmlDeviceGetTemperature" not in nv.calls
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" not in nv.calls

    old_driver = FakeNVML()
    old_driver.raise_on["nvmlDeviceGetTemperatureV"] = NVMLError_FunctionNotFound()
    old_driver.raise_on["nvmlDeviceGetCurrentClocksEventReasons"] = NVMLError_FunctionNotFound()
    src = NvmlSource(old_driver)
    for _ in range(2):
        (g,) = src.read()
        assert g.temperature_c == 71 and g.clock_events == ("power cap",)
    assert old_driver.calls["nvmlDeviceGetTemperatureV"] == 1  # found missing once, not asked again
    assert old_driver.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 2

    monkeypatch.delattr(FakeNVML, "nvmlDeviceGetTemperatureV")  # a binding without it
    (g,) = NvmlSource(FakeNVML()).read()
    assert g.temperature_c == 71


def test_error_mid_run_does_not_stop_the_sampler() -> None:
    nv = FakeNVML()
    s = Sampler(interval=0.05, nvml=nv, cpu=False)
    first = s.sample_once()
    nv.raise_on["nvmlDeviceGetTemperatureV"] = NVMLError_Unknown()
    second = s.sample_once()
    del nv.raise_on["nvmlDeviceGetTemperatureV"]
    third = s.sample_once()
    assert [x.gpus[0].temperature_c for x in (first, second, third)] == [71, None, 71]
    assert len(s.history()) == 3


def test_a_caller_sampling_while_the_thread_runs_gets_every_field() -> None:
    """A fleet worker asks for a snapshot while its sampler's thread ticks: the two take turns, so neither
    finds the GPU's worker busy with the other's read and hands back a GPU with every field None."""

    class SlowPower(FakeNVML):
        def nvmlDeviceGetPowerUsage(self, h: int) -> int:
            time.sleep(0.02)  # a real NVML call takes ms; long enough here for the two readers to meet
            return super().nvmlDeviceGetPowerUsage(h)

    powers = []
    with Sampler(interval=0.05, nvml=SlowPower(), cpu=False) as s:
        for _ in range(12):
            powers.append(s.sample_once().gpus[0].power_w)
            time.sleep(0.017)  # off the thread's beat, so that each side sometimes starts while the other reads
    assert powers == [650] * 12
    assert all(snap.gpus[0].power_w == 650 for snap in s.history())  # the thread's own ticks too


def test_lost_gpu_is_reported_and_sampling_goes_on() -> None:
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"])
    s = Sampler(interval=0.05, nvml=nv)
    s.sample_once()
    nv.lost.add(1)
    snap = s.sample_once()
    assert snap.gpus[1].lost and not snap.gpus[0].lost
    assert snap.state == "GPU 1 lost"
    assert snap.gpus[0].temperature_c == 71
    assert snap.cpu is not None  # the CPU part carries on
    again = s.sample_once()
    assert again.gpus[1].lost


def test_no_nvml_falls_back_to_the_cpu() -> None:
    s = Sampler(interval=0.05, nvml=FakeNVML(init_error=NVMLError_LibraryNotFound("NVML Shared Library Not Found")))
    snap = s.sample_once()
    assert snap.gpus == ()
    assert snap.state.startswith("NVML not available")
    assert snap.cpu is not None and snap.cpu.memory_total_bytes > 0


def test_real_cpu_sampler_thread_fills_the_ring_buffer() -> None:
    """The CPU path for real: a 20 Hz thread, a ring buffer that keeps the newest."""
    got: list[Snapshot] = []
    with Sampler(interval=0.05, capacity=5, on_snapshot=got.append) as s:
        deadline = time.monotonic() + 10
        while len(got) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(got) >= 8
    hist = s.history()
    assert len(hist) == 5  # capacity
    assert hist[-1] is got[-1]
    assert all(a.time <= b.time for a, b in zip(hist, hist[1:]))
    c = hist[-1].cpu
    assert c is not None and len(c.per_core_pct) >= 1 and 0 <= c.util_pct <= 100
    n = len(got)
    time.sleep(0.2)
    assert len(got) == n  # stopped: nothing more arrives


def test_interval_is_bounded() -> None:
    with pytest.raises(ValueError, match="20 Hz"):
        Sampler(interval=0.01)


def test_clock_event_decoding_and_conditions() -> None:
    assert decode_clock_events(0x1 | 0x40) == ("idle", "hw thermal")
    assert decode_clock_events(None) == ()
    nv = FakeNVML()
    s = Sampler(interval=0.05, nvml=nv, cpu=False)
    s.sample_once()
    nv.clock_events = 0x20
    s.sample_once()
    c = conditions(s.history())
    assert c["snapshots"] == 2
    assert c["mean_sm_clock_mhz"] == 1980
    assert c["max_temperature_c"] == 71
    assert c["throttle"] == ["power cap", "sw thermal"]
    assert c["power_limit_w"] == 700 and c["sm_clock_max_mhz"] == 1980
    assert conditions([]) == {"snapshots": 0}


def _watch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "watch", *args], capture_output=True, text=True,
                          timeout=60)


def test_watch_json_lines() -> None:
    out = _watch("--count", "2", "--interval", "0.1", "--json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert len(lines) == 2
    assert lines[0]["cpu"]["memory_total_bytes"] > 0
    assert lines[1]["time"] > lines[0]["time"]


def test_watch_text_and_bad_interval() -> None:
    out = _watch("--count", "1", "--interval", "0.1")
    assert out.returncode == 0 and " cpu  util " in out.stdout
    bad = _watch("--interval", "0.001")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "20 a second" in bad.stderr


def test_watch_exits_cleanly_on_ctrl_c() -> None:
    from ctrlc import popen_kwargs

    p = subprocess.Popen([sys.executable, "-m", "rooftop.tui.cli", "watch", "--interval", "0.1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen_kwargs())
    assert p.stdout is not None
    p.stdout.readline()  # running
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0
    assert "Traceback" not in err


def test_the_cpus_first_reading_measures_a_window_not_an_instant() -> None:
    """Read straight after it is made (as `rooftop watch`'s first line is), a CPU source measured no
    window and said 0% of a machine kept busy; it now waits out a short window first."""
    import threading

    from rooftop.probes.telemetry import CpuSource

    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        first = CpuSource().read()
    finally:
        stop.set()
        t.join()
    assert max(first.per_core_pct) > 20.0, first.per_core_pct
