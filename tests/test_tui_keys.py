"""Fast keys: keys that arrive faster than tabs are built, and dialogs closed twice at once.

A terminal delivers keys as they come, without waiting for the app to settle: a run ending
while a tab is still being built must not reach widgets that do not exist yet. Keys here go
straight to the driver, as a terminal's would, not through Pilot.press (which waits for idle).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from textual import events
from textual.widgets import DataTable, Input, TabbedContent

from test_tui_history import seeded_db
from test_tui_measure import tiny_plan, wait_for
from rooftop.store.runs import Store
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.app.panes.history import NameScreen
from rooftop.tui.app.panes.llm import Llm

# Each round starts an app (tabs build once per app): 2–8 s each on a busy 2-core box. Before the
# tabs read the app's state, 6 of 10 rounds crashed; ROOFTOP_FAST_KEY_ROUNDS=20 for a 20-run check.
ROUNDS = int(os.environ.get("ROOFTOP_FAST_KEY_ROUNDS", "4"))
CHARS = {"escape": "\x1b", "enter": "\r", "right_square_bracket": "]"}


async def send_keys(app, keys) -> None:  # keys: a str of one-character keys, or key names
    """Send `keys` as a terminal does when they come faster than the app handles them: each as it
    comes, without waiting for the app to finish with the one before (Pilot.press waits)."""
    for k in keys:
        event = events.Key(k, CHARS.get(k, k))
        event.set_sender(app)
        app._driver.send_message(event)
        await asyncio.sleep(0)  # the event loop runs on: a tab may be half built when the next key comes


async def test_fast_keys_while_a_run_ends_never_crash(tmp_path: Path) -> None:
    """Empty store, the app measuring at start; c 3 4 6 5 m c 3 4 6 as fast as they come."""
    for i in range(ROUNDS):
        app = create_app(AppConfig(sampler=None, db_path=tmp_path / f"r{i}.db", autostart=True,
                                   plan=tiny_plan("launch")))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.2)
            await send_keys(app, "c3465mc346")
            # the last key read and its tab built, the second run over (cancelled or complete)
            # (a tab focused late must not pull itself back in front: the keys after it count)
            try:
                await wait_for(pilot, lambda: app._exception is not None or (
                    app.query_one(TabbedContent).active == "llm" and app.query_one(Llm).is_mounted
                    and not app.measuring))
            except AssertionError:
                raise AssertionError(f"round {i}: the keys ended on tab {app.query_one(TabbedContent).active}, "
                                     f"measuring: {app.measuring}") from None
            assert app._exception is None, f"round {i}: {app._exception!r}"
            await pilot.pause()
            assert app.query_one("#llm-ops", DataTable).row_count  # the tab built whole
        assert app._exception is None and not app.return_code, f"round {i}"


async def test_esc_and_enter_together_in_the_rename_dialog(tmp_path: Path) -> None:
    """Esc cancels and the Enter behind it is dropped: no second close, no rename after a cancel."""
    rid = seeded_db(tmp_path / "r.db")
    app = create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", initial_tab="history"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("r", *"lab")
        assert isinstance(app.screen, NameScreen)
        for keys in (["escape", "enter"], ["enter", "escape"]):
            await send_keys(app, keys)
            await pilot.pause(0.2)
            assert not isinstance(app.screen, NameScreen), keys
            await pilot.press("r", *"lab")
        await pilot.press("enter", "enter")  # Enter twice: saved once, closed once
        await pilot.pause(0.2)
        assert not isinstance(app.screen, NameScreen)
    assert app._exception is None and not app.return_code
    with Store.open(tmp_path / "r.db") as store:
        assert store.run(rid).name == "lab"


def test_a_crash_inside_the_app_exits_non_zero(tmp_path: Path, monkeypatch, capsys) -> None:
    """`rooftop` whose app dies of an unhandled exception exits 1, not 0 as if all went well."""
    from textual import constants

    from rooftop.tui import cli
    from rooftop.tui.app import RooftopApp

    def broken(self) -> None:  # a bug anywhere in the app
        raise RuntimeError("a bug in the app")

    monkeypatch.setattr(constants, "DRIVER", "textual.drivers.headless_driver:HeadlessDriver")  # no terminal here
    monkeypatch.setattr(RooftopApp, "on_mount", broken)
    assert cli.main(["--db", str(tmp_path / "r.db")]) == 1
    assert "a bug in the app" in capsys.readouterr().err


def test_the_help_names_every_tab_key() -> None:
    """The help's key table lists each tab the bar has, with its number (it stopped at 6 when Profile came)."""
    from rooftop.tui.app import TABS, RooftopApp
    from rooftop.tui.app.widgets import HELP

    tab_keys = [b for b in RooftopApp.BINDINGS if getattr(b, "action", "").startswith("tab(")]
    assert len(tab_keys) == len(TABS)
    assert f"`1`–`{len(TABS)}`" in HELP
    for binding in tab_keys:
        assert binding.description in HELP, binding.description


async def test_a_tabs_keys_typed_with_its_number_are_not_lost(tmp_path: Path) -> None:
    """`3]]` in one read, from another tab: the two `]` reach What-if (they went to nobody while its focus
    waited for a refresh), so M goes 1 → 4."""
    from rooftop.tui.app.panes.whatif import WhatIf

    app = create_app(AppConfig(sampler=None, db_path=tmp_path / "r.db", device="h100", initial_tab="whatif"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("5")
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "history")
        await pilot.pause()
        await send_keys(app, ["3", "right_square_bracket", "right_square_bracket"])
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "whatif")
        await pilot.pause(0.3)
        assert app.query_one(TabbedContent).active == "whatif"
        assert app.query_one(WhatIf).analysis.op.m == 4


async def burst(app, keys: list[tuple[str, str | None]]) -> None:
    """Keys that came in one read of the terminal: all queued before the app handles the first."""
    for key, char in keys:
        event = events.Key(key, char)
        event.set_sender(app)
        app._driver.send_message(event)
    await asyncio.sleep(0)


def typed(text: str) -> list[tuple[str, str | None]]:
    return [("space" if c == " " else c, c) for c in text]


async def test_text_typed_right_after_ctrl_u_is_kept(tmp_path: Path) -> None:
    """Ctrl+U then a spec, as fast as a paste: the field ends with the spec, every time (a field's own
    editing keys ran only after bubbling up through a pane still busy with the last edit, so ctrl+u came
    after the typed text and deleted it: every round here, 9 of 40 typed by hand)."""
    app = create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", initial_tab="whatif"))
    specs = ("gemm 1 4096 4096 fp16", "norm 4096 4096 bf16", "gemv 8192 8192 bf16", "ew n=1e8 fp32")
    async with app.run_test(size=(80, 24)) as pilot:
        spec = app.query_one("#spec", Input)
        spec.focus()
        await pilot.pause()
        for i in range(3):
            want = specs[i % len(specs)]
            await burst(app, [("ctrl+u", "\x15"), *typed(want)])
            await pilot.pause()
            try:
                await wait_for(pilot, lambda: spec.value == want, timeout=2)
            except AssertionError:
                raise AssertionError(f"round {i}: typed {want!r} after ctrl+u, the field holds {spec.value!r}")
        # each editing key acts where it was typed: "gemm 1 8", ⌫, ←, ⌫, "16 4"
        await burst(app, [("ctrl+u", "\x15"), *typed("gemm 1 8"), ("backspace", "\x7f"), ("left", None),
                          ("backspace", "\x7f"), *typed("16 4")])
        await pilot.pause()
        await wait_for(pilot, lambda: spec.value == "gemm 16 4 ", timeout=2)
        # pasted right after ctrl+u (a terminal's bracketed paste: one event); ctrl+u clears to the cursor
        await burst(app, [("end", None), ("ctrl+u", "\x15")])
        paste = events.Paste("norm 4096 4096 bf16")
        paste.set_sender(app)
        app._driver.send_message(paste)
        await pilot.pause()
        await pilot.pause(0.5)
        assert spec.value == "norm 4096 4096 bf16"
