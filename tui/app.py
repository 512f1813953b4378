"""The rooftop Textual app: five tabs over one set of device profiles.

One factory, `create_app`, serves the command line and the tests. Long work
runs in thread workers that only post messages; the UI shows, models compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header, TabbedContent, TabPane

from rooftop.models.catalog import catalog
from rooftop.models.profile import DeviceProfile
from rooftop.probes.telemetry import Sampler
from rooftop.tui.comparepane import Compare
from rooftop.tui.historypane import History
from rooftop.tui.livepane import Live, Telemetry
from rooftop.tui.llmpane import Llm
from rooftop.tui.rooflinepane import Roofline
from rooftop.tui.whatif import WhatIf
from rooftop.tui.widgets import HelpScreen

TABS = ("live", "roofline", "whatif", "compare", "history", "llm")
FALLBACK_DEVICE = "h100"


def default_sampler() -> Sampler:
    return Sampler()  # 4 Hz


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

    # -- actions -----------------------------------------------------------------------

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_help(self) -> None:
        self.push_screen(HelpScreen())


def create_app(config: AppConfig | None = None) -> RooftopApp:
    """The app as the command line starts it; tests pass a config of their own."""
    return RooftopApp(config)
