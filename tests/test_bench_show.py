"""Benchmark (marked `bench`; `pytest -m bench -s tests/test_bench_show.py`): `rooftop show` of a run of
300,000 samples (the size a hostile import once held; one import now takes at most 100,000), in-process:
the default page, a page near the end, and the whole table of a 10,000-sample run with --all (what every
`show` printed before the table was paged, 0.32 ms a sample). Prints figures, asserts no times."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import pytest

from helpers.store_writer import synthetic_sample
from rooftop.store.runs import Store
from rooftop.tui.cli import main

pytestmark = pytest.mark.bench


def big_run(path: Path, n: int) -> str:
    with Store.open(path) as s:
        rid = s.begin_run({"name": "Lab GPU", "uuid": "GPU-bench"}, "quick", "cuda")
        s.add_samples(rid, [synthetic_sample(i % 1000) for i in range(n)])
        s.finish_run(rid)
    return rid


def timed(*argv: str) -> tuple[float, str]:
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        rc = main(list(argv))
    wall = time.perf_counter() - start
    assert rc == 0
    return wall, out.getvalue()


def test_show_of_a_large_run(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    rid = big_run(db, 300_000)
    first, text = timed("show", rid[:8], "--db", str(db))
    assert "299,950 after these not shown" in " ".join(text.split())
    last, _ = timed("show", rid[:8], "--db", str(db), "--page", "6000")
    small = tmp_path / "small.db"
    sid = big_run(small, 10_000)
    whole, text = timed("show", sid[:8], "--db", str(small), "--all")
    assert "9999" in text
    print(f"\nshow, 300,000 samples: first page {first:.2f} s, page 6000 {last:.2f} s; "
          f"--all of 10,000 samples {whole:.2f} s ({whole / 10_000 * 1e3:.3f} ms a sample, "
          f"so about {whole / 10_000 * 300_000:.0f} s for the 300,000 every show used to list)")
