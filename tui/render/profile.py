"""A profiled program as text: `rooftop profile`'s report (op groups, step split, MFU), and a stored
profile run as the app shows it.

The History tab shows a run of plan "profile" with `profile_detail` instead of ceilings
(a profile has none): the numbers come from the run as stored, nothing is recomputed there.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Mapping, Sequence

from rich.console import Group
from rich.text import Text

from rooftop.models.catalog import UnknownDevice, lookup_device
from rooftop.models.program.critpath import CriticalPath, FixFirst, PathOp
from rooftop.models.profile import DeviceProfile
from rooftop.models.roofline import ABOVE_ROOF
from rooftop.models.sample import Sample
from rooftop.models.units import fmt_bandwidth, fmt_bytes, fmt_flops, fmt_flops_rate, fmt_percent, fmt_ratio, fmt_time
from rooftop.models.program.workload import MEASURED, RANGES, flag_lines, owner_tag
from rooftop.store.critpath import stored_path
from rooftop.store.runs import Run
from rooftop.store.workloads import placed_on, profile_summary, stored_groups
from rooftop.tui.render.critpath import OP_WHAT_IF, path_head, path_lines
from rooftop.tui.render.fit import Col, FitRows
from rooftop.tui.render.report import Prose
from rooftop.tui.render.text import clean

TOP_OPS = 5
# an op group whose kernels a graph replayed (the op that launched them at capture), or that were launched before
# the window (costed as their twins' op): what its label says first


def _pct(x: Any) -> str:
    """A stored share: "n/a" when the run holds none."""
    return fmt_percent(x) if isinstance(x, (int, float)) else "n/a"


def profile_device(run: Run, extra: dict[str, DeviceProfile] | None = None) -> DeviceProfile | None:
    """The device whose roofs the profile was placed on, when the catalog (or `extra`) still has it."""
    dev = placed_on(run)
    if not dev:
        return None
    try:
        return lookup_device(str(dev), extra)
    except UnknownDevice:
        return None


def profile_detail(run: Run, samples: Sequence[Any]) -> Text:
    """The step split, MFU and the heaviest op groups of a stored profile."""
    s = profile_summary(run)
    span, busy, idle = s.get("span_s") or 0.0, s.get("device_busy_s") or 0.0, s.get("idle_s") or 0.0
    what = "kernels" if s.get("on_device") else "ops"
    text = Text()
    text.append(f"profile on the roofs of {s.get('device', '?')}: span {fmt_time(span)}, {what} busy "
                f"{fmt_time(busy)}, idle {fmt_time(idle)} ({_pct(idle / span if span else None)})\n")
    mfu = s.get("mfu")
    low = " (above 100%: the roof is low)" if isinstance(mfu, (int, float)) and mfu > 1 else ""
    text.append(f"MFU {_pct(mfu)}{low} · bandwidth {_pct(s.get('bandwidth_utilisation'))}; largest share: "
                f"{'idle time' if s.get('largest_share') == 'idle' else clean(str(s.get('largest_share', '?')))}\n")
    on = bool(s.get("on_device"))
    for line in headline_lines(s.get("headline"), on) + [coverage_text(s.get("coverage"), on)]:
        if line:
            text.append(clean(line) + "\n")
    try:
        groups = stored_groups(samples)
    except ValueError as exc:  # a store written before imports were checked may hold one
        groups = []
        text.append(f"  {clean(str(exc))}: its op groups are left out\n", style="yellow")
    for g in groups[:TOP_OPS]:
        roof = g.fraction_of_roof
        tag = owner_tag(g.owner, g.family)
        text.append(f"  {tag + ' ' if tag else ''}{clean(g.op)} {clean(g.dtype)} ×{g.calls}: {fmt_time(g.time_s)}"
                    f" ({_pct(g.time_s / span if span else None)}), {g.regime}"
                    + (f", {_pct(roof)} of roof" if roof is not None else "") + "\n")
    text.append_text(path_detail(s))
    text.append(basis_text(s.get("kernel_times"), s.get("counted_by"), short=True) + "\n", style="dim")
    return text


def path_detail(s: Mapping[str, Any]) -> Text:
    """A stored profile's critical path and its fix-first rows, a line each (nothing where none was kept, none
    could be built, or what was kept is malformed)."""
    try:
        path = stored_path(s)
    except ValueError:
        return Text()
    if path is None or not path.graph:
        return Text()
    text = Text(path_head(path) + "\n")
    for f in path.fix_first:
        text.append(f"  fix first: {clean(f.label)} saves {fmt_time(f.saving_s)} on the path ({clean(f.regime)}"
                    + (f", {_pct(f.fraction_of_roof)} of roof" if f.fraction_of_roof is not None else "") + ")\n")
    return text


def times_text(kernel_times: Any, counted_by: Any) -> str:
    """The short form of what the counted figures and the times are: the end of the Profile tab's basis line."""
    timed = kernel_times in (None, MEASURED)
    counted = "counted by the GPU's counters where shown; " if counted_by else ""
    return f"{counted}times {'measured' if timed else 'the range profiler split of its window, not measured'}"


def basis_text(kernel_times: Any, counted_by: Any, short: bool = False) -> str:
    """What the figures are: W and Q estimated (and, where the trace has counters, counted: how), times measured
    (or, for a trace of counter ranges, the range profiler's split of its window)."""
    timed = kernel_times in (None, MEASURED)
    if short:
        return f"W and Q estimated from shapes; {times_text(kernel_times, counted_by)}"
    text = ("W and Q are estimates from the recorded shapes and dtypes (rooftop's op models); "
            + ("times are measured." if timed else "times are the range profiler's even split of its window, not "
               "measured."))
    if counted_by:
        text += " Counted W and Q are the GPU's own (its CUPTI counters in the trace; how: under their table)."
    return text


def sample_label(sample: Sample) -> str:
    """A stored op group as `rooftop profile` lists it (op dtype shapes), for `rooftop show`."""
    try:
        groups = stored_groups([sample])
    except ValueError:
        groups = []
    if not groups:  # an op group a store holds malformed: named by what the sample says
        return f"{sample.family} {sample.dtype} {sample.shape_text}".strip()
    return op_label(groups[0])


TOP = 20
KERNEL_WIDTH = 60  # a kernel's short name in the text report (ROCm's Tensile names run to 400 characters)


def share(x: float | None) -> str:
    """A share of the span or of a roof as `rooftop profile` prints it (units.fmt_percent's one rule)."""
    return fmt_percent(x)


def _drop_nested(text: str, open_: str, close: str) -> str:
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            depth += 1
        elif ch == close and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def short_kernel(name: str) -> str:
    """A kernel's name without its return type, template arguments, parameters and namespaces:
    `void at::native::reduce_kernel<512, 1, …>(…)` → `reduce_kernel`."""
    s = clean(name).replace("(anonymous namespace)", "anon")
    s = _drop_nested(_drop_nested(s, "<", ">"), "(", ")").strip()
    s = s.split(" ")[-1] if " " in s else s
    return s.split("::")[-1] or clean(name)


def op_name(op: str) -> str:
    """torch's name of an op as a table shows it: without `aten::`."""
    return op.removeprefix("aten::")


def op_label(g: Any) -> str:
    """How an op group reads in a table: who owns its kernels first where that is not its op (`(graph)`: a CUDA/HIP
    graph replayed them; `(before window)`: launched before the window, costed as their twins' op), so a cropped row
    still says it; torch's name (without `aten::`), dtype, input shapes (cropped)."""
    tag = owner_tag(getattr(g, "owner", "op"), getattr(g, "family", ""))
    return clean(" ".join(x for x in (tag, op_name(g.op), g.dtype, shapes_brief(g.shapes_text)) if x))


def relabelled(cp: CriticalPath, work: Any) -> CriticalPath:
    """`cp` with each op group named as the op table names it (`op_label`: who owns its kernels, the op without
    `aten::`, its shapes cropped), so a row of the path, of fix first and of the op table read alike."""
    groups = work.group_by_key()
    keyed: tuple[PathOp | FixFirst, ...] = (*cp.ops, *cp.fix_first)
    names = {p.key: op_label(groups[p.key]) for p in keyed if p.key in groups}
    ops = tuple(replace(p, label=names.get(p.key, p.label)) for p in cp.ops)
    old = {p.label: names[p.key] for p in keyed if p.key in names}
    what = tuple(replace(w, name=OP_WHAT_IF + old.get(w.name[len(OP_WHAT_IF):], w.name[len(OP_WHAT_IF):]))
                 if w.name.startswith(OP_WHAT_IF) else w for w in cp.what_if)
    return replace(cp, ops=ops, what_if=what, steps=tuple(replace(s, ops=tuple(replace(p, label=names.get(
        p.key, p.label)) for p in s.ops)) for s in cp.steps),
        fix_first=tuple(replace(f, label=names.get(f.key, f.label)) for f in cp.fix_first))


SHAPES_CHARS = 100  # about four lines of the op column at 100 columns
SHAPE = re.compile(r"\d[\d×]*")  # one tensor's shape in a shapes text: 5×128


def shapes_brief(text: str, limit: int = SHAPES_CHARS) -> str:
    """A shapes text cropped to about `limit` characters at a shape's end, with how many shapes were left
    out: an optimizer's TensorList of 5000 tensors would otherwise fill the screen with one row."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind(", ", 0, limit), text.rfind(" · ", 0, limit))
    if cut <= 0:
        cut = limit
    n = len(SHAPE.findall(text, cut))
    return f"{text[:cut]} … {n:,} more shape{'s' if n != 1 else ''}" if n else text[:cut] + " …"


NO_W = "no W"  # the I of an op group that does no arithmetic, in every table


def intensity_text(i: float | None) -> str:
    """An op group's I in a table: 3 significant digits, whole from 1000 (4460, not 4.46e+03: 4 cells fewer)."""
    if i is None:
        return ""
    if i == 0:  # a data movement (cat, copy): no W, so no I worth a digit, and no point on the log axis
        return NO_W
    return "inf" if i == float("inf") else f"{i:.0f}" if abs(i) >= 1000 else f"{i:.3g}"


def achieved_text(g: Any) -> str:
    """What the group achieved on its limiting resource: B/s when memory-bound, FLOP/s otherwise."""
    if g.time_s <= 0 or not g.timed:  # no time recorded (a 0-µs event, a counter range): no rate, not "0 GB/s"
        return ""
    if g.flops > 0 and g.regime == "compute":
        return fmt_flops_rate(g.achieved_flops)
    return fmt_bandwidth(g.achieved_bandwidth) if g.bytes > 0 else ""


OPS_COLS = (Col("share"), Col("time"), Col("calls", drop=3), Col("op dtype shapes", "left", text=True),
            Col("I", drop=4), Col("achieved", drop=2), Col("regime", "left", drop=1), Col("of roof"))


def ops_table(work: Any, top: int = TOP, wide: bool = False) -> FitRows:
    """The op groups, memcpy / memset and the overlap of streams by share of the span, with the idle time as a
    row of its own: each row's share is its time alone on the device, so the shares add up to 100%. One line
    per row: the op's name and shapes are cropped to the width (whole with `wide`)."""
    span = work.span_s or 1.0
    rows: list[tuple[float, list[Any]]] = []
    rows.append((work.idle_s, [share(work.idle_s / span), fmt_time(work.idle_s), "", Text("idle time", style="bold"),
                               "", "", "", ""]))
    if work.overlap_s > 0:
        rows.append((work.overlap_s, [share(work.overlap_s / span), fmt_time(work.overlap_s), "",
                                      Text("overlap of streams", style="bold"), "", "", "", ""]))
    for x in work.transfers:
        label = f"{x.label} {fmt_bytes(x.bytes)}" if x.bytes else x.label
        rows.append((x.alone_s, [share(x.alone_s / span), fmt_time(x.time_s), str(x.calls), Text(label),
                                 "", fmt_bandwidth(x.achieved_bandwidth) if x.bytes and x.time_s > 0 else "",
                                 x.level if x.bandwidth else f"no {x.level} roof", share(x.fraction_of_roof)]))
    flagged = {f.subject for f in work.flags if f.kind == "op"}
    for g in work.groups[:top]:
        i = g.intensity
        roof = share(g.fraction_of_roof) + (" !" if g.op in flagged and (g.fraction_of_roof or 0) > ABOVE_ROOF else "")
        rows.append((g.alone_s, [
            share(g.alone_s / span), fmt_time(g.time_s), str(g.calls), Text(op_label(g)),
            intensity_text(i), achieved_text(g), g.regime, roof,
        ]))
    return FitRows(OPS_COLS, [r for _, r in sorted(rows, key=lambda x: -x[0])], wide=wide)


COUNTED_COLS = (Col("op dtype shapes", "left", text=True), Col("W model", drop=2), Col("W counted"),
                Col("Q model", drop=3), Col("Q counted"), Col("I counted", drop=1))


def counted_cells(flops: Any, nbytes: Any) -> tuple[str, str]:
    """W and Q as the counters counted them, for a table ("" where not counted)."""
    real = (int, float)
    return (fmt_flops(flops) if isinstance(flops, real) else "", fmt_bytes(nbytes) if isinstance(nbytes, real) else "")


def counter_lines(work: Any, top: int = TOP, wide: bool = False) -> list[Any]:
    """The op groups' W and Q as the trace's GPU counters measured them, beside the model's estimate, one line each
    (a trace without counters: none). Empty columns (no DRAM counter recorded: Q counted) are left out."""
    if not work.counted_by:
        return []
    rows = []
    for g in work.groups[:top]:
        if not g.kernels:
            continue
        w, q = counted_cells(g.measured_flops, g.measured_bytes)
        rows.append((Text(op_label(g)), fmt_flops(g.flops), w or "not counted", fmt_bytes(g.bytes),
                     q, intensity_text(g.measured_intensity)))
    if not rows:
        return []
    return [Text("counted by the GPU (CUPTI counters in the trace), beside the model's estimate:", style="bold"),
            FitRows(COUNTED_COLS, rows, wide, indent=2), Prose(clean(work.counted_by), style="dim")]


IDLE_LEGEND = ("host wait: the CPU issued the next kernel only after the device went idle (busy in that op, in "
               "a sync or a copy); kernel wait: the next kernel was already queued, a gap under 30 µs; other: it "
               "was queued and waited longer, on another stream or an event")


IDLE_COLS = (Col("share"), Col("time"), Col("cause", "left"), Col("", "left", text=True), Col("gaps", "left"))


def idle_lines(work: Any, wide: bool = False) -> list[Any]:
    """The idle time by cause (host wait, kernel wait, other), largest first: one line each, the cause's
    name cropped to the width."""
    if not work.idle_causes:
        return []
    span = work.span_s or 1.0
    by: dict[str, float] = {}
    for c in work.idle_causes:
        by[c.category] = by.get(c.category, 0.0) + c.time_s
    head = ", ".join(f"{k} {fmt_time(v)}" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))
    rows = [(share(c.time_s / span), fmt_time(c.time_s), c.category, clean(c.cause),
             f"({c.gaps} gap{'s' if c.gaps != 1 else ''})") for c in work.idle_causes[:8]]
    return [Prose(f"idle time by cause: {head}", style="bold"), FitRows(IDLE_COLS, rows, wide, header=False, indent=2),
            Prose(IDLE_LEGEND, style="dim")]


KERNEL_COLS = (Col("time"), Col("calls", "left"), Col("kernel", "left", text=True, least=8, most=KERNEL_WIDTH),
               Col("achieved", "left"), Col("counted", "left", drop=1))


def kernel_lines(work: Any, n: int = 5, wide: bool = False) -> list[Any]:
    """The top kernels by time: name, calls, time, achieved FLOP/s and GB/s (W and Q from their ops), one line
    each: a narrow terminal crops a long name instead of wrapping the figures onto the next line."""
    if not work.top_kernels:
        return []
    rows = []
    for k in work.top_kernels[:n]:
        rate = ", ".join(x for x in (fmt_flops_rate(k.achieved_flops) if k.flops else "",
                                     fmt_bandwidth(k.achieved_bandwidth) if k.bytes else "") if x) if k.timed else ""
        w, q = counted_cells(k.measured_flops, k.measured_bytes)
        counted = " · ".join(x for x in (f"W {w}" if w else "", f"Q {q}" if q else "") if x)
        rows.append((fmt_time(k.time_s), f"×{k.calls}", short_kernel(k.name), rate, counted))
    any_counted = any(k.measured_flops is not None or k.measured_bytes is not None for k in work.top_kernels[:n])
    head = ("top kernels (rates from their ops' W and Q; counted: by the GPU):" if any_counted
            else "top kernels (W and Q from the ops that launched them):")
    return [Text(head, style="bold"),
            FitRows(KERNEL_COLS, rows, wide, header=False, indent=2)]


STEP_LINES = 8  # steps listed one per line; a trace of thousands of steps says how many more
STEP_COLS = (Col("step", "left", text=True), Col("CPU"), Col("kernels", drop=1), Col("busy"), Col("span"),
             Col("idle"))


def step_lines(work: Any, wide: bool = False) -> list[Any]:
    """The first STEP_LINES profiler steps, one line each: CPU time, kernels, busy and idle; then how many more."""
    if not work.steps:
        return []
    rows = [(clean(s.name), fmt_time(s.cpu_s), str(s.kernels) if work.on_device else "", fmt_time(s.busy_s),
             fmt_time(s.span_s), fmt_time(s.idle_s)) for s in work.steps[:STEP_LINES]]
    out: list[Any] = [Text("per step:", style="bold"), FitRows(STEP_COLS, rows, wide, indent=2)]
    more = len(work.steps) - STEP_LINES
    if more > 0:
        out.append(Text(f"  … {more:,} more step{'s' if more != 1 else ''} ({len(work.steps):,} in all; "
                        "--json lists each)", style="dim"))
    return out


def ranges_text(span_s: float, kernels: Any) -> str:
    """The span of a trace of counter ranges, for what it is."""
    return (f"span {fmt_time(span_s)}: the CUPTI range profiler's window over {kernels} kernels (it replays each "
            "one to count it, and times none): no kernel time, idle time or step split is measured")


def mfu_text(work: Any) -> str:
    """MFU against the main matmul path's roof (what it leaves out and where it is held: `headline_lines`)."""
    if work.kernel_times == RANGES:
        return "MFU n/a (no kernel was timed)"
    if work.mfu is None:
        return "MFU n/a (no matmul FLOPs on a path this device has)"
    times = f"{work.gpus} × " if work.gpus > 1 else ""
    return f"MFU {share(work.mfu)} of {times}{work.mfu_path} {fmt_flops_rate(work.device.F(work.mfu_path))}"


def coverage_text(cov: Any, on_device: bool = True, brief: bool = False) -> str:
    """The coverage line (Workload.coverage, as computed or stored): the share of the kernel time with an owner,
    by kind, and with a W and Q model; '' when there is none to say. `brief`: the Profile tab's, which begins its
    basis line (`times_text` ends it)."""
    if not isinstance(cov, Mapping) or not isinstance(cov.get("owned"), (int, float)):
        return ""
    by_owner = cov.get("by_owner")
    by = by_owner if isinstance(by_owner, Mapping) else {}

    def part(k: str) -> float:
        v = by.get(k)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0

    what = ("kernels" if cov.get("of") == "kernels" else "kernel time") if on_device else "op time"
    modelled = cov.get("modelled")
    kinds = [f"{name} {share(part(k))}" for k, name in (("op", "ops"), ("graph", "ops at graph capture"),
                                                          ("annotation", "annotations")) if part(k) > 0]
    kinds_text = f" ({', '.join(kinds)})" if len(kinds) > 1 or part("annotation") > 0 or part("graph") > 0 else ""
    by_family = cov.get("by_family")
    fam = by_family if isinstance(by_family, (int, float)) else part("family")
    early, early_fam = part("before window"), max(0.0, fam - part("family"))
    loose = []
    if early > 0:
        how = (" (costed as their twins' ops in the first step)" if early_fam <= 1e-9 else
               ", grouped by kernel family" if early_fam >= early * (1 - 1e-9) else
               f" ({share(early_fam)} grouped by kernel family)")
        loose.append(f"{share(early)} launched before the window{how}")
    if part("family") > 0:
        loose.append(f"{share(part('family'))} with no op, grouped by kernel family")
    comm, unsized = (float(v) if isinstance(v := cov.get(k), (int, float)) and not isinstance(v, bool) else 0.0
                     for k in ("comm_sized", "comm_unsized"))
    if unsized > 0 and not brief:
        loose.append(f"{share(unsized)} communication of a size the trace does not give (time only)")
    loose_text = "; ".join(loose)
    if brief:
        text = f"W and Q from shapes: {share(modelled)} of {what}; owner: {share(cov['owned'])}{kinds_text}"
        return text + (f"; {loose_text}" if loose else "")
    text = f"coverage: {share(cov['owned'])} of {what} has an owner{kinds_text}"
    if isinstance(modelled, (int, float)):
        text += f", {share(modelled)} a W and Q model" + (f" ({share(comm)} communication, on its links)"
                                                            if comm > 0 else "")
    return text + (f"; {loose_text}" if loose else "")


def headline_lines(head: Any, on_device: bool = True) -> list[str]:
    """What MFU and bandwidth utilisation leave out (op groups above their roof by more than 1.5×: a wrong W or Q)
    and where they were held at the busy fraction (Workload.headline, as computed or stored)."""
    if not isinstance(head, Mapping):
        return []
    out: list[str] = []
    gone = [g for g in head.get("left_out") or () if isinstance(g, Mapping)]
    if gone:
        by: dict[str, list[float]] = {}  # op name → its groups' fractions of their roofs
        for g in sorted(gone, key=lambda g: -(g.get("time_s") or 0.0)):
            f = g.get("fraction_of_roof")
            by.setdefault(clean(op_name(str(g.get("op", "?")))), []).append(f if isinstance(f, (int, float)) else 0.0)
        names = ", ".join(f"{op} at {'up to ' if len(fs) > 1 else ''}{share(max(fs))} of its roof"
                          + (f" ({len(fs)} shapes)" if len(fs) > 1 else "")
                          for op, fs in list(by.items())[:3]) + (", …" if len(by) > 3 else "")
        part = head.get("left_out_share")
        of = f", {share(part)} of {'kernel' if on_device else 'op'} time" if isinstance(part, (int, float)) else ""
        n = len(gone)
        out.append(f"MFU and bandwidth leave out {n} op group{'s' if n != 1 else ''} above "
                   f"{head.get('wrong_count_above', 1.5)}× {'their' if n != 1 else 'its'} roof (W or Q overcounted, "
                   "a kernel doing less work than the op's count, as a Winograd convolution does, or data a cache "
                   f"held; {fmt_time(float(head.get('left_out_s') or 0.0))}{of}): {names}")
    busy = head.get("busy_fraction")
    held = [(name, head.get(f"{key}_counted")) for key, name in (("mfu", "MFU"), ("bandwidth", "bandwidth"))
            if head.get(f"{key}_held")]
    if held and isinstance(busy, (int, float)):
        figures = ", ".join(f"{name} {share(v)}" for name, v in held if isinstance(v, (int, float)))
        out.append(f"{' and '.join(n for n, _ in held)} held at the busy fraction {share(busy)}: the ops' counts "
                   f"over the span came to {figures}, more than a device busy that share of the span can do (its "
                   "roofs are low, or a count is: see the flags)")
    return out


def _depth(x: float) -> str:
    return f"{x:.1f}" if x < 10 else f"{x:,.0f}"


def queue_text(q: Any) -> str:
    """The launch queue in one line: the deepest stream's mean and max, its time at the cap, the CPU's wait on a
    full queue, and what that says ("" without a queue: no launch in the trace)."""
    d = q.deepest if q is not None else None
    if d is None:
        return ""
    where = f"stream {d.stream}" + (f" of GPU {d.device}" if len({s.device for s in q.streams}) > 1 else "")
    cap = (f"at its cap of {d.cap:,} for {share(d.at_cap_fraction)} of the span" if d.at_cap_s > 0
           else f"its cap {d.cap:,}")
    waited = f"; the CPU waited {fmt_time(q.blocked_s)} on a full queue" if q.blocked_s > 0 else ""
    verdict = f": {q.verdict}" if q.verdict else ""
    return f"launch queue: mean {_depth(d.mean)}, max {d.max:,} on {clean(where)} ({cap}){waited}{verdict}"


def summed_text(at_roof: Any, no_gaps: Any, both: Any, span: float, brief: bool = False) -> str:
    """The what-ifs summed as if one stream ran everything back to back (where no graph could re-time them);
    `brief`: without the speed-ups, and the Profile tab's shorter heading."""
    def fig(x: Any) -> str:
        if not isinstance(x, (int, float)) or isinstance(x, bool):
            return "n/a"
        return fmt_time(x) + ("" if brief else f" ({fmt_ratio(span / x if x > 0 else 0)})")

    head = "summed" if brief else "summed, as if one stream ran it all"
    return f"{head} — every op at its roof: {fig(at_roof)}; no gaps: {fig(no_gaps)}; both: {fig(both)}"


def split_lines(work: Any, path: CriticalPath | None = None) -> list[Text]:
    """The step split and (where no critical path could be re-timed) what each fix would give summed, then MFU
    beside bandwidth utilisation."""
    span = work.span_s or 1.0
    what = "kernels" if work.on_device else "ops"
    if not work.on_device:
        idle_why = "Python and framework time between ops"
    elif work.idle_causes:
        idle_why = f"mostly {clean(work.idle_causes[0].cause)}"
    elif work.idle_s > work.busy_s:
        idle_why = "the device waits for the CPU to issue kernels"
    else:
        idle_why = "gaps between kernels"
    s = work.summary()
    overlap = f", overlap {fmt_time(work.overlap_s)}" if work.overlap_s > 0 else ""
    lines = [
        Text(f"span {fmt_time(work.span_s)}: {what} busy {fmt_time(work.busy_s)} ({share(work.busy_s / span)}){overlap}, "
             f"idle {fmt_time(work.idle_s)} ({share(work.idle_s / span)}) — {idle_why}"
             + (f"; {work.kernels} kernels" if work.on_device else "")),
    ]
    if path is None or not path.graph:  # no graph to re-time: the old sums, said to be sums
        lines.append(Text(summed_text(s.get("step_at_roof_s"), s.get("step_without_gaps_s"), s.get("bound_s"),
                                      work.span_s)))
    if work.kernel_times == RANGES:  # a trace of counter ranges: nothing was timed, so no split and no fix
        lines = [Text(ranges_text(work.span_s, work.kernels))]
    queue = queue_text(getattr(work, "launch_queue", None))
    if queue:
        lines.append(Text(queue))
    dev = work.device
    times = f"{work.gpus} × " if work.gpus > 1 else ""
    bw = (f"bandwidth {share(work.bandwidth_utilisation)} of {times}{fmt_bandwidth(dev.B('dram'))}"
          if work.bandwidth_utilisation is not None else "")
    lines.append(Text(f"{mfu_text(work)} · {bw} (over the span; roofs of {dev.id})".replace(" ·  (", " (")))
    lines += [Text(clean(h)) for h in headline_lines(work.headline(), work.on_device)]
    cov = coverage_text(work.coverage(), work.on_device)
    if cov:
        lines.append(Text(cov))
    top = work.largest_share()
    lines.append(Text(f"largest share: {'idle time' if top == 'idle' else clean(top)}", style="bold"))
    if work.device_note:
        lines.append(Text(f"device: {clean(work.device_note)}", style="yellow"))

    for f in flag_lines(work.flags):
        lines.append(Text(f"flag: {clean(f)}", style="bold red"))
    for n in work.notes:
        lines.append(Text(f"note: {clean(n)}", style="yellow"))
    lines.append(Text(basis_text(work.kernel_times, work.counted_by), style="dim"))
    return lines


def profile_report(work: Any, top: int = TOP, wide: bool = False, path: CriticalPath | None = None,
                   path_note: str = "") -> Group:
    """`rooftop profile`'s report: the op groups, idle causes, top kernels and steps (one line a row; whole with
    `wide`, to print with crop=False), then the step split and MFU, then the critical path and what to fix first
    (`path`: none for a profile kept before there was one; `path_note`: a job's, whose path it is)."""

    head = Text(f"{clean(work.device_name) or ('CPU program' if not work.on_device else 'GPU program')} on the "
                f"roofs of {work.device.id} ({work.device.name})", style="bold")
    parts = (counter_lines(work, top, wide), idle_lines(work, wide), kernel_lines(work, wide=wide), step_lines(work, wide))
    extra = [x for part in parts if part for x in (Text(""), *part)]
    prose = (Prose(line) for line in split_lines(work, path))  # a value keeps its unit on its line ("13.8" over "ms")
    timed = work.kernel_times != RANGES  # a trace of counter ranges timed nothing: no path to speak of
    tail = [Text(""), *path_lines(path, wide, path_note)] if path is not None and timed else []
    return Group(Prose(head), Text(""), ops_table(work, top, wide), *extra, Text(""), *prose, *tail)


NCU_COLS = (Col("kernel", "left", text=True, least=16), Col("time"), Col("DRAM"), Col("L2→SM", drop=1),
            Col("tensor W"), Col("I dram"), Col("DRAM B/s"), Col("roof"))


def ncu_report(kernels: Sequence[Any], device: Any, top: int, wide: bool = False) -> Group:
    """Nsight Compute's kernels on the roofs of `device`: measured bytes per level, tensor work, the DRAM roof's
    share; the `top` longest (a table of 100k kernels helps no one: --json has them all). One line a kernel: its
    name gives way to the figures (whole with `wide`)."""
    shown = sorted(kernels, key=lambda k: -k.time_s)[: max(top, 1)]
    rows = []
    for k in shown:
        d = {p["level"]: p for p in k.points(device)}.get("dram", {})
        rows.append([
            short_kernel(k.name), fmt_time(k.time_s),
            fmt_bytes(k.dram_bytes) if k.dram_bytes is not None else "",
            fmt_bytes(k.l2_bytes) if k.l2_bytes is not None else "",
            fmt_flops(k.tensor_ops) if k.tensor_ops else "",
            f"{d['intensity']:.3g}" if d.get("intensity") else "",
            fmt_bandwidth(d.get("achieved_bandwidth", 0.0)) if d else "", share(d.get("fraction_of_roof")),
        ])
    t = FitRows(NCU_COLS, rows, wide)
    return Group(
        Text(f"{len(kernels)} kernels from Nsight Compute, on the roofs of {device.id}"
             + (f"; the {len(shown)} longest (--top N, or --json for all)" if len(shown) < len(kernels) else ""),
             style="bold"), Text(""), t,
        Text(""),
        Text("Bytes are measured: rate × kernel time per level (DRAM; L2→SM). Tensor W is the tensor pipes' "
             "count (sm__ops_path_tensor_src_*; on Blackwell sm__ops_path_tensor_op_utcqmma_*, …_utcomma_*), so "
             "padding rows are counted too; kernels without tensor work are placed by bandwidth.", style="dim"),
    )


COMPARE_COLS = (Col("op dtype shapes", "left", text=True), Col("A"), Col("B"), Col("B / A"))


def compare_report(ra: Any, rb: Any, split: dict[str, Any], diffs: Sequence[Any], top: int,
                   wide: bool = False) -> Group:
    """Two stored profiles side by side: the step split, then each op group's time in A and in B (one line
    each, the op cropped to the width; whole with `wide`)."""
    def both(key: str, fmt: Any) -> str:
        a, b = split[key]
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return "n/a"
        return f"{fmt(a)} → {fmt(b)}" + (f" ({fmt_ratio(b / a)})" if a else "")

    rows = [(op_label(d.group),
             fmt_time(d.time_a_s) if d.time_a_s is not None else "—",
             fmt_time(d.time_b_s) if d.time_b_s is not None else "—",
             fmt_ratio(d.ratio) if d.ratio is not None else "") for d in diffs[:top]]
    t = FitRows(COMPARE_COLS, rows, wide)
    return Group(
        Text(f"A = run {ra.label} ({clean(ra.device_name)}), B = run {rb.label} ({clean(rb.device_name)})", style="bold"),
        Text(f"span {both('span_s', fmt_time)}; busy {both('device_busy_s', fmt_time)}; "
             f"idle {both('idle_s', fmt_time)}; bound {both('bound_s', fmt_time)}"),
        Text(f"MFU {both('mfu', share)}; bandwidth {both('bandwidth_utilisation', share)}"),
        Text(""), t,
    )
