"""The reference repository's CSV formats (RealZST/llm-infra-notes, roofline/data/).

`summary.csv` holds every microbenchmark point, `roofs.csv` the ceilings per
GPU and dtype. rooftop writes both so its measurements sit beside the
published ones, and reads both so published (or a colleague's) measurements
become profiles and plottable points. Units: the CSVs use ms, GB/s, TFLOP/s;
rooftop converts to SI at this boundary and nowhere else.

roofs.csv keeps the reference's columns and rows exactly: one row per target
and matmul dtype (`fp64 fp32 tf32 fp16 bf16 fp8_e4m3 int8 nvfp4`) with the
DRAM bandwidth B, the peak F and the ridge. A rooftop profile has roofs the
reference's roofs.csv has no dtype for, so rooftop adds rows of the same
columns after those, named in `dtype` by rooftop's own key — rows a reader
that knows only the reference dtypes passes over (as the catalog's does):

- a compute path without a reference dtype (`fp32-fma`, `fp64-fma`, …): B
  (dram), F and ridge, like a reference row;
- a memory level other than dram (`l2`, `l1`, `llc`, `nvlink`, `pcie`): its B and
  `bw_case`, with `peak_tflop_s` and `ridge_flop_byte` empty;
- `dram` itself, only when the profile has no compute path at all (a
  bandwidth-only run), so its B is not lost.
A compute-only profile leaves `bandwidth_gb_s` and the ridge empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from rooftop.models import plausible
from rooftop.models.catalog import REFERENCE_DTYPE_PATH
from rooftop.models.paths import LEVELS, PATHS, fma_path, path_for
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.safetext import safe_text
from rooftop.models.sample import DATA_MOVING, FAMILIES, Sample, TimeStats
from rooftop.models.units import MiB

SUMMARY_COLUMNS = (
    "family", "dtype", "cache", "m", "n", "k", "reps", "bytes", "flops", "footprint_bytes", "target",
    "median_ms", "p10_ms", "p90_ms", "iqr_ratio", "gb_s", "tflop_s", "ai", "max_error", "l2_bytes", "device",
)
SUMMARY_REQUIRED = ("family", "dtype", "bytes", "flops", "target", "median_ms")
ROOFS_COLUMNS = (
    "target", "dtype", "bandwidth_gb_s", "peak_tflop_s", "ridge_flop_byte", "bw_case", "compute_case",
)
SHAPE_COLUMNS = ("m", "n", "k", "reps")

# Reference dtype names that rooftop spells differently, and back.
FROM_REFERENCE_DTYPE = {"fp8_e4m3": "fp8", "nvfp4": "fp4"}
TO_REFERENCE_DTYPE = {v: k for k, v in FROM_REFERENCE_DTYPE.items()}
# The matmul path each roofs.csv dtype row describes (the first dtype naming a path wins).
PATH_REFERENCE_DTYPE: dict[str, str] = {}
for _dt, _path in REFERENCE_DTYPE_PATH.items():
    PATH_REFERENCE_DTYPE.setdefault(_path, TO_REFERENCE_DTYPE.get(_dt, _dt))

# The reference's bandwidth definition: a data-moving kernel far above L2.
BW_MIN_FOOTPRINT = 256 * MiB
FMA_BW_MIN_FOOTPRINT = 512 * MiB
REPEATS = 7  # the reference protocol's samples per point; summary.csv does not record it


class CsvFormatError(ValueError):
    """A CSV row that cannot be read; the message names the row and the field."""


def _fmt(v: float | int | None) -> str:
    """A number as the CSV carries it: integers plain, floats at full precision, None empty."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return str(int(v))
    return repr(float(v))


# -- export ------------------------------------------------------------------------

FORMULA_LEAD = ("=", "+", "-", "@")  # what makes a spreadsheet read a cell as a formula (tab and CR: safe_text)


def _formula_like(text: str) -> bool:
    """Text a spreadsheet would run, or text that starts with the quote `csv_cell` adds (kept apart on import)."""
    if not text.lstrip("'").startswith(FORMULA_LEAD):
        return False
    try:
        float(text)  # a negative number stays a number
    except ValueError:
        return True
    return False


def csv_cell(value: str) -> str:
    """A cell as rooftop writes it: control characters shown, never written raw (models.safetext), and a
    formula-like text behind a leading quote (OWASP's CSV injection rule), which `csv_value` takes off."""
    text = safe_text(value)
    return "'" + text if _formula_like(text) else text


def csv_value(cell: str) -> str:
    """A cell as `csv_cell` was given it: the quote before a formula-like text taken off."""
    return cell[1:] if cell.startswith("'") and _formula_like(cell[1:]) else cell



def summary_rows(target: str, device: str, l2_bytes: float | None, samples: Iterable[Sample]) -> list[dict[str, str]]:
    """summary.csv rows for measured samples (skipped points have no time and are left out)."""
    rows = []
    for s in samples:
        if s.stats is None:
            continue
        t = s.stats.median_s
        rows.append({
            "family": s.family,
            "dtype": TO_REFERENCE_DTYPE.get(s.dtype, s.dtype),
            "cache": s.cache,
            **{c: _fmt(s.shape.get(c)) for c in SHAPE_COLUMNS},
            "bytes": _fmt(s.bytes),
            "flops": _fmt(s.flops),
            "footprint_bytes": _fmt(s.footprint_bytes),
            "target": target,
            "median_ms": _fmt(t * 1e3),
            "p10_ms": _fmt(s.stats.p10_s * 1e3),
            "p90_ms": _fmt(s.stats.p90_s * 1e3),
            "iqr_ratio": _fmt(s.stats.iqr_ratio),
            "gb_s": _fmt(s.bytes / t / 1e9 if t > 0 else None),
            "tflop_s": _fmt(s.flops / t / 1e12 if t > 0 else None),
            "ai": _fmt(s.flops / s.bytes if s.bytes else None),
            "max_error": _fmt(s.max_error),
            "l2_bytes": _fmt(l2_bytes),
            "device": device,
        })
    return rows


def roof_dtype(path: str) -> str:
    """The roofs.csv `dtype` of a compute path: the reference's name for a matmul path, else rooftop's key."""
    return PATH_REFERENCE_DTYPE.get(path_for(path, "gpu"), path)  # a CPU's bf16-matmul row is `bf16` too


def roof_key(dtype: str) -> tuple[str, str] | None:
    """What a roofs.csv `dtype` names: ("peak", compute path) or ("bandwidth", memory level); None if unknown."""
    d = dtype.strip().lower()
    if d in REFERENCE_DTYPE_PATH:
        return "peak", REFERENCE_DTYPE_PATH[d]
    if d in PATHS:
        return "peak", d
    if d in LEVELS:
        return "bandwidth", d
    return None


def _roof_row(target: str, dtype: str, bw: Ceiling | None, f: Ceiling | None) -> dict[str, str]:
    return {
        "target": target,
        "dtype": dtype,
        "bandwidth_gb_s": _fmt(bw.value / 1e9 if bw else None),
        "peak_tflop_s": _fmt(f.value / 1e12 if f else None),
        "ridge_flop_byte": _fmt(f.value / bw.value if f and bw else None),
        "bw_case": bw.case if bw else "",
        "compute_case": f.case if f else "",
    }


def roofs_rows(target: str, profile: DeviceProfile) -> list[dict[str, str]]:
    """roofs.csv rows for every roof and slope of the profile (the module docstring says which rows)."""
    dram = profile.bandwidth.get("dram")
    paths = sorted(profile.paths(), key=lambda p: path_for(p, "gpu") not in PATH_REFERENCE_DTYPE)  # the reference's rows first
    rows = [_roof_row(target, roof_dtype(p), dram, profile.peak[p]) for p in paths]
    levels = [lv for lv in profile.levels() if lv != "dram" or not rows]
    return rows + [_roof_row(target, lv, profile.bandwidth[lv], None) for lv in levels]


# -- import ------------------------------------------------------------------------


def _text(row: Mapping[str, str], col: str, line: int) -> str:
    text = (row.get(col) or "").strip()
    if not text:
        raise CsvFormatError(f"row {line}: {col} is empty")
    return text


def _float(row: Mapping[str, str], col: str, line: int, required: bool = True, positive: bool = False,
           signed: bool = False) -> float | None:
    """A number of the row: finite and never negative unless `signed` (zero too is refused where `positive`)."""
    text = (row.get(col) or "").strip()
    if not text:
        if required:
            raise CsvFormatError(f"row {line}: {col} is empty")
        return None
    try:
        v = float(text)
    except ValueError:
        raise CsvFormatError(f"row {line}: {col} = {plausible.shown(text)} is not a number") from None
    if not math.isfinite(v) or (v < 0 and not signed) or (positive and v == 0):
        want = "a positive number" if positive else "a number ≥ 0"
        raise CsvFormatError(f"row {line}: {col} = {plausible.shown(text)} is not {want}")
    return v


def _whole(row: Mapping[str, str], col: str, line: int) -> int | None:
    v = _float(row, col, line, required=False)
    if v is not None and not v.is_integer():
        raise CsvFormatError(f"row {line}: {col} = {plausible.shown(row[col].strip())} is not a whole number")
    return None if v is None else int(v)


def sample_from_summary(row: Mapping[str, str], line: int) -> Sample:
    """One summary.csv row as a Sample in SI units (p10 stands in for the minimum it does not record)."""
    family = (row.get("family") or "").strip()
    dtype = (row.get("dtype") or "").strip().lower()
    if not family or not dtype:
        raise CsvFormatError(f"row {line}: family and dtype are required")
    if family not in FAMILIES:
        raise CsvFormatError(f"row {line}: family = {plausible.shown(family)} is not a kernel family rooftop knows "
                             f"(one of: {', '.join(FAMILIES)})")
    dtype = FROM_REFERENCE_DTYPE.get(dtype, dtype)
    shape = {c: v for c in SHAPE_COLUMNS if (v := _whole(row, c, line)) is not None}
    median = _float(row, "median_ms", line, positive=True) / 1e3  # type: ignore[operator]
    p10 = _float(row, "p10_ms", line, required=False, positive=True)
    p90 = _float(row, "p90_ms", line, required=False, positive=True)
    iqr = _float(row, "iqr_ratio", line, required=False)
    stats = TimeStats(
        median_s=median,
        p10_s=p10 / 1e3 if p10 is not None else median,
        p90_s=p90 / 1e3 if p90 is not None else median,
        min_s=p10 / 1e3 if p10 is not None else median,
        iqr_ratio=iqr if iqr is not None else 0.0,
        repeats=REPEATS,
        calls=0,  # not recorded in summary.csv
    )
    if family == "gemm":
        path = REFERENCE_DTYPE_PATH.get(TO_REFERENCE_DTYPE.get(dtype, dtype))
    elif family == "fma":
        path = fma_path(dtype) if fma_path(dtype) in PATHS else None
    else:
        path = None
    return Sample(
        family=family,
        dtype=dtype,
        shape=shape,
        flops=_float(row, "flops", line),  # type: ignore[arg-type]
        bytes=_float(row, "bytes", line),  # type: ignore[arg-type]
        footprint_bytes=_float(row, "footprint_bytes", line, required=False) or 0.0,
        cache=(row.get("cache") or "warm").strip() or "warm",
        stats=stats,
        path=path,
        max_error=_float(row, "max_error", line, required=False, signed=True),  # a signed error, as JSON keeps it
    )


def reference_ceilings(samples: Iterable[Sample], source: str = "imported") -> tuple[dict[str, Ceiling], dict[str, Ceiling]]:
    """B and F from sample points with the reference's definitions (reference/README.md).

    B (dram): the best stable data-moving kernel with a working set ≥ 256 MiB,
    or the FMA sweep at R = 1 over ≥ 512 MiB. F per path: the best stable warm
    GEMM of each dtype; the FMA paths: the best stable FMA-sweep point. Unstable
    points (IQR/median > 0.10) never set a ceiling.
    """
    bandwidth: dict[str, Ceiling] = {}
    peak: dict[str, Ceiling] = {}
    for s in samples:
        if not s.stable:
            continue
        ws = s.footprint_bytes or s.bytes
        n = s.shape.get("n", int(ws))
        if (s.family in DATA_MOVING and ws >= BW_MIN_FOOTPRINT) or (
            s.family == "fma" and s.shape.get("reps") == 1 and ws >= FMA_BW_MIN_FOOTPRINT
        ):
            bw = s.bandwidth or 0.0
            case = f"{s.family}:{n}" if s.family != "fma" else f"fma:{s.dtype}:reps=1:{n}"
            if bw > bandwidth.get("dram", Ceiling(0.0, source)).value:
                bandwidth["dram"] = Ceiling(bw, source, case)
        if s.path and ((s.family == "gemm" and s.cache == "warm") or s.family == "fma"):
            rate = s.flop_rate or 0.0
            if s.family == "gemm":
                case = "x".join(str(s.shape.get(c, "?")) for c in ("m", "n", "k"))
            else:
                case = f"fma:{s.dtype}:reps={s.shape.get('reps', '?')}:{n}"
            if rate > peak.get(s.path, Ceiling(0.0, source)).value:
                peak[s.path] = Ceiling(rate, source, case)
    return bandwidth, peak


@dataclass
class Roofs:
    """One target's ceilings as roofs.csv gives them: B per memory level, F per compute path (SI units)."""

    bandwidth: dict[str, Ceiling] = field(default_factory=dict)
    peak: dict[str, Ceiling] = field(default_factory=dict)


def _keep_best(table: dict[str, Ceiling], key: str, c: Ceiling) -> None:
    """B and F are the best a device reached, so of two rows for one roof the higher stands."""
    if key not in table or c.value > table[key].value:
        table[key] = c


CSV_SCALE = {"peak": (1e12, "TFLOP/s"), "bandwidth": (1e9, "GB/s")}


def _roof(row: Mapping[str, str], col: str, line: int, kind: str, key: str, required: bool) -> float | None:
    """A roof or slope of a roofs.csv row in SI units, within models.plausible (told in the CSV's own units)."""
    v = _float(row, col, line, required=required, positive=True)
    if v is None:
        return None
    scale, unit = CSV_SCALE[kind]
    lo, hi = plausible.CEILING_RANGE[kind]
    if plausible.ceiling_problem(kind, key, v * scale):
        raise CsvFormatError(f"row {line}: {col} = {plausible.shown(row[col].strip())} is outside physical sense for {kind} {key} "
                             f"({lo / scale:g} to {hi / scale:g} {unit})")
    return v * scale


def _same_figure(text: str) -> float | str:
    """A figure as compared: 3350 and 3350.0 are one number; text that is no number is refused later."""
    try:
        return float(text)
    except ValueError:
        return text


def _refuse_conflict(seen: dict[tuple[str, str, str], tuple[int, tuple[str, str]]], key: tuple[str, str, str],
                     line: int, row: Mapping[str, str]) -> None:
    """Two rows for one target's roof that say different things: which one is right is not for rooftop to
    guess, so both are named (the same row twice is fine)."""
    figures = tuple((row.get(c) or "").strip() for c in ("bandwidth_gb_s", "peak_tflop_s"))
    first = seen.setdefault(key, (line, figures))  # type: ignore[arg-type]
    if tuple(map(_same_figure, first[1])) != tuple(map(_same_figure, figures)):
        target, _, name = key
        raise CsvFormatError(f"rows {first[0]} and {line} give target {target!r} two different {name} roofs "
                             f"(bandwidth_gb_s, peak_tflop_s: {', '.join(first[1])} and {', '.join(figures)}); "
                             "keep one of the two rows")


def read_roofs(rows: list[dict[str, str]], source: str = "imported") -> tuple[dict[str, Roofs], list[str]]:
    """roofs.csv rows by target, in file order; and a note for rows of a dtype rooftop does not know (left out)."""
    out: dict[str, Roofs] = {}
    unknown: dict[str, int] = {}
    seen: dict[tuple[str, str, str], tuple[int, tuple[str, str]]] = {}  # each roof's first row and its figures
    for i, r in enumerate(rows, start=2):
        target, dtype = _text(r, "target", i), _text(r, "dtype", i)
        key = roof_key(dtype)
        if key is None:
            unknown[dtype] = unknown.get(dtype, 0) + 1
            continue
        kind, name = key
        roofs = out.setdefault(target, Roofs())
        bw_case, compute_case = (r.get("bw_case") or "").strip(), (r.get("compute_case") or "").strip()
        if kind == "peak":
            f = _roof(r, "peak_tflop_s", i, "peak", name, required=True)
            _keep_best(roofs.peak, name, Ceiling(f, source, compute_case))  # type: ignore[arg-type]
            level = "dram"
            b = _roof(r, "bandwidth_gb_s", i, "bandwidth", level, required=False)
        else:
            if (r.get("peak_tflop_s") or "").strip():
                raise CsvFormatError(f"row {i}: a {name} row is a memory level's bandwidth; peak_tflop_s must be empty")
            level = name
            b = _roof(r, "bandwidth_gb_s", i, "bandwidth", level, required=True)
        if b is not None:
            _keep_best(roofs.bandwidth, level, Ceiling(b, source, bw_case))
        _refuse_conflict(seen, (target, kind, name), i, r)  # once the row's own figures are known to be sound
    notes = [f"left out {n} row{'s' if n > 1 else ''} of unknown dtype {d!r}" for d, n in unknown.items()]
    return out, notes


def group_summary(rows: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """summary.csv rows by target: its device name, L2 size and samples, in file order."""
    out: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(rows, start=2):
        target = _text(r, "target", i)
        g = out.setdefault(target, {"device": (r.get("device") or "").strip() or target,
                                    "l2_bytes": _float(r, "l2_bytes", i, required=False), "samples": []})
        g["samples"].append(sample_from_summary(r, i))
    return out
