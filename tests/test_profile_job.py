"""A distributed job: one trace per rank (real traces of public jobs), its collectives on the comm roofline,
the straggler, bad input, and a real 2-rank gloo DDP run under `rooftop profile -- torchrun …`."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from rooftop.models.units import fmt_time
from rooftop.models.program.collectives import RankCollective, bus_factor, rank_collectives
from rooftop.models.trace.commtrace import collective_name
from rooftop.models.program.job import RankSummary, align, missing_text, straggler
from rooftop.store.tracefile import load_trace

from inprocess import run_main

DATA = Path(__file__).parent / "data"
REAL = DATA / "real-traces"
RANK0, RANK1 = REAL / "trace_filter_sampled_rank-0.json.gz", REAL / "trace_filter_sampled_rank-1.json.gz"
NCCL2 = REAL / "nccl_parser_config_nccl_data.json.gz"
DDP = DATA / "ddp_gloo.py"


def rooftop(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rooftop.tui.cli", *args], capture_output=True, text=True, check=False,
                          timeout=timeout, env={**os.environ, "COLUMNS": "100", "NO_COLOR": "1", **env})


def raw_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def union(iv: list[tuple[float, float]]) -> float:
    total, cur = 0.0, None
    for s, e in sorted(iv):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur else 0.0)


def expected_split(path: Path) -> dict[str, float]:
    """From the raw JSON: the union of the kernels, of the NCCL kernels, and NCCL time less its overlap with
    the other kernels (seconds)."""
    ks = [e for e in raw_events(path) if e.get("cat") == "kernel"]

    def iv(es: list[dict]) -> list[tuple[float, float]]:
        return [(e["ts"] * 1e-6, (e["ts"] + e["dur"]) * 1e-6) for e in es]

    nccl = iv([e for e in ks if e["name"].startswith("nccl")])
    other = iv([e for e in ks if not e["name"].startswith("nccl")])
    overlap = union(nccl) + union(other) - union(nccl + other)
    return {"busy": union(iv(ks)), "comm": union(nccl), "exposed": union(nccl) - overlap}


@pytest.fixture(scope="module")
def sampled() -> tuple[dict, subprocess.CompletedProcess]:  # read in this process: no torch, no interpreter start
    out = run_main("profile", "--trace", str(RANK0), str(RANK1), "-d", "a100-80g-ds", "--json", "--no-save")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), out


def test_two_sampled_ranks_busy_comm_and_exposed_against_the_raw_kernels(sampled):
    doc, _ = sampled
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]  # from distributedInfo
    for r, path in zip(doc["ranks"], (RANK0, RANK1)):
        want = expected_split(path)
        assert r["busy_s"] == pytest.approx(want["busy"], rel=0.01)
        assert r["comm_s"] == pytest.approx(want["comm"], rel=0.01)
        assert r["comm_exposed_s"] == pytest.approx(want["exposed"], rel=0.01)
        assert 0 < r["comm_exposed_s"] < r["comm_s"] < r["busy_s"] <= r["span_s"]
        assert set(r) >= {"rank", "busy_s", "comm_s", "comm_exposed_s", "step_s", "mfu"}
        groups = r["op_groups"]  # the rank's own compute op groups, largest first, for opening one rank
        assert groups and [g["time_s"] for g in groups] == sorted((g["time_s"] for g in groups), reverse=True)
        assert not any(g["op"].startswith(("record_param_comms", "c10d::", "nccl:")) for g in groups)


def test_sampled_ranks_straggler_missing_ranks_and_collectives(sampled):
    doc, out = sampled
    s = doc["straggler"]
    by = {r["rank"]: r for r in doc["ranks"]}
    slow, other = by[s["rank"]], by[1 - s["rank"]]
    assert slow[f"{s['metric']}_s"] == pytest.approx(s["value_s"])
    assert s["value_s"] > other[f"{s['metric']}_s"] and s["by_s"] > 0
    assert s["groups"] and all(g["excess_s"] > 0 for g in s["groups"])
    assert not any(g["op"].startswith("record_param_comms") for g in s["groups"])  # compute groups only
    assert doc["missing_ranks"] == "2-127" and "missing ranks: 2-127 (2 of 128 ranks read" in out.stderr
    kinds = {c["op"] for c in doc["collectives"]}
    assert kinds == {"allreduce", "alltoall", "allgather"}
    assert sum(c["calls"] for c in doc["collectives"]) == 20  # 10 NCCL kernels per rank, each a collective
    for c in doc["collectives"]:
        assert set(c) >= {"op", "bytes", "calls", "time_s", "algbw", "busbw", "link", "fraction_of_link"}
        # a group of 64 or 128 ranks spans nodes; the all-gather's c10d op gathers 1 GiB from 16 MiB: 64 ranks
        assert c["link"] == "net" and c["group_size"] == (64 if c["op"] == "allgather" else 128)
        if c["op"] == "allgather":
            assert c["bytes"] == 1 << 30  # S: the gathered output, not the 16 MiB its nccl range records
        assert c["busbw"] == pytest.approx(c["algbw"] * bus_factor(c["op"], c["group_size"]))
    assert set(doc["alignment"]["offsets_s"]) == {"0", "1"} and doc["alignment"]["matched"]["1"] >= 5
    # among the op groups a collective is communication, not an op on the DRAM roof (its link is in the table)
    comm = [o for o in doc["ops"] if o["op"].startswith(("record_param_comms", "c10d::"))]
    assert comm and all(o["regime"] == "comm" and o["bound_s"] is None and o["fraction_of_roof"] is None
                        for o in comm)


def test_text_report_has_the_rank_table_straggler_and_collectives():
    out = run_main("profile", "--trace", str(RANK0), str(RANK1), "--no-save", "--top", "3")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "rank" in text and "exposed" in text and "straggler: rank" in text
    assert "collectives on the communication roofline" in text and "allreduce" in text


def test_nccl_trace_27_collectives_with_their_sizes():
    trace = load_trace(NCCL2)
    raw = [e["args"] for e in sorted(raw_events(NCCL2), key=lambda e: e.get("ts", 0))
           if e.get("name") == "record_param_comms"]
    colls = rank_collectives(trace)
    assert len(colls) == len(raw) == 27
    size = {"Float": 4, "Long": 8, "Byte": 1}
    for c, a in zip(colls, raw):
        assert c.collective == collective_name(a["Collective name"])
        assert c.bytes == max(a["In msg nelems"], a["Out msg nelems"]) * size[a["dtype"]]
    assert sum(1 for c in colls if c.kernels == 1) == 21  # 15 all-reduces and 6 broadcasts ran a kernel; 6 waits none


def test_nccl_trace_allreduce_groups_algbw_and_busbw():
    out = run_main("profile", "--trace", str(NCCL2), "-d", "a100-80g-ds", "--json", "--no-save")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    # the test's own grouping: the NCCL kernels carry their message in their args
    times: dict[int, list[float]] = defaultdict(list)
    for e in raw_events(NCCL2):
        if e.get("cat") == "kernel" and e["args"].get("Collective name") == "allreduce":
            times[e["args"]["In msg nelems"] * 4].append(e["dur"] * 1e-6)
    groups = {c["bytes"]: c for c in doc["collectives"] if c["op"] == "allreduce"}
    assert set(groups) == set(times) and len(groups) == 5
    n = 2
    for nbytes, ts in times.items():
        g = groups[nbytes]
        algbw = nbytes / (sum(ts) / len(ts))
        assert g["calls"] == len(ts) == 3
        assert g["time_s"] == pytest.approx(sum(ts), rel=1e-9)
        assert g["algbw"] == pytest.approx(algbw, rel=1e-9)
        assert g["busbw"] == pytest.approx(algbw * 2 * (n - 1) / n, rel=1e-9)
        assert g["link"] == "nvlink" and g["link_bandwidth"] == pytest.approx(300e9)
        assert g["fraction_of_link"] == pytest.approx(g["busbw"] / 300e9)
        assert g["expected_s"] == pytest.approx(nbytes * 2 * (n - 1) / n / 300e9)
        # on the roofline: W = the adds, Q = the wire bytes; the point sits on the link's slope at busbw / B
        assert g["flops"] == pytest.approx(nbytes / 4 * (n - 1) / n)
        assert g["intensity"] * 300e9 * g["fraction_of_link"] == pytest.approx(g["achieved_flops"])
    assert [r["rank"] for r in doc["ranks"]] == [0] and doc["missing_ranks"] == "1"


def test_link_given_on_the_command_line():
    out = run_main("profile", "--trace", str(NCCL2), "-d", "a100-80g-ds", "--link", "pcie", "--json", "--no-save")
    doc = json.loads(out.stdout)
    assert {c["link"] for c in doc["collectives"]} == {"pcie"}
    assert all(c["link_bandwidth"] == pytest.approx(32e9) for c in doc["collectives"])


def test_bad_input_each_file_named_in_one_line_the_good_ranks_kept(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    shutil.copy(RANK0, d / "a_rank-0.json.gz")
    shutil.copy(RANK0, d / "b_again.json.gz")  # rank 0 again (its distributedInfo says so)
    shutil.copy(NCCL2, d / "c_other_job.json.gz")  # world 2, not 128
    data = RANK1.read_bytes()
    (d / "d_rank-1.json.gz").write_bytes(data[: len(data) // 2])  # truncated
    out = run_main("profile", "--trace", str(d), "--json", "--no-save")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0]
    lines = out.stderr.splitlines()
    again = [x for x in lines if "b_again.json.gz" in x]
    other = [x for x in lines if "c_other_job.json.gz" in x]
    cut = [x for x in lines if "d_rank-1.json.gz" in x]
    assert len(again) == 1 and "rank 0 again" in again[0] and "left out" in again[0]
    assert len(other) == 1 and "another job" in other[0] and "world size 2" in other[0]
    assert len(cut) == 1 and "truncated" in cut[0]
    assert any("missing ranks: 1-127 (1 of 128 ranks read" in x for x in lines)
    assert "Traceback" not in out.stderr


def test_no_readable_rank_is_one_error_and_exit_2(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    (d / "rank-0.json").write_text("{\"traceEvents\": [")
    out = run_main("profile", "--trace", str(d), "--no-save")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("rooftop profile: error: no trace could be read")
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run_main("profile", "--trace", str(empty), "--no-save")
    assert out.returncode == 2 and "a folder with no traces in it" in out.stderr


def test_rank_from_the_file_name_when_the_trace_does_not_say(tmp_path):
    doc = json.loads(gzip.decompress(RANK1.read_bytes()))
    del doc["distributedInfo"]
    (tmp_path / "worker_rank7.json").write_text(json.dumps(doc))
    shutil.copy(RANK0, tmp_path / "r0.json.gz")
    out = run_main("profile", "--trace", str(tmp_path / "r0.json.gz"), str(tmp_path / "worker_rank7.json"),
                  "--json", "--no-save")
    assert out.returncode == 0, out.stderr
    assert [r["rank"] for r in json.loads(out.stdout)["ranks"]] == [0, 7]


# -- the alignment, on ranks whose clocks differ ---------------------------------------------------------------


def _rank(rank: int, shift: float, late: float) -> RankSummary:
    """Three all-reduces; this rank's clock is `shift` ahead and it joins the second one `late` s after the rest."""
    colls = []
    for i, (start, end) in enumerate(((1.0, 1.2), (2.0, 2.5), (3.0, 3.1))):
        s = start + (late if i == 1 else 0.0)
        colls.append(RankCollective("allreduce", 1e6, 2, "0", s + shift, s + shift, end + shift, end - s))
    return RankSummary(rank, f"r{rank}", 1.0, 3.0, 2.0, 1.0 + late, 1.0, 0.5, None, True,
                       {"aten::mm": 0.5 + late}, tuple(colls))


def test_align_by_collective_ends_not_wall_clock():
    ranks = [_rank(0, 0.0, 0.0), _rank(1, 123.0, 0.3)]
    al = align(ranks)
    assert al.offsets[1] == pytest.approx(-123.0)
    assert al.waits[0] == pytest.approx((0.0, 0.3, 0.0))  # rank 0 waited 0.3 s for rank 1 in the second one
    assert al.waits[1] == pytest.approx((0.0, 0.0, 0.0))
    s = straggler(ranks)
    assert s.rank == 1 and s.groups[0][0] == "aten::mm" and s.groups[0][1] == pytest.approx(0.15)


def test_calls_paired_that_cannot_be_one_collective_have_no_wait():
    """Rank 1 starts its second all-to-all after rank 0's has ended (their ends aligned by the other two): no
    collective ends before its last rank joins, so this pair is no counterpart (not paired at all, though it is the
    second of its kind on each rank) and neither call has a wait."""
    ranks = []
    for rank, (s2, e2) in ((0, (2.0, 2.1)), (1, (2.5, 2.6))):
        colls = [RankCollective("alltoall", 1e6 * (rank + 1), 2, "0", s, s, e, e - s)
                 for s, e in ((1.0, 1.2), (s2, e2), (3.0, 3.1))]
        ranks.append(RankSummary(rank, f"r{rank}", 1.0, 3.0, 2.0, 1.0, 1.0, 0.5, None, True, {}, tuple(colls)))
    al = align(ranks)
    assert al.matched[1] == 2  # all-to-all sizes differ per rank: paired by their ends, the second pair none
    assert al.waits[0][1] is None and al.waits[1][1] is None
    assert al.waits[0][0] == pytest.approx(0.0) and al.waits[1][2] == pytest.approx(0.0)


def test_names_and_rank_lists():
    assert [collective_name(x) for x in ("nccl:all_reduce", "c10d::_allgather_base_", "gloo:broadcast",
                                         "reduce_scatter_tensor", "nccl:all_to_all")] == [
        "allreduce", "allgather", "broadcast", "reducescatter", "alltoall"]
    assert missing_text({3, 4, 6}, 9) == "0-2, 5, 7-8" and missing_text({0}, 1) == ""


# -- a real distributed program ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ddp(tmp_path_factory) -> tuple[dict, Path, Path]:
    """A real 2-rank gloo DDP run under torchrun, its traces kept in a folder, its profile in a store; its
    temporary folder (TMPDIR) left as it found it: empty but for torch's compile cache."""
    tmp = tmp_path_factory.mktemp("ddp")
    db, traces, temp = tmp / "p.db", tmp / "traces", tmp / "tmp"
    temp.mkdir()
    out = rooftop("profile", "--steps", "2", "--json", "--db", str(db), "--save-trace", str(traces), "--",
                  "torchrun", "--standalone", "--nproc-per-node", "2", str(DDP), TMPDIR=str(temp))
    assert out.returncode == 0, out.stderr
    assert [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")] == []  # no torchelastic_*
    return json.loads(out.stdout), db, traces


PARAMS = 64 * 256 + 256 + 256 * 8 + 8  # the DDP model's one gradient bucket, fp32


def test_torchrun_gloo_ddp_two_ranks_kept_as_one_profile(ddp):
    from rooftop.store.runs import Store

    doc, db, traces = ddp
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and doc["backend"] == "gloo" and doc["world"] == 2
    assert sorted(p.name for p in traces.iterdir()) == ["rank-0.trace.json", "rank-1.trace.json"]
    ar = [c for c in doc["collectives"] if c["op"] == "allreduce"]
    assert len(ar) == 1 and ar[0]["bytes"] == PARAMS * 4 and ar[0]["ranks"] == 2 and ar[0]["calls"] >= 2
    assert ar[0]["link"] == "net" and ar[0]["algbw"] > 0
    assert ar[0]["busbw"] == pytest.approx(ar[0]["algbw"])  # 2(n−1)/n = 1 for two ranks
    assert all(r["comm_s"] > 0 and r["comm_exposed_s"] <= r["comm_s"] for r in doc["ranks"])
    path = doc["critical_path"]  # gloo ran on the CPU: no device work to join, the lowest rank's sums, said so
    assert path["graph"] is False and path["why_not"].startswith("a CPU trace") and path["rank"] == 0
    assert path["joined_ranks"] == [] and doc["what_if"] and not any(w["retimed"] for w in doc["what_if"])
    with Store.open(db) as store:
        runs = [r for r in store.runs() if r.plan == "profile"]
        assert len(runs) == 1 and runs[0].id == doc["run_id"]
        assert runs[0].device["profile"]["critical_path"] == path
        job = runs[0].device["profile"]["job"]
        assert [r["rank"] for r in job["ranks"]] == [0, 1] and job["collectives"]


@pytest.fixture(scope="module")
def ddp_comm(ddp) -> dict:
    """A `rooftop comm` run of the DDP job's backend (gloo, world 2), kept in the job's store."""
    comm = rooftop("comm", "--backend", "gloo", "--world", "2", "--max-size", "64K", "--json", "--db", str(ddp[1]))
    assert comm.returncode == 0, comm.stderr
    return json.loads(comm.stdout)


def test_gloo_job_on_the_link_measured_by_rooftop_comm(ddp, ddp_comm):
    """With a `rooftop comm` run of the same backend in the store, the all-reduce sits on its measured link:
    the best busbw it measured is the roof, its α-β fit gives the expectation."""
    _, db, traces = ddp
    cdoc = ddp_comm
    pts = [p for p in cdoc["points"] if p["collective"] == "allreduce" and p["busbw"]]
    best, alpha = max(p["busbw"] for p in pts), cdoc["fits"]["allreduce"]["alpha_s"]
    out = run_main("profile", "--trace", str(traces), "--json", "--no-save", "--db", str(db))
    assert out.returncode == 0, out.stderr
    # no CPU was measured into this store: a CPU job on a GPU's roofs is said so, with what to do
    from rooftop.tui.services.context import FALLBACK_DEVICE

    assert f"the trace ran on the CPU: the roofs shown are {FALLBACK_DEVICE}'s, a GPU's" in out.stderr
    assert "rooftop measure --device cpu" in json.loads(out.stdout)["summary"]["device_note"]
    [ar] = [c for c in json.loads(out.stdout)["collectives"] if c["op"] == "allreduce"]
    assert ar["link_bandwidth"] == pytest.approx(best) and ar["link_source"].startswith("measured: rooftop comm run")
    assert ar["fraction_of_link"] == pytest.approx(ar["busbw"] / best)
    assert ar["expected_s"] == pytest.approx(alpha + PARAMS * 4 / best)


def test_the_ranks_per_node_torchrun_started_reach_the_links_as_a_value(tmp_path: Path) -> None:
    """torchrun's --nproc-per-node is read_job's `per_node` (it was an attribute written onto the command's options
    and read back with getattr): all 128 ranks on one node put the sampled job's groups on NVLink, said without
    the 8-GPUs-a-node assumption; no count given keeps the assumption."""
    from rooftop.models.catalog import lookup_device
    from rooftop.tui.commands.job import read_job

    dev = lookup_device("a100-80g-ds")
    links = {}
    for per_node in (None, 128):
        job = read_job([RANK0, RANK1], lambda t: (dev, ""), db=tmp_path / "none.db", per_node=per_node)[0]
        links[per_node] = {(c["link"], "assuming" in c["link_why"]) for c in job.to_dict()["collectives"]}
    assert links[None] == {("net", True)} and links[128] == {("nvlink", False)}, links


def read_watched(tmp_path, monkeypatch, most: int, held=None) -> tuple:
    """The two sampled ranks and rank 1 again as ranks 2 and 3, read by read_job (`held`: a HeldRanks) with each
    load asserting that at most `most` rank traces read before are still alive: (job, work, problems, alive)."""
    import gc
    import weakref

    from rooftop.models.catalog import lookup_device
    from rooftop.store import tracefile
    from rooftop.tui.commands.job import read_job

    doc = json.loads(gzip.decompress(RANK1.read_bytes()))
    paths = [RANK0, RANK1]
    for r in (2, 3):
        doc["distributedInfo"]["rank"] = r
        p = tmp_path / f"rank-{r}.json"
        p.write_text(json.dumps(doc))
        paths.append(p)
    alive: list[weakref.ref] = []
    real = tracefile.load_trace

    def load(p, progress=None):
        gc.collect()
        assert sum(w() is not None for w in alive) <= most, "more earlier rank traces alive than may be"
        t = real(p, progress)
        alive.append(weakref.ref(t))
        return t

    monkeypatch.setattr(tracefile, "load_trace", load)
    dev = lookup_device("a100-80g-ds")
    return (*read_job(paths, lambda t: (dev, ""), held=held, db=tmp_path / "none.db"), alive)


def test_ranks_are_read_one_at_a_time(tmp_path, monkeypatch):
    """Streamed: when a rank's trace is read, no earlier rank's trace is still alive."""
    job, work, problems, alive = read_watched(tmp_path, monkeypatch, 0)
    assert [r.rank for r in job.ranks] == [0, 1, 2, 3] and len(alive) == 4
    assert problems == ["missing ranks: 4-127 (4 of 128 ranks read: no trace given for the rest)"]
    assert work.busy_s == pytest.approx(job.ranks[0].busy_s)  # the lowest rank's op groups are the ones kept
    assert job.ranks[2].comm_s == pytest.approx(job.ranks[1].comm_s)  # the same trace, renumbered


def test_python_api_names_one_trace_per_rank(monkeypatch):
    from rooftop.probes.profiler import profile, rank_trace_path

    monkeypatch.delenv("RANK", raising=False)
    assert rank_trace_path("run.trace.json") == Path("run.trace.json")  # not a distributed job
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert rank_trace_path("out/run.trace.json") == Path("out/run.rank-3.trace.json")
    assert rank_trace_path("out/r{rank}.json") == Path("out/r3.json")
    assert profile(steps=1).recorder.trace_path == Path("rooftop-profile.rank-3.trace.json")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert rank_trace_path("run.json") == Path("run.json")


def test_unlinked_nccl_kernels_match_their_collectives_in_order():
    """A trace whose kernels name no launch: each NCCL kernel goes to the next collective issued before it."""
    from rooftop.models.trace.read import parse_trace

    def comm(ts: float, n: int) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": ts, "dur": 5,
                "args": {"Collective name": "allreduce", "In msg nelems": n, "Out msg nelems": n, "dtype": "BFloat16",
                         "Group size": 4, "Process Group Ranks": "[0, 1, 2, 3]"}}

    def kernel(ts: float, dur: float, name: str = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL") -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"stream": 7, "device": 0}}

    trace = parse_trace({"traceEvents": [comm(100, 1 << 20), comm(200, 1 << 10), kernel(150, 40), kernel(210, 8),
                                         kernel(120, 500, "gemm")]})
    colls = rank_collectives(trace)
    assert [(c.bytes, c.time_s, c.group_size, c.group_ranks) for c in colls] == [
        (2 << 20, pytest.approx(40e-6), 4, (0, 1, 2, 3)), (2 << 10, pytest.approx(8e-6), 4, (0, 1, 2, 3))]


def test_torchrun_bad_options_and_missing_script_one_line_exit_2(tmp_path):
    out = run_main("profile", "--no-save", "--", "torchrun", "--bogus", str(DDP))
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        "rooftop profile: error: torchrun's options are not valid (see `torchrun --help`)")
    out = rooftop("profile", "--no-save", "--", "torchrun", "--standalone", "--nproc-per-node", "2",
                  str(tmp_path / "missing.py"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{tmp_path / 'missing.py'}: no such script" in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("rooftop profile: error:") and "failed on rank" in last and "exit status 2" in last


async def test_profile_tab_shows_a_kept_jobs_rank_table_and_opens_each_ranks_op_groups(tmp_path):
    from textual.widgets import Static

    from tui_helpers import printed

    from rooftop.tui.app import AppConfig, create_app
    from rooftop.tui.app.widgets import FitTable

    db = tmp_path / "r.db"
    out = run_main("profile", "--trace", str(RANK0), str(RANK1), "-d", "a100-80g-ds", "--json", "--db", str(db))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    slow = doc["straggler"]["rank"]
    by = {r["rank"]: r for r in doc["ranks"]}
    app = create_app(AppConfig(device="h100", sampler=None, db_path=db, export_dir=tmp_path))
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        pane = app.query_one("#prof-job", Static)
        text = printed(pane.content)
        assert pane.display and "2 ranks of 128 (nccl)" in text and f"straggler: rank {slow}" in text
        ranks = app.query_one("#prof-ranks", FitTable)
        assert ranks.display and ranks.row_count == 2 and "exposed" in ranks.shown
        assert [str(c) for c in ranks.get_row_at(slow)][0] == f"{slow} ◂"
        ops = app.query_one("#prof-ops", FitTable)
        title = app.query_one("#prof-ops-title", Static)
        assert "rank 0's op groups" in str(title.render())
        whole = ops.row_count  # rank 0: its op groups as kept, with the memcpy / memset and overlap rows
        ranks.focus()
        await pilot.press("down")  # rank 1
        await pilot.pause()
        assert "rank 1's op groups" in str(title.render())
        rows = [[str(c) for c in ops.get_row_at(i)] for i in range(ops.row_count)]
        r1 = by[1]
        assert rows[0][3] == "idle time" and rows[1][3].startswith("communication (exposed")  # by share
        assert len(rows) == 2 + len(r1["op_groups"]) and whole != len(rows)
        top = max(r1["op_groups"], key=lambda g: g["time_alone_s"])
        assert top["op"].removeprefix("aten::").startswith(rows[2][3].rstrip("…"))
        assert rows[2][1] == fmt_time(top["time_s"]) and rows[2][0] == f"{100 * top['time_alone_s'] / r1['span_s']:.1f}%"
        await pilot.press("up")
        await pilot.pause()
        assert "rank 0's op groups" in str(title.render()) and ops.row_count == whole


WAITING_RANK = """
import os, sys, time
from pathlib import Path
import torch.distributed as dist
dist.init_process_group("gloo")
Path(sys.argv[1], f"rank{dist.get_rank()}.pid").write_text(str(os.getpid()))
time.sleep(120)  # a rank stuck on its peers: only its launcher's end can stop it
"""


def test_sigkill_of_profile_takes_its_torchrun_ranks_with_it(tmp_path):
    import signal
    import time

    script = tmp_path / "waits.py"
    script.write_text(WAITING_RANK)
    proc = subprocess.Popen([sys.executable, "-m", "rooftop.tui.cli", "profile", "--no-save", "--", "torchrun",
                             "--standalone", "--nproc-per-node", "2", str(script), str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline:
            pids = [int(p.read_text()) for p in tmp_path.glob("rank*.pid") if p.read_text()]
            time.sleep(0.2)
        assert len(pids) == 2, "the ranks never started"
        proc.kill()  # SIGKILL to rooftop alone, as `kill -9` would: no cleanup runs
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids)
    finally:
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


async def _roofline_series(db: Path, device: str, tmp_path: Path) -> list:
    from rooftop.tui.app import AppConfig, create_app
    from rooftop.tui.app.widgets import RooflinePlot

    app = create_app(AppConfig(device=device, sampler=None, db_path=db, export_dir=tmp_path, initial_tab="roofline"))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        return list(app.query_one("#rl-plot", RooflinePlot).series)


async def test_roofline_tab_draws_a_kept_jobs_allreduces_on_their_link_slope(tmp_path):
    """Each all-reduce group sits on the device's NVLink slope B·I at its fraction of the link."""
    db = tmp_path / "r.db"
    out = run_main("profile", "--trace", str(NCCL2), "-d", "a100-80g-ds", "--json", "--db", str(db))
    assert out.returncode == 0, out.stderr
    groups = [c for c in json.loads(out.stdout)["collectives"] if c["op"] == "allreduce"]
    series = await _roofline_series(db, "a100-80g-ds", tmp_path)
    [slope] = [s for s in series if s.kind == "slope" and " nvlink " in s.label]  # the datasheet's: not twice
    b = slope.ys[0] / slope.xs[0]
    assert b == pytest.approx(300e9)
    points = {s.label: s for s in series if s.kind == "point" and s.label.startswith("allreduce ")}
    assert len(points) == len(groups) == 5
    for g in groups:
        [p] = [p for p in points.values() if p.ys[0] == pytest.approx(g["achieved_flops"])]
        assert p.xs[0] == pytest.approx(g["intensity"])
        assert p.ys[0] == pytest.approx(b * p.xs[0] * g["fraction_of_link"])
        pct = float(p.label.removesuffix("% of nvlink").rsplit(" ", 1)[1])  # "allreduce 25.0 MiB 2% of nvlink"
        assert pct == pytest.approx(100 * g["fraction_of_link"], abs=0.5)


async def test_roofline_tab_draws_the_link_a_gloo_job_crossed(ddp, ddp_comm, tmp_path):
    """A gloo job crossed sockets (net), a level the device's chart has none of: the link `rooftop comm` measured
    is drawn, and the job's all-reduce sits on it at busbw / B."""
    _, db, traces = ddp
    out = run_main("profile", "--trace", str(traces), "--json", "--db", str(db))  # kept after the comm run
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    [ar] = [c for c in doc["collectives"] if c["op"] == "allreduce"]
    assert ar["link_source"].startswith("measured: rooftop comm run")
    series = await _roofline_series(db, doc["summary"]["device"], tmp_path)
    [slope] = [s for s in series if s.kind == "slope" and " net " in s.label]
    assert slope.ys[0] / slope.xs[0] == pytest.approx(ar["link_bandwidth"])
    [p] = [s for s in series if s.kind == "point" and s.label.startswith("allreduce ")]
    assert p.ys[0] == pytest.approx(ar["link_bandwidth"] * p.xs[0] * ar["fraction_of_link"])


ENDS_WITH_HANDLERS = """
import atexit, sys
from pathlib import Path
import torch
marker = Path(sys.argv[1])
atexit.register(lambda: marker.write_text("ran"))  # the script's own exit handler
torch.ones(4).sum()
print("done", flush=False)
sys.exit(int(sys.argv[2]))
"""


@pytest.mark.parametrize("status", [0, 3])
def test_a_rank_ends_with_its_scripts_exit_handlers_and_status(tmp_path, status):
    """A profiled rank skips the interpreter's teardown (where torch's DDP teardown can deadlock a rank), but
    not the script's exit handlers, its output, its trace or its exit status."""
    script = tmp_path / "ends.py"
    script.write_text(ENDS_WITH_HANDLERS)
    marker = tmp_path / "atexit.txt"
    out = subprocess.run([sys.executable, "-m", "rooftop.probes.rankrun", str(tmp_path / "t"), "1", str(script),
                          str(marker), str(status)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "RANK": "0"})
    assert out.returncode == status, out.stderr
    assert marker.read_text() == "ran" and "done" in out.stdout
    assert (tmp_path / "t" / "rank-0.trace.json").is_file() or status != 0


def test_a_collective_no_other_rank_recorded_waits_for_nobody(sampled):
    """The sampled ranks each recorded some all-reduces the other did not: such a call has no counterpart, so
    no wait (n/a), never its whole time as a wait; an all-reduce of another size on the other rank is no
    counterpart (only an all-to-all's size differs per rank)."""
    doc, _ = sampled
    sizes = {r: {c.bytes for c in rank_collectives(load_trace(p)) if c.collective == "allreduce"}
             for r, p in ((0, RANK0), (1, RANK1))}
    alone = sizes[0] ^ sizes[1]
    assert 107822144 in alone  # 103 MiB: rank 0's alone
    rows = {c["bytes"]: c for c in doc["collectives"] if c["op"] == "allreduce"}
    for size in alone:
        c = rows[size]
        assert c["ranks"] == 1 and c["wait_s"] is None and c["own_s"] is None and c["busbw_own"] is None
    both = [rows[s] for s in sizes[0] & sizes[1]]
    assert both and all(c["ranks"] == 2 for c in both)
    assert any(c["wait_s"] is not None and 0 <= c["wait_s"] < c["time_s"] for c in both)
    out = run_main("profile", "--trace", str(RANK0), str(RANK1), "--no-save", "-d", "a100-80g-ds")
    lines = out.stdout.splitlines()
    [head] = [x for x in lines if x.startswith("collective ") and " wait " in x]
    [row] = [x for x in lines if x.startswith("allreduce") and "103 MiB" in x]
    time_end, wait_end = head.index(" time ") + 5, head.index(" wait ") + 5  # right-aligned columns
    assert row[:time_end].endswith("47.7 ms") and row[time_end:wait_end].strip() == ""  # its time, no wait


def test_clock_offsets_stay_in_the_traces_own_clocks_when_times_count_from_each_first_event():
    """Each trace's times count from its first event (µs since 1970 lose precision as seconds); the clock offset
    between two ranks is still the one between their traces' clocks: rank 1's trace stamped 7 s later is 7 s
    further off, with the same waits."""
    from rooftop.models.catalog import lookup_device
    from rooftop.models.program.job import summarize
    from rooftop.models.trace.read import parse_trace
    from rooftop.models.program.workload import build_workload

    def rank(doc_or_path, r):
        t = load_trace(doc_or_path) if isinstance(doc_or_path, Path) else parse_trace(doc_or_path)
        return summarize(t, build_workload(t, lookup_device("a100")), r, f"r{r}")

    doc = json.loads(gzip.decompress(RANK1.read_bytes()))
    for e in doc["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] += 7_000_000
    r0 = rank(RANK0, 0)
    before, after = align([r0, rank(RANK1, 1)]), align([r0, rank(doc, 1)])
    assert before.matched[1] >= 5
    assert after.offsets[1] - before.offsets[1] == pytest.approx(-7.0, abs=1e-9)
    assert after.waits == before.waits
    first = min(e["ts"] for e in raw_events(RANK1) if e.get("ph") == "X")
    assert abs(before.offsets[1]) < 1.0 and first > 1.6e15  # one job's clocks: within a second, in µs since 1970


def test_exposed_communication_never_exceeds_communication_by_rounding():
    from rooftop.models.program.job import exposed

    # times counted from a trace's first event: sums of these round in the last digit (0.0010868110000000033
    # exposed beside 0.0010868109999999998 communication was seen on a real gloo job)
    comm = [(0.00038708223230210503, 0.0005239730081664131), (0.0019530948022926224, 0.001980985592970351),
            (0.0035142715040122926, 0.003985792283991065)]
    compute = [(0.0006511321218034063, 0.0016083582971017918), (0.0020463418757010023, 0.002949191683905957),
               (0.004794482080407082, 0.005681385140221351)]  # no compute overlaps any comm: all of it is exposed
    c, _k, e = exposed(comm, compute)
    assert 0.0 <= e <= c
    assert e == pytest.approx(c)
