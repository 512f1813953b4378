"""rooftop's idle time against Holistic Trace Analysis's idle time breakdown, on every real trace the tests keep.

HTA's figures were taken by `scripts/hta_idle.py record` (HTA 0.5.0; the script says how to run it again) and
kept in tests/data/hta-idle.json, so this needs no HTA. They are HTA's rules over the same window rooftop reads:
the whole trace (HTA drops the last profiler step by default), times not rounded to whole µs (HTA rounds them by
default), the device's gaps (HTA splits each stream's). On that window the two agree to the µs on all but one
trace: on the H100 trace HTA links 7 kernels that have no launch in the trace to an unrelated runtime call (9 µs of
gaps moved from kernel wait to host wait).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rooftop.models.trace.timeline import idle_causes
from rooftop.store.tracefile import load_trace

DATA = Path(__file__).parent / "data"
HTA = json.loads((DATA / "hta-idle.json").read_text())
CATEGORIES = {"host wait": "host_wait", "kernel wait": "kernel_wait", "other": "other"}
WITHIN = 0.001  # of the span: 20× tighter than asked (2%); the worst today is 0.02%


def test_every_kept_real_trace_has_htas_figures():
    kept = {str(p.relative_to(DATA)) for p in [*DATA.glob("real-traces/**/*.json.gz"), *DATA.glob("*.trace.json.gz")]}
    assert kept == set(HTA["traces"]), "run scripts/hta_idle.py record for the traces added"
    assert HTA["consecutive_kernel_delay_us"] == 30


@pytest.mark.parametrize("name", sorted(HTA["traces"]), ids=lambda n: Path(n).name.split(".json")[0])
def test_idle_causes_fall_in_htas_three_categories_as_hta_splits_them(name):
    theirs = HTA["traces"][name]
    t = load_trace(DATA / name)
    span = t.span_s if t.kernels and not t.range_times else 0.0  # HTA's idle time reads no cuda_profiler_range
    assert span == pytest.approx(theirs["span_s"], abs=1e-6)  # the same window
    mine = dict.fromkeys(CATEGORIES.values(), 0.0)
    for c in idle_causes(t):
        mine[CATEGORIES[c.category]] += c.time_s
    for cat, v in theirs["device"].items():
        assert abs(mine[cat] - v) <= WITHIN * span, (cat, mine, theirs["device"])
