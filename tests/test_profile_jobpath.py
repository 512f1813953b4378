"""A distributed job's critical path: each collective joined across the ranks (the last rank to arrive sets its
end), run back from the rank whose steps end last; the ranks' traces held for it only up to a limit (past it, the
lowest rank's own path, said so); --window NAME for a job; kept in the store and given back by `show`.

Small two-rank jobs made here as Kineto JSON files (answers known from their events, µs in the traces, seconds in
the answers), and the real sampled ranks of a 128-rank job."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from rooftop.models.program import jobpath
from rooftop.models.program.critpath import SPLIT_KEYS, STRAGGLER

from inprocess import run_main
from test_critpath_synthetic import BIG_MM, NCCL, Events
from test_profile_job import read_watched

US = 1e-6
REAL = Path(__file__).parent / "data" / "real-traces"
RANK0, RANK1 = REAL / "trace_filter_sampled_rank-0.json.gz", REAL / "trace_filter_sampled_rank-1.json.gz"


def _rank(arrive: float, post: float, annotate: bool = False) -> Events:
    """One rank on one stream: a matmul until `arrive` (none when it arrives at 10), the all-reduce from there to
    110 µs (the late rank arrives at 100, so every rank's ends at 110), then a kernel of `post` µs after it; every
    launch made at once (0.5–7 µs), so the device, not the CPU, sets when each rank arrives."""
    e = Events()
    e.x("cpu_op", "aten::empty", 0, 0.1)  # both clocks count from 0
    if annotate:
        e.x("user_annotation", "fwd", 0.2, 20)
    if arrive > 10:
        e.launch("gemm_pre", 0.5, 2, arrive - 2, stream=7, op=BIG_MM)
    e.launch(NCCL, 3, arrive, 110 - arrive, stream=7)
    e.launch("tail_post", 5, 110, post, stream=7)
    return e


def _job(tmp_path: Path, *ranks: Events) -> list[str]:
    paths = []
    for r, e in enumerate(ranks):
        p = tmp_path / f"job.rank-{r}.json"
        p.write_text(json.dumps({"traceEvents": e.ev, "distributedInfo": {"rank": r, "world_size": len(ranks),
                                                                          "backend": "nccl"}}))
        paths.append(str(p))
    return paths


def _profile(*args: str) -> dict:
    out = run_main("profile", "--trace", *args, "-d", "h200", "--json", "--no-save")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _what(doc: dict, name: str) -> dict:
    (w,) = [x for x in doc["what_if"] if x["name"] == name]
    return w


def test_the_late_rank_sets_the_collectives_end_on_the_path_of_the_rank_that_ends_last(tmp_path):
    """Rank 0 arrives at 10 µs, rank 1 at 100 µs; rank 0's work after the all-reduce (190 µs) ends last, at 300 µs.
    Its path runs back from 300 through its all-reduce's end, to rank 1's arrival (the late rank sets the end) and
    rank 1's matmul: 97 µs on the other rank, waiting on peers. The late rank as fast as the median (10 µs) saves
    exactly its 90 µs late."""
    doc = _profile(*_job(tmp_path, _rank(10, 190), _rank(100, 140)))
    c = doc["critical_path"]
    assert c["graph"] and c["rank"] == 0 and c["joined_ranks"] == [0, 1] and c["not_joined"] == ""
    assert c["length_s"] == pytest.approx(297 * US, abs=1e-12)  # rank 0's first launch at 3 to 300
    assert c["split"]["peers"] == pytest.approx(97 * US, abs=1e-12)  # rank 1 until it arrived at 100
    assert c["split"]["device"] == pytest.approx(200 * US, abs=1e-12)  # the all-reduce's last 10 and the 190 after
    assert sum(c["split"].values()) == pytest.approx(c["length_s"], abs=1e-12)
    straggler = _what(doc, STRAGGLER)
    assert straggler["retimed"] and straggler["saving_s"] == pytest.approx(90 * US, abs=1e-12)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]  # the rank table is still there


def test_the_path_runs_from_the_late_rank_when_it_ends_last(tmp_path):
    """Rank 1, late at 100 µs, also ends last (250 µs against rank 0's 200): the path is its own, through its matmul
    and the all-reduce it came late to, with no wait on peers; the median's arrival takes its 90 µs off."""
    doc = _profile(*_job(tmp_path, _rank(10, 90), _rank(100, 140)))
    c = doc["critical_path"]
    assert c["rank"] == 1 and c["joined_ranks"] == [0, 1]
    assert c["length_s"] == pytest.approx(249.5 * US, abs=1e-12)  # its first launch at 0.5 to 250
    assert c["split"]["peers"] == 0.0
    assert c["split"]["device"] == pytest.approx(248 * US, abs=1e-12)  # 98 matmul, 10 all-reduce, 140 after
    assert _what(doc, STRAGGLER)["saving_s"] == pytest.approx(90 * US, abs=1e-12)
    assert {o["label"].split()[0] for o in c["ops"]} >= {"mm"}  # named as the op table names its op groups


def test_past_the_limit_the_lowest_ranks_own_path_said_so(tmp_path, monkeypatch):
    """Held for one rank only: rank 0's own path, its all-reduce its own 100 µs (no peer to wait on), said in one
    line; no straggler what-if (nothing joined)."""
    monkeypatch.setattr(jobpath, "PATH_RANKS", 1)
    paths = _job(tmp_path, _rank(10, 190), _rank(100, 140))
    doc = _profile(*paths)
    c = doc["critical_path"]
    assert c["rank"] == 0 and c["joined_ranks"] == []
    assert c["not_joined"] == ("the job's 2 rank traces are more than its critical path holds at once (1 ranks, "
                               "4,000,000 events), so each collective is not joined across the ranks")
    assert c["split"]["peers"] == 0.0 and c["split"]["device"] == pytest.approx(290 * US, abs=1e-12)
    assert STRAGGLER not in {w["name"] for w in doc["what_if"]}
    out = run_main("profile", "--trace", *paths, "-d", "h200", "--no-save", COLUMNS="100")
    assert out.returncode == 0, out.stderr
    assert "rank 0's own path: the job's 2 rank traces are more than its critical path holds" in out.stdout


def test_window_names_an_annotation_of_a_job_or_is_one_line(tmp_path):
    paths = _job(tmp_path, _rank(10, 190, annotate=True), _rank(100, 140, annotate=True))
    doc = _profile(*paths, "--window", "fwd")
    assert doc["critical_path"]["window"] == "fwd" and doc["critical_path"]["joined_ranks"] == [0, 1]
    out = run_main("profile", "--trace", *paths, "-d", "h200", "--window", "bwd", "--no-save")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == ("rooftop profile: error: --window bwd: the trace has no annotation "
                                                   "named 'bwd': it has 'fwd'")
    # one line, before anything else: the roofs are not picked (nor said) for a window the job lacks
    nccl = Path(__file__).parent / "data" / "real-traces" / "nccl_parser_config_nccl_data.json.gz"
    out = run_main("profile", "--trace", str(nccl), "--window", "nope", "--no-save")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith("rooftop profile: error: --window nope: the trace has no annotation named 'nope'")


def test_ranks_held_for_the_path_within_the_limit_then_only_the_lowest(tmp_path, monkeypatch):
    """Four ranks read, two held at most: at each read no more than two traces are alive (the lowest and the one
    read once past the limit), and after, the lowest alone."""
    held = jobpath.HeldRanks(ranks=2)
    job, _, _, alive = read_watched(tmp_path, monkeypatch, 2, held)
    assert [r.rank for r in job.ranks] == [0, 1, 2, 3] and held.over and held.read == 4
    assert [h.rank for h in held.of({0, 1, 2, 3})] == [0]
    gc.collect()
    assert [w() is not None for w in alive] == [True, False, False, False]


def test_the_sampled_ranks_of_a_real_job_joined_kept_and_shown(tmp_path):
    """Two ranks of a 128-rank job: rank 1's steps end last on the job's clock; the path's split sums to its length,
    every what-if within [0, length]; the store keeps it and `show` gives it back with whose path it is."""
    db = tmp_path / "p.db"
    out = run_main("profile", "--trace", str(RANK0), str(RANK1), "-d", "a100-80g-ds", "--json", "--db", str(db))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    c = doc["critical_path"]
    assert c["graph"] and c["rank"] == 1 and c["joined_ranks"] == [0, 1]
    assert c["window"] == "ProfilerStep#551–#552 (2 steps)" and len(c["steps"]) == 2
    assert set(c["split"]) == set(SPLIT_KEYS)
    assert sum(c["split"].values()) == pytest.approx(c["length_s"], rel=1e-9)
    assert all(0 <= w["saving_s"] <= c["length_s"] and w["length_s"] <= c["length_s"] for w in doc["what_if"])
    assert STRAGGLER in {w["name"] for w in doc["what_if"]}
    shown = run_main("show", doc["run_id"][:8], "--json", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    back = json.loads(shown.stdout)
    assert back["critical_path"] == c and back["what_if"] == doc["what_if"] and back["fix_first"] == doc["fix_first"]
    text = run_main("show", doc["run_id"][:8], "--db", str(db), COLUMNS="100")
    assert text.returncode == 0, text.stderr
    assert "joined across ranks 0-1 at their collectives" in text.stdout and "rank 1, whose steps end last" in text.stdout


def test_one_rank_of_a_job_its_steps_before_its_first_event_kept_and_shown(tmp_path):
    """Rank 0 alone of the 128-rank job: its own path (no other rank read), its first step starting 0.157 s before
    the trace's first event (its clock's zero): the steps' times count from the first one's start (none negative),
    kept, and `show` gives it back."""
    db = tmp_path / "p.db"
    out = run_main("profile", "--trace", str(RANK0), "-d", "a100-80g-ds", "--json", "--db", str(db))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    c = doc["critical_path"]
    assert c["rank"] == 0 and c["joined_ranks"] == [] and c["steps"][0]["start_s"] == 0.0
    assert all(s["end_s"] - s["start_s"] >= s["length_s"] - 1e-9 >= 0 and s["start_s"] >= 0 for s in c["steps"])
    shown = run_main("show", doc["run_id"][:8], "--db", str(db), COLUMNS="100")
    assert shown.returncode == 0 and "malformed" not in shown.stderr, shown.stderr
    assert "rank 0's own path: no other rank's trace was read" in shown.stdout


def test_the_sampled_ranks_collectives_are_joined_only_to_the_same_call():
    """The sampled ranks' traces keep 10 collectives each, not the same ones (all run as NCCL SendRecv kernels, so
    the n-th kernel of a name pairs calls up to 253 ms apart). Joined as the job's alignment pairs them: five calls
    both ranks ran, each pair the same collective on the same process group, of the same size (an all-to-all's
    differs per rank), ending within 0.4 ms on the graph's clock; the alignment pairs the same five."""
    from rooftop.models.program.collectives import collective_kernels
    from rooftop.models.program.critpath import peer_windows, windows_of
    from rooftop.models.program.depgraph import build_graph
    from rooftop.models.program.job import PER_RANK_SIZES, pair_collectives
    from rooftop.store.tracefile import load_trace

    t0, t1 = load_trace(RANK0), load_trace(RANK1)
    _, names, spans = windows_of(t0)
    g = build_graph([t0, t1], [spans, peer_windows(t1, names, None)])
    of_kernel = [{k: c for c, ks in collective_kernels(t) for k in ks} for t in (t0, t1)]
    assert len(g.comm_groups) == 5
    for a, b in g.comm_groups:
        c0, c1 = (of_kernel[g.act_rank[x]][g.act_index[x]] for x in (a, b))
        assert (c0.collective, c0.group, c0.via) == (c1.collective, c1.group, c1.via)
        assert c0.bytes == c1.bytes or c0.collective in PER_RANK_SIZES
        assert abs(g.time[2 * a + 1] - g.time[2 * b + 1]) < 0.4e-3
    colls = [[c for c, _ in collective_kernels(t)] for t in (t0, t1)]
    assert pair_collectives(*colls, (t1.origin_us - t0.origin_us) * US) == [(1, 0), (2, 2), (4, 4), (8, 8), (9, 9)]


def test_a_jobs_path_builds_its_graph_once_and_follows_the_rank_that_ends_last(monkeypatch):
    """Which rank ends last is read from the ranks' windows as the graph places their activities, without a graph
    of its own: one graph per job path (a two-rank graph of the sampled ranks is ~1 s here), from rank 1."""
    from rooftop.models.program import critpath, depgraph
    from rooftop.models.catalog import lookup_device
    from rooftop.models.program.workload import build_workload
    from rooftop.store.tracefile import load_trace

    built = []
    real = depgraph.build_graph

    def counted(*a, **k):
        built.append(1)
        return real(*a, **k)

    for mod in (depgraph, critpath, jobpath):
        if hasattr(mod, "build_graph"):
            monkeypatch.setattr(mod, "build_graph", counted)
    dev = lookup_device("a100-80g-ds")
    ranks = [jobpath.RankTrace(r, t, build_workload(t, dev)) for r, t in enumerate(map(load_trace, (RANK0, RANK1)))]
    cp, joined, _ = jobpath.job_path(ranks)
    assert len(built) == 1 and joined.rank == 1 and joined.ranks == (0, 1) and cp.graph
