"""The one run keeper (measure, comm, profile): samples committed as they come, a failing store told
once and then left alone, a run cancelled before its first sample removed. Real SQLite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.store import db as dbmod
from rooftop.store.runs import Store
from rooftop.tui.services.keeper import RunKeeper

INFO = {"name": "Test CPU", "kind": "cpu"}


def test_samples_are_committed_as_they_come(tmp_path: Path) -> None:
    keeper = RunKeeper(tmp_path / "r.db")
    rid = keeper.begin(INFO, plan="quick", backend="cpu")
    keeper.add([synthetic_sample(0)])
    with Store.open(tmp_path / "r.db", recover=False) as other:  # another reader sees it before the end
        assert other.run(rid).samples == 1 and other.run(rid).status == "running"
    keeper.add([synthetic_sample(1), synthetic_sample(2)])
    assert keeper.finish("complete") == rid
    with Store.open(tmp_path / "r.db") as store:
        run = store.run(rid)
        assert run.status == "complete" and run.samples == 3


def test_a_cancel_before_the_first_sample_leaves_no_run(tmp_path: Path) -> None:
    keeper = RunKeeper(tmp_path / "r.db")
    assert keeper.begin(INFO, plan="quick", backend="cpu")
    assert keeper.finish("cancelled") is None
    with Store.open(tmp_path / "r.db") as store:
        assert store.runs() == []


def test_nothing_is_kept_without_save(tmp_path: Path) -> None:
    keeper = RunKeeper(tmp_path / "r.db", save=False)
    assert keeper.begin(INFO, plan="quick", backend="cpu") is None
    keeper.add([synthetic_sample(0)])
    assert keeper.finish("complete") is None and not (tmp_path / "r.db").exists()


def test_an_unusable_store_is_told_once_at_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-db"
    bad.write_text("hello\n")
    told: list[tuple[str, bool]] = []
    keeper = RunKeeper(bad, on_error=lambda exc, begun: told.append((exc.reason, begun)))
    assert keeper.begin(INFO, plan="quick", backend="cpu") is None
    keeper.add([synthetic_sample(0)])
    assert keeper.finish("complete") is None
    assert told == [("foreign", False)] and bad.read_text() == "hello\n"


def test_a_failure_mid_run_is_told_once_and_nothing_more_is_written(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dbmod, "BUSY_TIMEOUT_MS", 100)
    told: list[tuple[str, bool]] = []
    keeper = RunKeeper(tmp_path / "r.db", on_error=lambda exc, begun: told.append((exc.reason, begun)))
    rid = keeper.begin(INFO, plan="quick", backend="cpu")
    keeper.add([synthetic_sample(0)])
    holder = sqlite3.connect(tmp_path / "r.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock past the busy timeout
    try:
        keeper.add([synthetic_sample(1)])
        keeper.add([synthetic_sample(2)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert keeper.finish("complete") == rid  # the run stays, with what was committed
    assert told == [("locked", True)]
    with Store.open(tmp_path / "r.db", recover=False) as store:
        assert store.run(rid).samples == 1 and store.run(rid).status == "running"
