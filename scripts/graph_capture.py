"""The graph-capture join on the shared replay + capture pairs, as figures: how much of each replay it joins, and the
GEMM FLOPs of the joined ops beside TraceLens's own (its GEMM.csv, on the same joined traces).

    python3 scripts/graph_capture.py

Per pair: graph launches joined, replayed kernels and the share of their time that got the op that launched them
at capture. Then one row per GEMM row of TraceLens's GEMM.csv: rooftop's GFLOP per call for the same op and M, N,
K, TraceLens's, and their ratio; a framework wrapper (vllm::rocm_unquantized_gemm, aiter::gemm_a16w16), which
TraceLens lists beside the aten op it calls, has no model of its own in rooftop yet and is said so. The default
suite checks the same (tests/test_graph_capture.py).
"""

from __future__ import annotations

import csv
from pathlib import Path

from rooftop.models.trace.capture import join_captures
from rooftop.models.program.opcontext import reads_inside
from rooftop.models.catalog import lookup_device
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace

MORE = Path(__file__).resolve().parent.parent / "tests" / "data" / "real-traces" / "more"
PAIRS = (("vllm-decode-full-mi300x", "vllm_decode_full"), ("sglang-qwen3-8b-decode-mi300x", "sglang_decode"))


def main() -> None:
    dev = lookup_device("mi300x-ds")
    table = []
    for stem, csv_dir in PAIRS:
        replay, capture = MORE / f"{stem}.replay.json.gz", MORE / f"{stem}.capture.json.gz"
        trace, rep = join_captures(load_trace(replay), [(capture.name, load_trace(capture))], whole_subtree=reads_inside)
        work = build_workload(trace, dev)
        print(f"{stem}: {rep.joined}/{rep.launches} graph launches joined, {rep.kernels_joined}/{rep.kernels} "
              f"replayed kernels, {rep.share:.2%} of their time ({rep.time_joined_s * 1e3:.3f} of "
              f"{rep.time_s * 1e3:.3f} ms)")
        with open(MORE / "tracelens-csv" / csv_dir / "GEMM.csv", newline="") as f:
            for row in csv.DictReader(f):
                mnk = {"m": int(row["param: M"]), "n": int(row["param: N"]), "k": int(row["param: K"])}
                theirs = float(row["GFLOPS_first"])
                found = [g for g in work.groups if g.op == row["name"] and dict(g.shape) == mnk]
                ours = found[0].flops / found[0].calls / 1e9 if found else None
                where = found[0].owner if found else "no rooftop model (wrapper of the aten op below it)"
                table.append((stem.split("-")[0], row["name"], f"{mnk['m']}×{mnk['n']}×{mnk['k']}", ours, theirs,
                              where))
    print(f"\n{'pair':7} {'op':30} {'M×N×K':18} {'rooftop GFLOP':>14} {'TraceLens GFLOP':>16} {'ratio':>8}  owner")
    for pair, op, mnk, ours, theirs, where in table:
        ratio = f"{ours / theirs:.5f}" if ours is not None else "—"
        shown = f"{ours:.6g}" if ours is not None else "—"
        print(f"{pair:7} {op:30} {mnk:18} {shown:>14} {theirs:>16.6g} {ratio:>8}  {where}")


if __name__ == "__main__":
    main()
