"""Text a trace holds never drives the terminal: a trace's distributedInfo.backend with an OSC in it retitled the
pane in `profile --trace`, `show` and the Profile tab. Every string read from a trace (names, its device, its
distributedInfo, its collectives' names and groups, its memcpy kinds, its input types) is read without the
characters a terminal obeys, and the views of a job kept before (whose stored text still holds them) escape it."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from inprocess import run_main
from tui_helpers import printed
from rooftop.models.safetext import UNSAFE
from rooftop.store.tracefile import load_trace

NCCL = Path(__file__).parent / "data" / "real-traces" / "nccl_parser_config_nccl_data.json.gz"
OSC, BIDI = "\x1b]0;PWNED\x07", "\u202e"
BAD = OSC + BIDI + "\u2028"


def raw(text: str) -> bool:
    return bool(UNSAFE.search(text.replace("\n", "")))


def _hostile(rank: int) -> dict:
    """The 2-rank NCCL job's rank 0 with an OSC, a bidi override and a line separator after every text the reader
    keeps (record_param_comms' own name is what marks a collective, so it stays)."""
    doc = json.loads(gzip.decompress(NCCL.read_bytes()))
    for e in [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"][-3:]:  # a thread named, not numbered
        e["tid"] = f"worker{BAD}"
    for e in doc["traceEvents"]:
        if isinstance(e.get("name"), str) and e["name"] != "record_param_comms":
            e["name"] += BAD
        a = e.get("args")
        if isinstance(a, dict):
            for k in ("Collective name", "Process Group Name", "Process Group Description", "kind"):
                if isinstance(a.get(k), str):
                    a[k] += BAD
            if isinstance(a.get("Input type"), list):
                a["Input type"] = [t + BAD if isinstance(t, str) and t else t for t in a["Input type"]]
    doc["deviceProperties"][0]["name"] += BAD
    info = doc["distributedInfo"]
    info.update(backend=info["backend"] + BAD, nccl_version=info["nccl_version"] + BAD, rank=rank)
    for pg in info["pg_config"]:
        pg.update(pg_name=pg["pg_name"] + BAD, pg_desc=pg["pg_desc"] + BAD)
    doc[f"extra{BAD}"] = f"x{BAD}"
    return doc


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("hostile")
    out = []
    for r in (0, 1):
        p = d / f"rank{r}.json"
        p.write_text(json.dumps(_hostile(r)))
        out.append(p)
    return out


def _strings(x: object, depth: int = 0):
    """Every string in a value: dataclasses, mappings and sequences walked."""
    if isinstance(x, str):
        yield x
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            yield from _strings(getattr(x, f.name), depth + 1)
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _strings(k, depth + 1)
            yield from _strings(v, depth + 1)
    elif isinstance(x, (list, tuple, frozenset, set)):
        for v in x:
            yield from _strings(v, depth + 1)


def test_every_string_a_trace_gives_is_read_without_controls(ranks):
    t = load_trace(ranks[0])
    bad = [s for s in _strings(t) if UNSAFE.search(s)]
    assert not bad, bad[:5]
    assert t.distributed["backend"] == "nccl]0;PWNED" and t.device_name.startswith("NVIDIA A100-PG509-200]0;")
    assert any(c.collective.startswith("allreduce]0;") for c in t.comms)
    assert any(c.group_name.startswith("0]0;") for c in t.comms)


def test_profile_and_show_of_a_job_from_hostile_traces_print_no_control(ranks, tmp_path):
    db = str(tmp_path / "r.db")
    out = run_main("profile", "--trace", *map(str, ranks), "-d", "a100", "--db", db)
    assert out.returncode == 0, out.stderr
    assert not raw(out.stdout) and not raw(out.stderr)
    assert "2 ranks of 2 (nccl]0;PWNED)" in out.stdout and "allreduce]0;pwned" in out.stdout
    js = run_main("profile", "--trace", *map(str, ranks), "-d", "a100", "--json", "--no-save")
    assert js.returncode == 0 and not raw(json.dumps(json.loads(js.stdout), ensure_ascii=False))
    runs = json.loads(run_main("runs", "--json", "--db", db).stdout)
    shown = run_main("show", runs[0]["id"], "--db", db)
    assert shown.returncode == 0 and not raw(shown.stdout + shown.stderr) and "(nccl]0;PWNED)" in shown.stdout


def _keep_old_job(tmp_path: Path) -> str:
    """A job kept before its trace's text was cleaned as read: its stored backend and collective hold an OSC."""
    from rooftop.models.catalog import lookup_device
    from rooftop.models.program.workload import build_workload
    from rooftop.store.runs import Store
    from rooftop.store.workloads import PLAN, group_sample, profile_device_info

    out = run_main("profile", "--trace", str(NCCL), "-d", "a100", "--json", "--no-save")
    doc = json.loads(out.stdout)
    job = {k: doc[k] for k in ("world", "backend", "ranks", "straggler", "collectives", "alignment", "missing_ranks",
                               "problems")}
    job["backend"] = "nccl" + BAD
    job["world"] = f"2{OSC}"
    job["collectives"][0]["op"] = "allreduce" + BAD
    job["collectives"][0]["link"] = "nvlink" + BAD
    work = build_workload(load_trace(NCCL), lookup_device("a100"))
    with Store.open(tmp_path / "r.db") as store:
        rid = store.begin_run(profile_device_info(work, "old.json", job=job), plan=PLAN, backend="torch.profiler")
        store.add_samples(rid, [group_sample(g) for g in work.groups])
        store.finish_run(rid, "complete")
    return rid


def test_show_of_a_job_kept_with_controls_in_its_text_escapes_them(tmp_path):
    rid = _keep_old_job(tmp_path)
    shown = run_main("show", rid, "--db", str(tmp_path / "r.db"))
    assert shown.returncode == 0 and not raw(shown.stdout + shown.stderr), shown.stdout
    assert "(nccl\\x1b]0;PWNED\\x07\\u202e\\u2028)" in shown.stdout  # shown, not obeyed


async def test_the_profile_tab_escapes_a_kept_jobs_backend(tmp_path):
    from textual.widgets import Static

    from rooftop.tui.app import AppConfig, create_app

    _keep_old_job(tmp_path)
    app = create_app(AppConfig(device="h100", sampler=None, db_path=tmp_path / "r.db", export_dir=tmp_path))
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        pane = app.query_one("#prof-job", Static)
        text = printed(pane.content)
        assert pane.display and "1 rank of 2" in text and "(nccl\\x1b" in text and not raw(text), text


def test_a_kept_jobs_collective_on_the_roofline_has_no_control_in_its_label():
    from rooftop.models.plotdata import collective_points

    pts = collective_points([{"op": "allreduce" + BAD, "intensity": 0.25, "achieved_flops": 1e9, "bytes": 8e6,
                              "fraction_of_link": 0.5, "link": "nvlink" + BAD, "time_s": 1.0}])
    assert pts and not raw(pts[0].label) and pts[0].label == "allreduce]0;PWNED 7.63 MiB 50% of nvlink]0;PWNED"
