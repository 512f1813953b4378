"""A measurement run end to end on the CPU: stored sample by sample with its conditions, however it ends."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from fake_nvml import FakeNVML
from probe_fixtures import cpu_backend, tiny_sizes  # noqa: F401 - a fixture
from rooftop.models.calibrate import reads
from rooftop.models.units import KiB
from rooftop.probes.plan import build_plan
from rooftop.probes.telemetry import Sampler
from rooftop.store.runs import Store
from rooftop.tui.services.measure import measure_run


@pytest.fixture
def plan(cpu_backend):
    return build_plan(cpu_backend, "quick", "launch,bandwidth,gemm,fma", sizes=tiny_sizes())


def test_run_is_stored_with_samples_ceilings_telemetry_and_conditions(plan, tmp_path: Path) -> None:
    nv = FakeNVML()  # the CPU backend, with a (fake) GPU sampled alongside: conditions come from it
    with Sampler(interval=0.05, nvml=nv, cpu=False) as sampler:
        result = measure_run(plan, tmp_path / "r.db", sampler=sampler)
    assert result.status == "complete" and not result.store_error
    assert len(result.samples) == len(plan.steps)
    with Store.open(tmp_path / "r.db") as store:
        run = store.run(result.run_id)
        assert run.status == "complete" and run.samples == len(plan.steps)
        stored = store.samples(result.run_id)
        assert [s.family for s in stored] == [s.family for s in result.samples]
        assert store.stored_profile(result.run_id).peak["fp32-matmul"].value > 0
        assert len(store.telemetry(result.run_id)) >= 1
    with_snaps = [s for s in stored if s.conditions.get("snapshots")]
    assert with_snaps, "every sample after the first snapshot carries its conditions"
    assert with_snaps[-1].conditions["mean_sm_clock_mhz"] == 1980
    assert with_snaps[-1].conditions["throttle"] == ["power cap"]
    assert result.throttled  # flagged: the fake GPU reports a power cap


def test_telemetry_is_merged_into_the_probes_own_conditions(plan, tmp_path: Path) -> None:
    """The sampler's conditions join the probe's (`method`, `working_set`, `sweep`), never replace them:
    a CPU torch-chain FMA point that lost its method passed for the compiled kernel and set B dram."""
    with Sampler(interval=0.05, nvml=FakeNVML(), cpu=False) as sampler:
        result = measure_run(plan, tmp_path / "r.db", sampler=sampler)
    with Store.open(tmp_path / "r.db") as store:
        stored = store.samples(result.run_id)
    for samples in (result.samples, stored):
        fma = [s for s in samples if s.family == "fma" and s.shape["reps"] == 1]
        assert fma and all(s.conditions["method"] == "torch-chain" and "snapshots" in s.conditions for s in fma)
        assert not any(reads(s) for s in fma), "the torch chain at R = 1 is no DRAM candidate"
        streams = [s for s in samples if s.family == "read_reduce"]
        assert streams and all(s.conditions["working_set"] in (16 * KiB, 64 * KiB) for s in streams)
        assert all(s.conditions["sweep"] == "square" for s in samples if s.family == "gemm" and s.shape["m"] == 32)
    assert any(s.conditions.get("throttle") == ["power cap"] for s in result.samples)


def test_cancel_keeps_what_was_measured(plan, tmp_path: Path) -> None:
    cancel = threading.Event()

    def after_three(prog, sample, cal) -> None:
        if prog.done == 3:
            cancel.set()

    result = measure_run(plan, tmp_path / "r.db", cancel=cancel, on_sample=after_three)
    assert result.status == "cancelled" and len(result.samples) == 3
    with Store.open(tmp_path / "r.db") as store:
        run = store.run(result.run_id)
        assert run.status == "cancelled" and run.samples == 3


def test_a_failure_mid_run_keeps_the_samples_before_it(plan, tmp_path: Path) -> None:
    def boom(prog, sample, cal) -> None:
        if prog.done == 2:
            raise RuntimeError("device fell off the bus")

    result = measure_run(plan, tmp_path / "r.db", on_sample=boom)
    assert result.status == "failed" and "fell off the bus" in result.error
    with Store.open(tmp_path / "r.db") as store:
        run = store.run(result.run_id)
        assert run.status == "failed" and run.samples == 2


def test_an_unusable_store_does_not_stop_the_measurement(plan, tmp_path: Path) -> None:
    bad = tmp_path / "not-a-db"
    bad.write_text("plain text")
    told: list[str] = []
    result = measure_run(plan, bad, on_store_error=told.append)
    assert result.status == "complete" and len(result.samples) == len(plan.steps)
    assert result.run_id is None and "the run is not kept in the store: " in result.store_error and told
    assert bad.read_text() == "plain text"


def test_telemetry_is_stored_as_it_arrives_not_only_at_the_end(plan, tmp_path: Path) -> None:
    """Mid-run, another connection already reads the run's telemetry; and a run longer than the
    sampler's ring buffer keeps every snapshot, not only the buffer's last ones."""
    import time

    db = tmp_path / "r.db"
    seen_mid_run: list[int] = []

    def slow_third(prog, sample, cal) -> None:  # a long point: 2.5 s of snapshots
        if prog.done == 3:
            time.sleep(2.5)
            with Store.open(db) as reader:
                [run] = reader.runs()
                seen_mid_run.append(len(reader.telemetry(run.id)))

    with Sampler(interval=0.05, capacity=30, nvml=FakeNVML(), cpu=False) as sampler:  # 1.5 s of buffer
        result = measure_run(plan, db, sampler=sampler, on_sample=slow_third)
    assert result.status == "complete" and not result.store_error
    with Store.open(db) as store:
        rows = store.telemetry(result.run_id)
    assert seen_mid_run and seen_mid_run[0] >= 30  # two flushes in 2.5 s, beyond the buffer's 30
    times = [r["time"] for r in rows]
    assert len(rows) > 50 and times == sorted(set(times))  # every snapshot once, in order
