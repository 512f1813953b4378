"""What the app starts with (AppConfig) and the state its tabs share (RunView): plain data, no widgets."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from rooftop.models.calibrate import Calibration
from rooftop.models.profile import DeviceProfile
from rooftop.models.units import fmt_count
from rooftop.probes.backend import select_backend
from rooftop.probes.plan import build_plan
from rooftop.probes.telemetry import Sampler
from rooftop.store.process import host_name
from rooftop.store.runs import Run

if TYPE_CHECKING:  # types only: the plan and its progress load with the measurement
    from rooftop.models.plotdata import Series
    from rooftop.models.sample import Sample
    from rooftop.probes.plan import Plan, Progress
    from rooftop.tui.services.measure import RunResult


@dataclass
class RunView:
    """What the app knows of the measurement in progress (or the last one): panels draw from it."""

    plan: str = ""
    points: int = 0
    device: str = ""
    samples: list[Sample] = field(default_factory=list)
    calibration: Calibration | None = None  # the ceilings so far
    progress: Progress | None = None  # of the last sample
    result: RunResult | None = None  # once finished
    error: str = ""  # the worker could not even start
    starting: bool = False  # asked for; the worker is loading torch and sizing the plan
    held: str = ""  # why no measurement started by itself (the store cannot keep one)
    stored: Run | None = None  # this machine's last run, kept from an earlier session

    def add(self, progress: Progress, sample: Sample, calibration: Calibration) -> None:
        self.samples.append(sample)
        self.progress, self.calibration = progress, calibration

    @classmethod
    def from_store(cls, run: Run, samples: list[Sample], profile: DeviceProfile | None) -> RunView:
        """A run kept from before, shown as it ended: its points, and the ceilings the store kept."""
        kind = "cpu" if run.backend == "cpu" else "gpu"
        units = run.device.get("units")
        prof = profile or DeviceProfile(id=run.label, name=run.device_name, source="measured", bandwidth={}, peak={},
                                        kind=kind, sm_count=units if isinstance(units, int) else None)
        unstable = tuple(s for s in samples if s.stats and not s.stable and not s.skipped)
        skipped = tuple(s for s in samples if s.skipped)
        return cls(run.plan, len(samples), measured_on(run.backend, run.device_name, prof), list(samples),
                   Calibration(prof, unstable, skipped, (), ()), stored=run)


@dataclass(frozen=True)
class StoreAtStart:
    """What the app reads from the store as it starts (read once, by `RooftopApp.read_store`)."""

    profiles: dict[str, DeviceProfile] = field(default_factory=dict)  # on offer beside the catalog, names escaped
    pins: tuple[str, ...] = ()  # the saved ops' specs (the Roofline tab's pins)
    measured_here: bool = False  # a run of this host is kept (any status, even cancelled): no measuring at start
    cannot_keep: str = ""  # why the store cannot keep a run (unusable, read-only, no room); '' when it can
    note: str = ""  # the store's trouble, said once as the app opens


def measured_on(backend: str, device_name: str, profile: DeviceProfile | None) -> str:
    """What a run measured, as the Live tab says it: `cpu (AMD EPYC 7763), 1 thread`. A CPU's
    ceilings scale with torch's threads (the app leaves one core to the UI, the CLI goes by load),
    so a CPU run always says how many it used."""
    threads = profile.threads if profile is not None else None
    return f"{backend} ({device_name})" + (f", {fmt_count(threads, 'thread')}" if threads else "")


def measured_here(run: Run) -> bool:
    """A measurement of this machine's ceilings: a profiled program or a collectives sweep is a run of its own
    kind (the Profile and History tabs show those), not what the Live tab or the start-up measurement go by."""
    return run.host == host_name() and not run.imported_from and run.kind == "measurement"


def default_sampler() -> Sampler:
    return Sampler()  # 4 Hz


def default_plan() -> Plan:  # torch loads here, in the worker thread
    """The quick plan on this machine's first GPU, else its CPU — leaving one core to the UI.

    On a CPU, torch's threads spin between kernels; with every core theirs the app
    could not answer a key for seconds (measured: tests/test_bench_tui_keys.py).
    """
    import torch  # deferred: torch, only when a measurement's plan is built

    if torch.cuda.is_available():
        return build_plan(select_backend(None), "quick")
    return build_plan(select_backend("cpu", threads=max(1, (os.cpu_count() or 1) - 1)), "quick")


@dataclass
class AppConfig:
    """What the app starts with; tests pass their own."""

    device: str | None = None  # device id shown first; None: this machine's GPU, else h100
    compare_with: str | None = None
    sampler: Callable[[], Sampler] | None = default_sampler  # None: no telemetry
    profiles: dict[str, DeviceProfile] = field(default_factory=dict)  # extra profiles (measured, imported)
    initial_tab: str = "roofline"
    db_path: Path | None = None  # None: --db / ROOFTOP_DB / the data directory
    export_dir: Path | None = None  # where History's export writes (default: the working directory)
    plan: Callable[[], Plan] = default_plan  # the plan `m` runs (tests pass a tiny one)
    autostart: bool = False  # measure at once when this machine has no stored profile (the CLI sets it)
    save: bool = True  # keep measurements in the store


class LabApp(Protocol):
    """What a pane reads of the app beyond Textual's `App`. The app is a RooftopApp, which imports the panes, so a
    pane cannot import it back to say so: it names this instead (`cast(LabApp, self.app)`)."""

    config: AppConfig

    def run_points(self, profile: DeviceProfile) -> list[Series]: ...
