"""Backends: device parsing, CPU facts (caches from sysfs), memory checks, the L2 flush."""

from __future__ import annotations

import pytest

from rooftop.models.units import KiB, MiB
from rooftop.probes.backend import (
    BackendError,
    Unsupported,
    busy_note,
    parse_cpu_list,
    parse_device,
    parse_size,
    select_backend,
    sysfs_caches,
)

from probe_fixtures import cpu_backend  # noqa: F401 - a fixture


def test_parse_sizes_and_cpu_lists():
    assert parse_size("32K") == 32 * KiB
    assert parse_size("32768K") == 32 * MiB
    assert parse_size("1M") == MiB
    assert parse_size("32 MiB") == 32 * MiB
    with pytest.raises(ValueError):
        parse_size("lots")
    assert parse_cpu_list("0") == 1
    assert parse_cpu_list("0-3,8") == 5
    assert parse_cpu_list("0-1\n") == 2


def test_sysfs_caches_from_a_tree(tmp_path):
    for i, (level, ctype, size, shared) in enumerate(
        [(1, "Data", "32K", "0"), (2, "Unified", "512K", "0"), (3, "Unified", "32768K", "0-3")]
    ):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, val in (("level", level), ("type", ctype), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{val}\n")
    caches = sysfs_caches(tmp_path, ncpus=4)
    assert [(c.level, c.type, c.size_bytes, c.instances) for c in caches] == [
        (1, "Data", 32 * KiB, 4), (2, "Unified", 512 * KiB, 4), (3, "Unified", 32 * MiB, 1)
    ]
    assert caches[1].total_bytes == 2 * MiB


def test_parse_device():
    assert parse_device(None) == ("auto", None)
    assert parse_device("cpu") == ("cpu", None)
    assert parse_device("CUDA:1") == ("cuda", 1)
    assert parse_device("cuda") == ("cuda", 0)
    with pytest.raises(BackendError, match="cpu, cuda or cuda:N"):
        parse_device("tpu:0")


def test_cpu_backend_records_device_facts(cpu_backend):
    info = cpu_backend.info
    assert info.kind == "cpu" and info.name and info.torch_version
    assert info.memory_bytes and info.memory_bytes > 0
    assert info.units and info.units >= 1
    d = info.to_dict()
    assert d["kind"] == "cpu" and isinstance(d["caches"], list)
    hw = info.hardware()
    assert hw.kind == "cpu" and hw.l2_bytes == info.l2_bytes
    assert cpu_backend.flush_bytes() >= 128 * MiB


def test_memory_check_refuses_what_does_not_fit(cpu_backend):
    cpu_backend.check_fits(MiB)
    with pytest.raises(Unsupported, match="out of memory"):
        cpu_backend.check_fits(10 * cpu_backend.free_bytes())


def test_cuda_request_without_cuda_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(BackendError, match="no CUDA device"):
        select_backend("cuda:0")


def test_threads_option_and_busy_note(cpu_backend):
    import dataclasses

    import torch

    before = torch.get_num_threads()
    try:
        b = select_backend("cpu", threads=1)
        assert torch.get_num_threads() == 1 and b.info.units == 1
    finally:
        torch.set_num_threads(before)
    with pytest.raises(BackendError, match="give 1 to"):
        select_backend("cpu", threads=0)
    with pytest.raises(BackendError, match="CPU backend only"):
        select_backend("cuda:0", threads=2)
    import os

    busy = dataclasses.replace(cpu_backend.info, busy_cpus=1, load_avg_1m=1.5, units=os.cpu_count(),
                               default_threads=None)
    assert "busy with other work" in busy_note(busy) and "--threads" in busy_note(busy)
    assert busy_note(dataclasses.replace(cpu_backend.info, busy_cpus=0)) is None
    if os.cpu_count() > 1:  # fewer threads than idle CPUs: nothing to warn about
        assert busy_note(dataclasses.replace(busy, units=os.cpu_count() - 1)) is None
        chosen = dataclasses.replace(busy, units=os.cpu_count() - 1, default_threads=os.cpu_count())
        assert f"measuring with {os.cpu_count() - 1} of torch's {os.cpu_count()} threads" in busy_note(chosen)


def test_busy_cpus_at_start_mean_fewer_threads(monkeypatch):
    import os

    import torch

    from rooftop.probes import devinfo as be

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(os.cpu_count())
        monkeypatch.setattr(be, "busy_cpus", lambda interval_s=0.2: os.cpu_count())  # everything busy
        b = select_backend("cpu")
        assert b.info.units == 1 == torch.get_num_threads()
        assert b.info.default_threads == os.cpu_count()
        if os.cpu_count() > 1:
            assert "measuring with 1 of torch's" in busy_note(b.info)
        b = select_backend("cpu", threads=os.cpu_count())  # the user's choice wins
        assert b.info.units == os.cpu_count()
    finally:
        torch.set_num_threads(before)


def _cuda_backend(cpu_backend):  # a Backend claiming cuda:0 (nothing here touches CUDA)
    import dataclasses

    from rooftop.probes.timing import GPU_PROTOCOL

    info = dataclasses.replace(cpu_backend.info, kind="cuda", index=0)
    return dataclasses.replace(cpu_backend, spec="cuda:0", info=info, protocol=GPU_PROTOCOL)


def test_gpu_free_memory_counts_what_torch_holds_unused(cpu_backend, monkeypatch):
    """mem_get_info does not see blocks torch's caching allocator keeps after a probe: they are free to us."""
    import torch

    gpu = _cuda_backend(cpu_backend)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev=None: (10 * MiB, 100 * MiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda dev=None: 7 * MiB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda dev=None: 2 * MiB)
    assert gpu.free_bytes() == 15 * MiB
    gpu.check_fits(12 * MiB)  # 0.85 × 15 MiB
    with pytest.raises(Unsupported, match="needs 14 MiB, 15 MiB free"):
        gpu.check_fits(14 * MiB)


class _FakeCuda:
    """torch.cuda's events and streams as CudaTimer uses them (no CUDA here): which stream gets each event."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, object]] = []
        outer = self
        names = iter(("start", "end"))

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.name = next(names)

            def record(self, stream: object = None) -> None:
                outer.recorded.append((self.name, stream))

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, end: object) -> float:
                return 2.5  # milliseconds, as CUDA events report

        self.Event = Event

    def current_stream(self, device: object = None) -> str:
        return f"stream of {device}"


def test_cuda_timer_puts_both_events_on_the_measured_devices_stream(monkeypatch):
    """A thread whose current device is another GPU (the TUI's worker) would otherwise time an idle stream."""
    import torch

    from rooftop.probes.backend import CudaTimer

    timer = CudaTimer(torch.device("cuda:1"))
    fake = _FakeCuda()
    timer._torch = type("FakeTorch", (), {"cuda": fake})()
    calls = []
    assert timer.time_calls(lambda: calls.append(1), 4) == pytest.approx(2.5e-3)  # seconds
    assert len(calls) == 4
    assert fake.recorded == [("start", "stream of cuda:1"), ("end", "stream of cuda:1")]


def test_run_plan_activates_the_device_in_the_measuring_thread(cpu_backend, monkeypatch):
    import threading

    from probe_fixtures import tiny_sizes
    from rooftop.probes.plan import build_plan, run_plan

    plan = build_plan(cpu_backend, "quick", "launch", sizes=tiny_sizes())
    threads = []
    monkeypatch.setattr(plan.backend, "activate", lambda: threads.append(threading.current_thread()))
    worker = threading.Thread(target=lambda: list(run_plan(plan)))
    worker.start()
    worker.join(30)
    assert threads == [worker]
    cpu_backend.activate()  # a no-op on the CPU
