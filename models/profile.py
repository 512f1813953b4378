"""Device profiles: a device's roofs and slopes, each number with its provenance."""

from __future__ import annotations

from dataclasses import dataclass, field, asdict
from typing import Any, Iterator, Mapping

from . import plausible
from .errors import BadInput
from .paths import PATHS, alias_of, level_sort_key, matmul_ladder, path_for, path_sort_key

# Where a number comes from. Every ceiling carries one, and every view shows it.
SOURCES = {
    "measured": "measured on this machine by rooftop",
    "reference": "published measurement (RealZST/llm-infra-notes)",
    "datasheet": "vendor datasheet (dense, not sparse)",
    "imported": "imported from a file",
    "typical": "typical value, not measured on this device",
}


class NoRoof(BadInput, LookupError):
    """The device has no roof for the path (or no slope for the level) an op needs."""


@dataclass(frozen=True)
class Ceiling:
    """One roof or slope: a value in SI units and where it came from."""

    value: float  # FLOP/s for a peak, bytes/s for a bandwidth, seconds for a latency
    source: str  # a key of SOURCES
    case: str = ""  # what produced it: "read_reduce:134217728", "2048x8192x8192", "datasheet"
    stable: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def provenance(self) -> dict[str, Any]:
        """Everything but the value: where it came from, the case, stability."""
        return {"source": self.source, "case": self.case, "stable": self.stable}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Ceiling":
        value = d["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"a ceiling's value must be a number, not {value!r}")
        return cls(float(value), str(d["source"]), str(d.get("case", "")), bool(d.get("stable", True)))


class Roofs(Mapping[str, "Ceiling"]):
    """A profile's compute roofs by path, found under either name of a path: a CPU's `bf16-matmul` is
    also `bf16-tc`, so an op's bf16 GEMM, a `--paths bf16-tc` and an older run that said `bf16-tc` all
    reach it. Iterating gives the names the profile holds."""

    __slots__ = ("_by",)

    def __init__(self, by: Mapping[str, "Ceiling"]) -> None:
        self._by = dict(by)

    def key(self, path: str) -> str | None:
        """The name this mapping holds `path` under (itself or its alias), None when it holds neither."""
        if path in self._by:
            return path
        alias = alias_of(path)
        return alias if alias is not None and alias in self._by else None

    def __getitem__(self, path: str) -> "Ceiling":
        key = self.key(path)
        if key is None:
            raise KeyError(path)
        return self._by[key]

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.key(path) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._by)

    def __len__(self) -> int:
        return len(self._by)

    def __repr__(self) -> str:
        return f"Roofs({self._by!r})"


def roofs_for(peak: Mapping[str, "Ceiling"], kind: str) -> Roofs:
    """`peak` under the names a device of `kind` gives its paths (a CPU's GEMMs are `-matmul`, not `-tc`);
    where a file holds a path under both names, the kind's own name wins."""
    own = {k: c for k, c in peak.items() if path_for(k, kind) == k}
    renamed = {path_for(k, kind): c for k, c in peak.items() if path_for(k, kind) != k}
    return Roofs({**renamed, **own})


@dataclass(frozen=True)
class DeviceProfile:
    """What the roofline needs to know about one device.

    `bandwidth` maps a memory level (`dram`, `l2`, links) to bytes/s; `peak`
    maps a compute path (`bf16-tc`, `fp32-fma`, …) to FLOP/s.
    """

    id: str
    name: str
    source: str  # where the profile as a whole comes from (a key of SOURCES)
    bandwidth: Mapping[str, Ceiling]
    peak: Mapping[str, Ceiling]
    vendor: str = ""
    kind: str = "gpu"  # "gpu" or "cpu"
    memory_bytes: float | None = None
    sm_count: int | None = None  # SMs (NVIDIA), CUs (AMD); on a CPU the threads torch measured with
    l2_bytes: float | None = None  # last-level cache: L2 on a GPU, LLC on a CPU
    power_limit_w: float | None = None
    launch_overhead: Ceiling | None = None  # seconds per kernel launch, when known
    notes: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every profile, however built (measured, stored, imported, replaced), names its roofs by its kind.
        object.__setattr__(self, "peak", roofs_for(self.peak, self.kind))

    # -- lookups -----------------------------------------------------------------

    @property
    def threads(self) -> int | None:
        """A CPU profile's thread count, kept in `sm_count` (probes: the backend's `units`); None for a GPU or
        when not recorded. Its ceilings are those of that many threads (1 and 2 differ ×2), and the app
        measures with one core left to the UI, `rooftop measure` by the load it finds, so two runs of one
        machine can have measured different things: whatever shows a CPU profile says how many."""
        n = self.sm_count  # a whole number ≥ 0 (plausible.fact_problem); a file may write 4 as 4.0
        return int(n) if self.kind == "cpu" and n else None

    def paths(self) -> list[str]:
        return sorted(self.peak, key=path_sort_key)

    def levels(self) -> list[str]:
        return sorted(self.bandwidth, key=level_sort_key)

    def path_name(self, path: str) -> str:
        """What this device calls `path`: the name it holds the roof under, else its kind's name for it."""
        return self.peak.key(path) or path_for(path, self.kind)  # type: ignore[attr-defined]

    def F(self, path: str) -> float:
        """Peak FLOP/s of a compute path (either of its names); NoRoof naming what the device has otherwise."""
        if path not in self.peak:
            have = ", ".join(self.paths()) or "none"
            name = path_for(path, self.kind)
            what = PATHS[name].label if name in PATHS else name
            raise NoRoof(f"{self.id} has no {name} roof ({what}); it has: {have}")
        return self.peak[path].value

    def B(self, level: str = "dram") -> float:
        """Bandwidth of a memory level in bytes/s; NoRoof naming what the device has otherwise."""
        if level not in self.bandwidth:
            have = ", ".join(self.levels()) or "none"
            raise NoRoof(f"{self.id} has no {level} bandwidth; it has: {have}")
        return self.bandwidth[level].value

    def is_roofline(self) -> bool:
        """A DRAM slope and at least one matmul roof: enough to stand in as a default device."""
        return "dram" in self.bandwidth and any(p in self.peak for p in matmul_ladder(self.kind))

    def ridge(self, path: str, level: str = "dram") -> float:
        """I* = F/B in FLOP/byte."""
        return self.F(path) / self.B(level)

    # -- serialisation -----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Scripting-friendly: `bandwidth` maps level → bytes/s and `peak` maps path → FLOP/s as plain
        numbers (`launch_overhead` in seconds); where each number came from is under `ceilings`."""
        ceilings: dict[str, Any] = {
            "bandwidth": {k: self.bandwidth[k].provenance() for k in self.levels()},
            "peak": {k: self.peak[k].provenance() for k in self.paths()},
        }
        if self.launch_overhead:
            ceilings["launch_overhead"] = self.launch_overhead.provenance()
        return {
            "id": self.id,
            "name": self.name,
            "source": self.source,
            "vendor": self.vendor,
            "kind": self.kind,
            "memory_bytes": self.memory_bytes,
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes,
            "power_limit_w": self.power_limit_w,
            "launch_overhead": self.launch_overhead.value if self.launch_overhead else None,
            "bandwidth": {k: self.bandwidth[k].value for k in self.levels()},
            "peak": {k: self.peak[k].value for k in self.paths()},
            "ceilings": ceilings,
            "notes": self.notes,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], strict: bool = True) -> "DeviceProfile":
        """Reads to_dict's form, and the older one where each number was an object {value, source, …}.

        Every number is checked against `bounds` (a file can say anything): `strict` raises
        ValueError naming the first bad one; otherwise (a store written before the checks) a
        bad fact reads as unknown (None) and a bad ceiling is left out.
        """
        lo = d.get("launch_overhead")
        prov = d.get("ceilings") or {}
        default = str(d.get("source", "imported"))

        def read(kind: str, key: str, v: Any, p: Mapping[str, Any] | None) -> Ceiling | None:
            c = Ceiling.from_dict(v) if isinstance(v, Mapping) else Ceiling.from_dict(
                {"source": default, **(p or {}), "value": v})
            problem = plausible.ceiling_problem(kind, key, c.value)
            if problem and strict:
                raise ValueError(problem)
            return None if problem else c

        def fact(name: str) -> Any:
            problem = plausible.fact_problem(name, d.get(name))
            if problem and strict:
                raise ValueError(problem)
            return None if problem else d.get(name)

        def ceilings(kind: str) -> dict[str, Ceiling]:
            given = d.get(kind, {})
            if not isinstance(given, Mapping):
                raise ValueError(f"{kind} must map names to numbers, not {type(given).__name__}")
            out = {str(k): read(kind, str(k), v, prov.get(kind, {}).get(k)) for k, v in given.items()}
            return {k: c for k, c in out.items() if c is not None}

        extra = dict(d.get("extra", {}))
        problem = plausible.free_problem("extra", extra)
        if problem and strict:
            raise ValueError(problem)
        launch = read("launch", "overhead", lo, prov.get("launch_overhead")) if lo is not None else None
        return cls(
            id=str(d["id"]),
            name=str(d.get("name", d["id"])),
            source=str(d.get("source", "imported")),
            vendor=str(d.get("vendor", "")),
            kind=str(d.get("kind", "gpu")),
            memory_bytes=fact("memory_bytes"),
            sm_count=fact("sm_count"),
            l2_bytes=fact("l2_bytes"),
            power_limit_w=fact("power_limit_w"),
            launch_overhead=launch,
            bandwidth=ceilings("bandwidth"),
            peak=ceilings("peak"),
            notes=str(d.get("notes", "")),
            extra=extra if not problem else {},
        )
