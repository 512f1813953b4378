"""A profile's critical path, what-ifs and "fix first" as JSON: what `rooftop profile --json` prints, what a
profile run keeps beside its step split, and back.

Three top-level keys of the profile document: `critical_path` (the window, its length, the split, the op groups on
the path, each step's), `what_if` (each re-timed step length and its saving) and `fix_first` (the top op groups by
what they save on the path). A profile kept before they were has none: `stored_path` gives None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rooftop.models import plausible
from rooftop.models.program.critpath import SPLIT_KEYS, CriticalPath, FixFirst, PathOp, StepPath, WhatIf
from rooftop.models.program.jobpath import Joined

PATH_KEYS = ("critical_path", "what_if", "fix_first")


def _op_name(key: tuple, label: str) -> str:
    """The op an op group's key names (its first part, as Workload keys them), else its label."""
    return key[0] if key and isinstance(key[0], str) else label


def _split(split: Mapping[str, float]) -> dict[str, float]:
    return {k: float(split.get(k, 0.0)) for k in SPLIT_KEYS}


def _path_op(p: PathOp) -> dict[str, Any]:
    return {"op": _op_name(p.key, p.label), "label": p.label, "time_s": p.time_s, "kernels": p.kernels}


def path_doc(cp: CriticalPath, joined: Joined | None = None) -> dict[str, Any]:
    """The three keys of the profile document (SI units) for `cp`; a job's (`joined`) says in `critical_path` whose
    path it is (`rank`), the ranks whose collectives it joined (`joined_ranks`, [] where none) and why none
    (`not_joined`)."""
    job = {} if joined is None else {"rank": joined.rank, "joined_ranks": list(joined.ranks),
                                     "not_joined": joined.alone}
    # a step's start and end count from the first window's start: on the trace's clock (from its first event in
    # the file) a step can start before it (the 128-rank job's rank 0: -0.157 s), and a time is never negative
    t0 = min((s.start for s in cp.steps), default=0.0)
    return {
        "critical_path": {
            "window": cp.window, **job, "length_s": cp.length_s, "graph": cp.graph, "why_not": cp.why_not,
            "split": _split(cp.split), "ops": [_path_op(p) for p in cp.ops],
            "steps": [{"window": s.window, "start_s": s.start - t0, "end_s": s.end - t0, "length_s": s.length_s,
                       "split": _split(s.split)} for s in cp.steps],
        },
        "what_if": [{"name": w.name, "length_s": w.length_s, "saving_s": w.saving_s, "retimed": w.retimed}
                    for w in cp.what_if],
        "fix_first": [{"op": _op_name(f.key, f.label), "label": f.label, "saving_s": f.saving_s, "regime": f.regime,
                       "fraction_of_roof": f.fraction_of_roof, "advice": f.advice} for f in cp.fix_first],
    }


def _seconds(d: Mapping[str, Any], k: str, where: str, lo: float = 0.0) -> float:
    v = d.get(k)
    bad = plausible.real_problem(f"{where}.{k}", v, lo, plausible.MAX_AMOUNT)
    if bad:
        raise ValueError(bad)
    return float(v)  # type: ignore[arg-type]  # real_problem refuses None and every non-number


def _text(d: Mapping[str, Any], k: str, where: str) -> str:
    v = d.get(k, "")
    if not isinstance(v, str):
        raise ValueError(f"{where}.{k} = {plausible.shown(v)} is not text")
    return v


def _list(v: Any, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(v, list) or not all(isinstance(x, Mapping) for x in v):
        raise ValueError(f"{where} = {plausible.shown(v)} is not a list of objects")
    return v


def _split_back(v: Any, where: str) -> dict[str, float]:
    if not isinstance(v, Mapping):
        raise ValueError(f"{where}.split = {plausible.shown(v)} is not an object")
    return {k: _seconds(v, k, f"{where}.split") for k in SPLIT_KEYS if k in v}


def _fraction(v: Any, where: str) -> float | None:
    if v is None:
        return None
    bad = plausible.real_problem(where, v, 0.0, plausible.MAX_AMOUNT)
    if bad:
        raise ValueError(bad)
    return float(v)


def stored_path(doc: Mapping[str, Any]) -> CriticalPath | None:
    """The critical path a profile document (or a stored step split) holds, None when it holds none (kept
    before there was one). Raises ValueError naming the first field that is not what `path_doc` writes."""
    c = doc.get("critical_path")
    if c is None:
        return None
    if not isinstance(c, Mapping):
        raise ValueError(f"critical_path = {plausible.shown(c)} is not an object")
    graph = c.get("graph")
    if not isinstance(graph, bool):
        raise ValueError(f"critical_path.graph = {plausible.shown(graph)} is not true or false")
    ops = []
    for i, p in enumerate(_list(c.get("ops", []), "critical_path.ops")):
        where = f"critical_path.ops[{i}]"
        kernels = p.get("kernels", 0)
        bad = plausible.whole_problem(f"{where}.kernels", kernels)
        if bad:
            raise ValueError(bad)
        ops.append(PathOp(key=(_text(p, "op", where),), label=_text(p, "label", where),
                          time_s=_seconds(p, "time_s", where), kernels=int(kernels)))
    # a step's start and end are times on its trace's clock, which counts from its first event: a rank's step can
    # start before it (the 128-rank job's rank 0: -0.157 s), or on a peer's clock
    steps = [StepPath(window=_text(s, "window", w), start=_seconds(s, "start_s", w, -plausible.MAX_AMOUNT),
                      end=_seconds(s, "end_s", w, -plausible.MAX_AMOUNT),
                      length_s=_seconds(s, "length_s", w), split=_split_back(s.get("split"), w), ops=())
             for i, s in enumerate(_list(c.get("steps", []), "critical_path.steps"))
             for w in (f"critical_path.steps[{i}]",)]
    what = []
    for i, x in enumerate(_list(doc.get("what_if", []), "what_if")):
        where = f"what_if[{i}]"
        if not isinstance(x.get("retimed"), bool):
            raise ValueError(f"{where}.retimed = {plausible.shown(x.get('retimed'))} is not true or false")
        what.append(WhatIf(name=_text(x, "name", where), length_s=_seconds(x, "length_s", where),
                           saving_s=_seconds(x, "saving_s", where), retimed=x["retimed"]))
    fix = [FixFirst(key=(_text(f, "op", w),), label=_text(f, "label", w), saving_s=_seconds(f, "saving_s", w),
                    regime=_text(f, "regime", w), fraction_of_roof=_fraction(f.get("fraction_of_roof"),
                                                                             f"{w}.fraction_of_roof"),
                    advice=_text(f, "advice", w))
           for i, f in enumerate(_list(doc.get("fix_first", []), "fix_first")) for w in (f"fix_first[{i}]",)]
    return CriticalPath(window=_text(c, "window", "critical_path"), steps=tuple(steps),
                        length_s=_seconds(c, "length_s", "critical_path"), split=_split_back(c.get("split"),
                                                                                            "critical_path"),
                        ops=tuple(ops), what_if=tuple(what), fix_first=tuple(fix), graph=graph,
                        why_not=_text(c, "why_not", "critical_path"))


def stored_joined(doc: Mapping[str, Any]) -> Joined | None:
    """Whose a stored job's critical path is and which ranks it joined (`path_doc`'s), None for one trace's (or a
    job's kept before its path was). Raises ValueError naming the first field that is not what `path_doc` writes."""
    c = doc.get("critical_path")
    if not isinstance(c, Mapping) or "rank" not in c:
        return None
    ranks = c.get("joined_ranks", [])
    for where, v in [("critical_path.rank", c["rank"]), *(("critical_path.joined_ranks", r) for r in
                                                          (ranks if isinstance(ranks, list) else [ranks]))]:
        bad = plausible.whole_problem(where, v)
        if bad:
            raise ValueError(bad)
    return Joined(int(c["rank"]), tuple(int(r) for r in ranks), _text(c, "not_joined", "critical_path"))


def path_problem(doc: Mapping[str, Any]) -> str | None:
    """What makes a stored critical path impossible to show, in words; None when fine (or when there is none)."""
    try:
        stored_path(doc)
        stored_joined(doc)
    except ValueError as exc:
        return str(exc)
    return None
