"""A distributed job as text (Rich, no textual): the rank table, the straggler, the collectives on their links.

Every function reads the job as JSON (`rooftop.models.program.job.Job.to_dict`, as `--json` prints it and a stored
profile keeps it under "job"), so the command line, a kept run and the app show the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from rooftop.models.links import link_name
from rooftop.models.safetext import safe_text as clean
from rooftop.models.units import fmt_bytes, fmt_percent, fmt_time
from rooftop.tui.render.fit import Col, FitRows
from rooftop.tui.render.profile import op_name

RANK_COLUMNS = ("rank", "step", "busy", "idle", "compute", "comm", "exposed", "MFU")
RANK_LEGEND = ("step = the median profiler step (the whole trace where it has none); busy, idle, compute, comm "
               "and exposed (communication no compute overlapped) are over the whole trace, so idle can exceed "
               "a step")


def _t(x: Any) -> str:
    return fmt_time(x) if isinstance(x, (int, float)) else ""


def rank_rows(job: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One row per rank, as RANK_COLUMNS; the straggler's rank marked ◂."""
    slow = (job.get("straggler") or {}).get("rank")
    return [(f"{r['rank']}" + (" ◂" if r["rank"] == slow else ""), _t(r.get("step_s")), _t(r.get("busy_s")),
             _t(r.get("idle_s")), _t(r.get("compute_s")), _t(r.get("comm_s")), _t(r.get("comm_exposed_s")),
             fmt_percent(r.get("mfu"), none="n/a")) for r in job.get("ranks") or ()]


def rank_table(job: Mapping[str, Any]) -> Table:
    t = Table(header_style="bold", box=None, pad_edge=False)
    for col in RANK_COLUMNS:
        t.add_column(col, justify="right", no_wrap=True)
    for row in rank_rows(job):
        t.add_row(Text(row[0], style="bold red" if "◂" in row[0] else ""), *row[1:])
    return t


def straggler_lines(job: Mapping[str, Any], wide: bool = False) -> list[Text]:
    s = job.get("straggler")
    if not s:
        return [Text("straggler: none (one rank read, or no rank above the median)")]
    out = [Text(f"straggler: rank {s['rank']}, its {s['metric']} time {_t(s['value_s'])} is {_t(s['by_s'])} "
                f"({fmt_percent(s.get('by_fraction'))}) above the median {_t(s['median_s'])}", style="bold")]
    for g in s.get("groups") or ():  # one line each: a long op and its shapes end in "…" at the width (whole, wide)
        out.append(Text(f"  +{_t(g['excess_s'])}  {clean(str(g['op']))}", no_wrap=True,
                        overflow="ignore" if wide else "ellipsis"))
    return out


def _gbs(x: float | None) -> str:
    return "" if not x else f"{x / 1e9:.3g}"


def collective_name(c: Mapping[str, Any]) -> str:
    """A collective as the table names it: its kind, and the library that ran it where not the job's backend
    ("allreduce (symm_mem)", "alltoall (DeepEP dispatch)")."""
    via = c.get("via")
    return clean(str(c["op"]) + (f" ({via})" if via else ""))


def collective_rows(job: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per (collective, size, group, library): calls, time, the wait for the slowest rank, algbw and busbw
    in GB/s, the link and the fraction of its roof, the α-β time of one call; a size the trace does not give is
    "?" (its time on the link, no fraction of it)."""
    return [{"collective": collective_name(c), "size": fmt_bytes(c["bytes"]) if c.get("bytes") is not None else "?",
             "ranks": clean(str(c.get("group_size", ""))), "calls": str(c["calls"]), "time": _t(c["time_s"]),
             "wait": _t(c.get("wait_s")),
             "algbw": _gbs(c.get("algbw")), "busbw": _gbs(c.get("busbw")),
             "link": clean(str(c.get("link", ""))),
             "of link": fmt_percent(c.get("fraction_of_link"), none="n/a"), "α-β": _t(c.get("expected_s"))}
            for c in job.get("collectives") or ()]


COLLECTIVE_COLS = (Col("collective", "left", text=True, least=14), Col("size"), Col("ranks", drop=5),
                   Col("calls", drop=2), Col("time"), Col("wait", drop=3), Col("algbw", drop=1), Col("busbw"),
                   Col("link", "left"), Col("of link"), Col("α-β", drop=4))


def collectives_table(job: Mapping[str, Any], wide: bool = False) -> FitRows:
    """The collectives' rows, one line each; columns with nothing in them are left out, and at 80 columns
    the least needed (said below the table) rather than cut mid-figure; every one with `wide`."""
    rows = collective_rows(job)
    return FitRows(COLLECTIVE_COLS, [[r[c.header] for c in COLLECTIVE_COLS] for r in rows], wide)


def job_head(job: Mapping[str, Any]) -> Text:
    n, world, backend = len(job.get("ranks") or ()), job.get("world"), job.get("backend")
    return Text(f"{n} rank{'s' if n != 1 else ''}" + (f" of {clean(str(world))}" if world else "")
                + (f" ({clean(str(backend))})" if backend else "") + ": ranks aligned by their collectives' ends, not by wall clock",
                style="bold")


def collective_notes(job: Mapping[str, Any], wide: bool = False) -> list[Any]:
    """Where each link's roof came from, why each group is on its link, and what wait and α-β mean."""
    colls = job.get("collectives") or ()
    if not colls:
        return []
    roofs: dict[str, tuple[Any, str, Any]] = {}
    for c in colls:
        roofs.setdefault(c.get("link", ""), (c.get("link_bandwidth"), c.get("link_source", ""), c.get("alpha_s")))
    how = "; ".join(f"{link_name(lk)}: {src}" if bw else f"{link_name(lk)}: no roof (give -d with one, or run "
                    "`rooftop comm`)" for lk, (bw, src, _) in roofs.items())
    out = [Text("collectives on the communication roofline (algbw, busbw in GB/s; busbw = algbw × nccl-tests' bus "
                f"factor; link roofs: {clean(how)})", style="bold")]
    tail = [Text(f"link: {clean(str(w))}", style="dim") for w in dict.fromkeys(c.get("link_why", "") for c in colls)]
    if any(c.get("bytes") is None for c in colls):
        tail.append(Text("size ? = the trace does not record it (kernels no recorded collective launched: DeepEP, a "
                         "graph's custom all-reduce): their time is on the link, with no fraction of it", style="dim"))
    no_alpha = any(bw and a is None for bw, _, a in roofs.values())
    tail.append(Text("wait = the part of the kernel time spent waiting for the slowest rank read (the spread of the "
                     "aligned starts); α-β = the expected time of one call at that size"
                     + (" (α = 0 where no `rooftop comm` run of this backend measured one)" if no_alpha else "") + ".",
                     style="dim"))
    return [out[0], collectives_table(job, wide), *tail]


def job_report(job: Mapping[str, Any], wide: bool = False) -> Group:
    parts: list[Any] = [job_head(job), Text(""), rank_table(job), Text(RANK_LEGEND, style="dim"), Text(""),
                        *straggler_lines(job, wide)]
    notes = collective_notes(job, wide)
    if notes:
        parts += [Text(""), *notes]
    return Group(*parts)


def _share(t: Any, span: float) -> str:
    return fmt_percent(t / span) if span and isinstance(t, (int, float)) else ""


def rank_group_rows(job: Mapping[str, Any], rank: int) -> list[tuple[str, ...]]:
    """One rank's step as the Profile tab lists a profile: (share of its span, time, calls, op, I, regime, of roof),
    by share: its idle time, its communication (the share is the exposed part, as an op group's share is its time
    alone) and its compute op groups as kept; [] for a rank not read."""
    r = next((x for x in job.get("ranks") or () if x.get("rank") == rank), None)
    if r is None:
        return []
    span = r.get("span_s") or 0.0
    idle, comm, exposed = r.get("idle_s"), r.get("comm_s"), r.get("comm_exposed_s")
    rows = [(idle, (_share(idle, span), _t(idle), "", "idle time", "", "", ""))]
    if comm:
        rows.append((exposed, (_share(exposed, span), _t(comm), str(r.get("collectives") or ""),
                               f"communication (exposed {_t(exposed)})", "", "", "")))
    for g in r.get("op_groups") or ():
        t, i = g.get("time_s"), g.get("intensity")
        alone = g.get("time_alone_s", t)
        rows.append((alone, (_share(alone, span), _t(t), str(g.get("calls", "")),
                             clean(op_name(str(g.get("op", "?")))), f"{i:.3g}" if isinstance(i, (int, float)) else "",
                             clean(str(g.get("regime", ""))), fmt_percent(g.get("fraction_of_roof")))))
    return [row for _, row in sorted(rows, key=lambda x: -(x[0] if isinstance(x[0], (int, float)) else 0.0))]
