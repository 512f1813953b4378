"""rooftop.store — every measurement kept in SQLite: runs, samples, ceilings, telemetry, saved ops.

Modules, one job each:
- `locations`: every path rooftop uses (platformdirs; --db PATH, ROOFTOP_DB, ROOFTOP_HOME).
- `db`: opening the file safely (a corrupt or foreign file is refused, never
  written), WAL + busy timeout + BEGIN IMMEDIATE writes, schema version and
  forward migrations.
- `process`: whether the process that owns a `running` run is still alive.
- `runs`: the `Store` API (below) and the `Run` record.
- `workloads`, `comms`, `fleets`: a profiled program, a collectives sweep and a fleet kept as runs;
  `critpath`: a profile's critical path as JSON.
- `io`: export/import, rooftop JSON and the reference CSVs (`refcsv`).
- `tracefile`: reading a trace file for `models.trace`; `hfconfig`: a Hugging Face config.json, or a
  built-in model name.

The API a measuring process uses; each call commits before it returns, so a
SIGKILL loses at most the sample in flight and the next open marks the run
`interrupted`, keeping its samples::

    from rooftop.store import Store
    store = Store.open(path)                         # None: ROOFTOP_DB, else the data dir
    run_id = store.begin_run(device_info, plan, backend, versions)   # device_info: name, uuid, …
    store.add_sample(run_id, sample)                 # rooftop.models.sample.Sample
    store.add_telemetry(run_id, rows)                # dicts with "t" (epoch seconds)
    store.set_ceilings(run_id, profile)              # rooftop.models.profile.DeviceProfile
    store.finish_run(run_id, "complete")             # or "cancelled" / "failed"

Readers: `runs(kind=…, status=…)`, `latest(kind, status, where)` (the newest such run), `run(ref)` (name, id or 4+ digit prefix), `samples(id)`,
`telemetry(id)`, `stored_profile(id)`, `profile(ref)`, and `profiles()` — each
device's latest complete run with ceilings (plus named runs) as profiles to
pass as `extra` to `rooftop.models.catalog.lookup_device`. Errors about the
file or bad references are `StoreError`s with one-line messages.

This package imports rooftop.models and the standard library only: never
torch, textual, or another rooftop package (a test checks sys.modules).
"""

from .db import StoreError
from .runs import BadName, ReadOnlyStore, Run, Store, UnknownRun

__all__ = ["BadName", "ReadOnlyStore", "Run", "Store", "StoreError", "UnknownRun"]
