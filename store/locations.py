"""All of rooftop's paths in one place (platformdirs), overridable for tests.

ROOFTOP_HOME moves everything; ROOFTOP_DB names the database file alone.
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "rooftop"


def data_dir() -> Path:
    """The user data directory (created on demand by whoever writes to it)."""
    home = os.environ.get("ROOFTOP_HOME")
    if home:
        return Path(home)
    import platformdirs  # deferred: platformdirs (~8 ms), not loaded by `rooftop --help`; only without ROOFTOP_HOME

    return Path(platformdirs.user_data_dir(APP, appauthor=False))


def db_path(override: str | os.PathLike[str] | None = None) -> Path:
    """The SQLite database: --db PATH, then ROOFTOP_DB, then the data directory."""
    if override:
        return Path(override)
    env = os.environ.get("ROOFTOP_DB")
    if env:
        return Path(env)
    return data_dir() / "rooftop.db"


def is_chosen(override: str | os.PathLike[str] | None = None) -> bool:
    """Whether the database was named (--db, ROOFTOP_DB) rather than left to the data directory: only the
    data directory is made when missing; a named file's folder must be there (a typo must not make a tree)."""
    return bool(override) or bool(os.environ.get("ROOFTOP_DB"))
