"""Fast keys: keys that arrive faster than tabs are built, and dialogs closed twice at once.

A terminal delivers keys as they come, without waiting for the app to settle: a run ending
while a tab is still being built must not reach widgets that do not exist yet. Keys here go
straight to the driver, as a terminal's would, not through Pilot.press (which waits for idle).
"""

from __future__ import annotations

from pathlib import Path

from textual import events

from test_tui_history import seeded_db
from test_tui_measure import tiny_plan, wait_for
from rooftop.store.runs import Store
from rooftop.tui.app import AppConfig, create_app
from rooftop.tui.historypane import NameScreen

ROUNDS = 8  # before the tabs read the app's state, 6 of 10 rounds like these crashed


CHARS = {"escape": "\x1b", "enter": "\r"}


def send_keys(app, keys) -> None:  # noqa: ANN001 - keys: a str of one-character keys, or key names
    """Queue `keys` at once, as a terminal does when they come faster than the app reads them."""
    for k in keys:
        event = events.Key(k, CHARS.get(k, k))
        event.set_sender(app)
        app._driver.send_message(event)


async def test_fast_keys_while_a_run_ends_never_crash(tmp_path: Path) -> None:
    """Empty store, the app measuring at start; c 3 4 6 5 m c 3 4 6 as fast as they come."""
    for i in range(ROUNDS):
        app = create_app(AppConfig(sampler=None, db_path=tmp_path / f"r{i}.db", autostart=True,
                                   plan=tiny_plan("launch")))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.2)
            send_keys(app, "c3465mc346")
            await pilot.pause(0.3)
            await wait_for(pilot, lambda: not app.measuring)
            assert app.query_one("#llm-ops").row_count  # the last tab built, whole
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
            send_keys(app, keys)
            await pilot.pause(0.2)
            assert not isinstance(app.screen, NameScreen), keys
            await pilot.press("r", *"lab")
        await pilot.press("enter", "enter")  # Enter twice: saved once, closed once
        await pilot.pause(0.2)
        assert not isinstance(app.screen, NameScreen)
    assert app._exception is None and not app.return_code
    with Store.open(tmp_path / "r.db") as store:
        assert store.run(rid).name == "lab"
