"""A job's traces whose distributedInfo or names lie (the failing cases of a hostile test): an impossible world
size, a rank outside the world, a number in a name that is no rank. Each file gets one line naming it and what
is allowed; nothing eats memory, nothing contradicts itself."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from inprocess import run_main

REAL = Path(__file__).parent / "data" / "real-traces"
RANK0, RANK1 = REAL / "trace_filter_sampled_rank-0.json.gz", REAL / "trace_filter_sampled_rank-1.json.gz"


def _rank0() -> dict:
    """Rank 0 of a 128-rank NCCL job."""
    return json.loads(gzip.decompress(RANK0.read_bytes()))


def _write(doc: dict, path: Path, **dist: object) -> Path:
    doc["distributedInfo"].update(dist)
    path.write_text(json.dumps(doc))
    return path


def _lines(err: str, name: str) -> list[str]:
    return [x for x in err.splitlines() if name in x]


def test_a_world_size_of_a_trillion_is_refused_per_file_not_listed(tmp_path):
    doc = _rank0()
    a = _write(doc, tmp_path / "x_rank-0.json", world_size=10**12)
    b = _write(doc, tmp_path / "x_rank-1.json", rank=1)
    out = run_main("profile", "--trace", str(a), str(b), "--no-save", "-d", "h200")
    assert out.returncode == 2 and "Traceback" not in out.stderr and "internal error" not in out.stderr
    for name in ("x_rank-0.json", "x_rank-1.json"):
        [line] = _lines(out.stderr, name)
        assert "world_size 1000000000000" in line and "1..1,048,576" in line and "left out" in line
    out = run_main("profile", "--trace", str(a), "--no-save", "-d", "h200")  # one file named: its line alone
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "x_rank-0.json: world_size 1000000000000" in out.stderr and "left out" not in out.stderr


def test_the_largest_world_allowed_says_its_missing_ranks_as_ranges(tmp_path):
    doc = _rank0()
    a = _write(doc, tmp_path / "a.json", world_size=2**20)
    b = _write(doc, tmp_path / "b.json", rank=5)
    out = run_main("profile", "--trace", str(a), str(b), "--json", "--no-save", "-d", "h200")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["world"] == 2**20 and [r["rank"] for r in got["ranks"]] == [0, 5]
    assert got["missing_ranks"] == "1-4, 6-1048575"
    assert "missing ranks: 1-4, 6-1048575 (2 of 1048576 ranks read: no trace given for the rest)" in out.stderr


def test_a_rank_outside_the_world_or_not_a_number_is_left_out_with_the_allowed_range(tmp_path):
    doc = _rank0()
    ok = _write(doc, tmp_path / "ok.json")
    bad = {"neg": -1, "big": 128, "bool": True, "text": "1"}
    paths = [_write(doc, tmp_path / f"r_{k}.json", rank=v) for k, v in bad.items()]
    out = run_main("profile", "--trace", str(ok), *map(str, paths), "--json", "--no-save", "-d", "h200")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert [r["rank"] for r in got["ranks"]] == [0] and got["missing_ranks"] == "1-127"
    for k in bad:
        [line] = _lines(out.stderr, f"r_{k}.json")
        assert "a whole number 0..127, world size 128" in line and line.endswith("left out")
    assert "rank -1 in its distributedInfo is outside" in out.stderr
    assert "rank 128 in its distributedInfo is outside" in out.stderr
    assert "rank True in its distributedInfo is not a rank" in out.stderr
    assert "missing ranks: 1-127 (1 of 128 ranks read: no trace given for the rest)" in out.stderr


def test_a_rank_beyond_a_world_given_later_is_left_out(tmp_path):
    doc = _rank0()
    del doc["distributedInfo"]["world_size"]
    early = _write(doc, tmp_path / "w_rank-200.json", rank=200)  # read first: no world size known yet
    late = _write(_rank0(), tmp_path / "w_rank-0.json")
    out = run_main("profile", "--trace", str(early), str(late), "--json", "--no-save", "-d", "h200")
    assert out.returncode == 0, out.stderr
    assert [r["rank"] for r in json.loads(out.stdout)["ranks"]] == [0]
    [line] = _lines(out.stderr, "w_rank-200.json")
    assert "rank 200 is outside the job's ranks (0..127, world size 128)" in line


def _no_dist(src: Path, dest: Path) -> str:
    doc = json.loads(gzip.decompress(src.read_bytes()))
    del doc["distributedInfo"]
    dest.write_text(json.dumps(doc))
    return str(dest)


def test_a_date_or_version_in_a_name_is_no_rank(tmp_path):
    a = _no_dist(RANK0, tmp_path / "train-20261130.json")
    b = _no_dist(RANK1, tmp_path / "train-20261201.json")
    out = run_main("profile", "--trace", a, b, "--no-save", "-d", "h200")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    for name in ("train-20261130.json", "train-20261201.json"):
        [line] = _lines(out.stderr, name)
        assert "no rank in its distributedInfo or its name (name such files …rank-N…): left out" in line
    assert "20261130" not in out.stderr.replace("train-20261130", "")
    c = _no_dist(RANK0, tmp_path / "qwen2.5-frank3.json")
    d = _no_dist(RANK1, tmp_path / "mi250_ROCm6_2.json")
    out = run_main("profile", "--trace", c, d, "--no-save", "-d", "h200")
    assert out.returncode == 2 and len(_lines(out.stderr, "no rank in its distributedInfo")) == 2


def test_a_rank_in_the_name_is_taken_in_its_usual_spellings(tmp_path):
    names = ("job_rank3.json", "job.Rank-1.json", "rank_0.json")
    paths = [_no_dist(src, tmp_path / n) for src, n in zip((RANK0, RANK1, RANK0), names)]
    out = run_main("profile", "--trace", *paths, "--json", "--no-save", "-d", "h200")
    assert out.returncode == 0, out.stderr
    assert [r["rank"] for r in json.loads(out.stdout)["ranks"]] == [0, 1, 3]


# -- files of two jobs, and the ranks a job lacks -------------------------------------------------------------------

NCCL2 = REAL / "nccl_parser_config_nccl_data.json.gz"  # rank 0 of a 2-rank DDP job: its process group, NCCL 2.17.1


def _ddp(path: Path, rank: int, edit=None) -> Path:
    doc = json.loads(gzip.decompress(NCCL2.read_bytes()))
    doc["distributedInfo"]["rank"] = rank
    if edit:
        edit(doc)
    path.write_text(json.dumps(doc))
    return path


def _job(tmp_path: Path, edit) -> tuple[dict, str, dict]:
    """Rank 0 as recorded and rank 1 as `edit` makes it: the job's JSON, stderr, and rank 0's alone."""
    a, b = _ddp(tmp_path / "a.json", 0), _ddp(tmp_path / "b.json", 1, edit)
    both = run_main("profile", "--trace", str(a), str(b), "-d", "a100", "--json", "--no-save")
    alone = run_main("profile", "--trace", str(a), "-d", "a100", "--json", "--no-save")
    assert both.returncode == 0 and alone.returncode == 0, both.stderr
    return json.loads(both.stdout), both.stderr, json.loads(alone.stdout)


def _calls(doc: dict) -> int:
    return sum(c["calls"] for c in doc["collectives"])


def test_the_same_program_recorded_an_hour_later_is_another_run_not_rank_1():
    """Two runs of one 2-rank program: their distributedInfo and collectives are the same, so they were merged,
    each collective's calls and time summed over both. Their clocks say they ended an hour apart."""
    import tempfile

    def later(doc):
        doc["baseTimeNanoseconds"] += 3600 * 10**9

    with tempfile.TemporaryDirectory() as d:
        doc, err, alone = _job(Path(d), later)
    assert [r["rank"] for r in doc["ranks"]] == [0] and _calls(doc) == _calls(alone) > 0
    [line] = _lines(err, "b.json")
    assert "rank 1: its collectives ended 3600 s apart from rank 0's in wall-clock time" in line
    assert line.endswith("another run, or other steps: left out")
    assert "missing ranks: 1 (1 of 2 ranks read: no trace given for the rest)" in err


def test_ranks_whose_collectives_pair_with_none_are_of_another_job(tmp_path):
    """A rank of another model (its all-reduces of other sizes) under the same distributedInfo: no collective of
    it pairs with rank 0's, so none can be aligned nor summed with them."""
    def other_model(doc):
        for e in doc["traceEvents"]:
            a = e.get("args") or {}
            for k in ("In msg nelems", "Out msg nelems"):
                if isinstance(a.get(k), int):
                    a[k] = a[k] * 3 + 1

    doc, err, alone = _job(tmp_path, other_model)
    assert [r["rank"] for r in doc["ranks"]] == [0] and _calls(doc) == _calls(alone)
    [line] = _lines(err, "b.json")
    assert "rank 1: its 21 collectives pair with none of rank 0's 21 in the process groups both used" in line
    assert line.endswith("another job: left out")


def test_a_process_group_or_nccl_version_of_another_job_is_said_and_left_out(tmp_path):
    def regroup(doc):
        doc["distributedInfo"]["pg_config"][0]["ranks"] = [0, 3]
        doc["distributedInfo"]["nccl_version"] = "2.18.3"

    doc, err, _ = _job(tmp_path, regroup)
    assert [r["rank"] for r in doc["ranks"]] == [0]
    [line] = _lines(err, "b.json")
    assert "from another job (NCCL version 2.18.3 against 2.17.1 in" in line
    assert "process group 0 has ranks [0, 3] against ranks [0, 1] in" in line and line.endswith("left out")


def test_a_missing_rank_0_is_said_to_be_missing(tmp_path):
    """'ranks missing: 0 of 2' read as 'none of 2 missing'."""
    out = run_main("profile", "--trace", str(_ddp(tmp_path / "b.json", 1)), "-d", "a100", "--no-save")
    assert out.returncode == 0
    assert "missing ranks: 0 (1 of 2 ranks read: no trace given for the rest)" in out.stderr
    assert "0 of 2" not in out.stderr
