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
