"""The roofline as lines and points to draw: pure data, no plotting library.

Both the CLI's `rooftop plot` and the TUI draw from these series, so the chart
means the same thing everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .analysis import Analysis
from .profile import DeviceProfile
from .safetext import clean
from .sample import CACHE_PROBES, DATA_MOVING, Sample
from .units import fmt_bytes, fmt_percent, fmt_time


@dataclass(frozen=True)
class Series:
    label: str
    xs: tuple[float, ...]  # intensity, FLOP/byte
    ys: tuple[float, ...]  # FLOP/s
    kind: str  # "roof" (flat), "slope" (memory level), "ridge", "point"
    # what a point means beyond (I, rate), one line per point where given (a shared chart's hover text):
    # its regime, fraction of roof, shapes; empty when the label says it all
    notes: tuple[str, ...] = ()


# the roofs a chart draws unless asked for others: one per precision a workload usually runs at
PLOT_PATHS = ("fp64-tc", "fp32-fma", "bf16-tc", "fp8-tc")


def intensity_span(profiles: list[DeviceProfile], points: Sequence[float] = (), lo: float = 0.1, hi: float = 1e4) -> tuple[float, float]:
    """An I range (decade-aligned) wide enough for every ridge and point."""
    vals = [lo, hi] + [p for p in points if p > 0 and math.isfinite(p)]
    for prof in profiles:
        for path in prof.peak:
            for level in prof.bandwidth:
                vals.append(prof.ridge(path, level))
    return 10 ** math.floor(math.log10(min(vals))), 10 ** math.ceil(math.log10(max(vals)))


def roof_series(
    profile: DeviceProfile,
    paths: list[str] | None = None,
    levels: list[str] | None = None,
    span: tuple[float, float] = (0.1, 1e4),
) -> list[Series]:
    """One slope per memory level (up to the highest roof shown) and one flat per path.

    Each flat starts at its ridge on the `dram` slope (or the first level given).
    """
    # each path once, by the device's name for it (bf16-tc asked of a CPU is its bf16-matmul roof)
    paths = list(dict.fromkeys(profile.path_name(p) for p in (paths or profile.paths()) if p in profile.peak))
    levels = [lv for lv in (levels or profile.levels()) if lv in profile.bandwidth]
    lo, hi = span
    out: list[Series] = []
    if not paths or not levels:
        return out
    top = max(profile.F(p) for p in paths)
    for lv in levels:
        b = profile.B(lv)
        x_end = min(hi, top / b)
        out.append(Series(f"{profile.id} {lv} {b / 1e9:.0f} GB/s", (lo, x_end), (b * lo, b * x_end), "slope"))
    base = "dram" if "dram" in levels else levels[0]
    for p in paths:
        f, r = profile.F(p), profile.ridge(p, base)
        out.append(Series(f"{profile.id} {p} {f / 1e12:.4g} TFLOP/s", (max(r, lo), hi), (f, f), "roof"))
        out.append(Series(f"I*={r:.3g}", (r,), (f,), "ridge"))
    return out


def point_series(a: Analysis, label: str | None = None) -> Series:
    """An op's point: at its attainable P, or at its measured throughput when timed. An op that does no
    arithmetic (a gather, a p2p send) sits at I = 0, off a log-log chart: its series has no point."""
    y = a.measured.achieved_flops if a.measured else a.attainable
    if not (0 < a.intensity < math.inf and 0 < y < math.inf):
        return Series(label or a.op.describe(), (), (), "point")
    note = f"{a.regime}-bound on {a.device.id} {a.path} (I* = {a.ridge:.3g})"
    if a.measured:
        note += f", {fmt_percent(a.measured.fraction_of_roof, 0)} of roof"
    return Series(label or a.op.describe(), (a.intensity,), (y,), "point", (note,))


def sample_series(
    samples: list[Sample],
    label: str,
    by_dtype: bool = False,
    families: tuple[str, ...] | None = None,
    warm_only: bool = False,
    split_unstable: bool = True,
) -> list[Series]:
    """Measured points at (I, W/t), one series per kernel family (and dtype), unstable points apart.

    Points without FLOPs (a copy) or without a time (skipped), and the launch
    probe's token FLOP, have no place on a FLOP/s chart and are left out.
    """
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for s in samples:
        rate = s.flop_rate
        if s.family.startswith("launch") or not rate or rate <= 0 or not (0 < s.intensity < math.inf):
            continue
        if (families and s.family not in families) or (warm_only and s.cache == "cold"):
            continue
        kind = f"{s.family} {s.dtype}" if by_dtype else s.family
        key = f"{label} {kind}".strip() if s.stable or not split_unstable else f"{label} unstable".strip()
        xs, ys = groups.setdefault(key, ([], []))
        xs.append(s.intensity)
        ys.append(rate)
    return [Series(k, tuple(xs), tuple(ys), "point") for k, (xs, ys) in groups.items()]


def bandwidth_curves(samples: list[Sample], label: str = "") -> list[Series]:
    """GB/s against working set, one curve per data-moving kernel (seed 000 §4, figure 2), and one per
    cache probe (l2_read, l1_read: the L2 and L1 plateaus that a torch op per working set cannot show)."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        bw = s.bandwidth
        if (s.family in DATA_MOVING or s.family in CACHE_PROBES) and bw and s.footprint_bytes > 0:
            groups.setdefault(f"{label} {s.family}".strip(), []).append((s.footprint_bytes, bw))
    out = []
    for name, pts in groups.items():
        pts.sort()
        out.append(Series(name, tuple(x for x, _ in pts), tuple(y for _, y in pts), "curve"))
    return out


def gemm_curves(samples: list[Sample]) -> list[Series]:
    """GEMM FLOP/s against size: the square sweep against n, the M sweep against M (seed 000 §4–5)."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        rate = s.flop_rate
        if s.family != "gemm" or not rate or s.cache == "cold":
            continue
        m, n, k = (int(s.shape.get(x, 0)) for x in "mnk")
        if m == n == k:
            groups.setdefault(f"{s.dtype} n×n×n (x = n)", []).append((n, rate))
        else:
            groups.setdefault(f"{s.dtype} M×{n}×{k} (x = M)", []).append((m, rate))
    return [Series(name, tuple(x for x, _ in sorted(p)), tuple(y for _, y in sorted(p)), "curve")
            for name, p in groups.items()]


def fma_curves(samples: list[Sample]) -> list[Series]:
    """FMA-sweep FLOP/s against R: the slope retraces B, the plateau is the FMA peak (seed 000 §4)."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        rate = s.flop_rate
        if s.family == "fma" and rate and s.shape.get("reps"):
            groups.setdefault(f"fma {s.dtype}", []).append((float(s.shape["reps"]), rate))
    return [Series(name, tuple(x for x, _ in sorted(p)), tuple(y for _, y in sorted(p)), "curve")
            for name, p in groups.items()]


# -- a profile's op groups ----------------------------------------------------------------------------------------


def op_group_series(ops: Sequence[Mapping[str, Any]], top: int) -> list[Series]:
    """A profile's first `top` op groups (`rooftop profile --json`'s "ops", largest first) that have a W, a Q and a
    measured time, as points at (I, achieved FLOP/s): one series per regime, so the legend says which is which."""
    groups: dict[str, tuple[list[float], list[float], list[str]]] = {}
    for o in ops[:top]:
        i, p = _number(o.get("intensity")), _number(o.get("achieved_flops"))
        if i is None or p is None or i <= 0 or p <= 0 or o.get("time_measured") is False:
            continue
        regime = clean(str(o.get("regime") or "unplaced"))
        xs, ys, notes = groups.setdefault(f"ops {regime}-bound", ([], [], []))
        xs.append(i)
        ys.append(p)
        shapes = " · ".join("×".join(str(x) for x in d) for d in o.get("shapes") or () if isinstance(d, list)
                            and all(isinstance(x, int) for x in d))
        f = _number(o.get("fraction_of_roof"))
        notes.append(" ".join(x for x in (clean(str(o.get("op", "?"))), clean(str(o.get("dtype") or "")), shapes) if x)
                     + f" ×{o.get('calls', 0)}, {fmt_time(_number(o.get('time_s')) or 0.0)}; {regime}-bound"
                     + (f", {fmt_percent(f)} of roof" if f is not None else ""))
    return [Series(k, tuple(xs), tuple(ys), "point", notes=tuple(n)) for k, (xs, ys, n) in groups.items()]


# -- an LLM step's per-layer ops ----------------------------------------------------------------------------------

LLM_SHOWN = ("q", "k", "v", "o", "gate", "up", "down", "attention", "lm_head",  # a layer's ops and the head
             "q_a", "q_b", "kv_a", "q absorb", "v up", "kv_b")  # and the latent-attention (MLA) layers' GEMMs


def llm_step_series(step: Any) -> list[Series]:
    """An LLM step (models.llm.StepBound) on its device's roofline, as the LLM tab and `rooftop llm --out` draw it:
    the DRAM slope and its ops' roofs, the linear layers (together at I ≈ tokens: one legend entry) and attention
    at their attainable FLOP/s; each point's note names its layer (a shared chart's hover text)."""
    shown = [(lo, a) for lo, a in step.ops if lo.name in LLM_SHOWN]
    groups: dict[str, list[Analysis]] = {}
    notes: dict[str, list[str]] = {}
    for lo, a in shown:
        name = "attention" if lo.name == "attention" else "linear layers"
        groups.setdefault(name, []).append(a)
        notes.setdefault(name, []).append(f"{lo.name} ×{lo.count:g}: {a.regime}-bound on {step.device.id} {a.path}")
    points = [Series(name, tuple(a.intensity for a in group), tuple(a.attainable for a in group), "point",
                     tuple(notes[name])) for name, group in groups.items()]
    paths = list(dict.fromkeys(a.path for _, a in shown))
    span = intensity_span([step.device], [x for p in points for x in p.xs])
    return roof_series(step.device, paths, ["dram"], span) + points


# -- a kept job's collectives on the link slopes ------------------------------------------------------------------

COLLECTIVE_POINTS = 6  # the collective groups drawn, by total time: more crowd the points legend off the screen


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def collective_points(collectives: Sequence[Mapping[str, Any]]) -> list[Series]:
    """A kept job's collective groups (`CollectiveGroup.to_dict`) as points at (W/Q, W/t): W the reduction's
    additions, Q the bytes each rank put on its link. Such a point sits on its link's slope B·I at the fraction
    busbw / B. Groups that add nothing (all-gather, all-to-all, broadcast) have no W, so no point: they are left
    out here (the Profile tab and `rooftop show` list them). The largest COLLECTIVE_POINTS by time."""
    out: list[tuple[float, Series]] = []
    for c in collectives:
        i, p = _number(c.get("intensity")), _number(c.get("achieved_flops"))
        if i is None or p is None or i <= 0 or p <= 0:
            continue
        frac = _number(c.get("fraction_of_link"))
        size = _number(c.get("bytes"))
        link = clean(str(c.get("link", "") or ""))
        on = f"{fmt_percent(frac, 0)} of {link}" if frac is not None else link
        via = clean(str(c.get("via") or ""))  # the library that ran it, where not the backend: symm_mem, …
        label = " ".join(x for x in (clean(str(c.get("op", "?"))) + (f" ({via})" if via else ""),
                                     fmt_bytes(size) if size else "", on) if x)
        out.append((_number(c.get("time_s")) or 0.0, Series(label, (i,), (p,), "point")))
    out.sort(key=lambda ts: -ts[0])
    return [s for _, s in out[:COLLECTIVE_POINTS]]


def job_links(collectives: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The ceiling (bytes/s) of each link a kept job's collectives crossed, as the job placed them."""
    links: dict[str, float] = {}
    for c in collectives:
        b = _number(c.get("link_bandwidth"))
        if b and b > 0 and c.get("link"):
            links.setdefault(str(c["link"]), b)
    return links


def link_slopes(profile: DeviceProfile, links: Mapping[str, float], span: tuple[float, float],
                paths: Sequence[str] = ()) -> list[Series]:
    """The slope of each link a job crossed, up to the highest roof shown, unless the device's chart draws that
    level already at the same B (within 1%)."""
    shown = [p for p in paths if p in profile.peak] or profile.paths()
    if not shown:
        return []
    top = max(profile.F(p) for p in shown)
    lo, hi = span
    out = []
    for lv, b in links.items():
        have = profile.bandwidth.get(lv)
        if have is not None and abs(have.value - b) <= 0.01 * b:
            continue
        x_end = min(hi, top / b)
        what = "" if have is None else " (the job's)"
        out.append(Series(f"{profile.id} {lv} {b / 1e9:.3g} GB/s{what}", (lo, x_end), (b * lo, b * x_end), "slope"))
    return out
