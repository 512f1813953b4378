"""A fleet: many measurements of one kind (every GPU of a server, every node of a cluster) side by side.

One row per member with its ceilings (B per level, F per path, launch) and what it ran under (SM clock,
power, throttling, other processes on it); the median row of each GPU model; and the straggler rule: a
member whose ceiling is below 0.9× the median of its peers (the other members of the same model) is
flagged, with the ceiling named. That rule is the fleet's one answer to "is this member fine?": the
report's flags and `rooftop check`'s median results both come from `peer_comparisons`. Only members
that completed their plan are compared (a stopped one's sweep is partial: kept, shown, not a peer).
Members of different models are never compared with one another: an H100 is not a slow H200. Pure:
profiles in, rows and flags out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Any, Iterable, Mapping, Sequence

from .paths import level_sort_key, path_sort_key
from .profile import DeviceProfile

STRAGGLER_RATIO = 0.9  # below 0.9× the peers' median is a straggler
LAUNCH = "launch"
UNKNOWN_MODEL = "device model unknown"  # the heading of members that gave no result and no device name
POWER_REASONS = ("power cap", "power brake")
THERMAL_REASONS = ("sw thermal", "hw thermal", "hw slowdown")


def ceiling_values(profile: DeviceProfile) -> dict[str, float]:
    """A profile's ceilings by name: `B dram`, `F bf16-tc`, `launch` (bytes/s, FLOP/s, seconds)."""
    out = {f"B {k}": profile.bandwidth[k].value for k in profile.levels()}
    out.update({f"F {k}": profile.peak[k].value for k in profile.paths()})
    if profile.launch_overhead is not None:
        out[LAUNCH] = profile.launch_overhead.value
    return out


def higher_is_better(ceiling: str) -> bool:
    """Bandwidth and peak: more is better; the launch floor is a time, where less is."""
    return ceiling != LAUNCH


def ceiling_order(names: Iterable[str]) -> list[str]:
    """B levels from main memory up, then F paths in the catalog's order, then launch."""
    def key(n: str) -> tuple[int, Any]:
        if n.startswith("B "):
            return (0, level_sort_key(n[2:]))
        if n.startswith("F "):
            return (1, path_sort_key(n[2:]))
        return (2, n)

    return sorted(set(names), key=key)


def short_of(ceiling: str, value: float, reference: float, ratio: float) -> bool:
    """Whether `value` falls short of `ratio` × `reference` (for launch: exceeds reference / ratio)."""
    if higher_is_better(ceiling):
        return value < ratio * reference
    return value > reference / ratio


def peer_rule(ratio: float = STRAGGLER_RATIO) -> str:
    """The straggler rule's words, as the fleet report and `rooftop check` both name it."""
    return f"{ratio:g}× its peers' median"


@dataclass(frozen=True)
class Member:
    """One measured device of a fleet: who (rank, host, device), what it measured, what it ran under."""

    rank: int
    host: str
    device: str  # cuda:0, cpu
    model: str  # the device's name: members are compared within one model
    profile: DeviceProfile | None  # None when it measured nothing (it died, hung or failed)
    status: str = "complete"  # complete | failed | lost (died or hung: no result came back)
    error: str = ""
    run_id: str | None = None
    local_rank: int | None = None
    sm_clock_mhz: float | None = None  # mean over the run
    power_w: float | None = None  # mean over the run
    power_limit_w: float | None = None
    max_temperature_c: float | None = None
    throttle: tuple[str, ...] = ()  # clock-event reasons seen while it measured
    processes: tuple[str, ...] = ()  # other processes on the device when it began ("1234 python")
    wall_s: float | None = None
    alone: DeviceProfile | None = None  # the same device measured alone before, to see what sharing cost

    @property
    def label(self) -> str:
        where = " ".join(x for x in (self.host, self.device) if x)
        return f"rank {self.rank} ({where})" if where else f"rank {self.rank}"

    @property
    def comparable(self) -> bool:
        """Measured to the end of its plan: only such a member sets its peers' median or is held to it."""
        return self.profile is not None and self.status == "complete"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "local_rank": self.local_rank, "host": self.host, "device": self.device,
            "model": self.model, "status": self.status, "error": self.error, "run_id": self.run_id,
            "ceilings": ceiling_values(self.profile) if self.profile else {},
            "sm_clock_mhz": self.sm_clock_mhz, "power_w": self.power_w, "power_limit_w": self.power_limit_w,
            "max_temperature_c": self.max_temperature_c, "throttle": list(self.throttle),
            "processes": list(self.processes), "wall_s": self.wall_s,
        }


@dataclass(frozen=True)
class Flag:
    """Something wrong with one member, in words, with the figures behind it where there are some."""

    rank: int
    host: str
    kind: str  # straggler | power | thermal | busy | failed | lost | cancelled | shared
    text: str
    ceiling: str = ""
    value: float | None = None
    reference: float | None = None  # the peers' median (straggler) or the device alone (shared)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "kind": self.kind, "ceiling": self.ceiling,
                "value": self.value, "reference": self.reference, "text": self.text}


@dataclass(frozen=True)
class ModelGroup:
    """The members of one device model, their median row, and which ceilings every report column shows."""

    model: str
    members: tuple[Member, ...]
    median: Mapping[str, float]
    ceilings: tuple[str, ...]


@dataclass(frozen=True)
class FleetReport:
    members: tuple[Member, ...]
    groups: tuple[ModelGroup, ...]
    flags: tuple[Flag, ...] = ()
    ratio: float = STRAGGLER_RATIO
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def stragglers(self) -> list[Flag]:
        return [f for f in self.flags if f.kind == "straggler"]

    def group_of(self, member: Member) -> ModelGroup | None:
        return next((g for g in self.groups if member in g.members), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [m.to_dict() for m in self.members],
            "median": {g.model: dict(g.median) for g in self.groups},
            "straggler_ratio": self.ratio,
            "flags": [f.to_dict() for f in self.flags],
            "stragglers": sorted({f.rank for f in self.stragglers}),
            "notes": list(self.notes),
        }


def median_row(members: Sequence[Member]) -> dict[str, float]:
    """Per ceiling, the median over the comparable members that have it."""
    values: dict[str, list[float]] = {}
    for m in members:
        if m.comparable:
            for k, v in ceiling_values(m.profile).items():  # type: ignore[arg-type]
                values.setdefault(k, []).append(v)
    return {k: float(median(vs)) for k, vs in values.items()}


@dataclass(frozen=True)
class PeerComparison:
    """One ceiling of one member against the median of its peers, judged by the straggler rule."""

    member: Member
    ceiling: str
    value: float
    peers_median: float
    ratio: float = STRAGGLER_RATIO

    @property
    def straggles(self) -> bool:
        return short_of(self.ceiling, self.value, self.peers_median, self.ratio)


def peer_comparisons(members: Sequence[Member], ratio: float = STRAGGLER_RATIO) -> list[PeerComparison]:
    """Each comparable member's ceilings against the median of its peers (the other comparable members of
    its group that have that ceiling): the one rule behind the report's stragglers and check's median."""
    out = []
    measured = [m for m in members if m.comparable]
    for m in measured:
        mine = ceiling_values(m.profile)  # type: ignore[arg-type]
        for ceiling in ceiling_order(mine):
            peers = [ceiling_values(p.profile)[ceiling] for p in measured  # type: ignore[arg-type]
                     if p is not m and ceiling in ceiling_values(p.profile)]  # type: ignore[arg-type]
            if peers:
                out.append(PeerComparison(m, ceiling, mine[ceiling], float(median(peers)), ratio))
    return out


def straggler_flags(members: Sequence[Member], ratio: float = STRAGGLER_RATIO) -> list[Flag]:
    """A flag for each ceiling `peer_comparisons` finds short, with both figures."""
    flags = []
    for c in peer_comparisons(members, ratio):
        if c.straggles:
            m, ref = c.member, c.peers_median
            rule = (f"below {peer_rule(ratio)} {fmt_ceiling(c.ceiling, ref)}" if higher_is_better(c.ceiling)
                    else f"above its peers' median {fmt_ceiling(c.ceiling, ref)} ÷ {ratio:g}")
            flags.append(Flag(m.rank, m.host, "straggler",
                              f"{m.label}: {c.ceiling} {fmt_ceiling(c.ceiling, c.value)} is {rule}",
                              c.ceiling, c.value, ref))
    return flags


def condition_flags(m: Member) -> list[Flag]:
    """Power- or thermally-capped while it measured, other processes on its device, or no result at all."""
    out = []
    power = [r for r in m.throttle if r in POWER_REASONS]
    thermal = [r for r in m.throttle if r in THERMAL_REASONS]
    if power:
        out.append(Flag(m.rank, m.host, "power", f"{m.label}: ran power-capped ({', '.join(power)})"))
    if thermal:
        out.append(Flag(m.rank, m.host, "thermal", f"{m.label}: ran thermally capped ({', '.join(thermal)})"))
    if m.processes:
        out.append(Flag(m.rank, m.host, "busy", f"{m.label}: measured while in use by {', '.join(m.processes)}"))
    if m.profile is None:
        why = m.error or ("stopped before its first ceiling" if m.status == "cancelled" else "it measured nothing")
        out.append(Flag(m.rank, m.host, m.status if m.status in ("lost", "failed") else "failed",
                        f"{m.label}: no result ({why})"))
    elif m.status != "complete":
        how = m.error or ("stopped" if m.status == "cancelled" else m.status)
        out.append(Flag(m.rank, m.host, "cancelled" if m.status == "cancelled" else "failed",
                        f"{m.label}: {how}, before the end of its plan: what it measured is kept, not compared "
                        "with its peers"))
    return out


def shared_flags(m: Member, ratio: float = STRAGGLER_RATIO) -> list[Flag]:
    """Ceilings that measuring together lowered: below `ratio` × the same device measured alone."""
    if m.profile is None or m.alone is None:
        return []
    now, alone = ceiling_values(m.profile), ceiling_values(m.alone)
    return [Flag(m.rank, m.host, "shared", f"{m.label}: {c} {fmt_ceiling(c, now[c])} measured with the others, "
                 f"{fmt_ceiling(c, alone[c])} alone: the shared power or PCIe budget lowered it", c, now[c], alone[c])
            for c in ceiling_order(now) if c in alone and short_of(c, now[c], alone[c], ratio)]


def fleet_report(members: Sequence[Member], ratio: float = STRAGGLER_RATIO) -> FleetReport:
    """Rows, the median row of each model, and every flag, members in rank order."""
    members = sorted(members, key=lambda m: m.rank)
    known = {m.model for m in members if m.model}
    models: dict[str, list[Member]] = {}
    for m in members:  # a member with no device name (it gave no result) joins the fleet's one model, if one
        model = m.model or (next(iter(known)) if len(known) == 1 else UNKNOWN_MODEL)
        models.setdefault(model, []).append(m)
    groups, flags = [], []
    for model, ms in models.items():
        names = {k for m in ms if m.profile is not None for k in ceiling_values(m.profile)}
        groups.append(ModelGroup(model, tuple(ms), median_row(ms), tuple(ceiling_order(names))))
        flags += straggler_flags(ms, ratio)
    for m in members:
        flags += condition_flags(m) + shared_flags(m, ratio)
    notes = []
    if len(groups) > 1:
        notes.append(f"{len(groups)} device models ({', '.join(g.model for g in groups)}): each is compared "
                     "with its own kind only")
    lonely = [g.model for g in groups if g.model != UNKNOWN_MODEL and sum(1 for m in g.members if m.comparable) < 2]
    if lonely:
        notes.append(f"no peer to compare with for {', '.join(lonely)}: fewer than two members measured to the end")
    flags.sort(key=lambda f: f.rank)
    return FleetReport(tuple(members), tuple(groups), tuple(flags), ratio, tuple(notes))


def fmt_ceiling(ceiling: str, value: float) -> str:
    """GB/s for bandwidth, TFLOP/s for peaks, µs for the launch floor."""
    if ceiling.startswith("B "):
        return f"{value / 1e9:.4g} GB/s"
    if ceiling.startswith("F "):
        return f"{value / 1e12:.4g} TFLOP/s"
    return f"{value * 1e6:.3g} µs"


def member_from_dict(d: Mapping[str, Any], profile: DeviceProfile | None,
                     alone: DeviceProfile | None = None) -> Member:
    """A member back from `Member.to_dict` (as a fleet run keeps it), with its profile read separately."""
    def num(k: str) -> float | None:
        v = d.get(k)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    lr = d.get("local_rank")
    return Member(
        rank=int(d["rank"]), host=str(d.get("host", "")), device=str(d.get("device", "")),
        model=str(d.get("model") or ""), profile=profile, status=str(d.get("status", "complete")),
        error=str(d.get("error", "")), run_id=d.get("run_id") if isinstance(d.get("run_id"), str) else None,
        local_rank=int(lr) if isinstance(lr, int) else None, sm_clock_mhz=num("sm_clock_mhz"),
        power_w=num("power_w"), power_limit_w=num("power_limit_w"), max_temperature_c=num("max_temperature_c"),
        throttle=tuple(str(x) for x in d.get("throttle") or ()), processes=tuple(str(x) for x in d.get("processes") or ()),
        wall_s=num("wall_s"), alone=alone,
    )


def run_conditions(samples: Iterable[Any]) -> dict[str, Any]:
    """What a member ran under, from its samples' recorded conditions: mean SM clock and power, the
    power limit, the hottest temperature, every throttle reason seen."""
    clocks: list[float] = []
    powers: list[float] = []
    limits: list[float] = []
    temps: list[float] = []
    reasons: set[str] = set()
    for s in samples:
        c = s.conditions if isinstance(getattr(s, "conditions", None), Mapping) else {}
        for key, into in (("mean_sm_clock_mhz", clocks), ("mean_power_w", powers), ("power_limit_w", limits),
                          ("max_temperature_c", temps)):
            v = c.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                into.append(float(v))
        reasons.update(str(r) for r in c.get("throttle") or ())
    return {
        "sm_clock_mhz": sum(clocks) / len(clocks) if clocks else None,
        "power_w": sum(powers) / len(powers) if powers else None,
        "power_limit_w": max(limits) if limits else None,
        "max_temperature_c": max(temps) if temps else None,
        "throttle": tuple(sorted(reasons)),
    }
