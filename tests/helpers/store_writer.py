"""A stand-in for `rooftop measure` in tests: opens the store, begins a run and adds samples.

Usage: python store_writer.py DB N SLEEP_S [finish]
Prints "begun RUN_ID", then "sample I" after each sample is committed (so the
test knows which samples have finished), and "done" at the end.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.sample import Sample, TimeStats
from rooftop.store.runs import Store


def synthetic_sample(i: int) -> Sample:
    """A plausible bandwidth point whose numbers encode i, so tests can check each one."""
    n = (i + 1) * 1024
    t = 1e-4 * (i + 1)
    return Sample(
        family="read_reduce", dtype="fp32", shape={"n": n}, flops=float(n), bytes=4.0 * n,
        footprint_bytes=4.0 * n, stats=TimeStats(t, 0.9 * t, 1.1 * t, 0.8 * t, 0.01, 7, 10),
    )


def damage_pages(path: Path) -> None:
    """Overwrite the pages after the first two of a checkpointed store: a valid header over damaged data."""
    import sqlite3

    c = sqlite3.connect(path)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    data = bytearray(path.read_bytes())
    for i in range(2 * 4096, len(data), 7):
        data[i] = 0xAB
    path.write_bytes(bytes(data))


def main() -> None:
    db, n, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    finish = len(sys.argv) > 4 and sys.argv[4] == "finish"
    store = Store.open(db)
    run_id = store.begin_run({"name": "Synthetic GPU", "uuid": "GPU-synthetic"}, "test", "synthetic")
    print("begun", run_id, flush=True)
    for i in range(n):
        store.add_sample(run_id, synthetic_sample(i))
        print("sample", i, flush=True)
        if pause:
            time.sleep(pause)
    if finish:
        store.set_ceilings(run_id, DeviceProfile(
            id="local", name="Synthetic GPU", source="measured",
            bandwidth={"dram": Ceiling(1e12, "measured", "read_reduce:1024")},
            peak={"fp32-fma": Ceiling(2e13, "measured", "fma:fp32:reps=64:1024")},
        ))
        store.finish_run(run_id, "complete")
    store.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
