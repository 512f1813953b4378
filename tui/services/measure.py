"""One measurement run, as `rooftop measure` and the app's Live tab both make it.

The plan's samples go into the store one by one as they arrive (a crash loses
at most the point in flight), each with the conditions it ran under (mean SM
clock, max temperature, throttle reasons from the telemetry sampler); the
telemetry goes in beside them as it arrives, once a second (a crash loses at
most the last second of it), and the ceilings at the end. A store that cannot
be opened or written does not stop the measurement: it is reported, and the
samples are still returned (services.keeper says how the run is kept).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rooftop.models.calibrate import Calibration, calibrate
from rooftop.models.sample import Sample
from rooftop.probes.plan import Plan, Progress, run_plan
from rooftop.probes.telemetry import Sampler, conditions, snapshot_dict
from rooftop.store.db import StoreError
from rooftop.store.runs import RunStatus
from rooftop.tui.services.context import open_db
from rooftop.tui.services.keeper import RunKeeper


@dataclass
class RunResult:
    samples: list[Sample]
    calibration: Calibration
    status: RunStatus  # complete | cancelled | failed
    wall_s: float
    run_id: str | None = None  # None when nothing could be stored
    store_error: str = ""
    error: str = ""  # why a failed run failed
    throttled: list[Sample] = field(default_factory=list)  # points taken while the GPU throttled
    kept: int = 0  # samples committed to the store (all of them unless store_error says otherwise)


OnSample = Callable[[Progress, Sample, Calibration], object]  # what it returns is not read


def measure_run(
    plan: Plan,
    db_path: str | Path | None = None,
    *,
    store: bool = True,
    sampler: Sampler | None = None,
    cancel: threading.Event | None = None,
    on_sample: OnSample | None = None,
    on_store_error: Callable[[str], object] | None = None,
    on_note: Callable[[str], object] | None = None,
) -> RunResult:
    """Run `plan`, storing as it goes; returns what was measured however the run ended.

    Ctrl-C (KeyboardInterrupt) and `cancel` end the run as cancelled; an exception from a
    probe ends it as failed (its message in `error`). `on_sample` gets each sample with the
    ceilings so far, computed here so a UI only shows them. `on_note` is told of another measurement running
    into the same store at once (a warning: both are kept).
    """
    backend = plan.backend
    hw = backend.info.hardware()
    info = backend.info  # telemetry numbers the GPUs as NVML does, which need not be CUDA's order
    gpu = next((i for i in (info.nvml_index, info.index) if i is not None), 0) if backend.is_cuda else 0
    failed_mid_run: list[str] = []

    def store_failed(exc: StoreError, begun: bool) -> None:
        if not begun:  # told at once: the measurement goes on without the store
            if on_store_error is not None:
                on_store_error(f"the run is not kept in the store: {exc}")
        else:  # told with the result
            failed_mid_run.append(f"saving to the store failed: {exc}")

    keeper = RunKeeper(db_path, save=store, on_error=store_failed, on_beside=on_note)
    run_id = keeper.begin(info.to_dict(), plan.name, backend.spec, _versions(info.to_dict()))
    samples: list[Sample] = []
    status: RunStatus = "complete"
    error = ""
    started = time.time()
    log = TelemetryLog(sampler, db_path, run_id, since=started - sampler.interval).start() \
        if run_id is not None and sampler is not None else None
    t0 = time.perf_counter()
    last = started
    cal = calibrate([], hw)
    try:
        for prog, sample in run_plan(plan, cancel):
            if sampler is not None:  # the snapshots during the point, and the one just before it began
                during = sampler.history(since=last - sampler.interval)
                sample = with_telemetry(sample, conditions(during, gpu))
            last = time.time()
            samples.append(sample)
            keeper.add([sample])
            cal = calibrate(samples, hw)
            if on_sample is not None:
                on_sample(prog, sample, cal)
        if cancel is not None and cancel.is_set():
            status = "cancelled"
    except KeyboardInterrupt:
        status = "cancelled"
    except Exception as exc:  # a probe bug or a dead device: keep what was measured
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        cal = calibrate(samples, hw)
        if log is not None and (told := log.close()):
            failed_mid_run.append(told)
        keeper.set_ceilings(cal.profile)
        run_id = keeper.finish(status)
    store_error = failed_mid_run[-1] if failed_mid_run else \
        (f"the run is not kept in the store: {keeper.error}" if keeper.error is not None and run_id is None else "")
    throttled = [s for s in samples if s.conditions.get("throttle")]
    return RunResult(samples, cal, status, time.perf_counter() - t0, run_id, store_error, error, throttled,
                     keeper.added if run_id is not None else 0)


def with_telemetry(sample: Sample, telemetry: dict[str, Any]) -> Sample:
    """The sample with what it ran under added to what the probe recorded (its `method`, `working_set`,
    `sweep`…): merged, never replaced, since calibration reads the probe's own conditions (a CPU torch-chain
    FMA point that lost its method would pass for the compiled kernel and could set B dram)."""
    return dataclasses.replace(sample, conditions={**telemetry, **sample.conditions})


class TelemetryLog:
    """Stores a run's telemetry as the sampler takes it: what is new, once every `every` seconds.

    A thread of its own, on a connection of its own (a Store serves one thread at a time), so
    a long point does not hold the telemetry back and a SIGKILL loses at most the last second;
    the sampler's ring buffer (10 minutes at 4 Hz) no longer bounds what a long run keeps.
    """

    def __init__(self, sampler: Sampler, db_path: str | Path | None, run_id: str, since: float,
                 every: float = 1.0) -> None:
        self.sampler, self.db_path, self.run_id, self.every = sampler, db_path, run_id, every
        self._last = since  # snapshots after this time are not stored yet
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._db: Any = None
        self.error = ""

    def start(self) -> "TelemetryLog":
        self._thread = threading.Thread(target=self._run, name="rooftop-telemetry-log", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            self.flush()
            if self._stop.wait(self.every):
                return

    def flush(self) -> None:
        """Store the snapshots taken since the last flush; a failure is kept in `error`, never raised."""
        new = [s for s in self.sampler.history(since=self._last) if s.time > self._last]
        if not new or self.error:
            return
        try:
            if self._db is None:
                self._db = open_db(self.db_path, recover=False)
            self._db.add_telemetry(self.run_id, [{**snapshot_dict(s), "t": s.time} for s in new])
        except StoreError as exc:
            self.error = f"saving to the store failed: {exc}"
            return
        self._last = new[-1].time

    def close(self) -> str:
        """Stop the thread, store the rest; returns what went wrong, or ''."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.flush()
        if self._db is not None:
            self._db.close()
        return self.error


def _versions(info: dict[str, Any]) -> dict[str, Any]:
    keys = ("torch_version", "cuda_version", "hip_version", "driver_version", "compute_capability")
    return {k.removesuffix("_version"): info[k] for k in keys if info.get(k) is not None}
