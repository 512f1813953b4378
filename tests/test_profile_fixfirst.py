"""The critical path, the what-ifs re-timed on it and "fix first" as `rooftop profile`, `--json`, the store and
`rooftop show` give them. Before, the report added the op groups' gaps up ("every op at its roof … no gaps …
both") whatever overlapped; now the figures re-timed on the path replace the sums, which stay, labelled "summed",
only where no graph could be built (saying why); a profile kept before there was a path still shows, without one."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from helpers.critpaths import ADVICE, made_path
from rooftop.models.catalog import lookup_device
from rooftop.models.program.critpath import SPLIT_KEYS, critical_path
from rooftop.models.program.job import group_label
from rooftop.models.program.workload import OpGroup, Workload, build_workload
from rooftop.store.critpath import path_doc, stored_path
from rooftop.store.runs import Store
from rooftop.store.tracefile import load_trace
from rooftop.store.workloads import profile_json, profile_problem, profile_summary, save_profile
from rooftop.tui.cli import main
from rooftop.tui.render.profile import op_label, profile_report

QWEN = Path(__file__).parent / "data" / "qwen2.5-7b-decode-b8-ctx1024-h200.trace.json.gz"
H100 = Path(__file__).parent / "data" / "real-traces" / "more" / "h100-hf-qwen1.5-0.5b-infer-bs16.json.gz"
WIDTH = 80


@pytest.fixture(scope="module")
def work() -> Workload:
    return build_workload(load_trace(QWEN), lookup_device("h200"))


def printed(work: Workload, path: object, width: int = WIDTH) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, highlight=False, markup=False).print(profile_report(work, path=path))
    return buf.getvalue()


def test_the_report_gives_the_path_and_fix_first_not_the_sums(work: Workload) -> None:
    path = made_path(work)
    out = printed(work, path)
    lines = out.splitlines()
    assert all(len(line) <= WIDTH for line in lines), [line for line in lines if len(line) > WIDTH]
    assert "summed" not in out and "every op at its roof: " not in out  # the sums are gone where the path is
    head = next(line for line in lines if line.startswith("critical path of ProfilerStep#2–#3 (2 steps): "))
    assert f"{path.length_s * 1e3:.0f} ms" in head and "CPU 120 ms" in head
    what = " ".join(lines[lines.index(next(x for x in lines if x.startswith("what if"))):][:2])
    assert "every op at its roof" in what and "saves 9.00 ms" in what and "no launch gaps" in what
    assert "op:" not in what  # one op group's what-if is its fix-first row
    start = lines.index("fix first (what running each op group at its roof takes off the path):")
    rows = lines[start + 2:start + 7]
    for i, (row, f) in enumerate(zip(rows, path.fix_first), start=1):
        assert row.split()[:3] == [str(i), f"{f.saving_s * 1e3:.2f}", "ms"], row
        assert f.label[:20] in row and f.regime in row
    assert f"1. {ADVICE} (1)" in out.replace("\n     ", " ")


def test_without_a_graph_the_sums_stay_labelled_summed_with_why(work: Workload) -> None:
    out = printed(work, made_path(work, graph=False, why_not="no launch links: a GPU-only trace"))
    assert "critical path: not built (no launch links: a GPU-only trace); the what-ifs are summed" in \
        out.replace("\n", " ")
    assert "summed, as if one stream ran it all — every op at its roof: " in out.replace("\n", " ")
    assert "fix first" not in out and "re-timed" not in out


def test_the_path_is_kept_and_given_back(work: Workload, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = made_path(work)
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        rid = save_profile(store, work, source="decode.json.gz", backend="trace", path=path)
        old = save_profile(store, work, source="decode.json.gz", backend="trace")  # as kept before there was a path
        run, samples = store.run(rid), store.samples(rid)
        doc = profile_json(run, samples)
        old_doc = profile_json(store.run(old), store.samples(old))
        back = stored_path(profile_summary(run))
        assert stored_path(profile_summary(store.run(old))) is None
    want = json.loads(json.dumps(path_doc(path)))
    assert {k: doc[k] for k in want} == want
    assert set(doc["critical_path"]) == {"window", "length_s", "graph", "why_not", "split", "ops", "steps"}
    assert set(doc["critical_path"]["split"]) == set(SPLIT_KEYS)
    assert doc["fix_first"][0] == {"op": "aten::mm", "label": path.fix_first[0].label, "saving_s": 0.005,
                                   "regime": "memory", "fraction_of_roof": path.fix_first[0].fraction_of_roof,
                                   "advice": f"{ADVICE} (1)"}
    assert [w["name"] for w in doc["what_if"]][:2] == ["every op at its roof", "no launch gaps"]
    assert "critical_path" not in doc["summary"] and not {"critical_path", "what_if", "fix_first"} & set(old_doc)
    assert back is not None and back.length_s == path.length_s and back.split == path.split
    assert [(f.label, f.saving_s, f.advice) for f in back.fix_first] == [(f.label, f.saving_s, f.advice)
                                                                          for f in path.fix_first]
    assert [(p.label, p.time_s, p.kernels) for p in back.ops] == [(p.label, p.time_s, p.kernels) for p in path.ops]

    assert main(["show", rid[:8], "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "critical path of ProfilerStep#2–#3 (2 steps)" in shown and "fix first" in shown and "summed" not in shown
    assert main(["show", rid[:8], "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fix_first"] == want["fix_first"]
    assert main(["show", old[:8], "--db", str(db)]) == 0  # kept before: shows, with the sums, without a path
    shown = capsys.readouterr().out
    assert "critical path" not in shown and "summed, as if one stream ran it all — every op" in shown.replace("\n", " ")


def test_a_stored_path_that_is_not_one_rooftop_writes_is_named(work: Workload, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        rid = save_profile(store, work, source="decode.json.gz", backend="trace", path=made_path(work))
    c = sqlite3.connect(db)
    facts = json.loads(c.execute("SELECT device_json FROM runs WHERE id = ?", (rid,)).fetchone()[0])
    facts["profile"]["fix_first"][1]["saving_s"] = -0.002
    c.execute("UPDATE runs SET device_json = ? WHERE id = ?", (json.dumps(facts), rid))
    c.commit()
    c.close()
    with Store.open(db) as store:
        problem = profile_problem(store.run(rid), store.samples(rid))
    assert problem == "device.profile fix_first[1].saving_s = -0.002 is outside [0, 1e+30]", problem


def forward_twice(path: Path) -> Path:
    """Two `forward` ranges on the CPU, each launching one kernel (a small Kineto trace, as torch.profiler writes)."""
    ev = []
    for i, t0 in enumerate((0.0, 100.0)):
        ext, corr = 10 + i, 20 + i
        ev += [{"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": t0, "dur": 40},
               {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 1, "dur": 5,
                "args": {"External id": ext, "Input Dims": [[64, 64], [64, 64]],
                         "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 2,
                "dur": 2, "args": {"correlation": corr, "External id": ext}},
               {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t0 + 6, "dur": 30,
                "args": {"correlation": corr, "External id": ext, "stream": 7, "device": 0}}]
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_profile_json_has_the_path_what_ifs_and_fix_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The H200 decode trace: the path's split sums to its length, every what-if is within [0, length], fix first
    is at most five op groups by saving, named as the op table names them; kept, `show --json` gives it back."""
    db = str(tmp_path / "r.db")
    assert main(["profile", "--trace", str(QWEN), "-d", "h200", "--json", "--db", db]) == 0
    doc = json.loads(capsys.readouterr().out)
    c = doc["critical_path"]
    assert c["graph"] is True and c["window"] and set(c["split"]) == set(SPLIT_KEYS)
    assert sum(c["split"].values()) == pytest.approx(c["length_s"], rel=1e-9)
    assert all(0 <= w["saving_s"] <= c["length_s"] and w["retimed"] for w in doc["what_if"])
    assert 0 < len(doc["fix_first"]) <= 5 and [f["saving_s"] for f in doc["fix_first"]] == \
        sorted((f["saving_s"] for f in doc["fix_first"]), reverse=True)
    labels = {op_label(OpGroup(op=o["op"], shapes=o["shapes"], dtype=o["dtype"], model="", path="", counting="",
                               owner=o["owner"], family=o["family"])) for o in doc["ops"]}  # the op table's
    assert all(f["label"] in labels for f in doc["fix_first"]), (doc["fix_first"], labels)
    assert main(["show", doc["run_id"][:8], "--db", db, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {k: shown[k] for k in ("critical_path", "what_if", "fix_first")} == \
        {k: doc[k] for k in ("critical_path", "what_if", "fix_first")}


def test_window_names_an_annotation_or_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(forward_twice(tmp_path / "fwd.json"))
    assert main(["profile", "--trace", trace, "-d", "h200", "--window", "forward", "--json", "--no-save"]) == 0
    c = json.loads(capsys.readouterr().out)["critical_path"]
    assert c["window"] == "forward" and [s["window"] for s in c["steps"]] == ["forward", "forward"]
    assert main(["profile", "--trace", trace, "-d", "h200", "--window", "backward", "--no-save"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert "--window backward: the trace has no annotation named 'backward'" in err and "'forward'" in err


def test_two_op_groups_of_one_op_and_shapes_are_two_what_ifs_and_two_rows(capsys):
    """The H100 inference step runs _flash_attention_forward as its own op and as the twins of the kernels launched
    before the window: two op groups with one op, dtype and shapes. Each has its own what-if and fix-first row,
    read apart by their owner (they shared one name, so the step's own group's saving went to the other's row)."""
    trace = load_trace(H100)
    work = build_workload(trace, lookup_device("h100"))
    cp = critical_path(trace, work)
    names = [w.name for w in cp.what_if]
    assert len(names) == len(set(names))
    groups = work.group_by_key()
    for f in cp.fix_first:
        assert f.label == group_label(groups[f.key])
    flash = [f for f in cp.fix_first if "_flash_attention_forward" in f.label]
    assert sorted(groups[f.key].owner for f in flash) == ["before window", "op"]
    assert main(["profile", "--trace", str(H100), "--json", "--no-save"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [f["label"] for f in doc["fix_first"]].count(doc["fix_first"][0]["label"]) == 1
