"""A text field whose editing keys act in the order they were typed."""

from __future__ import annotations

from textual import events
from textual.widgets import Input


class TextField(Input):
    """An Input that runs its own key bindings (ctrl+u, backspace, ←, home, …) as the key arrives.

    Textual inserts a typed character as soon as the field reads its key, but runs the field's
    bindings only once the key has bubbled up to the app through every container's message queue.
    A pane still busy with the last edit's Changed messages held ctrl+u back behind the text typed
    after it, and ctrl+u then deleted that text. Here the field's own bindings run first, in order.
    """

    async def _on_key(self, event: events.Key) -> None:
        if not event.is_printable:
            for binding in self._bindings.key_to_bindings.get(event.key, ()):
                if not binding.priority and await self.app.run_action(binding.action, self):
                    event.stop()
                    event.prevent_default()
                    return
        await super()._on_key(event)
