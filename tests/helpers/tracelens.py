"""rooftop's W and Q beside TraceLens's per-op figures on the two shared graph pairs (vLLM and SGLang decode, MI300X).

TraceLens's CSVs (tests/data/real-traces/more/tracelens-csv/) give, per op and shapes, GFLOPS and data moved per
call (in MiB: 2^20 bytes) on the replay joined to its capture. Each row's op is found in the capture trace (or,
for the ops that run eagerly around the graph, the replay trace) by its name and recorded Input Dims, types and
Concrete Inputs, and costed by rooftop from that record: `cost_op`, and where the record alone is not enough the
ops around it (`models.opcontext`: attention's lengths from the replay's iteration annotation, a MoE's experts from
the ops inside it). TraceLens's MoE rows are two pseudo-ops (up, down) of one vllm::moe_forward call: summed.

Run it to print the table: `.venv/bin/python tests/helpers/tracelens.py`.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

MORE = Path(__file__).parent.parent / "data" / "real-traces" / "more"
PAIRS = {"vllm_decode_full": "vllm-decode-full-mi300x", "sglang_decode": "sglang-qwen3-8b-decode-mi300x"}
CSVS = ("GEMM", "InferenceAttention_fwd", "RMSNorm_fwd", "MoE_unfused_fwd", "UnaryElementwise", "RoPE_fwd",
        "Reduce_fwd")
MIB = 2.0 ** 20


@dataclass
class Row:
    pair: str
    table: str
    op: str
    shapes: str
    ours_gflop: float
    ours_mib: float
    theirs_gflop: float
    theirs_mib: float | None
    model: str

    @property
    def w_ratio(self) -> float | None:
        return self.ours_gflop / self.theirs_gflop if self.theirs_gflop else None

    @property
    def q_ratio(self) -> float | None:
        return self.ours_mib / self.theirs_mib if self.theirs_mib else None


def _key(name: str, dims: object, types: object, concrete: object) -> str:
    return json.dumps([name, dims, [str(t) for t in types or []], [str(c) for c in concrete or []]])


def _records(pair: str) -> tuple[dict, dict]:
    """(capture trace, replay trace) of a pair: each its ops by (name, dims, types, concrete) → op index."""
    from rooftop.store.tracefile import load_trace

    out = []
    for part in ("capture", "replay"):
        trace = load_trace(MORE / f"{PAIRS[pair]}.{part}.json.gz")
        index: dict[str, int] = {}
        for i, o in enumerate(trace.ops):
            index.setdefault(_key(o.name, [list(d) if isinstance(d, (list, tuple)) else d for d in o.dims],
                                  o.types, o.concrete), i)
        out.append((trace, index))
    return tuple(out)


def _lengths(pair: str):
    """The replay's iteration annotation: the step's query and key lengths."""
    from rooftop.models.program.opcost.inference import lengths_of

    doc = json.loads(gzip.open(MORE / f"{PAIRS[pair]}.replay.json.gz").read())
    names = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"}
    [got] = [g for n in names if (g := lengths_of(n)) is not None]
    return got


def _cost(trace, i: int, lengths):
    from rooftop.models.program.opcontext import OpContext, needs_context
    from rooftop.models.program.shapecost import NO_MODEL, cost_op, cost_with

    o = trace.ops[i]
    c = cost_op(o.name, o.dims, o.types, None, o.concrete)
    if c.model in NO_MODEL and needs_context(o.name):
        from rooftop.models.program.opcost import inference

        if inference.base_name(o.name) in inference.ATTENTION:  # the capture has no annotation: the replay's
            return cost_with(o.name, o.dims, o.types, o.concrete, lambda call: inference.attention(call, lengths)) or c
        return OpContext(trace).cost(i) or c
    return c


def rows() -> list[Row]:
    out: list[Row] = []
    for pair in PAIRS:
        traces = _records(pair)
        lengths = _lengths(pair)
        moe: dict[str, Row] = {}
        for table in CSVS:
            path = MORE / "tracelens-csv" / pair / f"{table}.csv"
            if not path.exists():
                continue
            for r in csv.DictReader(path.open()):
                dims = ast.literal_eval(r["Input Dims_first"])
                types = ast.literal_eval(r["Input type_first"])
                concrete = ast.literal_eval(r["Concrete Inputs_first"])
                name = r["name"]
                op = "vllm::moe_forward" if name.startswith("pseudo_op::moe_") else name
                key = _key(op, dims, types, concrete)
                if name.startswith("sglang_profiler::"):  # TraceLens drops the wrapper's line number
                    key = None
                    for trace, index in traces:
                        hit = next((i for k, i in index.items() if json.loads(k)[0].startswith(name + "_")
                                    and json.loads(k)[1:] == json.loads(_key(op, dims, types, concrete))[1:]), None)
                        if hit is not None:
                            found = (trace, hit)
                            break
                    else:
                        found = None
                else:
                    found = next(((t, ix[key]) for t, ix in traces if key in ix), None)
                if found is None:
                    raise LookupError(f"{pair}: {name} {dims} is in neither trace")
                c = _cost(*found, lengths)
                mib = r["Data Moved (MB)_first"]
                row = Row(pair, table, name, " · ".join("×".join(map(str, d)) for d in dims if d),
                          c.flops / 1e9, c.bytes / MIB, float(r["GFLOPS_first"]), float(mib) if mib else None, c.model)
                if op == "vllm::moe_forward":  # up and down: one call of rooftop's, two rows of TraceLens's
                    if op in moe:
                        m = moe[op]
                        m.theirs_gflop += row.theirs_gflop
                        m.theirs_mib = (m.theirs_mib or 0.0) + (row.theirs_mib or 0.0)
                        continue
                    row = moe[op] = dataclasses.replace(row, op="vllm::moe_forward (up + down)")
                out.append(row)
    return out


def table(rs: list[Row]) -> str:
    lines = [f"{'pair':<17} {'op':<44} {'shapes':<34} {'rooftop GFLOP':>13} {'TraceLens':>10} {'W ratio':>7} "
             f"{'rooftop MiB':>11} {'TraceLens':>10} {'Q ratio':>7}"]
    for r in rs:
        w = f"{r.w_ratio:.4f}" if r.w_ratio is not None else "—"
        q = f"{r.q_ratio:.4f}" if r.q_ratio is not None else "—"
        theirs_q = f"{r.theirs_mib:10.4g}" if r.theirs_mib is not None else f"{'—':>10}"
        lines.append(f"{r.pair:<17} {r.op[:44]:<44} {r.shapes[:34]:<34} {r.ours_gflop:13.6g} {r.theirs_gflop:10.6g} "
                     f"{w:>7} {r.ours_mib:11.4g} {theirs_q} {q:>7}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(rows()))
