"""Keep one run in the store as it goes: begun, its samples added as they come, its ceilings, finished.

The one keeper of `rooftop measure` (and the app's Live tab, and a fleet's runs), `rooftop comm` and
`rooftop profile`.
Its policy: the store never stops the work; a measurement another process runs into the same store at
the same time is told in one line (`on_beside`), never refused. A store that cannot be opened or written is told
once, through `on_error`, and from then on nothing more is written (what was committed stays;
a run left `running` is marked interrupted by the next rooftop that opens the store). A run
cancelled before its first sample is deleted, so no empty run shows in History.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from rooftop.models.profile import DeviceProfile
from rooftop.models.sample import Sample
from rooftop.models.units import fmt_when
from rooftop.store.db import StoreError
from rooftop.store.process import host_name
from rooftop.store.runs import NewRun, Run, RunStatus, Store
from rooftop.tui.services.context import open_db

OnError = Callable[[StoreError, bool], None]  # the error, and whether the run had begun


def beside_words(beside: Sequence[tuple[Run, int | None]]) -> str:
    """One line for the measurements another process is running into the same store: which, where, since when;
    both runs are kept, but two measurements share the machine."""
    here = host_name()
    runs = [f"run {r.short_id} ({r.plan} on {r.device_name}, "
            + (f"pid {pid}" if r.host == here and pid else f"on {r.host}")
            + f", since {fmt_when(r.started_at, '%H:%M:%S')})" for r, pid in beside[:3]]
    more = f" and {len(beside) - 3} more" if len(beside) > 3 else ""
    return (f"{'another measurement is' if len(beside) == 1 else 'other measurements are'} running into this store: "
            f"{', '.join(runs)}{more}; both are kept, but measurements that share a machine can each read low")


class RunKeeper:
    """One run in the store at `db` (--db / ROOFTOP_DB / the data dir); with `save` off, keeps nothing."""

    def __init__(self, db: str | Path | None, *, save: bool = True, on_error: OnError | None = None,
                 on_open: Callable[[Store], None] | None = None,
                 on_beside: Callable[[str], object] | None = None) -> None:
        self.db, self.save, self.on_error, self.on_open = db, save, on_error, on_open
        self.on_beside = on_beside  # told, in one line, of measurements other processes run into the store
        self.store: Store | None = None
        self.run_id: str | None = None
        self.error: StoreError | None = None  # the first failure; nothing is written after it
        self.added = 0

    @property
    def keeping(self) -> bool:
        return self.store is not None and self.run_id is not None

    def begin(self, device_info: Mapping[str, Any], plan: str, backend: str,
              versions: Mapping[str, Any] | None = None) -> str | None:
        """Open the store and begin the run; its id, or None when nothing will be kept."""
        if not self.save:
            return None
        try:
            self.store = store = open_db(self.db)
            if self.on_open is not None:
                self.on_open(store)
            self.run_id = run_id = store.begin_run(dict(device_info), plan=plan, backend=backend, versions=versions)
            beside = store.running_beside(run_id) if self.on_beside is not None else []
        except StoreError as exc:
            self._drop(exc, begun=False)
            return self.run_id
        if beside and self.on_beside is not None:
            self.on_beside(beside_words(beside))
        return self.run_id

    def keep_whole(self, items: Sequence[NewRun]) -> str | None:
        """Keep whole runs made elsewhere (a fleet: the members its ranks sent, then the fleet run) in one
        transaction; the last one's id, or None when nothing was kept (all or none). The store stays open
        for reading them back until `close`."""
        if not self.save or not items:
            return None
        try:
            if self.store is None:
                self.store = open_db(self.db)
                if self.on_open is not None:
                    self.on_open(self.store)
            self.store.insert_runs(items)
        except StoreError as exc:
            self._drop(exc, begun=False)
            return None
        self.run_id = items[-1].run.id
        return self.run_id

    def add(self, samples: Iterable[Sample]) -> None:
        """Commit `samples` now (a crash later loses none of them)."""
        batch = list(samples)
        if self.keeping and batch:
            self._write(lambda s, run: s.add_samples(run, batch))
            self.added += len(batch) if self.keeping else 0

    def set_ceilings(self, profile: DeviceProfile) -> None:
        if self.keeping and (profile.peak or profile.bandwidth):
            self._write(lambda s, run: s.set_ceilings(run, profile))

    def finish(self, status: RunStatus) -> str | None:
        """End the run as `status` and close the store; the run's id, or None when none was kept."""
        if self.keeping:
            self._write(lambda s, run: s.finish_run(run, status))
        if self.keeping and status == "cancelled" and not self.added:  # before its first point: nothing to keep
            self._write(lambda s, run: s.delete(run))
            if self.keeping:
                self.run_id = None
        self.close()
        return self.run_id

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def _write(self, write: Callable[[Store, str], Any]) -> None:
        """`write(store, run id)`, while keeping."""
        assert self.store is not None and self.run_id is not None
        try:
            write(self.store, self.run_id)
        except StoreError as exc:
            self._drop(exc, begun=True)

    def _drop(self, exc: StoreError, begun: bool) -> None:
        """The first failure: told once, then nothing more is written."""
        if self.error is None:
            self.error = exc
            if self.on_error is not None:
                self.on_error(exc, begun)
        self.close()
        if not begun:
            self.run_id = None
