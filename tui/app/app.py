"""The rooftop Textual app: seven tabs over one set of device profiles.

One factory, `create_app`, serves the command line and the tests. Long work
runs in thread workers that only post messages; the UI shows, models compute.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from pathlib import Path
from typing import Callable

from rooftop.models.analysis import Analysis, analyze
from rooftop.models.catalog import catalog, lookup_device
from rooftop.models.ops import Op
from rooftop.models.plotdata import Series
from rooftop.models.profile import DeviceProfile, NoRoof
from rooftop.models.safetext import safe_text
from rooftop.models.spec import SpecError, parse_spec
from rooftop.models.units import fmt_count
from rooftop.probes.telemetry import Sampler, Snapshot
from rooftop.store.db import StoreError
from rooftop.store.fleets import by_device_key
from rooftop.tui.app.messages import (
    FileWritten,
    MeasureFinished,
    MeasureStarted,
    SampleTaken,
    StoreProblem,
    Telemetry,
)
from rooftop.tui.app.panes.compare import Compare
from rooftop.tui.app.panes.history import History
from rooftop.tui.app.panes.live import Live, MeasurePanel
from rooftop.tui.app.panes.llm import Llm
from rooftop.tui.app.panes.profile import ProfilePane
from rooftop.tui.app.panes.roofline import Roofline
from rooftop.tui.app.panes.whatif import DEFAULT_SPEC, WhatIf
from rooftop.tui.app.state import AppConfig, RunView, StoreAtStart, measured_here
from rooftop.tui.app.widgets import HelpScreen
from rooftop.tui.app.widgets.base import closing
from rooftop.tui.services.context import (
    FALLBACK_DEVICE,
    cannot_create,
    default_device,
    not_this_gpu,
    profiles_on_offer,
    run_points,
    store_session,
)
from rooftop.tui.services.measure import measure_run
from rooftop.tui.services.stopsignals import leave_terminal, on_stop_signals
from rooftop.tui.share.out import wrote_line
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.reactive import var
from textual.screen import Screen
from textual.widget import MountError, Widget
from textual.widgets import Footer, Header, Input, TabbedContent, TabPane, Tabs
from textual.worker import Worker, WorkerState, get_current_worker

TABS = ("live", "roofline", "whatif", "compare", "history", "llm", "profile")
# The widget that gets the focus when a tab is shown, so the tab's own keys work at once.
TAB_HOME = {"whatif": "WhatIf", "history": "#hist-table", "llm": "Llm", "profile": "#prof-runs"}
NARROW_BELOW = 90  # columns: below this, tabs stack or hide their chart (app.tcss: Screen.-narrow)
NOTE_S = 3  # seconds a note (toast) stays: it covers the chart's lower right meanwhile
SHORT_BELOW = 30  # rows: below this, the header goes and Live packs its traces (app.tcss: Screen.-short)


class Tabbed(TabbedContent):
    """TabbedContent that follows the focus only while the focus is still there.

    Textual shows the pane of a widget that gets the focus, through a message handled later. With
    fast keys (`3 4 6`) the What-if pane's focus message arrived after `6` had shown the LLM tab
    and pulled What-if back in front; a message whose widget has lost the focus since is stale.
    """

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        focused = self.app.focused
        if focused is None or event.tab_pane not in focused.ancestors_with_self:
            event.stop()
            event.prevent_default()  # Textual would still run TabbedContent's own handler


class RooftopApp(App[None]):
    """The app. What several tabs show lives in the reactive attributes below: each tab watches
    what it shows once it is built (and reads it then), so the app never reaches into a tab that
    may not be built yet — a run ending while keys build tabs crashed it that way."""

    # The app's state: tabs watch these (self.watch(self.app, name, ...)) from their on_mount.
    profiles: var[dict[str, DeviceProfile]] = var(dict, init=False)  # every device list
    current: var[Analysis | None] = var(None, init=False)  # the What-if analysis
    pinned: var[list[Op]] = var(list, init=False)  # ops pinned to the Roofline tab, kept in the store
    run_view: var[RunView] = var(RunView, init=False, always_update=True)  # set again on each sample
    device_id: var[str] = var(FALLBACK_DEVICE, init=False, always_update=True)  # what Roofline shows
    overlay_id: var[str | None] = var(None, init=False, always_update=True)  # the Roofline tab's second device
    curve: var[str] = var("bandwidth", init=False)  # the Live tab's left chart (v: the next sweep)
    telemetry: var[Snapshot | None] = var(None, init=False, always_update=True)  # the sampler's latest
    runs_changed: var[int] = var(0, init=False)  # counts changes to the stored runs (History reloads)

    CSS_PATH = "app.tcss"
    TITLE = "rooftop"
    SUB_TITLE = "roofline lab"
    # Textual sets these classes on the screen as the terminal resizes; app.tcss lays out by them.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-normal")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT_BELOW, "-tall")]
    BINDINGS = [
        Binding("1", "tab('live')", "Live", show=False),
        Binding("2", "tab('roofline')", "Roofline", show=False),
        Binding("3", "tab('whatif')", "What-if", show=False),
        Binding("4", "tab('compare')", "Compare", show=False),
        Binding("5", "tab('history')", "History", show=False),
        Binding("6", "tab('llm')", "LLM", show=False),
        Binding("7", "tab('profile')", "Profile", show=False),
        Binding("m", "measure", "Measure"),
        Binding("c", "cancel", "Cancel", show=False),
        Binding("escape", "escape", "Leave field / cancel", show=False),
        Binding("v", "next_curve", "Curve", show=False),
        # the tab on show to a file (app/export.py); History's own `e` exports its run as JSON
        Binding("e", "export(False)", "Export", show=False),
        Binding("E", "export(True)", "Export SVG", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def get_default_screen(self) -> Screen:
        """The first screen, with its breakpoint classes already on.

        Textual adds them at the first resize, after every widget is styled, and so
        would style them all a second time before the first frame.
        """
        screen = super().get_default_screen()
        width, height = self.size
        screen.add_class(*screen._get_breakpoint_classes(width, self.HORIZONTAL_BREAKPOINTS),
                         *screen._get_breakpoint_classes(height, self.VERTICAL_BREAKPOINTS), update=False)
        return screen

    def __init__(self, config: AppConfig | None = None) -> None:
        super().__init__()
        self.config = config or AppConfig()
        self._unsignal: Callable[[], None] = lambda: None  # removes the stop-signal handlers (on_mount's)
        start = self.read_store()
        self.store_note = start.note
        self.measured_here = start.measured_here
        self.cannot_keep = start.cannot_keep
        self.profiles: dict[str, DeviceProfile] = {**catalog(), **start.profiles, **self.config.profiles}
        self.device_id, self.device_note = self._pick_device()
        self._sampler: Sampler | None = None
        # State the tabs read when they mount (tabs other than the first mount after the first frame).
        self.current = self._first_op()
        self.pinned = self._saved_pins(start.pins)
        self.run_view = self._last_run_here()
        self._unbuilt: dict[str, Callable[[], Widget]] = {}  # tabs not shown yet

    def _first_op(self) -> Analysis | None:
        """The What-if tab's opening op (a batch-1 decode GEMV) on the first device."""
        try:
            return analyze(parse_spec(DEFAULT_SPEC), self.profiles[self.device_id])
        except (NoRoof, KeyError):
            return None

    def _saved_pins(self, specs: tuple[str, ...]) -> list[Op]:
        """The pinned ops saved in the store; one that no longer parses is named in a note, not dropped."""
        ops, bad = [], []
        for spec in specs:
            try:
                ops.append(parse_spec(spec))
            except SpecError:
                bad.append(spec)
        if bad:
            self.store_note = f"saved pins that no longer parse were left out: {'; '.join(bad)}"
        return ops

    def read_store(self) -> StoreAtStart:
        """The profiles on offer (services' `profiles_on_offer`), the saved pins, whether this host was measured
        and whether a run can be kept; a broken store is a note, not a crash."""
        db = self.config.db_path
        try:
            with store_session(db) as store:
                if store is None:
                    return StoreAtStart(cannot_keep=cannot_create(db))
                note, cannot_keep = "", ""
                if store.room is not None:
                    cannot_keep = f"it has no room to write: {store.room.words}"
                    note = f"the store is read only for now: {store.room.words}"
                elif store.read_only:
                    cannot_keep = f"it is read-only: {store.read_only}"
                found = profiles_on_offer(store)
                pins = tuple(str(o["spec"]) for o in store.saved_ops())
                here = store.latest(kind="measurement", where=measured_here) is not None
        except StoreError as exc:
            return StoreAtStart(cannot_keep=str(exc), note=f"store unavailable: {exc}")
        # a stored name reaches many widgets: escaped here once (control characters shown, never sent)
        shown = {safe_text(k): dataclasses.replace(p, id=safe_text(p.id), name=safe_text(p.name))
                 for k, p in found.items()}
        return StoreAtStart(shown, pins, here, cannot_keep, note)

    def _last_run_here(self) -> RunView:
        """This machine's last measurement in the store (any status), for the Live tab after a restart."""
        if not self.measured_here:
            return RunView()
        try:
            with store_session(self.config.db_path) as store:
                if store is None:
                    return RunView()
                mine = store.latest(kind="measurement", where=measured_here)
                if mine is None:
                    return RunView()
                return RunView.from_store(mine, store.samples(mine.id), store.stored_profile(mine.id))
        except StoreError:
            return RunView()  # the store's trouble is said once, by read_store

    def run_points(self, profile: DeviceProfile) -> list[Series]:
        """The sample points of the stored run behind a measured or imported profile ([] if unreadable)."""
        try:
            with store_session(self.config.db_path) as store:
                return [] if store is None else run_points(store, [profile])
        except StoreError:
            return []

    def _pick_device(self) -> tuple[str, str]:
        """The first device shown, and a note saying why when it was not named (the default-device rule)."""
        if self.config.device:
            return lookup_device(self.config.device, self.profiles).id, ""
        chosen = default_device(self.profiles)
        notes = {
            "local": "showing local: this machine's latest measured profile",
            "catalog": f"showing {chosen.profile.id}, the {chosen.profile.source} profile of this machine's GPU",
            "unknown": f"{not_this_gpu(chosen)}; m measures it now",
            "fallback": f"no known GPU here: showing {FALLBACK_DEVICE} (reference); pick any device in the tabs",
        }
        return ("local" if chosen.why == "local" else chosen.profile.id), notes[chosen.why]

    def compose(self) -> ComposeResult:
        yield Header()
        other = self.config.compare_with or ("h200" if self.device_id != "h200" else "h100")
        panes = {
            "live": ("1 Live", lambda: Live(id="live-pane")),
            "roofline": ("2 Roofline", lambda: Roofline(self.profiles, self.device_id, overlay=self.overlay_id,
                                                       id="roofline-pane")),
            "whatif": ("3 What-if", lambda: WhatIf(self.profiles, self.device_id, id="whatif-pane")),
            "compare": ("4 Compare", lambda: Compare(self.profiles, self.device_id, other, id="compare-pane")),
            "history": ("5 History", lambda: History(self.config.db_path, self.config.export_dir, id="history-pane")),
            "llm": ("6 LLM", lambda: Llm(self.profiles, self.device_id, id="llm-pane")),
            "profile": ("7 Profile", lambda: ProfilePane(self.config.db_path, id="profile-pane")),
        }
        with Tabbed(initial=self.config.initial_tab, id="tabs"):
            for tab, (title, make) in panes.items():
                with TabPane(title, id=tab):
                    # Only the first tab is built now (first frame fast); each other one is built
                    # when first shown, and reads what it needs from the app's state.
                    if tab == self.config.initial_tab:
                        yield make()
                    else:
                        self._unbuilt[tab] = make
        yield Footer()

    @on(TabbedContent.TabActivated)
    def _build_tab(self, event: TabbedContent.TabActivated) -> None:
        tab = event.pane.id or ""
        if closing(self) or not event.pane.is_mounted:
            return  # quitting: a tab key typed just before `q` must not mount into a pane being removed
        make = self._unbuilt.pop(tab, None)
        if make is not None:
            event.pane.mount(make())
        self.call_after_refresh(self._focus_home, tab)

    def _focus_home(self, tab: str) -> None:
        """Focus the shown tab's home, so its keys work at once and show in the footer: History's
        table (r, d, e), the What-if and LLM panes ([ ] p , .); on the other tabs the tab bar."""
        if self.query_one(TabbedContent).active != tab:
            return  # another tab was asked for since (fast keys): focusing here would pull this one back
        pane = self.query_one(f"#{tab}")
        focused = self.focused
        if focused is not None and pane in focused.ancestors_with_self:
            return  # already in the tab (a click on a field): leave it there
        homes = pane.query(TAB_HOME[tab]) if tab in TAB_HOME else None
        if homes:
            homes.first().focus()
        elif focused is None:  # after a number key: the tab bar, where ← → move between tabs
            self.query_one(TabbedContent).query_one(Tabs).focus()

    def on_mount(self) -> None:
        self._unsignal = on_stop_signals(asyncio.get_running_loop(), self._stop_signal)
        # First-launch notes are short: a toast sits over the chart's lower right while it lasts.
        if self.device_note:
            self.notify(self.device_note, timeout=NOTE_S)
        if self.store_note:
            self.notify(self.store_note, severity="warning", timeout=8)
        if self.config.sampler is not None:
            self._sampler = self.config.sampler()
            if self._sampler.local is None:  # live DRAM bandwidth as a fraction of this machine's measured B
                self._sampler.local = self.profiles.get("local")
            if self._sampler.own is None:  # … and each GPU's against its own, where it was measured
                self._sampler.own = by_device_key(self.profiles.values())
            self._sampler.on_snapshot = lambda s: self.post_message(Telemetry(s))  # thread-safe
            self._sampler.start()
        if self.config.autostart and not self.measured_here and self.config.save and self.cannot_keep:
            # a run it could not keep would cost the user minutes for nothing: say why on the Live tab instead
            self.query_one(TabbedContent).active = "live"
            self.run_view = RunView(held=safe_text(
                f"no measurement of this machine yet, and none started by itself: the store cannot keep a run "
                f"({self.cannot_keep}) — press m to measure anyway (not kept), or start rooftop with --db PATH"))
        elif self.config.autostart and not self.measured_here:
            self.notify("no measurement of this machine yet: measuring it now (quick plan) — c cancels",
                        timeout=NOTE_S)
            self.query_one(TabbedContent).active = "live"
            self.action_measure()
        elif self.config.autostart and not ("local" in self.profiles and self.profiles["local"].is_roofline()):
            self.notify("this machine's measurements so far are partial (cancelled, interrupted, or --only): "
                        "m measures it again", timeout=NOTE_S)

    def _stop_signal(self, signum: int) -> None:
        """SIGHUP (the SSH session closing) or SIGTERM: as `c` then `q`. A measurement is cancelled and
        kept with its ceilings: its thread ends the run before the process exits. Exit 128 + signal."""
        if signum == getattr(signal, "SIGHUP", None):
            leave_terminal()  # the terminal is gone: the screen's last writes go nowhere instead of failing
        self.workers.cancel_group(self, "measure")
        self.exit(return_code=128 + signum)

    def _handle_exception(self, error: Exception) -> None:
        """Once quit was asked for, a widget that finds its children already removed (a tab mounted by a
        key typed just before `q`: its Mount arrives during teardown) is not a crash; anything else is."""
        if closing(self) and isinstance(error, (NoMatches, MountError)):
            return
        super()._handle_exception(error)

    def on_unmount(self) -> None:
        self._unsignal()
        if self._sampler is not None:
            self._sampler.stop()

    # -- cross-tab wiring ------------------------------------------------------------

    @property
    def sampler(self) -> Sampler | None:
        return self._sampler

    def on_telemetry(self, message: Telemetry) -> None:
        # A panel mounting later (a lazy tab) fills itself from the sampler's history in its on_mount.
        self.telemetry = message.snapshot

    @on(WhatIf.Changed)
    def _op_changed(self, message: WhatIf.Changed) -> None:
        self.current = message.analysis

    @on(WhatIf.Pinned)
    def _op_pinned(self, message: WhatIf.Pinned) -> None:
        """p pins the What-if op to the Roofline tab, or unpins it if it is pinned; the store keeps the pins."""
        op = message.analysis.op
        same = [p for p in self.pinned if p.spec() == op.spec()]  # a spec is the pin's identity (as stored)
        keep = not same
        self.pinned = [*self.pinned, op] if keep else [p for p in self.pinned if p not in same]
        problem = self._save_pin(op, keep)
        verb = "pinned" if keep else "unpinned"
        if problem:
            self.notify(f"{verb} {op.describe()} for this session only: {problem}", severity="warning", timeout=6)
        else:
            self.notify(f"{verb} {op.describe()}" + (" (on the Roofline tab)" if keep else ""), timeout=3)

    def _save_pin(self, op: Op, keep: bool) -> str:
        """Save or forget a pin in the store: '' when done, else why not (the pin still holds in memory)."""
        try:
            with store_session(self.config.db_path, create=True) as store:
                assert store is not None  # create=True: opened or raised
                if keep:
                    store.save_op(op.spec(), op.spec(), [self.device_id])
                else:
                    store.delete_op(op.spec())
        except StoreError as exc:
            return str(exc)
        return ""

    # -- measuring ---------------------------------------------------------------------

    @property
    def measuring(self) -> bool:
        return any(w.group == "measure" and w.is_running for w in self.workers)

    def action_measure(self) -> None:
        if self.measuring:
            self.notify("a measurement is already running (c cancels it)", timeout=3)
            return
        self.run_view = RunView(starting=True)  # torch takes seconds to load: say so at once
        self.measure()

    def action_cancel(self) -> None:
        if self.measuring:
            self.workers.cancel_group(self, "measure")
            self.notify("cancelling: the point in flight finishes or is dropped; everything measured is kept",
                        timeout=4)

    def action_next_curve(self) -> None:
        curves = MeasurePanel.CURVES
        self.curve = curves[(curves.index(self.curve) + 1) % len(curves)]

    @work(thread=True, exclusive=True, exit_on_error=False, group="measure", description="measuring")
    def measure(self) -> object:
        """Run the plan in a thread; only messages reach the UI (harlequin's pattern)."""
        worker = get_current_worker()
        plan = self.config.plan()
        info = plan.backend.info
        threads = f", {fmt_count(info.units, 'thread')}" if info.kind == "cpu" and info.units else ""
        self.post_message(MeasureStarted(plan.name, len(plan.steps), f"{plan.backend.spec} ({info.name}){threads}"))
        result = measure_run(
            plan, self.config.db_path, store=self.config.save, sampler=self._sampler,
            cancel=worker.cancelled_event,  # toolong's pattern: the domain loop checks the worker's event
            on_sample=lambda p, s, c: self.post_message(SampleTaken(p, s, c)),
            on_store_error=lambda m: self.post_message(StoreProblem(m)),
            on_note=lambda m: self.post_message(StoreProblem(m)),
        )
        self.post_message(MeasureFinished(result))
        return result

    @on(MeasureStarted)
    def _started(self, m: MeasureStarted) -> None:
        self.run_view = RunView(m.plan, m.points, m.device)

    @on(SampleTaken)
    def _sample(self, m: SampleTaken) -> None:
        self.run_view.add(m.progress, m.sample, m.calibration)
        self.run_view = self.run_view  # always_update: the Live tab shows the new point

    @on(MeasureFinished)
    def _finished(self, m: MeasureFinished) -> None:
        result = m.result
        self.run_view.result = result
        self.run_view = self.run_view
        self.notify(f"measurement {result.status}: {fmt_count(len(result.samples), 'point')}", timeout=NOTE_S,
                    severity="information" if result.status != "failed" else "error")
        self.reload_profiles()
        if self._sampler is not None:  # live DRAM bandwidth against the newest measured B
            self._sampler.set_local(self.profiles.get("local"))
        if result.status == "complete" and "local" in self.profiles:
            before = self.device_id  # show the new measurement, with what was shown before overlaid
            self.overlay_id = before if before != "local" else self.overlay_id
            self.device_id = "local"

    @on(FileWritten)
    def _file_written(self, m: FileWritten) -> None:
        if m.error:
            self.notify(safe_text(m.error), severity="error", timeout=8)
            return

        self.notify(safe_text(wrote_line(Path(m.path))), timeout=6)

    @on(StoreProblem)
    def _store_problem(self, m: StoreProblem) -> None:
        self.notify(m.message, severity="warning", timeout=8)

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        """The one place worker failures surface (a probe that could not even start, a bug)."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            err = event.worker.error
            self.notify(f"{event.worker.description} failed: {err}", severity="error", timeout=10)
            self.run_view.error = str(err)
            self.run_view = self.run_view

    def reload_profiles(self, history: bool = True) -> None:
        """Pick up new measured or renamed profiles in every device list."""
        self.profiles = {**catalog(), **self.read_store().profiles, **self.config.profiles}
        if history:
            self.runs_changed += 1

    @on(History.StoreChanged)
    def _store_changed(self) -> None:
        self.reload_profiles(history=False)

    # -- actions -----------------------------------------------------------------------

    def action_export(self, svg: bool) -> None:
        """e / E: the Roofline, LLM or Profile tab on show to a file (the pane's export_file); History's run as
        JSON wherever its focus is; elsewhere, a note of where it works."""
        tab = self.query_one(TabbedContent).active
        panes = self.query(f"#{tab}-pane")
        pane = panes.first() if panes else None
        if isinstance(pane, History):
            pane.action_export()
        elif pane is not None and hasattr(pane, "export_file"):
            pane.export_file(svg)
        else:
            self.notify("e exports the Roofline, LLM and Profile tabs (History: the selected run)", timeout=4)

    def action_tab(self, tab: str) -> None:
        # A widget of the old tab that kept the focus would pull its tab back to the front.
        self.set_focus(None)
        self.query_one(TabbedContent).active = tab
        homes = self.query_one(f"#{tab}").query(TAB_HOME[tab]) if tab in TAB_HOME else None
        if homes:  # built: its home takes the keys that came with this one ("3]]"), not after a refresh
            self.screen.set_focus(homes.first())

    def action_escape(self) -> None:
        """Esc leaves a text field for the tab's home, so 1–7, m, q and the tab's own keys ([ ] p)
        work again (with no focus at all they would wait for another tab); elsewhere it cancels."""
        if isinstance(self.focused, Input):
            self.set_focus(None)
            self._focus_home(self.query_one(TabbedContent).active)
        else:
            self.action_cancel()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())


def create_app(config: AppConfig | None = None) -> RooftopApp:
    """The app as the command line starts it; tests pass a config of their own."""
    return RooftopApp(config)
