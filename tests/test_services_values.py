"""Services take values, not a command's options: the profiles on offer, the device for a trace, the link roofs
of a job, keeping a workload and a device's stored points are each one services function, called with a database
path and plain values by the CLI and the app alike (real SQLite, real traces, the real app object)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_helpers import gloo_sweep
from rooftop.models.catalog import catalog, lookup_device
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.store.runs import Store
from rooftop.store.tracefile import load_trace
from rooftop.tui.services.context import profiles_on_offer, run_points, store_points, store_profiles
from rooftop.tui.services.workloads import keep_workload, link_roofs, trace_device

DATA = Path(__file__).parent / "data"
H200_TRACE = DATA / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"


def measured_db(path: Path) -> str:
    """A store with one complete measured run of this host (so `local`) with two samples; its run id."""
    from helpers.store_writer import synthetic_sample

    with Store.open(path) as store:
        rid = store.begin_run({"name": "Test GPU", "uuid": "GPU-t1"}, "quick", "cuda")
        store.add_sample(rid, synthetic_sample(0))
        store.add_sample(rid, synthetic_sample(1))
        store.set_ceilings(rid, DeviceProfile(
            id="local", name="Test GPU", source="measured", sm_count=77,
            bandwidth={"dram": Ceiling(1.5e12, "measured", "read_reduce:134217728")},
            peak={"fp16-tc": Ceiling(2e14, "measured", "4096x4096x4096")}))
        store.finish_run(rid, "complete")
    return rid


def test_the_app_and_the_cli_offer_the_same_profiles(tmp_path: Path) -> None:
    """One rule for the profiles on offer: the app's device lists hold the catalog and exactly what `rooftop -d`
    is offered from the same store (the app re-read the store on its own before)."""
    from rooftop.tui.app import AppConfig, create_app

    db = tmp_path / "r.db"
    rid = measured_db(db)
    with Store.open(db) as store:
        offered = profiles_on_offer(store)
    assert "local" in offered and offered["local"].extra["run_id"] == rid
    assert store_profiles(db) == offered  # the CLI's, from the path alone
    app = create_app(AppConfig(device="h100", sampler=None, db_path=db, export_dir=tmp_path))
    assert {k: v for k, v in app.profiles.items() if k not in catalog()} == offered
    assert app.measured_here and not app.cannot_keep and not app.store_note


def test_a_broken_store_is_a_note_in_the_app_and_a_warning_on_the_cli(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from rooftop.tui.app import AppConfig, create_app

    bad = tmp_path / "not-a-db"
    bad.write_text("plain text")
    assert store_profiles(bad) == {}
    assert "showing the built-in catalog only" in capsys.readouterr().err
    start = create_app(AppConfig(device="h100", sampler=None, db_path=bad, export_dir=tmp_path)).read_store()
    assert start.profiles == {} and start.note.startswith("store unavailable: ") and start.cannot_keep


def test_stored_points_are_one_rule_for_both_front_ends(tmp_path: Path) -> None:
    """A measured profile's run gives its samples as points, labelled with the device; a catalog one gives none."""
    db = tmp_path / "r.db"
    measured_db(db)
    local = store_profiles(db)["local"]
    cli = store_points(db, [local, lookup_device("h100")])
    with Store.open(db) as store:
        assert run_points(store, [local]) == cli
    assert cli and all(s.label.startswith("local ") for s in cli) and sum(len(s.xs) for s in cli) == 2
    assert store_points(tmp_path / "none.db", [lookup_device("h100")]) == []  # no run named: the store is not opened


def test_the_device_for_a_trace_is_chosen_from_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = load_trace(H200_TRACE)
    db = tmp_path / "none.db"
    assert trace_device(db, ["h100"], trace) == (lookup_device("h100"), "")  # -d wins, said nowhere
    device, note = trace_device(db, [], trace)  # the trace's own GPU, said on stderr
    assert device.id == "h200" and note and f"using h200: {note}" in capsys.readouterr().err
    assert not db.exists()  # reading never creates a store


def test_a_workload_is_kept_and_a_comm_run_gives_the_link_roof(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from rooftop.models.program.workload import build_workload

    db = tmp_path / "r.db"
    h200 = lookup_device("h200")
    work = build_workload(load_trace(H200_TRACE), h200)
    rid = keep_workload(db, work, str(H200_TRACE), "trace")
    assert rid is not None
    with Store.open(db) as store:
        assert store.run(rid).kind == "profile" and len(store.samples(rid)) == len(work.groups)
    bad = tmp_path / "not-a-db"
    bad.write_text("plain text")
    assert keep_workload(bad, work, str(H200_TRACE), "trace") is None
    assert "the run is not kept in the store" in capsys.readouterr().err

    assert not any(r.source.startswith("measured: rooftop comm") for r in link_roofs(db, h200, "gloo").values())
    with Store.open(db) as store:
        cid = gloo_sweep(store)
    net = link_roofs(db, h200, "gloo")["net"]
    assert net.source.startswith(f"measured: rooftop comm run {cid[:8]} (gloo, world 4)") and (net.bandwidth or 0) > 0
