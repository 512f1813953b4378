"""Whatever a probe measures comes back unchanged: from SQLite, and through a JSON export and import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.models.sample import FAMILIES, Sample, TimeStats
from rooftop.store.io import export_json, import_file
from rooftop.store.runs import Store

pos = st.floats(min_value=1e-12, max_value=1e6, allow_nan=False, allow_infinity=False)  # seconds: models.plausible
times = st.lists(pos, min_size=4, max_size=4).map(sorted)  # min ≤ p10 ≤ median ≤ p90, as percentiles are
stats = st.builds(lambda t, iqr, repeats, calls: TimeStats(t[2], t[1], t[3], t[0], iqr, repeats, calls),
                  times, st.floats(0, 5), st.integers(1, 100), st.integers(0, 10_000))
samples = st.builds(
    Sample,
    family=st.sampled_from(FAMILIES),
    dtype=st.sampled_from(["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8"]),
    shape=st.dictionaries(st.sampled_from(["m", "n", "k", "reps", "batch"]), st.integers(1, 2**40), max_size=4),
    flops=st.floats(0, 1e18),
    bytes=st.floats(0, 1e15),
    footprint_bytes=st.floats(0, 1e15),
    cache=st.sampled_from(["warm", "cold", "streaming"]),
    stats=st.none() | stats,
    path=st.none() | st.sampled_from(["bf16-tc", "fp32-fma", "fp8-tc"]),
    skipped=st.sampled_from(["", "out of memory", "unsupported dtype: fp8 needs sm_89"]),
    max_error=st.none() | st.floats(0, 1),
    conditions=st.dictionaries(st.sampled_from(["sm_clock_mhz", "temp_c", "throttle"]),
                               st.integers(0, 3000) | st.text(max_size=8) | st.booleans(), max_size=3),
)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Store, Path]:
    d = tmp_path_factory.mktemp("prop")
    return Store.open(d / "a.db"), Store.open(d / "b.db"), d


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(samples, min_size=1, max_size=5))
def test_samples_round_trip_through_sqlite_and_json(stores: tuple[Store, Store, Path], batch: list[Sample]) -> None:
    a, b, d = stores
    rid = a.begin_run({"name": "prop"}, "quick", "cpu")
    for s in batch:
        a.add_sample(rid, s)
    a.finish_run(rid, "complete")
    assert a.samples(rid) == batch
    f = d / f"{rid}.json"
    f.write_text(json.dumps(export_json(a, [a.run(rid)])))
    import_file(b, f)
    assert b.samples(rid) == batch
