"""The rooftop Textual app: five tabs over one set of device profiles.

One factory, `create_app`, serves the command line and the tests. Long work
runs in thread workers that only post messages; the UI shows, models compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Header, TabbedContent, TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from rooftop.models.catalog import catalog
from rooftop.models.profile import DeviceProfile
from rooftop.probes.telemetry import Sampler
from rooftop.tui.comparepane import Compare
from rooftop.tui.historypane import History
from rooftop.tui.livepane import Live, MeasurePanel, Telemetry
from rooftop.tui.llmpane import Llm
from rooftop.tui.rooflinepane import Roofline
from rooftop.tui.whatif import WhatIf
from rooftop.tui.widgets import HelpScreen

TABS = ("live", "roofline", "whatif", "compare", "history", "llm")
FALLBACK_DEVICE = "h100"


def default_sampler() -> Sampler:
    return Sampler()  # 4 Hz


def default_plan():  # noqa: ANN201 - a probes.plan.Plan; torch loads here, in the worker thread
    """The quick plan on this machine's first GPU, else its CPU — leaving one core to the UI.

    On a CPU, torch's threads spin between kernels; with every core theirs the app
    could not answer a key for seconds (measured: tests/test_bench_tui_keys.py).
    """
    import os

    import torch

    from rooftop.probes.backend import select_backend
    from rooftop.probes.plan import build_plan

    if torch.cuda.is_available():
        return build_plan(select_backend(None), "quick")
    return build_plan(select_backend("cpu", threads=max(1, (os.cpu_count() or 1) - 1)), "quick")


@dataclass
class MeasureStarted(Message):
    plan: str
    points: int
    device: str


@dataclass
class SampleTaken(Message):
    progress: object  # probes.plan.Progress
    sample: object  # models.sample.Sample
    calibration: object  # models.calibrate.Calibration (the ceilings so far, computed in the worker)


@dataclass
class MeasureFinished(Message):
    result: object  # tui.measuring.RunResult


@dataclass
class StoreProblem(Message):
    message: str


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
    plan: Callable[[], object] = default_plan  # the plan `m` runs (tests pass a tiny one)
    autostart: bool = False  # measure at once when this machine has no stored profile (the CLI sets it)
    save: bool = True  # keep measurements in the store


class RooftopApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "rooftop"
    SUB_TITLE = "roofline lab"
    BINDINGS = [
        Binding("1", "tab('live')", "Live", show=False),
        Binding("2", "tab('roofline')", "Roofline", show=False),
        Binding("3", "tab('whatif')", "What-if", show=False),
        Binding("4", "tab('compare')", "Compare", show=False),
        Binding("5", "tab('history')", "History", show=False),
        Binding("6", "tab('llm')", "LLM", show=False),
        Binding("m", "measure", "Measure"),
        Binding("c,escape", "cancel", "Cancel", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, config: AppConfig | None = None) -> None:
        super().__init__()
        self.config = config or AppConfig()
        self.store_note = ""
        self.profiles: dict[str, DeviceProfile] = {**catalog(), **self._stored_profiles(), **self.config.profiles}
        self.device_id, self.device_note = self._pick_device()
        self._sampler: Sampler | None = None

    def _stored_profiles(self) -> dict[str, DeviceProfile]:
        """Measured and imported profiles, and `local`; a broken store is a note, not a crash."""
        import sqlite3

        from rooftop.store.db import StoreError
        from rooftop.store.runs import Store

        try:
            store = Store.open_existing(self.config.db_path)
            if store is None:
                return {}
            with store:
                found = store.profiles()
                local = store.local_profile()
        except (StoreError, sqlite3.DatabaseError, OSError) as exc:
            self.store_note = f"store unavailable: {exc}"
            return {}
        if local is not None:
            found["local"] = local
        return found

    def run_points(self, profile: DeviceProfile) -> list:
        """The sample points of the stored run behind a measured or imported profile ([] if unreadable)."""
        import sqlite3

        from rooftop.models.plotdata import sample_series
        from rooftop.store.db import StoreError
        from rooftop.store.runs import Store

        run_id = profile.extra.get("run_id")
        try:
            store = Store.open_existing(self.config.db_path) if run_id else None
            if store is None:
                return []
            with store:
                return sample_series(store.samples(str(run_id)), profile.id)
        except (StoreError, sqlite3.DatabaseError, OSError):
            return []

    def _pick_device(self) -> tuple[str, str]:
        if self.config.device:
            return self.config.device, ""
        if "local" in self.profiles:
            return "local", "showing local: this machine's latest measured profile"
        from rooftop.probes.identify import local_reference_profile

        found = local_reference_profile()
        if found is not None:
            return found.id, f"showing {found.id}, the reference profile of this machine's GPU"
        return FALLBACK_DEVICE, f"no known GPU here: showing {FALLBACK_DEVICE} (reference); pick any device in the tabs"

    def compose(self) -> ComposeResult:
        yield Header()
        other = self.config.compare_with or ("h200" if self.device_id != "h200" else "h100")
        with TabbedContent(initial=self.config.initial_tab, id="tabs"):
            with TabPane("1 Live", id="live"):
                yield Live(id="live-pane")
            with TabPane("2 Roofline", id="roofline"):
                yield Roofline(self.profiles, self.device_id, id="roofline-pane")
            with TabPane("3 What-if", id="whatif"):
                yield WhatIf(self.profiles, self.device_id, id="whatif-pane")
            with TabPane("4 Compare", id="compare"):
                yield Compare(self.profiles, self.device_id, other, id="compare-pane")
            with TabPane("5 History", id="history"):
                yield History(self.config.db_path, self.config.export_dir, id="history-pane")
            with TabPane("6 LLM", id="llm"):
                yield Llm(self.profiles, self.device_id, id="llm-pane")
        yield Footer()

    def on_mount(self) -> None:
        if self.device_note:
            self.notify(self.device_note, timeout=6)
        if self.store_note:
            self.notify(self.store_note, severity="warning", timeout=8)
        if self.config.sampler is not None:
            live = self.query_one(Live)
            self._sampler = self.config.sampler()
            self._sampler.on_snapshot = lambda s: live.post_message(Telemetry(s))
            self._sampler.start()
        if self.config.autostart and "local" not in self.profiles:
            self.notify("no measurement of this machine yet: measuring it now (quick plan) — c cancels", timeout=8)
            self.query_one(TabbedContent).active = "live"
            self.action_measure()

    def on_unmount(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()

    # -- cross-tab wiring ------------------------------------------------------------

    @on(WhatIf.Changed)
    def _op_changed(self, message: WhatIf.Changed) -> None:
        self.query_one(Roofline).show_op(message.analysis)
        self.query_one(Compare).show_op(message.analysis)

    @on(WhatIf.Pinned)
    def _op_pinned(self, message: WhatIf.Pinned) -> None:
        self.query_one(Roofline).pin(message.analysis)

    # -- measuring ---------------------------------------------------------------------

    @property
    def measuring(self) -> bool:
        return any(w.group == "measure" and w.is_running for w in self.workers)

    def action_measure(self) -> None:
        if self.measuring:
            self.notify("a measurement is already running (c cancels it)", timeout=3)
            return
        self.measure()

    def action_cancel(self) -> None:
        if self.measuring:
            self.workers.cancel_group(self, "measure")
            self.notify("cancelling: the point in flight finishes or is dropped; everything measured is kept",
                        timeout=4)

    @work(thread=True, exclusive=True, exit_on_error=False, group="measure", description="measuring")
    def measure(self) -> object:
        """Run the plan in a thread; only messages reach the UI (harlequin's pattern)."""
        from rooftop.tui.measuring import measure_run

        worker = get_current_worker()
        plan = self.config.plan()
        self.post_message(MeasureStarted(plan.name, len(plan.steps), f"{plan.backend.spec} ({plan.backend.info.name})"))
        result = measure_run(
            plan, self.config.db_path, store=self.config.save, sampler=self._sampler,
            cancel=worker.cancelled_event,  # toolong's pattern: the domain loop checks the worker's event
            on_sample=lambda p, s, c: self.post_message(SampleTaken(p, s, c)),
            on_store_error=lambda m: self.post_message(StoreProblem(m)),
        )
        self.post_message(MeasureFinished(result))
        return result

    @on(MeasureStarted)
    def _started(self, m: MeasureStarted) -> None:
        self.query_one(MeasurePanel).started(m.plan, m.points, m.device)

    @on(SampleTaken)
    def _sample(self, m: SampleTaken) -> None:
        self.query_one(MeasurePanel).add(m.progress, m.sample, m.calibration)

    @on(MeasureFinished)
    def _finished(self, m: MeasureFinished) -> None:
        result = m.result
        self.query_one(MeasurePanel).finished(result)
        self.notify(f"measurement {result.status}: {len(result.samples)} points", timeout=5,
                    severity="information" if result.status != "failed" else "error")
        self.reload_profiles()
        if result.status == "complete" and "local" in self.profiles:
            roofline = self.query_one(Roofline)
            before = roofline.device_id
            roofline.select_device("local")  # the new measurement, with what was shown before overlaid
            if before != "local":
                roofline.query_one("#rl-overlay").value = before

    @on(StoreProblem)
    def _store_problem(self, m: StoreProblem) -> None:
        self.notify(m.message, severity="warning", timeout=8)

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        """The one place worker failures surface (a probe that could not even start, a bug)."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            err = event.worker.error
            self.notify(f"{event.worker.description} failed: {err}", severity="error", timeout=10)
            self.query_one(MeasurePanel).query_one("#ms-status").update(f"failed: {err}")

    def reload_profiles(self, history: bool = True) -> None:
        """Pick up new measured or renamed profiles in every device list."""
        self.profiles = {**catalog(), **self._stored_profiles(), **self.config.profiles}
        for pane in (self.query_one(Roofline), self.query_one(WhatIf), self.query_one(Compare), self.query_one(Llm)):
            pane.set_profiles(self.profiles)
        if history:
            self.query_one(History).reload()

    @on(History.StoreChanged)
    def _store_changed(self) -> None:
        self.reload_profiles(history=False)

    # -- actions -----------------------------------------------------------------------

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_help(self) -> None:
        self.push_screen(HelpScreen())


def create_app(config: AppConfig | None = None) -> RooftopApp:
    """The app as the command line starts it; tests pass a config of their own."""
    return RooftopApp(config)
