"""A pane's read of the store, for a thread worker: what it read, or why it could not, never raised.

The panes read in `textual.work(thread=True)` workers (as harlequin loads its catalog) and post what came back
as a message, so the UI thread never waits on SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

from rooftop.store.db import StoreError
from rooftop.store.runs import Store
from rooftop.tui.services.context import store_session

T = TypeVar("T")


def read_store(db_path: Path | None, read: Callable[[Store], T]) -> tuple[T | None, str]:
    """(`read` of the store at `db_path`, ''); (None, '') when there is no store yet; (None, why) when unreadable."""
    try:
        with store_session(db_path) as store:
            return (None, "") if store is None else (read(store), "")
    except StoreError as exc:
        return None, str(exc)
