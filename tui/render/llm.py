"""An LLM step as text: the per-step bound, the per-layer ops, the Amdahl split, the parallel dimensions' comm."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from rooftop.models.comm import COLLECTIVE_NAMES as COLLECTIVES
from rooftop.models.links import LINK_LEVELS
from rooftop.models.llm.claims import claim_lines
from rooftop.models.llm.expertparallel import ep_line
from rooftop.models.llm.step import arch_lines, launch_line, rank_line
from rooftop.models.safetext import safe_text
from rooftop.models.units import (
    fmt_bandwidth,
    fmt_bytes,
    fmt_count,
    fmt_intensity,
    fmt_percent,
    fmt_ratio,
    fmt_time,
)
from rooftop.tui.render.layout import Prose, hanging
from rooftop.tui.render.report import device_heading

if TYPE_CHECKING:  # types only
    from rooftop.models.llm.step import Amdahl, StepBound


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _gib3(n: float) -> str:
    """GiB in at most six columns, without an exponent: 0.0068, 0.0625, 4.29, 1,100."""
    g = n / 2**30
    return f"{g:,.0f}" if g >= 100 else f"{g:.3g}" if g >= 0.01 else f"{g:.2g}"


def llm_steps_table(steps: list) -> Group:
    """One row per batch × context: the bytes a step must read, its bounds (roofline, launch), tokens/s,
    measured share; then the launch floor and whether it all fits in memory. With tp × pp > 1 every
    figure is one rank's (the heading says so) and tok/s counts the pass through all pp stages."""
    s0 = steps[0]
    a = s0.arch
    kvd = s0.phase.kv_dtype or a.dtype
    moe = f", MoE {a.experts} experts top-{a.experts_per_token}" if a.experts else ""
    split = f"; per rank of TP {s0.tp} × PP {s0.pp}" if s0.ranks > 1 else ""
    split += f"; the busiest of EP {s0.ep.degree} ranks" if s0.ep else ""
    head = Text.assemble(
        (f"{a.name} {s0.phase.kind}", "bold"),
        f" on {device_heading(s0.device)} — {a.params / 1e9:.2f} B params, {a.weights_label} weights "
        f"{_gib(a.weights_bytes)} (input embedding {_gib(a.embedding_bytes)}), KV {kvd}{moe}{split}",
    )
    t = Table(header_style="bold", box=None, pad_edge=False, padding=(0, 1), collapse_padding=True)
    measured = any(s.measured_s for s in steps)
    cols = ["batch", "prompt" if s0.phase.kind == "prefill" else "ctx", "wts GiB", "KV GiB", "Q/B ms",
            "ΣT ms", "launch", "tok/s≤"]
    cols += ["meas ms", "expl.", "rest ms"] if measured else ["W/F ms"]
    for c in cols:
        t.add_column(c, justify="right", no_wrap=True, min_width=len(c))

    def ms(x: float) -> str:
        return f"{x * 1e3:,.0f}" if abs(x) >= 1 else f"{x * 1e3:.3g}"

    for s in steps:
        floor = s.launch_floor_s
        row = [str(s.phase.batch), str(s.phase.kv_len), f"{s.weights_read_bytes / 2**30:.2f}", _gib3(s.kv_bytes),
               ms(s.bytes_bound_s), ms(s.lower_bound_s),
               (ms(floor) + ("*" if s.binds == "launch" else "")) if floor is not None else "—",
               f"{s.tokens_per_s:,.0f}"]
        if measured:
            row += [ms(s.measured_s) if s.measured_s else "", fmt_percent(s.explained, 0) if s.measured_s else "",
                    ms(s.measured_s - s.lower_bound_s) if s.measured_s else ""]
        else:
            row.append(ms(s.compute_s))
        t.add_row(*row, style="red" if s.memory.fits is False else "")
    rank = "one rank's " if s0.ranks > 1 else ""
    notes = Prose(
        f"wts = {rank}weights read per step (all but the input embedding table); KV = {rank}cache read per step "
        "(decode) or written (prefill); Q/B = (wts + KV) / B, the activations left out; W/F = the step's FLOPs / F; "
        "ΣT = the sum of each op's max(W/F, Q/B), activations counted; "
        "launch = the eager launch floor (kernels × launch overhead), * where it binds: T ≥ max(ΣT, launch); "
        f"tok/s≤ = tokens per step / {'(PP × T)' if s0.pp > 1 else 'T'}; held = what device memory must hold: "
        "all weights and the batch's KV cache (activations not counted); "
        "expl. = ΣT / measured; rest = measured − ΣT: kernel launch and CPU overhead, or kernels below "
        "their roof.", style="dim")
    return Group(Prose(head), t, notes, hanging(llm_step_notes(steps)))


def llm_step_notes(steps: list) -> list[tuple[str | Text, str | Text]]:
    """The launch floor (it scales with the kernels, the same at every batch) and the memory fit:
    each step that does not fit, else the largest that does."""
    s0 = steps[0]
    out: list[tuple[str | Text, str | Text]] = [(" ·", line) for line in arch_lines(s0.arch)]
    out.append((" ·", launch_line(s0)))
    if s0.ranks > 1:
        out.append((" ·", rank_line(s0)))
    if s0.ep:
        out.append((" ·", ep_line(s0.ep, s0.device)))

    for s in steps:  # a measured step faster than its bound, a tokens/s claim above it
        where = f"batch {s.phase.batch}, {'prompt' if s.phase.kind == 'prefill' else 'ctx'} {s.phase.kv_len}: "
        claim = claim_lines(s, s.claimed_tokens_per_s) if s.claimed_tokens_per_s else []
        out += [(Text(" !", style="red"), Text(where + line, style="red")) for line in s.measured_lines() + claim]
    over = [s for s in steps if s.memory.fits is False]
    if s0.memory.weights_fit is False:  # then nothing fits: say it once, with the smallest KV cache
        least = min(steps, key=lambda s: s.memory.needed_bytes)
        return out + [(Text(" !", style="red"), Text(least.memory.describe(least.device.id), style="red"))]
    for s in over:
        where = f"batch {s.phase.batch}, {'prompt' if s.phase.kind == 'prefill' else 'ctx'} {s.phase.kv_len}: "
        out.append((Text(" !", style="red"), Text(where + s.memory.describe(s.device.id), style="red")))
    if not over:
        big = max(steps, key=lambda s: s.memory.needed_bytes)
        out.append((" ·", big.memory.describe(big.device.id)))
    return out


def _times(count: float) -> str:
    """An op's multiplicity: whole where it is whole, else to three figures (expected MoE experts)."""
    return str(round(count)) if abs(count - round(count)) < 1e-9 else f"{count:.4g}"


def llm_ops_table(step: StepBound) -> Group:
    total = step.lower_bound_s
    t = Table(header_style="bold", box=None, pad_edge=False)
    for c, j in (("op", "left"), ("shape", "left"), ("×", "right"), ("I", "right"), ("regime", "left"),
                 ("T each", "right"), ("T total", "right"), ("share", "right")):
        t.add_column(c, justify="left" if j == "left" else "right")
    for lo, a in step.ops:
        t.add_row(lo.name, a.op.describe(), _times(lo.count), f"{a.intensity:.3g}", a.regime,
                  fmt_time(a.time_lower_bound), fmt_time(a.time_lower_bound * lo.count),
                  f"{100 * a.time_lower_bound * lo.count / total:.1f}%")
    title = Prose(f"per-step ops at batch {step.phase.batch} (path {step.ops[1][1].path}; ridge "
                 f"{step.ops[1][1].ridge:.3g} FLOP/B)", style="bold")
    by_note: dict[str, list[str]] = {}
    for lo, _ in step.ops:
        if lo.note:
            by_note.setdefault(lo.note, []).append(lo.name)
    notes = [Prose(f"× for {', '.join(names)}: {note}", style="dim") for note, names in by_note.items()]
    launch = step.launch_s
    tiny = sum(1 for _, a in step.ops if launch is not None and a.time_lower_bound < launch)
    if tiny and launch is not None:  # tiny counts none without a launch time
        notes.append(Prose(f"{fmt_count(tiny, 'op kind')} {'is' if tiny == 1 else 'are'} bounded below one kernel "
                           f"launch ({fmt_time(launch)} on {step.device.id}): at this size launch overhead, not the "
                           f"roofline, sets {'its' if tiny == 1 else 'their'} time (CUDA graphs cut it).", style="yellow"))
    return Group(title, t, *notes)


def amdahl_table(split: Amdahl) -> Group:
    t = Table(header_style="bold", box=None, pad_edge=False)
    for c in ("part", "before", "after", "saved"):
        t.add_column(c, justify="left" if c == "part" else "right")
    for name, before in split.before.items():
        after = split.after[name]
        t.add_row(safe_text(name), f"{before:.3g} ms", f"{after:.3g} ms", f"{before - after:.3g} ms")  # typed by the user
    t.add_row("total", f"{split.total_before:.3g} ms", f"{split.total_after:.3g} ms",
              f"{split.total_before - split.total_after:.3g} ms", style="bold")
    return Group(Prose(f"end to end: {fmt_ratio(split.speedup)} (Amdahl's law: the parts not sped up keep "
                      "their time)", style="bold"), t)


def parallel_table(dims: Sequence[Any], device: Any, step: Any) -> Any:
    """Each parallel dimension's communication per step: I_comm and, per link, whether it is comm-bound."""
    links = [lv for lv in LINK_LEVELS if lv in device.bandwidth]
    ph = step.phase
    t = Table(title=f"communication per step, one rank ({ph.kind}, batch {ph.batch}, {ph.tokens} tokens): "
                    f"comm-bound on a link when I_comm < its ridge F/B", title_justify="left", box=None,
              header_style="bold", pad_edge=False)
    for h in ("dim", "collective", "Q_comm", "I_comm", *[f"{lv} ({fmt_bandwidth(device.B(lv))})" for lv in links]):
        t.add_column(h, justify="left" if h in ("dim", "collective") else "right")
    for d in dims:
        verdicts = {v["level"]: v for v in d.on_links(device)}
        what = f"{d.calls}× {COLLECTIVES[d.collective].split(' (')[0]} of {fmt_bytes(d.message_bytes)}"
        t.add_row(f"{d.dim.upper()}×{d.degree}", what, fmt_bytes(d.wire_bytes), fmt_intensity(d.intensity),
                  *[f"{fmt_time(verdicts[lv]['comm_s'])} " + ("comm-bound" if verdicts[lv]["comm_bound"] else "ok")
                    for lv in links])
        for x in d.extra:  # in the Q_comm above: the transfers beside the layers' collectives
            t.add_row("", f"+ {x.name} {COLLECTIVES[x.collective].split(' (')[0]} {fmt_bytes(x.message_bytes)}",
                      f"({fmt_bytes(x.wire_bytes)})", "", *["" for _ in links], style="dim")
    parts: list[Any] = [t]
    if not links:
        parts.append(Prose(f"{device.id} has no link levels (nvlink, xgmi, pcie, net): pick a profile with them, "
                           "e.g. -d h100-sxm-ds, to see where each dimension turns comm-bound"))
    else:
        parts.append(Prose(f"the rank computes {fmt_time(dims[0].compute_s)} per step (Σ W/F over its share); "
                           f"ridges: " + ", ".join(f"{lv} {fmt_intensity(dims[0].link_ridge(device.B(lv)))}"
                                                   for lv in links)))
    return Group(*parts)
