"""Each command's HTML report, built from the very dict its `--json` prints (so the page and the JSON agree).

A report reads like the terminal one, laid out for a browser: the headline figures first, the chart(s), then
the tables. The charts come in as inline SVG strings (share/figure.py draws them); every string from a trace,
a config or a store goes through `html.esc` (the `html` helpers escape every cell and line they are given).
Op groups are capped as in the terminal (`--top`), and the report says how many it left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rooftop.models.plotdata import (
    collective_points, intensity_span, job_links, link_slopes, op_group_series, roof_series,
)
from rooftop.models.units import (
    fmt_bandwidth, fmt_bytes, fmt_flops, fmt_flops_rate, fmt_intensity, fmt_percent, fmt_ratio, fmt_time,
)
from rooftop.models.program.jobpath import Joined
from rooftop.models.program.workload import MEASURED, RANGES, Flag, OpGroup, flag_lines, owner_tag
from rooftop.store.critpath import stored_path
from rooftop.tui.render.critpath import joined_text, path_head, what_if_text
from rooftop.tui.render.job import COLLECTIVE_COLS, RANK_COLUMNS, RANK_LEGEND, collective_rows, straggler_lines
from rooftop.tui.render.profile import (
    IDLE_LEGEND, STEP_LINES, TOP, achieved_text, basis_text, coverage_text, headline_lines, intensity_text, op_label,
    short_kernel,
)
from rooftop.tui.share.figure import Chart
from rooftop.tui.share.html import Cell, Figure, figure, headline, notes, page, prose, section, table

__all__ = ["ceilings_table", "compare_report", "group_of", "llm_report", "measure_report", "op_report", "op_rows",
           "plot_report", "profile_report"]

KERNELS_LISTED = 10  # the top kernels a trace's --json carries; the report lists each


def _num(x: Any) -> float | None:
    """A JSON figure as a float; None for null, text or a bool."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _t(x: Any) -> Cell:
    """A time cell that sorts by its seconds ("" for none)."""
    v = _num(x)
    return Cell(fmt_time(v), v) if v is not None else Cell("")


def _pct(x: Any) -> Cell:
    """A share cell that sorts by its fraction ("" for none)."""
    v = _num(x)
    return Cell(fmt_percent(v), v) if v is not None else Cell("")


def _n(x: Any) -> Cell:
    v = _num(x)
    return Cell(f"{int(v):,}" if v is not None and v == int(v) else "" if v is None else f"{v:.3g}", v)


def group_of(d: Mapping[str, Any]) -> OpGroup:
    """An op group of a profile's --json read back (`OpGroup.from_dict`), so its label and achieved rate read as the
    terminal's (`op_label`, `achieved_text`) from the one function that writes them."""
    return OpGroup.from_dict(d)


# -- a profile --------------------------------------------------------------------------------------------------


def profile_title(doc: Mapping[str, Any]) -> tuple[str, str]:
    """The report's title and its line under it: the program's device, the roofs it was placed on, the job."""
    s = doc.get("summary") or {}
    on = bool(s.get("on_device"))
    who = str(s.get("trace_device") or ("GPU program" if on else "CPU program"))
    title = f"{who} on the roofs of {s.get('device', '?')}"
    parts = [f"{int(s['kernels']):,} kernels" if on and _num(s.get("kernels")) is not None else "",
             f"{len(doc.get('ops') or ()):,} op groups"]
    if doc.get("ranks"):
        n, world = len(doc["ranks"]), doc.get("world")
        parts.insert(0, f"{n} rank{'s' if n != 1 else ''}" + (f" of {world}" if world else "")
                     + (f" ({doc['backend']})" if doc.get("backend") else ""))
    if doc.get("run_id"):
        parts.append(f"kept as run {str(doc['run_id'])[:8]}")
    return title, " · ".join(p for p in parts if p)


def profile_figures(s: Mapping[str, Any]) -> list[Figure]:
    """The headline tiles: span, busy, idle, MFU, bandwidth, coverage."""
    span = _num(s.get("span_s")) or 0.0
    busy, idle = _num(s.get("device_busy_s")) or 0.0, _num(s.get("idle_s")) or 0.0
    gpus = int(s.get("gpus") or 1)
    times = f"{gpus} × " if gpus > 1 else ""
    cov = stored if isinstance(stored := s.get("coverage"), Mapping) else {}
    ranges = s.get("kernel_times") == RANGES
    mfu, bw = _num(s.get("mfu")), _num(s.get("bandwidth_utilisation"))
    what = "kernels" if s.get("on_device") else "ops"
    return [
        Figure("span", fmt_time(span), "the range profiler's window" if ranges else "first to last event"),
        Figure("busy", fmt_time(busy), f"{what}: {fmt_percent(busy / span)} of the span" if span and not ranges
               else "not timed"),
        Figure("idle", fmt_time(idle), f"{fmt_percent(idle / span)} of the span" if span and not ranges else ""),
        Figure("MFU", fmt_percent(mfu) if mfu is not None else "n/a",
               f"of {times}{s.get('mfu_path')}" if mfu is not None and s.get("mfu_path") else "no matmul FLOPs timed"),
        Figure("bandwidth", fmt_percent(bw) if bw is not None else "n/a", f"of {times}DRAM, over the span"),
        Figure("coverage", fmt_percent(_num(cov.get("owned"))) if _num(cov.get("owned")) is not None else "n/a",
               f"has an owner; {fmt_percent(_num(cov.get('modelled')))} a W and Q model"
               if _num(cov.get("modelled")) is not None else ""),
    ]


def profile_lines(doc: Mapping[str, Any]) -> str:
    """Under the tiles: the largest share, and what MFU and bandwidth leave out or were held at."""
    s = doc.get("summary") or {}
    top = s.get("largest_share")
    out = [prose(f"Largest share: {'idle time' if top == 'idle' else top}.", "lead")] if top else []
    out += [prose(x) for x in headline_lines(s.get("headline"), bool(s.get("on_device"))) if x]
    return "\n".join(out)


def notes_section(doc: Mapping[str, Any]) -> str:
    """Coverage in words, the device note, the flags (one line per kind and roof, as the terminal's), the notes and
    a job's problems, and what the figures are."""
    s = doc.get("summary") or {}
    flags = [Flag.from_dict(f) for f in doc.get("flags") or () if isinstance(f, Mapping)]
    return section("Flags and notes", prose(coverage_text(s.get("coverage"), bool(s.get("on_device")))),
                   notes([f"device: {s['device_note']}"] if s.get("device_note") else [], "problem"),
                   notes(flag_lines(flags), "flag"),
                   notes([str(n) for n in doc.get("notes") or ()] + [str(p) for p in doc.get("problems") or ()]),
                   prose(basis_text(s.get("kernel_times", MEASURED), s.get("counted_by")), "muted"), anchor="notes")


OP_HEADERS = ("share", "time", "calls", "op dtype shapes", "I", "achieved", "regime", "of roof")
OP_NUMERIC = (0, 1, 2, 4, 7)


def op_rows(doc: Mapping[str, Any], top: int = TOP) -> tuple[list[list[Cell]], int]:
    """The op table as the terminal's: idle time, the overlap of streams, each transfer and the `top` op groups by
    their time alone (their share of the span), largest first; and how many op groups were left out."""
    s = doc.get("summary") or {}
    span = _num(s.get("span_s")) or 0.0
    rows: list[tuple[float, list[Cell]]] = []
    blank = [Cell("")] * 4

    def share(t: Any) -> Cell:
        v = _num(t)
        return _pct(v / span if span and v is not None else None)

    idle = _num(s.get("idle_s")) or 0.0
    rows.append((idle, [share(idle), _t(idle), Cell(""), Cell("idle time"), *blank]))
    over = _num((doc.get("overlap") or {}).get("time_s")) or 0.0
    if over > 0:
        rows.append((over, [share(over), _t(over), Cell(""), Cell("overlap of streams"), *blank]))
    for x in doc.get("transfers") or ():
        label = f"{x.get('row', '?')} {fmt_bytes(x['bytes'])}" if _num(x.get("bytes")) else str(x.get("row", "?"))
        achieved = _num(x.get("achieved_bandwidth"))
        rows.append((_num(x.get("time_alone_s")) or 0.0, [
            share(x.get("time_alone_s")), _t(x.get("time_s")), _n(x.get("calls")), Cell(label), Cell(""),
            Cell(fmt_bandwidth(achieved) if achieved else "", achieved),
            Cell(str(x.get("level", "")) if x.get("bandwidth") else f"no {x.get('level', '?')} roof"),
            _pct(x.get("fraction_of_roof"))]))
    ops = [o for o in doc.get("ops") or () if isinstance(o, Mapping)]
    for o in ops[:top]:
        g = group_of(o)
        rows.append((g.alone_s, [
            share(o.get("time_alone_s")), _t(o.get("time_s")), _n(o.get("calls")),
            Cell(op_label(g), title=" ".join(x for x in (owner_tag(g.owner, g.family), g.op, g.dtype, g.shapes_text)
                                             if x)),
            Cell(intensity_text(_num(o.get("intensity"))), _num(o.get("intensity"))),
            Cell(achieved_text(g)), Cell(g.regime), _pct(o.get("fraction_of_roof"))]))
    return [r for _, r in sorted(rows, key=lambda x: -x[0])], max(0, len(ops) - top)


def ops_section(doc: Mapping[str, Any], top: int) -> str:
    rows, left = op_rows(doc, top)
    n = len(doc.get("ops") or ())
    cap = (f"The {min(top, n)} largest of {n:,} op groups; {left:,} more left out (--json lists every one)."
           if left else f"All {n:,} op groups.") + " Click a heading to sort."
    return section("Op groups", table(OP_HEADERS, rows, numeric_cols=OP_NUMERIC, caption=cap),
                   prose("share = the time each ran alone on the device, so the shares add up to 100%; I in FLOP/byte; "
                         "achieved = FLOP/s when compute-bound, bytes/s otherwise; of roof = its bound over its time.",
                         "muted"), anchor="ops")


def idle_section(doc: Mapping[str, Any]) -> str:
    causes = [c for c in doc.get("idle_causes") or () if isinstance(c, Mapping)]
    if not causes:
        return ""
    rows = [[_pct(c.get("share")), _t(c.get("time_s")), Cell(str(c.get("category", ""))),
             Cell(str(c.get("cause", ""))), _n(c.get("gaps")), Cell(str(c.get("detail", "")))] for c in causes]
    return section("Idle time by cause", table(("share", "time", "kind", "cause", "gaps", "what it means"), rows,
                                               numeric_cols=(0, 1, 4)), prose(IDLE_LEGEND, "muted"), anchor="idle")


def kernels_section(doc: Mapping[str, Any]) -> str:
    ks = [k for k in doc.get("top_kernels") or () if isinstance(k, Mapping)]
    if not ks:
        return ""
    rows = []
    for k in ks[:KERNELS_LISTED]:
        timed = k.get("time_measured") is not False
        f, b = _num(k.get("achieved_flops")), _num(k.get("achieved_bandwidth"))
        rows.append([_t(k.get("time_s")), _n(k.get("calls")), Cell(short_kernel(str(k.get("name", "?"))),
                                                                   title=str(k.get("name", ""))),
                     Cell(fmt_flops_rate(f) if timed and f and _num(k.get("flops")) else "", f),
                     Cell(fmt_bandwidth(b) if timed and b and _num(k.get("bytes")) else "", b),
                     Cell(str(k.get("roof") or "")), _pct(k.get("fraction_of_roof"))])
    return section("Top kernels", table(("time", "calls", "kernel", "FLOP/s", "bytes/s", "roof", "of roof"), rows,
                                        numeric_cols=(0, 1, 3, 4, 6),
                                        caption="W and Q from the ops that launched them; hover a name for all of it."),
                   anchor="kernels")


def steps_section(doc: Mapping[str, Any]) -> str:
    steps = [x for x in doc.get("steps") or () if isinstance(x, Mapping)]
    if not steps:
        return ""
    rows = [[Cell(str(x.get("name", ""))), _t(x.get("cpu_s")), _n(x.get("kernels")), _t(x.get("busy_s")),
             _t(x.get("span_s")), _t(x.get("idle_s"))] for x in steps[:STEP_LINES]]
    more = len(steps) - STEP_LINES
    cap = f"The first {STEP_LINES} of {len(steps):,} steps (--json lists each)." if more > 0 else ""
    return section("Steps", table(("step", "CPU", "kernels", "busy", "span", "idle"), rows,
                                  numeric_cols=(1, 2, 3, 4, 5), caption=cap), anchor="steps")


def path_section(doc: Mapping[str, Any]) -> str:
    """The critical path: its length and split, the op groups on it, the what-ifs and what to fix first."""
    try:
        cp = stored_path(doc)
    except ValueError as exc:
        return section("Critical path", prose(f"not shown: {exc}"))
    if cp is None or (doc.get("summary") or {}).get("kernel_times") == RANGES:
        return ""
    if not cp.graph:
        return section("Critical path", prose(f"not built ({cp.why_not or 'no dependency graph'}); the what-ifs "
                                              "are summed"), anchor="path")
    c = doc.get("critical_path") or {}
    body = [prose(path_head(cp), "lead")]
    if "rank" in c:
        body.append(prose(joined_text(Joined(int(c["rank"]), tuple(c.get("joined_ranks") or ()),
                                             str(c.get("not_joined") or "")))))
    if cp.ops:
        body.append(table(("on path", "of path", "kernels", "op group"),
                          [[_t(p.time_s), _pct(p.time_s / cp.length_s if cp.length_s else None), _n(p.kernels),
                            Cell(p.label)] for p in cp.ops], numeric_cols=(0, 1, 2),
                          caption="The op groups on the path (their device time on it)."))
    body.append(prose(what_if_text(cp)))
    if cp.fix_first:
        body.append(table(("#", "saves", "of path", "op group", "regime", "of roof", "what to do"),
                          [[_n(i), _t(f.saving_s), _pct(f.saving_s / cp.length_s if cp.length_s else None),
                            Cell(f.label), Cell(f.regime), _pct(f.fraction_of_roof), Cell(f.advice)]
                           for i, f in enumerate(cp.fix_first, start=1)], numeric_cols=(0, 1, 2, 5),
                          caption="Fix first: what running each op group at its roof takes off the path."))
    return section("Critical path", *body, anchor="path")


def job_section(doc: Mapping[str, Any], comm_svg: str = "") -> str:
    """A job's rank table, its straggler and its collectives on the communication roofline."""
    if not doc.get("ranks"):
        return ""
    slow = (doc.get("straggler") or {}).get("rank")
    ranks = [[Cell(f"{r['rank']}" + (" (straggler)" if r["rank"] == slow else ""), float(r["rank"])),
              *(_t(r.get(k)) for k in ("step_s", "busy_s", "idle_s", "compute_s", "comm_s", "comm_exposed_s")),
              _pct(r.get("mfu"))] for r in doc["ranks"]]
    body = [table(RANK_COLUMNS, ranks, numeric_cols=range(len(RANK_COLUMNS))), prose(RANK_LEGEND, "muted")]
    straggler = [t.plain.strip() for t in straggler_lines(doc, wide=True)]
    body += [prose(straggler[0], "lead"), notes(straggler[1:])]
    colls = collective_rows(doc)
    if colls:
        heads = [c.header for c in COLLECTIVE_COLS]
        raw = list(doc.get("collectives") or ())
        keys = {"size": "bytes", "calls": "calls", "time": "time_s", "wait": "wait_s", "algbw": "algbw",
                "busbw": "busbw", "of link": "fraction_of_link", "α-β": "expected_s", "ranks": "group_size"}
        rows = [[Cell(r[h], _num(c.get(keys[h])) if h in keys else None) for h in heads] for r, c in zip(colls, raw)]
        if comm_svg:
            unroofed = sorted({str(c.get("link")) for c in raw if c.get("link") and not _num(c.get("link_bandwidth"))})
            missing = (f" No roof is known for {', '.join(unroofed)} on this device, so its collectives stand "
                       "against no slope: `rooftop comm` measures one." if unroofed else "")
            body.append(figure(comm_svg, "The collectives on their link slopes (algbw against the link roofs)."
                               + missing))
        body.append(table(heads, rows, numeric_cols=[i for i, h in enumerate(heads) if h in keys],
                          caption="Collectives (algbw, busbw in GB/s; busbw = algbw × nccl-tests' bus factor)."))
        body.append(notes(dict.fromkeys(str(c.get("link_why", "")) for c in raw), "muted"))
    return section("The job's ranks", *body, anchor="job")


def profile_report(payload: Mapping[str, Any], charts_svg: Sequence[str], *, version: str, command: str,
                   top: int = TOP) -> str:
    """`rooftop profile --out FILE.html` (and `show` of a kept profile): the same content as the terminal report,
    from the dict `--json` prints; `charts_svg`: the roofline with every op group a point, then (a job) the
    communication roofline."""
    title, sub = profile_title(payload)
    s = payload.get("summary") or {}
    charts = list(charts_svg)
    head = section("Headline", headline(profile_figures(s)), profile_lines(payload), anchor="headline")
    no_w = sum(1 for o in (payload.get("ops") or ())[:top] if isinstance(o, Mapping) and o.get("intensity") == 0)
    unplotted = f" {no_w} of them do no arithmetic (no W: a copy, a cat) and have no point." if no_w else ""
    roof = section("Roofline", figure(charts[0], "Each op group is a point at its I and achieved FLOP/s; hover one "
                                      "for its name, shapes, I, rate, regime and fraction of the roof." + unplotted),
                   anchor="roofline") if charts else ""
    parts = [head, roof, job_section(payload, charts[1] if len(charts) > 1 else ""), ops_section(payload, top),
             idle_section(payload), kernels_section(payload), steps_section(payload), path_section(payload),
             notes_section(payload)]
    return page(title, [p for p in parts if p], version=version, command=command, subtitle=sub)


def profile_charts(doc: Mapping[str, Any], device: Any, top: int = TOP) -> list[Any]:
    """A profile's charts (share.figure.Chart): its op groups on the roofs of `device` (a DeviceProfile), and for
    a job its collectives on the link slopes."""
    s = doc.get("summary") or {}
    title, sub = profile_title(doc)
    points = op_group_series([o for o in doc.get("ops") or () if isinstance(o, Mapping)], top)
    paths = [p for p in dict.fromkeys(str(o.get("path")) for o in doc.get("ops") or () if isinstance(o, Mapping))
             if p in device.peak] or device.paths()
    span = intensity_span([device], [x for p in points for x in p.xs])
    charts = [Chart("roofline", roof_series(device, paths, device.levels(), span) + points,
                    f"{title}: op groups on the roofline", f"{device.id} ({device.source}) · {sub}")]
    colls = [c for c in doc.get("collectives") or () if isinstance(c, Mapping)]
    comm = collective_points(colls)
    if comm:
        cspan = intensity_span([device], [x for p in comm for x in p.xs])
        roofs = roof_series(device, paths, ["dram"], cspan)
        charts.append(Chart("roofline", roofs + link_slopes(device, job_links(colls), cspan, paths) + comm,
                            "collectives on the communication roofline",
                            f"{device.id} ({device.source}) · {s.get('trace_device') or ''}".rstrip(" ·")))
    return charts


# -- a measurement, an LLM step, the small ones ---------------------------------------------------------------


def ceilings_table(profile: Mapping[str, Any]) -> str:
    """A device profile's roofs (`DeviceProfile.to_dict`), each with the conditions that produced it: the case,
    where it came from, whether it was stable."""
    ceil = stored if isinstance(stored := profile.get("ceilings"), Mapping) else {}
    rows = []
    for kind, values, fmt in (("bandwidth", profile.get("bandwidth") or {}, fmt_bandwidth),
                              ("peak", profile.get("peak") or {}, fmt_flops_rate)):
        for name, v in values.items():
            c = (ceil.get(kind) or {}).get(name) or {}
            stable = c.get("stable")
            rows.append([Cell(kind), Cell(str(name)), Cell(fmt(v), _num(v)), Cell(str(c.get("source", ""))),
                         Cell(str(c.get("case", ""))), Cell("" if stable is None else "yes" if stable else "no")])
    return table(("roof", "path or level", "value", "source", "case (conditions)", "stable"), rows,
                 numeric_cols=(2,), caption=f"{profile.get('id', '?')} ({profile.get('name', '')}, "
                                            f"{profile.get('source', '')})")


def _charts(charts_svg: Sequence[str], captions: Sequence[str]) -> list[str]:
    return [figure(svg, captions[i] if i < len(captions) else "") for i, svg in enumerate(charts_svg)]


def measure_report(payload: Mapping[str, Any], charts_svg: Sequence[str], *, version: str, command: str) -> str:
    """`rooftop measure --out FILE.html`: the ceilings with their conditions, the roofline and the curves."""
    prof = payload.get("profile") or {}
    info = payload.get("device_info") or {}
    samples = [x for x in payload.get("samples") or () if isinstance(x, Mapping)]
    figs = [Figure("points", f"{len(samples):,}", f"plan {payload.get('plan', '?')}"),
            Figure("status", str(payload.get("status", "?")), f"{_num(payload.get('wall_s')) or 0:.1f} s"),
            *(Figure("DRAM B", fmt_bandwidth(v), "measured") for k, v in (prof.get("bandwidth") or {}).items()
              if k == "dram")]
    lines = [f"{x} was above its roof" for x in payload.get("above_roof") or ()]
    lines += [f"{x} was taken while the GPU throttled" for x in payload.get("throttled") or ()]
    parts = [section("Headline", headline(figs), notes(list(payload.get("notes") or ())), notes(lines, "problem")),
             section("Charts", *_charts(charts_svg, ("The measured roofline.", "Bandwidth against working set.",
                                                     "GEMM FLOP/s against size.", "The FMA sweep."))),
             section("Ceilings", ceilings_table(prof))]
    if info:
        parts.append(section("Device", table(("fact", "value"), [[Cell(str(k)), Cell(str(v))] for k, v in info.items()
                                                                  if v is not None and not isinstance(v, (dict, list))], sortable=False)))
    title = f"{prof.get('name') or prof.get('id', 'device')} measured"
    return page(title, parts, version=version, command=command, subtitle=str(prof.get("id", "")))


def llm_report(payload: Mapping[str, Any], charts_svg: Sequence[str], *, version: str, command: str) -> str:
    """`rooftop llm --out FILE.html`: the bound table (one row per batch × context), the per-layer points of the
    first step and its op table."""
    steps = [x for x in payload.get("steps") or () if isinstance(x, Mapping)]
    s0 = steps[0] if steps else {}
    rows = [[_n(x.get("batch")), _n(x.get("context") if x.get("phase") == "decode" else x.get("prompt")),
             Cell(fmt_bytes(x["weights_read_bytes"]), x["weights_read_bytes"]) if _num(x.get("weights_read_bytes"))
             is not None else Cell(""), Cell(fmt_bytes(x["kv_bytes"]), x["kv_bytes"]) if _num(x.get("kv_bytes"))
             is not None else Cell(""), _t(x.get("bytes_bound_s")), _t(x.get("step_time_bound_s")),
             _t(x.get("launch_floor_s")), Cell(str(x.get("binds", ""))),
             _n(round(x["tokens_per_s_upper_bound"])) if _num(x.get("tokens_per_s_upper_bound")) else Cell(""),
             _t(x.get("measured_s")), _pct(x.get("explained_fraction"))] for x in steps]
    ctx = "context" if s0.get("phase") == "decode" else "prompt"
    bound = table(("batch", ctx, "weights read", "KV", "Q/B", "step bound", "launch floor", "binds", "tok/s ≤",
                   "measured", "explained"), rows, numeric_cols=(0, 1, 2, 3, 4, 5, 6, 8, 9, 10))
    flips = payload.get("compute_bound_batch") or {}
    figs = [Figure("step bound", fmt_time(_num(s0.get("step_time_bound_s")) or 0.0), f"batch {s0.get('batch')}"),
            Figure("tokens/s ≤", f"{_num(s0.get('tokens_per_s_upper_bound')) or 0:,.0f}", str(s0.get("binds", ""))),
            Figure("weights", fmt_bytes(_num(s0.get("weights_bytes")) or 0.0), str(s0.get("dtype", ""))),
            *(Figure("compute-bound from", f"batch {flips['whole_step']}", "the whole step")
              for _ in (0,) if flips.get("whole_step"))]
    ops = [o for o in s0.get("ops") or () if isinstance(o, Mapping)]
    op_table = table(("op", "× per step", "W", "Q", "I", "regime", "bound"),
                     [[Cell(str(o.get("description") or o.get("op", ""))), _n(o.get("count")),
                       Cell(fmt_flops(o["flops"]), o["flops"]) if _num(o.get("flops")) is not None else Cell(""),
                       Cell(fmt_bytes(o["bytes"]), o["bytes"]) if _num(o.get("bytes")) is not None else Cell(""),
                       Cell(fmt_intensity(o["intensity"]), o["intensity"]) if _num(o.get("intensity")) else Cell(""),
                       Cell(str(o.get("regime", ""))), _t(o.get("time_lower_bound_s"))] for o in ops],
                     numeric_cols=(1, 2, 3, 4, 6), caption="The first row's per-layer ops (W and Q of one call).")
    parts = [section("Headline", headline(figs)),
             section("Roofline", *_charts(charts_svg, ("Each per-layer op at its I and attainable FLOP/s.",))),
             section("Bound per batch", bound), section("Per-layer ops", op_table)]
    amdahl = payload.get("amdahl")
    if isinstance(amdahl, Mapping):
        before, after = amdahl.get("before_ms") or {}, amdahl.get("after_ms") or {}
        parts.append(section("Amdahl", table(("part", "before ms", "after ms"),
                                             [[Cell(str(k)), _n(v), _n(after.get(k))] for k, v in before.items()],
                                             numeric_cols=(1, 2)),
                             prose(f"speed-up {fmt_ratio(_num(amdahl.get('speedup')) or 0.0)}")))
    title = f"{payload.get('model', '?')} {s0.get('phase', '')} on {payload.get('device', '?')}"
    return page(title, parts, version=version, command=command)


def op_report(payload: Sequence[Mapping[str, Any]], charts_svg: Sequence[str], *, version: str, command: str) -> str:
    """`rooftop op --out FILE.html`: the ops on the roofline and each one's analysis (`op --json`'s list)."""
    rows = [[Cell(str(a.get("description") or a.get("op", ""))), Cell(str(a.get("device", ""))),
             Cell(fmt_flops(a["flops"]), a["flops"]) if _num(a.get("flops")) is not None else Cell(""),
             Cell(fmt_bytes(a["bytes"]), a["bytes"]) if _num(a.get("bytes")) is not None else Cell(""),
             Cell(fmt_intensity(a["intensity"]), a["intensity"]) if _num(a.get("intensity")) else Cell(""),
             Cell(str(a.get("path", ""))), Cell(str(a.get("regime", ""))), _t(a.get("time_bound_s"))]
            for a in payload]
    advice = [f"{a.get('description', '')}: {x}" for a in payload for x in a.get("advice") or ()]
    parts = [section("Roofline", *_charts(charts_svg, ("Each op at its I and attainable FLOP/s.",))),
             section("Ops", table(("op", "device", "W", "Q", "I", "path", "regime", "bound"), rows,
                                  numeric_cols=(2, 3, 4, 7)), notes(advice))]
    return page("ops on the roofline", parts, version=version, command=command)


def plot_report(profiles: Sequence[Mapping[str, Any]], charts_svg: Sequence[str], *, version: str,
                command: str) -> str:
    """`rooftop plot --out FILE.html`: the roofline and each device's roofs (`DeviceProfile.to_dict` each)."""
    parts = [section("Roofline", *_charts(charts_svg, ())),
             section("Roofs", *(ceilings_table(p) for p in profiles))]
    return page("roofline: " + " vs ".join(str(p.get("id", "?")) for p in profiles), parts, version=version,
                command=command)


def compare_report(payload: Mapping[str, Any], charts_svg: Sequence[str], *, version: str, command: str) -> str:
    """`rooftop compare --out FILE.html`: the overlaid rooflines, the crossovers (`compare --json`) and each
    device's roofs."""
    rows = [[Cell(str(p.get("a", ""))), Cell(str(p.get("b", ""))), Cell(str(p.get("path", ""))),
             Cell(str(p.get("level", ""))),
             Cell(fmt_intensity(p["crossover"]), p["crossover"]) if _num(p.get("crossover")) else Cell("none"),
             Cell(str(p.get("higher_below", ""))), Cell(str(p.get("higher_above", "")))]
            for p in payload.get("pairs") or ()]
    devices = [d for d in payload.get("devices") or () if isinstance(d, Mapping)]
    parts = [section("Roofline", *_charts(charts_svg, ())),
             section("Crossovers", table(("A", "B", "path", "level", "crossover I", "higher below", "higher above"),
                                         rows, numeric_cols=(4,)), notes(list(payload.get("notes") or ()))),
             section("Roofs", *(ceilings_table(d) for d in devices))]
    return page("compare: " + " vs ".join(str(d.get("id", "?")) for d in devices), parts, version=version,
                command=command)

