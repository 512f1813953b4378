"""The critical path of a profile as text: its length and split, the op groups on it, the what-ifs re-timed on
it, and which op group to fix first; `rooftop profile`, `rooftop show` and the Profile tab show these.

Everything here is read off a `CriticalPath` (computed, or as stored): nothing is re-timed here.
"""

from __future__ import annotations

from typing import Any, Mapping

from rich.text import Text

from rooftop.models.program.critpath import SPLIT_KEYS, WHOLE, CriticalPath, FixFirst
from rooftop.models.program.job import missing_text
from rooftop.models.program.jobpath import Joined
from rooftop.models.units import fmt_percent, fmt_ratio, fmt_time
from rooftop.models.program.workload import OpGroup
from rooftop.tui.render.fit import Col, FitRows
from rooftop.tui.render.layout import Prose, hanging
from rooftop.tui.render.text import clean

# what each part of the path's split is, as the report names it
SPLIT_NAMES = {"cpu": "CPU", "device": "device", "launch": "launch", "kernel_gap": "kernel gaps",
               "other_stream": "waiting on another stream", "peers": "waiting on peers"}
SPLIT_BRIEF = SPLIT_NAMES | {"kernel_gap": "gaps", "other_stream": "other stream", "peers": "peers"}
PATH_OPS = 8  # the op groups on the path the report lists
OP_WHAT_IF = "op:"  # a what-if that runs one op group at its roof (the fix-first rows say what each saves)
STEPS_LISTED = 6


def _of(x: float, whole: float) -> str:
    return fmt_percent(x / whole) if whole > 0 else ""


def split_text(split: Mapping[str, float], length_s: float) -> str:
    """The path's split in words, largest first: "device 12.1 ms (88.0%), CPU 1.2 ms (8.7%), …" (parts of 0 left
    out)."""
    parts = sorted(((k, split.get(k, 0.0)) for k in SPLIT_KEYS), key=lambda kv: -kv[1])
    return ", ".join(f"{SPLIT_NAMES[k]} {fmt_time(v)} ({_of(v, length_s)})" for k, v in parts if v > 0) or "empty"


def path_head(cp: CriticalPath) -> str:
    """The path in one line: what was analysed, its length, its split."""
    what = "the whole trace" if cp.window == WHOLE else clean(cp.window)
    return f"critical path of {what}: {fmt_time(cp.length_s)} — {split_text(cp.split, cp.length_s)}"


def what_if_text(cp: CriticalPath) -> str:
    """The step-wide what-ifs re-timed on the graph, in one line: the step after, what it saves, the speed-up."""
    shown = [w for w in cp.what_if if w.retimed and not w.name.startswith(OP_WHAT_IF)]
    parts = [f"{clean(w.name)} {fmt_time(w.length_s)} (saves {fmt_time(w.saving_s)}"
             + (f", {fmt_ratio(cp.length_s / w.length_s)}" if w.length_s > 0 else "") + ")" for w in shown]
    return "what if, re-timed on the path: " + "; ".join(parts) if parts else ""


def fix_cells(f: FixFirst, length_s: float) -> tuple[str, str, str | Text, str, str]:
    """One fix-first row's cells: the milliseconds it saves on the path, their share of it, the op group, its
    regime, its fraction of the roof (the report's table and the Profile tab's panel)."""
    return (fmt_time(f.saving_s), _of(f.saving_s, length_s), Text(clean(f.label)), clean(f.regime),
            fmt_percent(f.fraction_of_roof))


PATH_OP_COLS = (Col("on path"), Col("of path"), Col("kernels", drop=1), Col("op group", "left", text=True))
FIX_COLS = (Col("#"), Col("saves"), Col("of path", drop=2), Col("op group", "left", text=True),
            Col("regime", "left", drop=1), Col("of roof"))


def fix_first_lines(cp: CriticalPath, wide: bool = False) -> list[Any]:
    """The top op groups by what running each at its roof takes off the path, then what to do about each."""
    if not cp.fix_first:
        return [Text("fix first: no op group at its roof shortens the path (it is bound by the CPU, gaps or "
                     "waits, or its op groups have no roof)", style="bold")]
    rows = [(str(i), *fix_cells(f, cp.length_s)) for i, f in enumerate(cp.fix_first, start=1)]
    out: list[Any] = [Text("fix first (what running each op group at its roof takes off the path):", style="bold"),
                      FitRows(FIX_COLS, rows, wide, indent=2)]
    advice = [(f"  {i}.", clean(f.advice)) for i, f in enumerate(cp.fix_first, start=1) if f.advice]
    return out + ([hanging(advice)] if advice else [])


def joined_text(j: Joined) -> str:
    """A job's path in a line: whose it is and the ranks it joined at their collectives, or why it stands alone."""
    if not j.ranks:
        return f"rank {j.rank}'s own path" + (f": {clean(j.alone)}" if j.alone else "")
    top = max(j.ranks) + 1
    ranks = missing_text(set(range(top)) - set(j.ranks), top)
    return (f"joined across ranks {ranks} at their collectives (each ends as its last rank arrives): the path runs "
            f"back from rank {j.rank}, whose steps end last")


def path_lines(cp: CriticalPath, wide: bool = False, note: str = "") -> list[Any]:
    """The critical path section: its length and split (`note`: a job's, whose path it is), each step's length, the
    op groups on it, the what-ifs, fix first. Where no graph could be built: why, in one line (the summed figures
    are said beside the split)."""
    said = [Prose(f"  {note}")] if note else []
    if not cp.graph:
        return [Prose(f"critical path: not built ({clean(cp.why_not) or 'no dependency graph'}); the what-ifs "
                      "are summed", style="bold"), *said]
    out: list[Any] = [Prose(path_head(cp), style="bold"), *said]
    if len(cp.steps) > 1:
        listed = ", ".join(f"{clean(s.window)} {fmt_time(s.length_s)}" for s in cp.steps[:STEPS_LISTED])
        more = len(cp.steps) - STEPS_LISTED
        out.append(Prose(f"  per step: {listed}" + (f", … {more:,} more (--json lists each)" if more > 0 else ""),
                         style="dim"))
    if cp.ops:
        rows = [(fmt_time(p.time_s), _of(p.time_s, cp.length_s), str(p.kernels), Text(clean(p.label)))
                for p in cp.ops[:PATH_OPS]]
        out += [Text("op groups on the path (their device time on it):", style="bold"),
                FitRows(PATH_OP_COLS, rows, wide, indent=2)]
    line = what_if_text(cp)
    if line:
        out.append(Prose(line))
    return out + [Text("")] + fix_first_lines(cp, wide)


def panel_head(cp: CriticalPath) -> Text:
    """The Profile tab's fix-first panel heading, a line each at 80 columns: the path's length and split (shares
    only), the step-wide what-ifs (the step after, what it saves), how to open a row."""
    parts = sorted(((k, cp.split.get(k, 0.0)) for k in SPLIT_KEYS), key=lambda kv: -kv[1])
    split = ", ".join(f"{SPLIT_BRIEF[k]} {_of(v, cp.length_s)}" for k, v in parts if v > 0)
    text = Text(f"critical path {fmt_time(cp.length_s)}: {split}\n")
    shown = [w for w in cp.what_if if w.retimed and not w.name.startswith(OP_WHAT_IF)]
    if shown:
        text.append("re-timed: " + "; ".join(f"{clean(w.name)} −{fmt_time(w.saving_s)}" for w in shown) + "\n",
                    style="dim")
    if cp.fix_first:
        text.append("fix first: each op group at its roof, the path's saving (↵ opens it)", style="bold")
    else:
        text.append(fix_first_lines(cp)[0])
    return text


def opened_text(label: str, group: OpGroup | None, f: FixFirst, cp: CriticalPath) -> Text:
    """An op group opened from the fix-first panel: its whole label, its figures as kept, its time on the path,
    what its roof would save there, and the advice for it."""
    text = Text(clean(label) + "\n", style="bold")
    if group is not None:
        text.append(f"  ×{group.calls}, {fmt_time(group.time_s)} in all, {clean(group.regime or f.regime)}"
                    + (f", bound {fmt_time(group.bound_s)}" if group.bound_s is not None else "")
                    + (f", {fmt_percent(f.fraction_of_roof)} of its roof" if f.fraction_of_roof is not None else "")
                    + "\n")
    on = next((p for p in cp.ops if p.label == f.label), None)
    if on is not None:
        text.append(f"  on the critical path: {fmt_time(on.time_s)} over {on.kernels} kernel"
                    f"{'s' if on.kernels != 1 else ''}\n")
    text.append(f"  at its roof the path is {fmt_time(f.saving_s)} shorter ({_of(f.saving_s, cp.length_s)})\n")
    if f.advice:
        text.append(f"  {clean(f.advice)}", style="dim")
    return text
