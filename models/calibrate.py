"""Calibration: measured samples → ceilings → a DeviceProfile comparable to the catalog.

The definitions are the reference's (shared/reference/README.md):
- B dram: the best kernel that reads (read_reduce, copy, triad, or the compiled
  FMA sweep at R = 1) whose working set is far above the last cache level:
  ≥ max(4 × L2, 256 MiB) on a GPU, ≥ 4 × LLC on a CPU, where it must also sit on
  the curve's DRAM plateau (see on_plateau). `write` (a memset) is never B: its
  best figure in the same window (a CPU: at B's working sets) is reported beside
  it (extra["write_bandwidth"]).
- The cache levels (GPU l2, l1; CPU llc, l2), from reading kernels only:
  models.hierarchy picks their samples and flags a level above its physical
  limit or slower than the level under it (left out of the ceilings, listed in
  the notes and extra["flagged"]).
- F per compute path: the best stable warm GEMM of that path, and the FMA-sweep
  plateau for fp32-fma / fp64-fma: the best stable point among those not on the
  bandwidth slope (see _plateau).
Unstable points (iqr_ratio > 0.10) are left out and listed; a level or path
with only unstable points keeps its best one, marked stable=False.
Pure: no torch, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from . import hierarchy
from .conditions import ceiling_conditions
from .hardware import Hardware
from .paths import path_for
from .profile import Ceiling, DeviceProfile
from .roofline import ABOVE_ROOF
from .sample import CACHE_PROBES, DATA_MOVING, Sample
from .units import MiB

SLOPE_GAIN = 1.5  # an FMA-sweep point is on the slope if one at ≥ 2R runs this much faster
GPU_DRAM_MIN = 256 * MiB
PLATEAU_AGREE = 0.10  # CPU: the two largest working sets' rates agree this well on DRAM's plateaus


@dataclass(frozen=True)
class Windows:
    """Working-set ranges that count as DRAM and as in-cache."""

    dram_min: float
    cache_min: float
    cache_max: float  # 0 when the cache size is unknown: no cache level


def windows(hw: Hardware) -> Windows:
    """The reference's 'far above L2' and 'inside the cache' for this device."""
    llc = hw.l2_bytes or 0.0
    if hw.kind == "gpu":
        return Windows(dram_min=max(4 * llc, GPU_DRAM_MIN), cache_min=0.0, cache_max=llc / 2)
    return Windows(
        dram_min=4 * llc if llc else GPU_DRAM_MIN,
        cache_min=hw.private_cache_bytes or 0.0,
        cache_max=llc / 2,
    )


def case_of(s: Sample) -> str:
    """The reference's case names: read_reduce:<bytes>, MxNxK, fma:<dtype>:reps=R:<elements>."""
    sh = s.shape
    if s.family in DATA_MOVING or s.family in CACHE_PROBES:
        return f"{s.family}:{int(s.footprint_bytes)}"
    if s.family == "gemm":
        cold = ":cold" if s.cache == "cold" else ""
        return f"{sh.get('m')}x{sh.get('n')}x{sh.get('k')}{cold}"
    if s.family == "fma":
        prefix = "fma" if s.conditions.get("method", "triton") == "triton" else f"fma-{s.conditions['method']}"
        return f"{prefix}:{s.dtype}:reps={sh.get('reps')}:{sh.get('n')}"
    return f"{s.family}:{s.dtype}:" + ",".join(f"{k}={v}" for k, v in sh.items())


def label_of(s: Sample) -> str:
    """case_of with the dtype in front for GEMMs (whose case names only the shape)."""
    return f"{s.dtype} {case_of(s)}" if s.family == "gemm" else case_of(s)


def _best(cands: Iterable[Sample], rate: Callable[[Sample], float]) -> Ceiling | None:
    cands = [c for c in cands if rate(c)]
    if not cands:
        return None
    stable = [c for c in cands if c.stable]
    pool = stable or cands
    best = max(pool, key=rate)
    return Ceiling(rate(best), "measured", case_of(best), stable=bool(stable))


def _plateau(group: Sequence[Sample]) -> list[Sample]:
    """The FMA sweep's plateau: the points not on its bandwidth slope, stable or not.

    On the slope, doubling R doubles the rate; so a point is on it when a point with at
    least twice its R runs SLOPE_GAIN× faster or more. The fastest point never is, so
    the plateau is never empty. A stable point on the slope (R = 1 is one) must not
    stand for the compute roof because the plateau's points were noisy (then the
    plateau's best point is the roof, marked unstable), and a noisy spike on the
    plateau must not push its stable points out (they stay on it: the spike is < 1.5×).
    """
    def on_slope(s: Sample) -> bool:
        r = s.shape.get("reps", 0)
        return any(o.shape.get("reps", 0) >= 2 * r and _fl(o) >= SLOPE_GAIN * _fl(s) for o in group)

    return [s for s in group if not on_slope(s)]


def _bw(s: Sample) -> float:
    return s.bandwidth or 0.0


def _fl(s: Sample) -> float:
    return s.flop_rate or 0.0


def reads(s: Sample) -> bool:
    """The kernels B is measured with: the streams that read (not `write`, a memset, which the memory
    system serves differently: an H200 wrote at 4580 GB/s where its best read was 4363), and the
    compiled FMA sweep at R = 1 (a pure load-FMA-store stream).

    The CPU's chunked torch chain is left out: its chunks are cache-sized on purpose.
    """
    if s.family in DATA_MOVING:
        return s.family != "write"
    return s.family == "fma" and s.shape.get("reps") == 1 and s.conditions.get("method", "triton") == "triton"


def _size_groups(cands: Sequence[Sample]) -> list[list[Sample]]:
    """The candidates by working set, largest first; sets within 10% are one (each kernel rounds the
    working set down to whole arrays)."""
    groups: list[list[Sample]] = []
    for s in sorted(cands, key=lambda s: -s.footprint_bytes):
        if groups and s.footprint_bytes >= 0.9 * groups[-1][0].footprint_bytes:
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def on_plateau(cands: Sequence[Sample]) -> tuple[list[Sample], str, bool]:
    """The CPU's DRAM points, a note, and whether B from them is an upper estimate: the two largest working
    sets when their best rates agree within PLATEAU_AGREE; else the largest alone. Then, when the smaller of
    the two ran faster, a cache may still serve the largest too: B is an upper estimate. When the larger ran
    faster, no cache explains it (a cache makes the smaller set faster): the machine was busy during the
    smaller one, and B, the largest set's, is not raised by a cache; the note says to measure again.

    A CPU's reported LLC can be a fraction of the cache that serves it: a VM that reports 32 MiB can
    run 1 GiB sets from its host's cache (75 GB/s where DRAM gave 48–50). Only the largest sets count,
    and two of them agreeing is what shows the curve has reached DRAM's plateau."""
    groups = _size_groups(cands)
    if len(groups) < 2:
        return [s for g in groups for s in g], "", False
    top, second = groups[0], groups[1]
    r_top, r_second = max(_bw(s) for s in top), max(_bw(s) for s in second)
    if abs(r_second / r_top - 1.0) <= PLATEAU_AGREE:
        return top + second, "", False
    sets = (f"({top[0].footprint_bytes / MiB:.0f} MiB at {r_top / 1e9:.1f} GB/s, "
            f"{second[0].footprint_bytes / MiB:.0f} MiB at {r_second / 1e9:.1f} GB/s)")
    if r_top > r_second:
        return top, (f"B dram from the largest working set: the two largest disagree by more than "
                     f"{PLATEAU_AGREE:.0%} {sets}, the larger faster, which no cache explains: the machine "
                     "was busy; measure again on a quiet machine"), False
    note = (f"B dram is an upper estimate: the two largest working sets disagree by more than "
            f"{PLATEAU_AGREE:.0%} {sets}: a cache may still serve them, or the machine was busy; measure "
            "again on a quiet machine")
    return top, note, True


def dram_window(cands: Sequence[Sample], hw: Hardware, win: Windows) -> tuple[list[Sample], str, bool]:
    """The candidates that count as DRAM, a note when the window had to be widened, and whether B from
    them is an upper estimate: working set ≥ win.dram_min (else the largest one, if above the LLC), and
    on a CPU the plateau of the largest sets."""
    far = [s for s in cands if s.footprint_bytes >= win.dram_min]
    note = ""
    if not far and cands and hw.l2_bytes:
        top = max(s.footprint_bytes for s in cands)
        if top > hw.l2_bytes:
            far = [s for s in cands if s.footprint_bytes == top]
            note = (f"B dram from the largest working set ({top / MiB:.0f} MiB), below the "
                    f"{win.dram_min / MiB:.0f} MiB the definition asks for")
    if hw.kind == "cpu":
        far, plateau_note, upper = on_plateau(far)
        note = "; ".join(n for n in (note, plateau_note) if n)
        return far, note, upper
    return far, note, False


def write_window(writes: Sequence[Sample], far: Sequence[Sample], hw: Hardware, win: Windows) -> list[Sample]:
    """The write points that count beside B: on a CPU, those at the working sets B came from (`far`), since a
    smaller set can be a host cache's (a quick plan runs no write there: then there is no write figure);
    on a GPU, or with no B, write's own DRAM window."""
    if hw.kind != "cpu" or not far:
        return dram_window(writes, hw, win)[0]
    sets = {s.footprint_bytes for s in far}
    return [w for w in writes if any(abs(w.footprint_bytes / f - 1.0) <= 0.1 for f in sets)]


def write_figure(p: DeviceProfile) -> Ceiling | None:
    """The write (memset) bandwidth kept beside B, as a Ceiling to show; None when the profile has
    none (or a stored file holds something else there)."""
    v = p.extra.get("write_bandwidth")
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
        return None
    return Ceiling(float(v), p.source, str(p.extra.get("write_case", "")), p.extra.get("write_stable") is not False)


@dataclass(frozen=True)
class Calibration:
    profile: DeviceProfile
    unstable: tuple[Sample, ...]  # measured but left out of the ceilings
    skipped: tuple[Sample, ...]  # not measured, with their reasons
    above_roof: tuple[Sample, ...]  # > 10% above the measured roofline (cache residency, miscount)
    notes: tuple[str, ...]


def calibrate(samples: Sequence[Sample], hw: Hardware, device_id: str = "local") -> Calibration:
    """Turn one run's samples into a measured DeviceProfile, with what was left out and why."""
    measured = [s for s in samples if s.stats is not None and not s.skipped]
    warm = [s for s in measured if s.cache != "cold"]
    win = windows(hw)
    notes: list[str] = []

    bandwidth: dict[str, Ceiling] = {}
    moving = [s for s in warm if reads(s)]
    far, note, upper = dram_window(moving, hw, win)
    if note:
        notes.append(note)
    dram = _best(far, _bw)
    if dram:
        bandwidth["dram"] = dram
    write = _best(write_window([s for s in warm if s.family == "write"], far, hw, win), _bw)
    for level, cands in hierarchy.candidates([s for s in warm if s.family != "write"], hw).items():
        c = _best(cands, _bw)
        if c:
            bandwidth[level] = c
    bandwidth, flags = hierarchy.check(bandwidth, hw)
    notes += [f.text() for f in flags]

    peak: dict[str, Ceiling] = {}
    for fam in ("gemm", "fma"):
        by_path: dict[str, list[Sample]] = {}
        for s in warm:
            if s.family == fam and s.path:  # an older CPU run's bf16-tc points make its bf16-matmul roof
                by_path.setdefault(path_for(s.path, hw.kind), []).append(s)
        for path, group in by_path.items():
            c = _best(_plateau(group) if fam == "fma" else group, _fl)
            if c and (path not in peak or c.value > peak[path].value):
                peak[path] = c
    methods = {s.conditions.get("method") for s in warm if s.family == "fma"} - {None, "triton"}
    for m in sorted(methods):  # type: ignore[type-var]  # None taken out above
        notes.append(
            f"fp32-fma/fp64-fma come from the {m} FMA sweep: the rate of unfused torch elementwise kernels "
            "on cache-resident chunks, not the cores' FMA peak (the GEMM paths run on the same units)"
        )

    launches = [s for s in warm if s.family == "launch"]
    launch = min(launches, key=lambda s: s.stats.median_s) if launches else None  # type: ignore[union-attr]
    graphs = [s for s in warm if s.family == "launch_graph"]
    extra: dict[str, object] = {}
    conds = {**ceiling_conditions(warm, _bw, bandwidth, case_of), **ceiling_conditions(warm, _fl, peak, case_of)}
    if conds:  # the GPU's clock and throttling when each ceiling's point ran (models.conditions)
        extra["ceiling_conditions"] = conds
    if upper and "dram" in bandwidth:
        extra["dram_upper_estimate"] = True
    if write:  # beside B, never as B
        extra.update(write_bandwidth=write.value, write_case=write.case, write_stable=write.stable)
    if graphs:
        extra["launch_graph_s"] = min(s.stats.median_s for s in graphs)  # type: ignore[union-attr]
    unstable = tuple(s for s in measured if not s.stable)
    if unstable:
        extra["unstable"] = [label_of(s) for s in unstable]
    if flags:
        extra["flagged"] = {f.level: f.to_dict() for f in flags}

    profile = DeviceProfile(
        id=device_id,
        name=hw.name,
        source="measured",
        bandwidth=bandwidth,
        peak=peak,
        vendor=hw.vendor,
        kind=hw.kind,
        memory_bytes=hw.memory_bytes,
        sm_count=hw.units,
        l2_bytes=hw.l2_bytes,
        launch_overhead=(
            Ceiling(launch.stats.median_s, "measured", case_of(launch), launch.stable)  # type: ignore[union-attr]
            if launch
            else None
        ),
        notes="; ".join(notes),
        extra=extra,
    )
    return Calibration(
        profile=profile,
        unstable=unstable,
        skipped=tuple(s for s in samples if s.skipped),
        above_roof=tuple(above_roof(measured, profile)),
        notes=tuple(notes),
    )


def above_roof(samples: Iterable[Sample], profile: DeviceProfile, factor: float = ABOVE_ROOF) -> list[Sample]:
    """Compute points more than `factor` above min(F, B_dram · I) of their own path."""
    if "dram" not in profile.bandwidth:
        return []
    out = []
    b = profile.B("dram")
    for s in samples:
        if s.family not in ("gemm", "fma") or not s.path or s.path not in profile.peak or not s.flop_rate:
            continue
        roof = min(profile.F(s.path), b * s.intensity)
        if s.flop_rate > factor * roof:
            out.append(s)
    return out
