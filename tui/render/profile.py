"""A profiled program as text: `rooftop profile`'s report (op groups, step split, MFU), and a stored
profile run as the app shows it.

The History tab shows a run of plan "profile" with `profile_detail` instead of ceilings
(a profile has none): the numbers come from the run as stored, nothing is recomputed there.
"""

from __future__ import annotations

from typing import Any, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from rooftop.models.catalog import UnknownDevice, lookup_device
from rooftop.models.profile import DeviceProfile
from rooftop.models.units import fmt_time
from rooftop.store.runs import Run
from rooftop.store.workloads import group_records, placed_on, profile_summary
from rooftop.tui.render.text import clean

TOP_OPS = 5


def _pct(x: Any) -> str:
    """A stored share: "n/a" when the run holds none."""
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "n/a"


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
    text.append(f"MFU {_pct(s.get('mfu'))} · bandwidth {_pct(s.get('bandwidth_utilisation'))}; largest share: "
                f"{'idle time' if s.get('largest_share') == 'idle' else clean(str(s.get('largest_share', '?')))}\n")
    groups = sorted(group_records(samples), key=lambda g: -(g.get("time_s") or 0.0))
    for g in groups[:TOP_OPS]:
        roof = g.get("fraction_of_roof")
        text.append(f"  {clean(str(g.get('op', '?')))} {clean(str(g.get('dtype', '')))} ×{g.get('calls', 0)}: {fmt_time(g.get('time_s') or 0)}"
                    f" ({_pct((g.get('time_s') or 0) / span if span else None)}), {g.get('regime', '')}"
                    + (f", {_pct(roof)} of roof" if isinstance(roof, (int, float)) else "") + "\n")
    text.append("W and Q estimated from shapes; times measured\n", style="dim")
    return text


def sample_label(sample: Any) -> str:
    """A stored op group as `rooftop profile` lists it (op dtype shapes), for `rooftop show`."""
    from rooftop.models.workload import OpGroup

    g = sample.conditions.get("profile") or {}
    return op_label(OpGroup(op=str(g.get("op", "?")), shapes=list(g.get("shapes") or []),
                            dtype=str(g.get("dtype", "")), model="", path="", counting=""))


TOP = 20


def share(x: float | None) -> str:
    """A share of the span or of a roof as `rooftop profile` prints it ("" for none; 2 digits below 0.1%)."""
    return "" if x is None else f"{100 * x:.1f}%" if x >= 0.001 else f"{100 * x:.2g}%"


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


def op_label(g: Any) -> str:
    """How an op group reads in a table: torch's name (without `aten::`), dtype, input shapes."""
    name = g.op[6:] if g.op.startswith("aten::") else g.op
    return clean(" ".join(x for x in (name, g.dtype, g.shapes_text) if x))


def achieved_text(g: Any) -> str:
    """What the group achieved on its limiting resource: B/s when memory-bound, FLOP/s otherwise."""
    from rooftop.models.units import fmt_bandwidth, fmt_flops_rate

    if g.flops > 0 and g.regime == "compute":
        return fmt_flops_rate(g.achieved_flops)
    return fmt_bandwidth(g.achieved_bandwidth) if g.bytes > 0 else ""


def ops_table(work: Any, top: int = TOP) -> Table:
    """The op groups by time share, with the idle time as a row of its own."""
    from rooftop.models.units import fmt_time

    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("share", "right"), ("time", "right"), ("calls", "right"), ("op dtype shapes", "left"),
                      ("I", "right"), ("achieved", "right"), ("regime", "left"), ("of roof", "right")):
        t.add_column(col, justify=just, no_wrap=col != "op dtype shapes", overflow="fold",
                     ratio=1 if col == "op dtype shapes" else None)
    span = work.span_s or 1.0
    rows: list[tuple[float, list[Any]]] = []
    idle_label = "idle time"
    rows.append((work.idle_s, [share(work.idle_s / span), fmt_time(work.idle_s), "", Text(idle_label, style="bold"),
                               "", "", "", ""]))
    for g in work.groups[:top]:
        i = g.intensity
        rows.append((g.time_s, [
            share(g.time_s / span), fmt_time(g.time_s), str(g.calls), Text(op_label(g)),
            "" if i is None else ("inf" if i == float("inf") else f"{i:.3g}"), achieved_text(g), g.regime,
            share(g.fraction_of_roof),
        ]))
    for _, r in sorted(rows, key=lambda x: -x[0]):
        t.add_row(*r)
    return t


def split_lines(work: Any) -> list[Text]:
    """The step split and what each fix would give (Amdahl), then MFU beside bandwidth utilisation."""
    from rooftop.models.units import fmt_bandwidth, fmt_flops_rate, fmt_ratio, fmt_time

    span = work.span_s or 1.0
    what = "kernels" if work.on_device else "ops"
    if not work.on_device:
        idle_why = "Python and framework time between ops"
    elif work.idle_s > work.busy_s:
        idle_why = "the device waits for the CPU to issue kernels (launch / CPU bound)"
    else:
        idle_why = "gaps between kernels"
    s = work.summary()
    lines = [
        Text(f"span {fmt_time(work.span_s)}: {what} busy {fmt_time(work.busy_s)} ({share(work.busy_s / span)}), "
             f"idle {fmt_time(work.idle_s)} ({share(work.idle_s / span)}) — {idle_why}"
             + (f"; {work.kernels} kernels" if work.on_device else "")),
        Text(f"every op at its roof: {fmt_time(work.at_roof_s)} ({fmt_ratio(s['speedup_at_roof'] or 0)}); "
             f"no gaps: {fmt_time(work.no_gaps_s)} ({fmt_ratio(s['speedup_without_gaps'] or 0)}); "
             f"both: {fmt_time(work.bound_s)} (the sum of the ops' bounds T)"),
    ]
    dev = work.device
    mfu = (f"MFU {share(work.mfu)} of {work.mfu_path} {fmt_flops_rate(dev.F(work.mfu_path))}"
           if work.mfu is not None else "MFU n/a (no matmul FLOPs on a path this device has)")
    bw = (f"bandwidth {share(work.bandwidth_utilisation)} of {fmt_bandwidth(dev.B('dram'))}"
          if work.bandwidth_utilisation is not None else "")
    lines.append(Text(f"{mfu} · {bw} (over the span; roofs of {dev.id})".replace(" ·  (", " (")))
    top = work.largest_share()
    lines.append(Text(f"largest share: {'idle time' if top == 'idle' else clean(top)}", style="bold"))
    for n in work.notes:
        lines.append(Text(f"note: {clean(n)}", style="yellow"))
    lines.append(Text("W and Q are estimates from the recorded shapes and dtypes (rooftop's op models); "
                      "times are measured.", style="dim"))
    return lines


def profile_report(work: Any, top: int = TOP) -> Group:
    head = Text(f"{clean(work.device_name) or ('CPU program' if not work.on_device else 'GPU program')} on the "
                f"roofs of {work.device.id} ({work.device.name})", style="bold")
    return Group(head, Text(""), ops_table(work, top), Text(""), *split_lines(work))


def ncu_report(kernels: Sequence[Any], device: Any, top: int) -> Group:
    """Nsight Compute's kernels on the roofs of `device`: measured bytes per level, tensor work, the DRAM roof's
    share; the `top` longest (a table of 100k kernels helps no one: --json has them all)."""
    from rooftop.models.units import fmt_bandwidth, fmt_bytes, fmt_flops, fmt_time

    cols = ("kernel", "time", "DRAM", "L2→SM", "tensor W", "I dram", "DRAM B/s", "roof")
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
    t = Table(header_style="bold", box=None, pad_edge=False, padding=(0, 1, 0, 0))
    for j, col in enumerate(cols):
        if col == "kernel":
            t.add_column(col, no_wrap=True, overflow="ellipsis", max_width=16)
        else:  # numbers are never squeezed: the kernel's name gives way
            t.add_column(col, justify="right", no_wrap=True, min_width=max(len(col), *(len(r[j]) for r in rows)))
    for r in rows:
        t.add_row(Text(r[0]), *r[1:])
    return Group(
        Text(f"{len(kernels)} kernels from Nsight Compute, on the roofs of {device.id}"
             + (f"; the {len(shown)} longest (--top N, or --json for all)" if len(shown) < len(kernels) else ""),
             style="bold"), Text(""), t,
        Text(""),
        Text("Bytes are measured: rate × kernel time per level (DRAM; L2→SM). Tensor W is the tensor pipes' "
             "count (sm__ops_path_tensor_src_*), so padding rows are counted too; kernels without tensor work "
             "are placed by bandwidth.", style="dim"),
    )


def compare_report(ra: Any, rb: Any, split: dict[str, Any], diffs: Sequence[Any], top: int) -> Group:
    """Two stored profiles side by side: the step split, then each op group's time in A and in B."""
    from rooftop.models.units import fmt_ratio, fmt_time
    from rooftop.models.workload import OpGroup

    def both(key: str, fmt: Any) -> str:
        a, b = split[key]
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return "n/a"
        return f"{fmt(a)} → {fmt(b)}" + (f" ({fmt_ratio(b / a)})" if a else "")

    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("op dtype shapes", "left"), ("A", "right"), ("B", "right"), ("B / A", "right")):
        t.add_column(col, justify=just, no_wrap=col != "op dtype shapes", overflow="fold",
                     ratio=1 if col == "op dtype shapes" else None)
    for d in diffs[:top]:
        label = op_label(OpGroup(op=d.op, shapes=d.shapes, dtype=d.dtype, model="", path="", counting=""))
        t.add_row(Text(label), fmt_time(d.time_a_s) if d.time_a_s is not None else "—",
                  fmt_time(d.time_b_s) if d.time_b_s is not None else "—",
                  fmt_ratio(d.ratio) if d.ratio is not None else "")
    return Group(
        Text(f"A = run {ra.label} ({clean(ra.device_name)}), B = run {rb.label} ({clean(rb.device_name)})", style="bold"),
        Text(f"span {both('span_s', fmt_time)}; busy {both('device_busy_s', fmt_time)}; "
             f"idle {both('idle_s', fmt_time)}; bound {both('bound_s', fmt_time)}"),
        Text(f"MFU {both('mfu', share)}; bandwidth {both('bandwidth_utilisation', share)}"),
        Text(""), t,
    )
