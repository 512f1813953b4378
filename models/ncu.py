"""Nsight Compute's `--csv --page raw` export: real kernels with measured bytes per level and tensor ops.

Where a user has the counters (often admin-only), the bytes need no model:
ncu reports rates, so bytes = rate × the kernel's duration —
DRAM `dram__bytes.sum.per_second` × `gpu__time_duration.sum`, and L2→SM
`derived__lts__lts2xbar_bytes.sum.per_second` × the same time. Tensor work is
counted by the tensor pipes (`sm__ops_path_tensor_src_*.sum`, one FLOP per op
as ncu counts them: the 4096³ bf16 GEMM's is 2·4096³). Each kernel then has
one point per level: the hierarchical roofline of real kernels.

The export starts with ncu's own log lines (`==PROF== …`), then the header
row (`"ID","Process ID",…`), then a row of units, then one row per kernel.
Pure: parses text; reading the file is the caller's.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Any

from .profile import DeviceProfile, NoRoof

TIME = "gpu__time_duration.sum"
DRAM_RATE = "dram__bytes.sum.per_second"
L2_RATE = "derived__lts__lts2xbar_bytes.sum.per_second"
TENSOR_RE = re.compile(r"^sm__ops_path_tensor_src_([a-z0-9]+?)(?:_dst_[a-z0-9]+)?(?:_sparsity_(?:on|off))?\.sum$")
TENSOR_PATHS = {"bf16": "bf16-tc", "fp16": "fp16-tc", "tf32": "tf32-tc", "fp8": "fp8-tc", "int8": "int8-tc",
                "fp64": "fp64-tc", "fp4": "fp4-tc"}
TIME_UNITS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3,
              "s": 1.0, "second": 1.0}
PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


class NcuError(ValueError):
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


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """The kernels of a `ncu --csv --page raw` export; NcuError if it is not one."""
    rows = list(csv.reader(io.StringIO(text)))
    head = next((i for i, r in enumerate(rows) if r and r[0].strip() == "ID" and "Kernel Name" in r), None)
    if head is None:
        raise NcuError("not an Nsight Compute raw CSV: no header row with ID and Kernel Name "
                       "(export with `ncu --csv --page raw`)")
    header = [c.strip() for c in rows[head]]
    col = {c: i for i, c in enumerate(header)}
    if TIME not in col:
        raise NcuError(f"the CSV has no {TIME} column (collect with --set roofline, or --metrics {TIME},…)")
    units = rows[head + 1] if len(rows) > head + 1 else []
    has_units = bool(units) and not (units[0].strip())  # the units row has an empty ID cell
    data = rows[head + 2:] if has_units else rows[head + 1:]
    def unit(c: str) -> str:
        return units[col[c]] if has_units and col[c] < len(units) else ""

    t_scale = _time_scale(unit(TIME) or "ns")
    dram_scale = _byte_rate_scale(unit(DRAM_RATE) or "byte/s") if DRAM_RATE in col else None
    l2_scale = _byte_rate_scale(unit(L2_RATE) or "byte/s") if L2_RATE in col else None
    if dram_scale is None and l2_scale is None:
        raise NcuError(f"the CSV has neither {DRAM_RATE} nor {L2_RATE}: no bytes to place the kernels by "
                       "(collect with --set roofline)")
    tensor_cols = [(c, TENSOR_RE.match(c).group(1)) for c in header if TENSOR_RE.match(c)]
    kernels = []
    for r in data:
        if len(r) < len(header) or not r[0].strip():
            continue
        t = _number(r[col[TIME]])
        if t is None:
            continue
        t *= t_scale

        def rate_bytes(name: str, scale: float | None) -> float | None:
            if scale is None:
                return None
            v = _number(r[col[name]])
            return None if v is None else v * scale * t

        by_path: dict[str, float] = {}
        for c, src in tensor_cols:
            v = _number(r[col[c]]) or 0.0
            if v and src in TENSOR_PATHS:
                by_path[TENSOR_PATHS[src]] = by_path.get(TENSOR_PATHS[src], 0.0) + v
        kernels.append(NcuKernel(
            id=r[0].strip(), name=r[col["Kernel Name"]], time_s=t,
            dram_bytes=rate_bytes(DRAM_RATE, dram_scale), l2_bytes=rate_bytes(L2_RATE, l2_scale),
            tensor_ops=sum(by_path.values()), path=max(by_path, key=by_path.get) if by_path else None,
            grid=r[col["Grid Size"]] if "Grid Size" in col else "",
            block=r[col["Block Size"]] if "Block Size" in col else "",
            device_name=r[col[DEVICE_NAME]].strip() if DEVICE_NAME in col else "",
        ))
    if not kernels:
        raise NcuError("the CSV has a header but no kernel rows")
    return kernels
