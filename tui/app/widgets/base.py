"""Small shared pieces: an error line, watching the app's state, device pickers."""


from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from rich.text import Text
from textual.dom import DOMNode
from textual.widget import Widget
from textual.widgets import Select, Static

from rooftop.models.safetext import safe_text


class ErrorLine(Static):
    """An inline error under a form; it takes no row while there is none (a row counts at 24 lines)."""

    DEFAULT_CSS = """
    ErrorLine { height: auto; display: none; }
    ErrorLine.-shown { display: block; }
    """

    def show(self, exc: Exception | None) -> None:
        """Show what went wrong (the exception's first argument), or nothing."""
        self.set_class(exc is not None, "-shown")
        self.update("" if exc is None else Text(f"✗ {exc.args[0] if exc.args else exc}", style="bold red"))



def closing(widget: DOMNode) -> bool:
    """The app is quitting: a pane whose Mount arrives now finds its children already removed, so it
    fills nothing (keys typed just before `q` mounted it)."""
    return bool(getattr(widget.app, "_exit", False))


def watch_app(widget: Widget, init: bool = True, **callbacks: Callable[[Any], None]) -> None:
    """Call each callback with the app's state of that name now (unless not `init`), and again
    whenever it changes (each state has a type of its own: the callback is given that one).

    A tab calls this from its on_mount, once its widgets exist: it reads what it shows as it is
    built and follows it afterwards, and the app never has to reach into a tab that may not be
    built yet. State the app does not keep (a test's bare App) is left alone.
    """
    reactives = getattr(type(widget.app), "_reactives", {})
    for name, callback in callbacks.items():
        if name in reactives:
            widget.watch(widget.app, name, callback, init=init)



def device_options(ids: Iterable[str]) -> list[tuple[Text, str]]:
    """Select options for device ids: each prompt a Text (a Select reads a str as markup, and a run's
    name may hold '[/bold]'), its control characters written visibly."""
    return [(Text(safe_text(i)), i) for i in ids]



def refresh_select(select: Select, ids: list[str], extra: Sequence[str] = ()) -> None:
    """New options for a device Select, keeping its value when it still exists."""
    keep = select.value
    options = device_options(list(extra) + list(ids))
    with select.prevent(Select.Changed):
        select.set_options(options)
        if keep in [v for _, v in options]:
            select.value = keep
