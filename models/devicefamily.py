"""Which catalog profile a trace's GPU is: by its name's family, or for a nameless ROCm device by its CUs.

A trace names its device (torch's `deviceProperties`): "NVIDIA A100-PG509-200"
is an A100 (the a100 family), "AMD Radeon Graphics" with 104 CUs is an MI200-series
GCD. A device of no known family gets no profile, and the caller says so:
another vendor's roofs are never used for it silently. The families are
package data (models/data/families.json), not code.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .catalog import _read_text, catalog
from .profile import DeviceProfile
from .units import GiB

MEMORY_TOLERANCE = 0.10  # a profile whose card holds more than 10% more or less memory is another variant


@dataclass(frozen=True)
class Placement:
    """The profile a trace's device is placed on (None: no reference here), and how, in one line."""

    profile: DeviceProfile | None
    family: str
    vendor: str  # the trace's device vendor: nvidia, amd, or ""
    note: str


@functools.lru_cache(maxsize=1)
def families() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(_read_text("families.json"))["families"])


def _squash(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def trace_vendor(name: str, props: Mapping[str, Any]) -> str:
    """nvidia or amd from the name, else from the warp size (32 on NVIDIA, 64 on AMD CDNA); '' if neither says."""
    low = name.lower()
    if any(w in low for w in ("nvidia", "tesla", "geforce", "quadro", "rtx")):
        return "nvidia"
    if any(w in low for w in ("amd", "radeon", "instinct")):
        return "amd"
    warp = props.get("warpSize")
    return {32: "nvidia", 64: "amd"}.get(warp if isinstance(warp, int) else 0, "")


def _family(name: str, props: Mapping[str, Any], vendor: str) -> dict[str, Any] | None:
    sq = _squash(name)
    for f in families():
        if any(m in sq for m in f["match"]):
            return f
    cus = props.get("numSms")
    if vendor == "amd" and isinstance(cus, int):
        for f in families():
            if f["vendor"] == "amd" and cus in f.get("cus", ()):
                return f
    return None


def same_model(a: str, b: str) -> bool:
    """Whether two device names are one model: the same name, or of one family (a datasheet's "NVIDIA H200 SXM
    141GB" is NVML's "NVIDIA H200"), a MIG slice being no whole GPU."""
    sa, sb = _squash(a), _squash(b)
    if sa == sb:
        return True
    fa, fb = _family(a, {}, trace_vendor(a, {})), _family(b, {}, trace_vendor(b, {}))
    return fa is not None and fa is fb and ("mig" in sa) == ("mig" in sb)


def place_device(name: str, props: Mapping[str, Any] | None = None,
                 pool: Mapping[str, DeviceProfile] | None = None) -> Placement:
    """The profile for a trace's device `name` (with its deviceProperties `props`), from `pool` (the catalog)."""
    props = props or {}
    pool = pool if pool is not None else catalog()
    vendor = trace_vendor(name, props)
    want = name.strip().lower()
    for p in pool.values():
        if p.name.lower() == want and p.source in ("reference", "datasheet"):
            return Placement(p, p.id, vendor, f"the trace's {name} is {p.id} ({p.source} profile)")
    fam = _family(name, props, vendor)
    if fam is None:
        what = f"{name} ({vendor.upper() if vendor else 'vendor unknown'})" if name else "its GPU"
        return Placement(None, "", vendor, f"rooftop has no reference profile for the trace's {what}")
    cus = props.get("numSms")
    if fam.get("cus") and isinstance(cus, int) and cus not in fam["cus"]:  # an MI250X GCD (110 CUs) is no MI210
        return Placement(None, fam["family"], vendor,
                         f"rooftop has no reference profile for the trace's {name} with {cus} compute units (the "
                         f"{fam['family']} family's reference has {', '.join(str(c) for c in fam['cus'])})")
    profile = next((pool[i] for i in fam["profiles"] if i in pool), None)
    if profile is None:
        return Placement(None, fam["family"], vendor, f"rooftop has no profile of the {fam['family']} family "
                                                      f"for the trace's {name}")
    how = f"by its {props['numSms']} compute units" if not any(m in _squash(name) for m in fam["match"]) else "by name"
    note = (f"the trace's {name} is of the {fam['family']} family ({how}): placed on {profile.id}, "
            f"the {profile.source} profile of {profile.name}")
    if fam.get("note"):
        note += f" ({fam['note']})"
    mem = props.get("totalGlobalMem")
    if isinstance(mem, (int, float)) and profile.memory_bytes and \
            abs(mem - profile.memory_bytes) > MEMORY_TOLERANCE * profile.memory_bytes:
        note += (f"; that card has {profile.memory_bytes / GiB:.0f} GiB, the trace's {mem / GiB:.0f} GiB: another "
                 "variant, whose memory bandwidth may differ (give -d, or measure on that machine)")
    return Placement(profile, fam["family"], vendor, note)
