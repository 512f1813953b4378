"""Which catalog profile a trace's GPU is: by its name's family, told apart by its properties, and by its
properties alone where the name says nothing.

A trace names its device and its properties (torch's `deviceProperties`: name, SM/CU count, memory, warp
size, compute capability or gfx version) and its runtime (`cuda_runtime_version` or `hip_runtime_version`).
"NVIDIA A100-PG509-200" is an A100 (the a100 family) with less memory; "NVIDIA H100 PCIe" is of the h100
family but its 114 SMs make it the PCIe card, not the SXM one; a ROCm device named "" or "AMD Radeon
Graphics" with 304 CUs, gfx 9.4 and 192 GiB is an MI300X. A device no profile fits gets none, with the
closest profiles named: another GPU's roofs are never used for it silently. The families are package data
(models/data/families.json), not code.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .catalog import _read_text, catalog
from .profile import DeviceProfile
from .units import GiB

MEMORY_TOLERANCE = 0.10  # a profile whose card holds more than 10% more or less memory is another variant
# words a name may hold that name no model: "AMD Radeon Graphics" (ROCm's name for many devices) says nothing
GENERIC_WORDS = frozenset({"amd", "ati", "nvidia", "radeon", "graphics", "gpu", "device", "instinct", "corporation"})
RUNTIME_KEYS = {"hip_runtime_version": "HIP", "roctracer_version": "HIP", "cuda_runtime_version": "CUDA",
                "cupti_version": "CUDA", "cuda_driver_version": "CUDA"}


@dataclass(frozen=True)
class Identity:
    """What a trace (or NVML) says of a GPU: the facts one model is told from another by."""

    name: str
    vendor: str  # nvidia, amd, or "" when nothing says
    units: int | None  # SMs (NVIDIA) or CUs (AMD)
    memory: float | None  # bytes
    arch: str  # compute capability (CUDA) or gfx major.minor (HIP), "9.4"; "" when not given
    runtime: str  # "CUDA", "HIP" or ""

    @property
    def unit_word(self) -> str:
        return "compute units" if self.vendor == "amd" else "SMs"

    def describe(self) -> str:
        """The properties in words: "304 compute units, 192 GiB, gfx 9.4, HIP runtime"."""
        arch = ("gfx " if self.vendor == "amd" or self.runtime == "HIP" else "compute capability ") + self.arch
        parts = [f"{self.units} {self.unit_word}" if self.units else "",
                 f"{self.memory / GiB:.0f} GiB" if self.memory else "", arch if self.arch else "",
                 f"{self.runtime} runtime" if self.runtime else ""]
        return ", ".join(p for p in parts if p)

    def called(self) -> str:
        """The device as a note names it: its name and properties, or its properties alone."""
        about = self.describe()
        if not self.name:
            return f"nameless GPU ({about})" if about else "GPU"
        return f"{self.name} ({about})" if about else self.name


@dataclass(frozen=True)
class Placement:
    """The profile a trace's device is placed on (None: no profile fits it), how, in one line, and the
    catalog's closest profiles to name when there is none."""

    profile: DeviceProfile | None
    family: str
    vendor: str  # the trace's device vendor: nvidia, amd, or ""
    note: str
    closest: tuple[str, ...] = ()
    identity: Identity | None = None


@functools.lru_cache(maxsize=1)
def families() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(_read_text("families.json"))["families"])


def _words(name: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", name.lower())


def _squash(name: str) -> str:
    return "".join(_words(name))


def _spans(name: str) -> set[str]:
    """Every run of the name's consecutive words, joined: a family fragment must be one ('rtx4090' in
    'NVIDIA GeForce RTX 4090', never 'l4' in 'NVIDIA L40S')."""
    w = _words(name)
    return {"".join(w[i:j]) for i in range(len(w)) for j in range(i + 1, len(w) + 1)}


def is_generic(name: str) -> bool:
    """Whether a device name names no model: empty, or only words like AMD, Radeon, Graphics."""
    return not [w for w in _words(name) if w not in GENERIC_WORDS]


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def trace_runtime(metadata: Mapping[str, Any] | None) -> str:
    """HIP or CUDA from a trace's top-level version fields ('' when it records none)."""
    for key, runtime in RUNTIME_KEYS.items():
        if (metadata or {}).get(key) not in (None, ""):
            return runtime
    return ""


def trace_vendor(name: str, props: Mapping[str, Any], runtime: str = "") -> str:
    """nvidia or amd from the name, else from the runtime (HIP, CUDA), else from the warp size (32 on NVIDIA,
    64 on AMD CDNA); '' if none says."""
    low = name.lower()
    if any(w in low for w in ("nvidia", "tesla", "geforce", "quadro", "rtx")):
        return "nvidia"
    if any(w in low for w in ("amd", "radeon", "instinct")):
        return "amd"
    if runtime:
        return "amd" if runtime == "HIP" else "nvidia"
    warp = props.get("warpSize")
    return {32: "nvidia", 64: "amd"}.get(warp if isinstance(warp, int) else 0, "")


def identify(name: str, props: Mapping[str, Any] | None = None,
             metadata: Mapping[str, Any] | None = None) -> Identity:
    """The identity of a trace's device from its name, its deviceProperties and the trace's top-level fields."""
    props = props or {}
    runtime = trace_runtime(metadata) or str(props.get("runtime", ""))
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    arch = f"{major}.{minor}" if _int(major) and isinstance(minor, int) and minor >= 0 else ""
    mem = props.get("totalGlobalMem")
    return Identity(name.strip(), trace_vendor(name, props, runtime), _int(props.get("numSms")),
                    float(mem) if isinstance(mem, (int, float)) and not isinstance(mem, bool) and mem > 0 else None,
                    arch, runtime)


def _family_of(name: str) -> dict[str, Any] | None:
    spans = _spans(name)
    return next((f for f in families() if any(m in spans for m in f["match"])), None)


def _units_fit(p: DeviceProfile, who: Identity) -> bool:
    return who.units is None or p.sm_count is None or p.sm_count == who.units


def _memory_fits(p: DeviceProfile, who: Identity) -> bool:
    return who.memory is None or not p.memory_bytes or \
        abs(who.memory - p.memory_bytes) <= MEMORY_TOLERANCE * p.memory_bytes


def same_model(a: str, b: str) -> bool:
    """Whether two device names are one model: the same name, or of one family (a datasheet's "NVIDIA H200 SXM
    141GB" is NVML's "NVIDIA H200"), a MIG slice being no whole GPU."""
    sa, sb = _squash(a), _squash(b)
    if sa == sb:
        return True
    fa, fb = _family_of(a), _family_of(b)
    return fa is not None and fa is fb and ("mig" in sa) == ("mig" in sb)


def same_card(p: DeviceProfile, who: Identity) -> bool:
    """Whether a (measured) profile is of the very card `who` names: the same name, and SM (CU) count and
    memory that fit where both give them."""
    return bool(who.name) and _squash(p.name) == _squash(who.name) and _units_fit(p, who) and _memory_fits(p, who)


def _arch_of(pool: Mapping[str, DeviceProfile]) -> dict[str, tuple[str, ...]]:
    return {pid: tuple(f.get("arch", ())) for f in families() for pid in f["profiles"] if pid in pool}


def closest(who: Identity, pool: Mapping[str, DeviceProfile], n: int = 2) -> tuple[str, ...]:
    """The `n` built-in GPU profiles nearest the device: same vendor, same architecture, then the SM (CU)
    count and the memory nearest (by ratio)."""
    arch = _arch_of(pool)

    def apart(have: tuple[str, ...]) -> int:  # 0: the same architecture, 1: the same major version, 2: other
        if not who.arch or who.arch in have:
            return 0
        return 1 if who.arch.split(".")[0] in {a.split(".")[0] for a in have} else 2

    def far(p: DeviceProfile) -> tuple[bool, int, float]:
        # a fact the device gives and the profile lacks counts as far as a factor of e
        ratio = sum(abs(math.log(a / b)) if b else 1.0
                    for a, b in ((who.units, p.sm_count), (who.memory, p.memory_bytes)) if a)
        return bool(who.vendor) and p.vendor != who.vendor, apart(arch.get(p.id, ())), ratio

    gpus = [p for p in pool.values() if p.kind == "gpu" and p.source in ("reference", "datasheet")]
    return tuple(p.id for p in sorted(gpus, key=far)[:n])


def _none(who: Identity, pool: Mapping[str, DeviceProfile], family: str, why: str) -> Placement:
    return Placement(None, family, who.vendor, why, closest(who, pool), who)


def _by_properties(who: Identity, pool: Mapping[str, DeviceProfile]) -> list[tuple[dict[str, Any], DeviceProfile]]:
    """The (family, profile) pairs a nameless device's properties fit: vendor, architecture, SM (CU) count
    and memory, each where both sides give it; the count must be given."""
    if who.units is None:
        return []
    fits = []
    for f in families():
        if (who.vendor and f["vendor"] != who.vendor) or (who.arch and who.arch not in f.get("arch", ())):
            continue
        fits += [(f, pool[i]) for i in f["profiles"]
                 if i in pool and pool[i].sm_count == who.units and _memory_fits(pool[i], who)]
    return fits


def _placed(who: Identity, f: dict[str, Any], p: DeviceProfile, by_name: bool, whose: str) -> Placement:
    how = "by name" if by_name else "by its properties; its name says nothing"
    note = f"{whose} {who.name if by_name else who.called()} is of the {f['family']} family ({how}): placed " \
           f"on {p.id}, the {p.source} profile of {p.name}"
    if f.get("notes", {}).get(p.id):
        note += f" ({f['notes'][p.id]})"
    if not _memory_fits(p, who):
        # it does not fit: both memories are known
        note += (f"; that card has {p.memory_bytes / GiB:.0f} GiB, "  # type: ignore[operator]
                 f"{whose} {who.memory / GiB:.0f} GiB: another "  # type: ignore[operator]
                 "variant, whose memory bandwidth may differ (give -d, or measure on that machine)")
    return Placement(p, f["family"], who.vendor, note, (), who)


def place_device(name: str, props: Mapping[str, Any] | None = None,
                 pool: Mapping[str, DeviceProfile] | None = None,
                 metadata: Mapping[str, Any] | None = None, whose: str = "the trace's") -> Placement:
    """The profile for a trace's device `name` (with its deviceProperties `props` and the trace's top-level
    fields `metadata`), from `pool` (the catalog); none, with the closest named, where no profile fits.
    `whose` starts the note's naming of the device ("the trace's", "this machine's")."""
    pool = pool if pool is not None else catalog()
    who = identify(name, props, metadata)
    for p in pool.values():
        if name and p.name.lower() == who.name.lower() and p.source in ("reference", "datasheet") and \
                _units_fit(p, who):
            return Placement(p, p.id, who.vendor, f"{whose} {name} is {p.id} ({p.source} profile)", (), who)
    fam = None if is_generic(name) else _family_of(name)
    if fam is not None:
        profiles = [pool[i] for i in fam["profiles"] if i in pool]
        if not profiles:
            return _none(who, pool, fam["family"], f"rooftop has no profile of the {fam['family']} family for "
                                                   f"{whose} {who.called()}")
        fit = [p for p in profiles if _units_fit(p, who)]
        if not fit:  # a MIG slice is no whole GPU, an RTX 4090 D (114 SMs) no RTX 4090
            counts = ", ".join(sorted({str(p.sm_count) for p in profiles if p.sm_count}))
            return _none(who, pool, fam["family"],
                         f"rooftop has no profile for {whose} {who.called()}: the {fam['family']} family's "
                         f"profiles have {counts} {who.unit_word}")
        return _placed(who, fam, next((p for p in fit if _memory_fits(p, who)), fit[0]), True, whose)
    if name and not is_generic(name):
        return _none(who, pool, "", f"rooftop has no profile for {whose} {who.called()}")
    fits = _by_properties(who, pool)
    kinds = list(dict.fromkeys(f["family"] for f, _ in fits))
    if len(kinds) == 1:
        f, p = fits[0]
        return _placed(who, f, p, False, whose)
    if kinds:
        return Placement(None, "", who.vendor, f"rooftop cannot tell which GPU {whose} {who.called()} is: its "
                                               f"properties fit {', '.join(p.id for _, p in fits)}",
                         tuple(dict.fromkeys(p.id for _, p in fits)), who)
    return _none(who, pool, "", f"rooftop has no profile for {whose} {who.called()}")


KERNEL_UNITS = "the trace has no deviceProperties; its SM count is its kernels' (launch grid ÷ blocks per SM)"


def place_by_units(units: int, pool: Mapping[str, DeviceProfile] | None = None) -> Placement:
    """The profile for a trace that names no GPU but whose kernels say its SM count (CUPTI's: an NVIDIA GPU): the
    one profile of that count, or where several share it (an A100 and an A800; their memory variants), the first,
    with a note naming the others: such a trace is placed, as it was on the default device, never refused for
    what its count cannot tell. A count no profile has is an unknown GPU (profile None, the closest named)."""
    pool = pool if pool is not None else catalog()
    placed = place_device("", {"numSms": units, "runtime": "CUDA"}, pool=pool, whose="the trace's")
    if placed.profile is not None:
        return dataclasses.replace(placed, note=f"{placed.note} ({KERNEL_UNITS})")
    fits = [pool[i] for i in placed.closest if i in pool and pool[i].sm_count == units]
    if not fits or len(fits) != len(placed.closest):
        return placed
    first = fits[0]
    return dataclasses.replace(placed, profile=first, note=(
        f"{KERNEL_UNITS}: {units} SMs fit {', '.join(p.id for p in fits)}; placed on {first.id}, the "
        f"{first.source} profile of {first.name} (give -d ID for another)"))
