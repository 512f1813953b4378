"""The built-in device catalog: reference measurements and datasheets.

Shipped as package data (models/data/): the reference repository's CSVs
unchanged (seed 000 tables 3–5) and datasheet.json. Nothing here is typed into
code; this module only reads and converts to SI units.
"""

from __future__ import annotations

import csv
import functools
import io
import json
from importlib import resources
from typing import Any, Iterable

from .errors import BadInput
from .launch import with_launch_figures
from .profile import Ceiling, DeviceProfile
from .units import GiB, MiB

# Reference CSV dtype → the compute path its GEMM ran on.
REFERENCE_DTYPE_PATH = {
    "fp64": "fp64-tc",
    "fp32": "fp32-matmul",
    "tf32": "tf32-tc",
    "fp16": "fp16-tc",
    "bf16": "bf16-tc",
    "fp8_e4m3": "fp8-tc",
    "fp8": "fp8-tc",
    "int8": "int8-tc",
    "nvfp4": "fp4-tc",
}
FMA_COLUMNS = {"fp32_fma_tflop_s": "fp32-fma", "fp64_fma_tflop_s": "fp64-fma"}


def _read_text(*parts: str) -> str:
    node = resources.files("rooftop.models").joinpath("data")
    for p in parts:
        node = node.joinpath(p)
    return node.read_text(encoding="utf-8")


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _float_or_none(text: str) -> float | None:
    try:
        return float(text.split()[0])
    except (ValueError, IndexError, AttributeError):
        return None


def reference_profiles(
    roofs: Iterable[dict[str, str]],
    devices: Iterable[dict[str, str]] = (),
    fma: Iterable[dict[str, str]] = (),
    launch: Iterable[dict[str, str]] = (),
    source: str = "reference",
) -> list[DeviceProfile]:
    """Profiles from rows in the reference repository's CSV formats.

    Also used by the store to import a user's roofs.csv, hence the `source`.
    """
    info = {r["target"]: r for r in devices}
    fmas = {r["target"]: r for r in fma}
    launches = {r["target"]: r for r in launch}
    bandwidth: dict[str, dict[str, Ceiling]] = {}
    peak: dict[str, dict[str, Ceiling]] = {}
    order: list[str] = []
    for r in roofs:
        t = r["target"]
        if t not in peak:
            order.append(t)
            peak[t] = {}
            bandwidth[t] = {}
        path = REFERENCE_DTYPE_PATH.get(r["dtype"].strip().lower())
        if path is None:
            continue
        peak[t][path] = Ceiling(float(r["peak_tflop_s"]) * 1e12, source, r.get("compute_case", ""))
        bw = float(r["bandwidth_gb_s"]) * 1e9
        if "dram" not in bandwidth[t] or bw > bandwidth[t]["dram"].value:
            bandwidth[t]["dram"] = Ceiling(bw, source, r.get("bw_case", ""))
    out = []
    for t in order:
        d = info.get(t, {})
        for col, path in FMA_COLUMNS.items():
            v = _float_or_none(fmas.get(t, {}).get(col, ""))
            if v is not None:
                peak[t][path] = Ceiling(v * 1e12, source, "fma sweep plateau")
        name = d.get("name", t)
        lo = launches.get(t)
        mem = _float_or_none(d.get("memory_gib", ""))
        l2 = _float_or_none(d.get("l2_mib", ""))
        sm = _float_or_none(d.get("sm_cu", ""))
        out.append(
            DeviceProfile(
                id=t,
                name=name,
                source=source,
                vendor="amd" if "AMD" in name or t.startswith("mi") else "nvidia",
                memory_bytes=mem * GiB if mem is not None else None,
                sm_count=int(sm) if sm is not None else None,
                l2_bytes=l2 * MiB if l2 is not None else None,
                power_limit_w=_float_or_none(d.get("power_limit", "")),
                launch_overhead=(
                    Ceiling(float(lo["launch_overhead_us"]) * 1e-6, source, lo.get("case", "")) if lo else None
                ),
                bandwidth=bandwidth[t],
                peak=peak[t],
            )
        )
    return out


def _value(v: Any, scale: float, doc: str) -> Ceiling:
    if isinstance(v, dict):
        return Ceiling(float(v["value"]) * scale, str(v.get("source", "datasheet")), str(v.get("case", doc)))
    return Ceiling(float(v) * scale, "datasheet", doc)


def datasheet_profiles(data: dict[str, Any]) -> list[DeviceProfile]:
    """Profiles from datasheet.json: each with its document (notes), and where it is and the boost clock its
    figures are computed at (extra: url, clock_hz) where the entry gives them."""
    out = []
    for d in data["devices"]:
        doc = d.get("doc", "datasheet")
        extra: dict[str, Any] = {"url": d["url"]} if d.get("url") else {}
        if d.get("clock_mhz"):
            extra["clock_hz"] = float(d["clock_mhz"]) * 1e6
        out.append(
            DeviceProfile(
                id=d["id"],
                name=d["name"],
                source="datasheet",
                vendor=d.get("vendor", ""),
                memory_bytes=float(d["memory_gb"]) * 1e9 if d.get("memory_gb") else None,
                sm_count=d.get("sm_count"),
                l2_bytes=float(d["l2_mib"]) * MiB if d.get("l2_mib") else None,
                power_limit_w=d.get("power_limit_w"),
                bandwidth={k: _value(v, 1e9, doc) for k, v in d["bandwidth_gb_s"].items()},
                peak={k: _value(v, 1e12, doc) for k, v in d["peak_tflop_s"].items()},
                notes=doc,
                extra=extra,
            )
        )
    return out


@functools.lru_cache(maxsize=1)
def _catalog() -> dict[str, DeviceProfile]:
    ref = reference_profiles(
        _rows(_read_text("reference", "roofs.csv")),
        _rows(_read_text("reference", "devices.csv")),
        _rows(_read_text("reference", "fma.csv")),
        _rows(_read_text("reference_launch.csv")),
    )
    ds = datasheet_profiles(json.loads(_read_text("datasheet.json")))
    families = {r["target"]: r["family"] for r in _rows(_read_text("device_families.csv"))}
    return with_launch_figures({p.id: p for p in ref + ds}, families)


def catalog() -> dict[str, DeviceProfile]:
    """Every built-in profile by id: reference measurements first, then datasheets."""
    return dict(_catalog())


def find_by_name(gpu_name: str) -> DeviceProfile | None:
    """The reference profile whose device name matches an NVML/torch device name."""
    want = gpu_name.strip().lower()
    for p in _catalog().values():
        if p.source == "reference" and p.name.lower() == want:
            return p
    return None


class UnknownDevice(BadInput, LookupError):
    """A device id that is neither in the catalog nor among the extra profiles given."""


def lookup_device(device_id: str, extra: dict[str, DeviceProfile] | None = None) -> DeviceProfile:
    """A profile by id (case-insensitive), from `extra` (e.g. the store) first, then the catalog."""
    pool = {**_catalog(), **(extra or {})}
    want = device_id.strip().lower()
    for pid, prof in pool.items():
        if pid.lower() == want:
            return prof
    raise UnknownDevice(f"unknown device {device_id!r}; choose one of: {', '.join(pool)}")
