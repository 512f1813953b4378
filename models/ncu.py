"""Nsight Compute's `--csv --page raw` export: real kernels with measured bytes per level and tensor ops.

Where a user has the counters (often admin-only), the bytes need no model:
ncu reports rates, so bytes = rate × the kernel's duration —
DRAM `dram__bytes.sum.per_second` × `gpu__time_duration.sum`, and L2→SM
`derived__lts__lts2xbar_bytes.sum.per_second` × the same time. Tensor work is
counted by the tensor pipes (`sm__ops_path_tensor_src_*.sum`, and on Blackwell
`sm__ops_path_tensor_op_utcqmma_*` / `…_utcomma_*` for FP8 and FP4; one FLOP per
op as ncu counts them: the 4096³ bf16 GEMM's is 2·4096³; the metrics' meanings are
`rooftop.models.counters`', shared with the counters a trace carries). Each kernel then has
one point per level: the hierarchical roofline of real kernels.

The export starts with ncu's own log lines (`==PROF== …`), then the header
row (`"ID","Process ID",…`), then a row of units, then one row per kernel.
Pure: parses text; reading the file is the caller's.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from .counters import DRAM_BYTES, tensor_ops, tensor_path
from .errors import BadInput
from .profile import DeviceProfile, NoRoof

TIME = "gpu__time_duration.sum"
DRAM_RATE = DRAM_BYTES + ".per_second"
L2_RATE = "derived__lts__lts2xbar_bytes.sum.per_second"
TIME_UNITS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3,
              "s": 1.0, "second": 1.0}
PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


class NcuError(BadInput, ValueError):
    """Not a usable Nsight Compute raw CSV; one line saying what is missing."""


@dataclass(frozen=True)
class NcuKernel:
    """One profiled kernel: its time, measured bytes per level, and tensor ops by path."""

    id: str
    name: str
    time_s: float
    dram_bytes: float | None
    l2_bytes: float | None  # L2 → SM traffic
    tensor_ops: float  # all tensor paths together
    path: str | None  # the tensor path with the most ops, None for a kernel with none
    grid: str = ""
    block: str = ""
    device_name: str = ""  # the GPU ncu ran on (device__attribute_display_name), to pick its roofs

    def level_bytes(self) -> dict[str, float]:
        out = {}
        if self.dram_bytes is not None:
            out["dram"] = self.dram_bytes
        if self.l2_bytes is not None:
            out["l2"] = self.l2_bytes
        return out

    def points(self, device: DeviceProfile | None = None) -> list[dict[str, Any]]:
        """One point per level: I = tensor ops / that level's bytes, achieved FLOP/s and B/s, and where the
        device has the roofs, the attainable rate and the fraction of it this kernel reached."""
        out = []
        for level, q in self.level_bytes().items():
            p: dict[str, Any] = {
                "level": level, "bytes": q, "intensity": self.tensor_ops / q if q > 0 else None,
                "achieved_flops": self.tensor_ops / self.time_s if self.time_s > 0 else 0.0,
                "achieved_bandwidth": q / self.time_s if self.time_s > 0 else 0.0,
            }
            if device is not None:
                try:
                    b = device.B(level)
                except NoRoof:
                    b = None
                peak = None
                if self.path and self.tensor_ops > 0:
                    try:
                        peak = device.F(self.path)
                    except NoRoof:
                        peak = None
                p["bandwidth_roof"] = b
                p["peak"] = peak
                bound = max(q / b if b else 0.0, self.tensor_ops / peak if peak else 0.0)
                p["bound_s"] = bound if bound > 0 else None
                p["fraction_of_roof"] = bound / self.time_s if bound > 0 and self.time_s > 0 else None
            out.append(p)
        return out

    def to_dict(self, device: DeviceProfile | None = None) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "time_s": self.time_s, "dram_bytes": self.dram_bytes,
                "l2_bytes": self.l2_bytes, "tensor_ops": self.tensor_ops, "path": self.path, "grid": self.grid,
                "block": self.block, "points": self.points(device)}


def _number(cell: str) -> float | None:
    s = cell.strip().replace(",", "")
    if not s or s.lower() in ("n/a", "nan"):
        return None
    try:
        return float(s)
    except ValueError:
        return None


def _time_scale(unit: str) -> float:
    u = unit.strip()
    if u not in TIME_UNITS:
        raise NcuError(f"{TIME} is in {u!r}; expected ns, us, ms or s")
    return TIME_UNITS[u]


def _byte_rate_scale(unit: str) -> float:
    """byte/s, Kbyte/s, Gbyte/second … (ncu scales units unless --print-units base); bare 'byte' as ncu
    labels some derived rates."""
    m = re.fullmatch(r"([KMGTP]?)(?:i?)byte(?:/s(?:econd)?)?", unit.strip())
    if not m:
        raise NcuError(f"a bytes-per-second column is in {unit!r}; expected byte/s (or K/M/G/Tbyte/s)")
    return PREFIX[m.group(1)]


DEVICE_NAME = "device__attribute_display_name"


FIELD_LIMIT = 4 * 1024 * 1024  # bytes in one CSV field: a long demangled kernel name fits, a runaway one does not


@dataclass(frozen=True)
class NcuExport:
    """The kernels of one export, and the rows left out with why (one counted warning, not one each)."""

    kernels: list[NcuKernel]
    skipped: int = 0
    first_skipped: str = ""  # the first row left out and why, for the warning line

    def warning(self) -> str:
        if not self.skipped:
            return ""
        return f"{self.skipped} kernel row(s) left out: {self.first_skipped}" + (" (and others)" if self.skipped > 1 else "")


@dataclass(frozen=True)
class _Columns:
    """Where each used column is, and its unit's scale: found once, from the header and units rows."""

    col: dict[str, int]
    width: int
    t_scale: float
    dram_scale: float | None
    l2_scale: float | None
    tensor: tuple[tuple[int, str], ...]  # (column, its metric), for the tensor-pipe op counters


def _columns(header_row: list[str], units: list[str] | None) -> _Columns:
    header = [c.strip() for c in header_row]
    col = {c: i for i, c in enumerate(header)}
    if TIME not in col:
        raise NcuError(f"the CSV has no {TIME} column (collect with --set roofline, or --metrics {TIME},…)")
    def unit(c: str) -> str:
        return units[col[c]] if units and col[c] < len(units) else ""

    dram_scale = _byte_rate_scale(unit(DRAM_RATE) or "byte/s") if DRAM_RATE in col else None
    l2_scale = _byte_rate_scale(unit(L2_RATE) or "byte/s") if L2_RATE in col else None
    if dram_scale is None and l2_scale is None:
        raise NcuError(f"the CSV has neither {DRAM_RATE} nor {L2_RATE}: no bytes to place the kernels by "
                       "(collect with --set roofline)")
    tensor = tuple((i, c) for i, c in enumerate(header) if tensor_path(c))
    return _Columns(col, len(header), _time_scale(unit(TIME) or "ns"), dram_scale, l2_scale, tensor)


class _BadRow(ValueError):
    """A kernel row whose counters are not a kernel's (negative, infinite): left out and counted."""


def _counter(r: list[str], i: int, what: str) -> float | None:
    v = _number(r[i])
    if v is not None and not (0.0 <= v < math.inf):
        raise _BadRow(f"{what} = {r[i].strip()[:40]}")
    return v


def _kernel(r: list[str], c: _Columns) -> NcuKernel | None:
    t = _counter(r, c.col[TIME], TIME)
    if t is None:
        return None
    t *= c.t_scale

    def rate_bytes(name: str, scale: float | None) -> float | None:
        v = _counter(r, c.col[name], name) if scale is not None else None
        return None if v is None else v * scale * t  # type: ignore[operator]

    by_path = {p: v for p, v in tensor_ops({name: _counter(r, i, "tensor ops") or 0.0 for i, name in c.tensor}).items()
               if v}
    def get(name: str) -> str:
        return r[c.col[name]] if name in c.col else ""

    return NcuKernel(
        id=r[0].strip(), name=get("Kernel Name"), time_s=t,
        dram_bytes=rate_bytes(DRAM_RATE, c.dram_scale), l2_bytes=rate_bytes(L2_RATE, c.l2_scale),
        tensor_ops=sum(by_path.values()), path=max(by_path, key=by_path.__getitem__) if by_path else None,
        grid=get("Grid Size"), block=get("Block Size"), device_name=get(DEVICE_NAME).strip(),
    )


def _rows(lines: Iterable[str]) -> Iterator[tuple[int, list[str]]]:
    """CSV rows with their line numbers, one at a time (a 100k-kernel export is a gigabyte of text)."""
    old = csv.field_size_limit(FIELD_LIMIT)
    try:
        reader = csv.reader(lines)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise NcuError(f"line {reader.line_num}: {exc} (at most {FIELD_LIMIT // 1024 // 1024} MiB a field)") from None
            yield reader.line_num, row
    finally:
        csv.field_size_limit(old)


def read_ncu(lines: Iterable[str]) -> NcuExport:
    """The kernels of a `ncu --csv --page raw` export, read row by row; NcuError if it is not one."""
    rows = _rows(lines)
    for _, r in rows:
        if r and r[0].strip() == "ID" and "Kernel Name" in r:
            header = r
            break
    else:
        raise NcuError("not an Nsight Compute raw CSV: no header row with ID and Kernel Name "
                       "(export with `ncu --csv --page raw`)")
    first = next(rows, None)
    has_units = first is not None and bool(first[1]) and not first[1][0].strip()  # the units row has no ID
    c = _columns(header, first[1] if has_units else None)  # type: ignore[index]  # has_units: first is a row
    kernels: list[NcuKernel] = []
    skipped, first_skipped = 0, ""
    pending = [] if has_units or first is None else [first]
    for line, r in itertools.chain(pending, rows):
        if len(r) < c.width or not r[0].strip():
            continue
        try:
            k = _kernel(r, c)
        except _BadRow as exc:
            skipped += 1
            first_skipped = first_skipped or f"line {line} (ID {r[0].strip()[:20]}): {exc}"
            continue
        if k is not None:
            kernels.append(k)
    if not kernels:
        raise NcuError("the CSV has a header but no kernel rows" + (f"; {first_skipped}" if first_skipped else ""))
    return NcuExport(kernels, skipped, first_skipped)


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """The kernels of an export held as text (see read_ncu)."""
    return read_ncu(io.StringIO(text)).kernels
