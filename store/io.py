"""Moving runs between machines: rooftop JSON, and the reference repository's CSVs.

JSON is rooftop's own complete format: every field of each run, its samples,
telemetry and stored profile, in SI units. Importing it into another store and
exporting again gives the same document (bar `exported_at`).

CSV is the reference repository's pair, `summary.csv` (sample points) and
`roofs.csv` (ceilings; `refcsv` says which rows rooftop adds for the roofs the
reference has no dtype for), so rooftop's measurements sit beside the
published ones. A summary.csv and a roofs.csv from one folder are one export:
importing the folder, or both files in one command, makes each `target` ONE
run with the samples of the one and the ceilings of the other. Either file
alone works too: roofs.csv gives ceilings only; summary.csv gives sample
points and, by the reference's definitions, its ceilings. `CSV_LIMITS` lists
what the CSVs cannot carry (JSON carries it all).

Run ids of imports are fixed by content (run id in JSON; a hash of the CSV
files and the target otherwise), so importing the same files twice adds
nothing. An import reads and checks every file before it writes, then adds all
their runs in one transaction: a bad file is refused in one line and leaves the
store as it was.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence, cast

from rooftop.models import plausible
from rooftop.models.calibrate import Hardware, above_roof, calibrate, case_of, label_of
from rooftop.models.profile import Ceiling, DeviceProfile
from rooftop.models.comm import COLLECTIVES, COPIES
from rooftop.models.paths import LEVELS, PATHS
from rooftop.models.sample import FAMILIES, Sample, TimeStats

from . import refcsv
from .db import StoreError
from .fleets import with_members
from .workloads import FAMILY as PROFILE_FAMILY
from .workloads import profile_problem
from .runs import HEX_RE, SHORT_ID, STATUSES, NewRun, Run, RunKind, RunStatus, Store, name_problem

FORMAT = "rooftop-runs"
FORMAT_VERSION = 1
CSV_NAMESPACE = uuid.UUID("8f7c5a1e-2b0d-4d5e-9a40-726f6f66746f")  # fixes CSV-import run ids by content
IMPORT_FORMATS = ("rooftop JSON (from `rooftop export --format json`), the reference summary.csv and roofs.csv, "
                  "or a folder holding them")
CSV_LIMITS = (
    "CSV carries measurements only (a profile or comm run exports as JSON), and cannot carry a run's id, host, backend, plan, versions, status or times, its telemetry, points that were "
    "skipped, each point's minimum time, repeats, calls, conditions and shape beyond m/n/k/reps, nor device facts "
    "besides the name and L2 size; an imported CSV run gets an id of its own and ceilings marked imported "
    "(its launch overhead comes back from the launch points). JSON keeps everything."
)
SUMMARY, ROOFS = "summary.csv", "roofs.csv"
# What one import may hold, all its files together: a full measurement keeps a few thousand samples and a
# profile its op groups, so this is far beyond any export, and keeps `rooftop show` and the views quick.
MAX_IMPORT_SAMPLES = 100_000
MAX_IMPORT_TELEMETRY = 100_000
IMPORT_LIMITS = (f"One import holds at most {MAX_IMPORT_SAMPLES:,} samples and {MAX_IMPORT_TELEMETRY:,} telemetry "
                 "rows, all its files together.")
PAIR = f"{SUMMARY} + {ROOFS}"


class ImportFailed(StoreError):
    """A file that cannot be imported; one line naming the file, what is wrong, and what is accepted."""


class Malformed(TypeError):
    """A run of a JSON file whose shape is wrong (text where an object belongs, …); the message says which."""


@dataclass
class Source:
    """What one file (or one summary.csv + roofs.csv pair) holds, read and checked but not yet stored."""

    path: str
    kind: str  # "json", "summary.csv", "roofs.csv", "summary.csv + roofs.csv"
    runs: list[NewRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was left out, for the user to see


@dataclass
class ImportResult:
    """What one import did: runs added, and runs already in the store (left as they were)."""

    path: str
    kind: str
    added: list[Run] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # ids already present
    notes: list[str] = field(default_factory=list)


# -- JSON ----------------------------------------------------------------------------


def run_document(store: Store, run: Run) -> dict[str, Any]:
    """One run with everything the store holds about it."""
    profile = store.stored_profile(run.id)
    return {
        "id": run.id,
        "name": run.name,
        "device_key": run.device_key,
        "host": run.host,
        "device": dict(run.device),
        "backend": run.backend,
        "versions": dict(run.versions),
        "plan": run.plan,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "status": run.status,
        "imported_from": run.imported_from,
        "profile": profile.to_dict() if profile else None,
        "samples": [s.to_dict() for s in store.samples(run.id)],
        "telemetry": store.telemetry(run.id),
    }


def measurement_document(store: Store, run: Run) -> dict[str, Any]:
    """A kept measurement as `rooftop measure --json` printed it (what its HTML report is made of): its ceilings,
    samples and device facts, how long it took, and the points above their roof or taken while the GPU throttled."""
    profile = store.stored_profile(run.id)
    samples = store.samples(run.id)
    return {
        "profile": profile.to_dict() if profile else {},
        "samples": [s.to_dict() for s in samples],
        "device_info": dict(run.device),
        "plan": run.plan,
        "notes": [],
        "above_roof": [label_of(s) for s in above_roof(samples, profile)] if profile else [],
        "wall_s": (run.ended_at - run.started_at) if run.ended_at else None,
        "status": run.status,
        "run_id": run.id,
        "throttled": [label_of(s) for s in samples if s.conditions.get("throttle")],
    }


def export_json(store: Store, runs: Iterable[Run]) -> dict[str, Any]:
    """The runs as one document; a fleet run brings its member runs (see `fleets.with_members`)."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported_at": time.time(),
        "runs": [run_document(store, r) for r in with_members(store, runs)],
    }


def _text(d: dict[str, Any], key: str, default: str | None = None) -> str:
    """A text field: a string (JSON has no other way to write one); absent gives `default`."""
    v = d.get(key, default) if default is not None else d[key]
    if not isinstance(v, str):
        raise Malformed(f"{key} = {plausible.shown(v)} is not text")
    return v


def _mapping(d: dict[str, Any], key: str) -> dict[str, Any]:
    v = d.get(key, {})
    if not isinstance(v, dict):
        raise Malformed(f"{key} = {plausible.shown(v)} is not an object")
    return dict(v)


def _json_run(d: dict[str, Any], source: str) -> NewRun:
    """One run of a rooftop JSON export; KeyError/TypeError/ValueError… when a field is missing or wrong.

    A run's fields are taken as JSON typed them (no number for text, no text for a time):
    what the file says is checked by `run_problem`, not coerced into something it did not say.
    """
    if not isinstance(d, dict):
        raise Malformed(f"a run must be an object, not {plausible.shown(d)}")
    name = d.get("name")
    run = Run(
        id=_text(d, "id").lower(),
        name=_text(d, "name") if name is not None else None,
        device_key=_text(d, "device_key"),
        host=_text(d, "host", ""),
        device=_mapping(d, "device"),
        backend=_text(d, "backend", ""),
        versions=_mapping(d, "versions"),
        plan=_text(d, "plan", ""),
        started_at=d["started_at"],
        ended_at=d.get("ended_at"),
        status=cast(RunStatus, _text(d, "status")),  # any text: `run_problem` refuses one not in STATUSES
        imported_from=Path(source).name,
    )
    if not isinstance(d.get("telemetry", []), list) or not isinstance(d.get("samples", []), list):
        raise Malformed("samples and telemetry must be lists")
    telemetry = [t if isinstance(t, dict) else _not_object("a telemetry row", t) for t in d.get("telemetry", [])]
    samples = [_json_sample(s, i) for i, s in enumerate(d.get("samples", []), start=1)]
    profile = d.get("profile")
    if profile is not None and not isinstance(profile, dict):
        raise Malformed(f"profile = {plausible.shown(profile)} is not an object")
    if profile:
        _check_profile(profile)
    return NewRun(run, samples, telemetry, DeviceProfile.from_dict(profile) if profile else None)


def _not_object(what: str, v: Any) -> dict[str, Any]:
    raise Malformed(f"{what} must be an object, not {plausible.shown(v)}")


STAT_FIELDS = tuple(f.name for f in dataclasses.fields(TimeStats))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _number_field(d: dict[str, Any], key: str, where: str, required: bool = True) -> None:
    """`d[key]` must be a number as JSON writes one (text such as "fast" is not one); null where not required."""
    if key not in d or d[key] is None:
        if required:
            raise Malformed(f"{where} has no {key} (a number)")
        return
    if not _is_number(d[key]):
        raise Malformed(f"{where} {key} = {plausible.shown(d[key])} is not a number")


def _text_field(d: dict[str, Any], key: str, where: str, nullable: bool = False) -> None:
    v = d.get(key)
    if not isinstance(v, str) and not (v is None and (nullable or key not in d)):
        raise Malformed(f"{where} {key} = {plausible.shown(v)} is not text")


def _check_stats(st: Any, where: str) -> None:
    """A sample's stats: null (a skipped point), or an object of exactly STAT_FIELDS, each a number."""
    if st is None:
        return
    if not isinstance(st, dict):
        raise Malformed(f"{where} stats = {plausible.shown(st)} is not an object")
    unknown = [k for k in st if k not in STAT_FIELDS]
    if unknown:
        raise Malformed(f"{where} stats has an unknown field {plausible.shown(unknown[0])} "
                        f"(its fields: {', '.join(STAT_FIELDS)})")
    for k in STAT_FIELDS:
        if not (k == "iqr_ratio" and k in st and st[k] is None):  # null: infinite (JSON has no infinity)
            _number_field(st, k, f"{where} stats")


def _check_sample_fields(d: dict[str, Any], where: str) -> None:
    """Each field of an exported sample of the type export writes it, named with what it must be when not."""
    for key in ("family", "dtype"):
        if not isinstance(d.get(key), str):
            raise Malformed(f"{where} " + (f"{key} = {plausible.shown(d[key])} is not text" if key in d
                                           else f"has no {key} (text)"))
    for key in ("cache", "skipped"):
        _text_field(d, key, where)
    _text_field(d, "path", where, nullable=True)
    for key in ("flops", "bytes"):
        _number_field(d, key, where)
    for key in ("footprint_bytes", "max_error"):
        _number_field(d, key, where, required=False)
    shape = d.get("shape", {})
    if not isinstance(shape, dict):
        raise Malformed(f"{where} shape = {plausible.shown(shape)} is not an object of sizes")
    bad = next((p for k, v in shape.items() if (p := plausible.whole_problem(f"shape {k}", v))), None)
    if bad:
        raise Malformed(f"{where} {bad}")
    if not isinstance(d.get("conditions", {}), dict):
        raise Malformed(f"{where} conditions = {plausible.shown(d['conditions'])} is not an object")
    _check_stats(d.get("stats"), where)


def _json_sample(d: Any, i: int = 1) -> Sample:
    """A sample as exported; a null iqr_ratio (JSON has no infinity) reads as infinite: unstable."""
    if not isinstance(d, dict):
        _not_object(f"sample {i}", d)
    _check_sample_fields(d, f"sample {i}")
    st = d.get("stats")
    if isinstance(st, dict) and "iqr_ratio" in st and st["iqr_ratio"] is None:
        d = {**d, "stats": {**st, "iqr_ratio": math.inf}}
    return Sample.from_dict(d)


def _check_roofs(p: dict[str, Any], kind: str) -> None:
    """A profile's `bandwidth` / `peak`: an object of numbers (or, in the older form, of {value, source, …})."""
    given = p.get(kind, {})
    if not isinstance(given, dict):
        raise Malformed(f"profile {kind} = {plausible.shown(given)} is not an object of {kind} by name")
    for k, v in given.items():
        if isinstance(v, dict):
            _number_field(v, "value", f"profile {kind} {k}")
            _text_field(v, "source", f"profile {kind} {k}")
        elif not _is_number(v):
            raise Malformed(f"profile {kind} {k} = {plausible.shown(v)} is not a number")


def _check_profile(p: dict[str, Any]) -> None:
    """A stored profile's fields of the types `DeviceProfile.to_dict` writes; which one is wrong, by name."""
    _check_roofs(p, "bandwidth")
    _check_roofs(p, "peak")
    _number_field(p, "launch_overhead", "profile", required=False)
    prov = p.get("ceilings") or {}
    if not isinstance(prov, dict):
        raise Malformed(f"profile ceilings = {plausible.shown(prov)} is not an object "
                        "(bandwidth, peak, launch_overhead: where each number came from)")
    for kind, v in prov.items():
        by_name = kind in ("bandwidth", "peak")
        entries = v.values() if by_name and isinstance(v, dict) else [v]
        if not isinstance(v, dict) or not all(isinstance(e, dict) for e in entries):
            raise Malformed(f"profile ceilings {kind} = {plausible.shown(v)} is not "
                            + ("an object of {source, case, stable} objects" if by_name
                               else "a {source, case, stable} object"))
    if not isinstance(p.get("extra", {}), dict):
        raise Malformed(f"profile extra = {plausible.shown(p['extra'])} is not an object")


DEVICE_FACTS = ("l2_bytes", "memory_bytes", "sm_count", "power_limit_w")  # what views read from a run's device


# The sample families a run of each kind holds: a profile's op groups, a comm sweep's collectives and host
# copies, a measurement's kernels (models.sample.FAMILIES; a fleet's samples are its members', as measured).
KIND_FAMILIES: dict[RunKind, tuple[str, ...]] = {"measurement": FAMILIES, "profile": (PROFILE_FAMILY,),
                                                 "comm": (*COLLECTIVES, *COPIES), "fleet": FAMILIES}


def families_of(kind: RunKind) -> tuple[str, ...]:
    """The sample families a run of `kind` may hold (KIND_FAMILIES)."""
    return KIND_FAMILIES[kind]


def _unknown_in_sample(s: Sample, kind: RunKind) -> str | None:
    """A family the run's kind does not hold, or a compute path rooftop does not define, in words."""
    families = families_of(kind)
    if s.family not in families:
        return f"an unknown family {plausible.shown(s.family)} (a {kind} run's are: {', '.join(families)})"
    if s.path and s.path not in PATHS:
        return f"an unknown compute path {plausible.shown(s.path)} (one of: {', '.join(PATHS)})"
    return None


def _unknown_ceiling(profile: DeviceProfile) -> str | None:
    """A slope of a memory level, or a roof of a compute path, that rooftop does not define, in words."""
    level = next((k for k in profile.bandwidth if k not in LEVELS), None)
    if level is not None:
        return f"a bandwidth of an unknown memory level {plausible.shown(level)} (one of: {', '.join(LEVELS)})"
    path = next((k for k in profile.peak if k not in PATHS), None)
    if path is not None:
        return f"a peak of an unknown compute path {plausible.shown(path)} (one of: {', '.join(PATHS)})"
    return None


def run_problem(item: NewRun) -> str | None:
    """What makes a run from a file impossible to keep, in words; None when it is fine.

    One place for every field (the values' own rules are in models.plausible), used for JSON and
    CSV alike, so nothing a view or a formula cannot use reaches the store.
    """
    run, profile = item.run, item.profile
    if len(run.id) != 32 or any(c not in "0123456789abcdef" for c in run.id):
        return f"has a bad id {run.id!r} (32 hex digits expected)"
    if run.status not in STATUSES:
        return f"has an unknown status {plausible.shown(run.status)} (one of: {', '.join(STATUSES)})"
    checks = [plausible.when_problem("started_at", run.started_at),
              plausible.optional(plausible.when_problem("ended_at", run.ended_at), run.ended_at)]
    checks += [plausible.fact_problem(f"device {k}", run.device.get(k)) if k != "power_limit_w" else
               plausible.fact_problem(k, run.device.get(k)) for k in DEVICE_FACTS]
    checks += [plausible.free_problem("device", dict(run.device)), plausible.free_problem("versions", dict(run.versions))]
    for i, t in enumerate(item.telemetry, start=1):
        checks += [plausible.free_problem(f"telemetry row {i}", dict(t)),
                   plausible.when_problem(f"telemetry row {i} t", t["t"]) if "t" in t else None]
    bad = next((c for c in checks if c), None)
    if bad:
        return f"has an impossible value: {bad}"
    for i, s in enumerate(item.samples, start=1):
        problem = plausible.sample_problem(s)
        if problem:
            return f"sample {i} has an impossible value: {problem}"
        problem = _unknown_in_sample(s, run.kind)
        if problem:
            return f"sample {i} has {problem}"
    if run.kind == "profile":
        problem = profile_problem(run, item.samples)
        if problem:
            return f"is a malformed profile: {problem}"
    if profile is not None:
        unknown = _unknown_ceiling(profile)
        if unknown:
            return f"has {unknown}"
        roofs = [("bandwidth", k, c) for k, c in profile.bandwidth.items()]
        roofs += [("peak", k, c) for k, c in profile.peak.items()]
        roofs += [("launch", "overhead", profile.launch_overhead)] if profile.launch_overhead else []
        bad = next((p for kind, k, c in roofs if (p := plausible.ceiling_problem(kind, k, c.value))), None)
        if bad:
            return f"has an impossible ceiling: {bad}"
        bad = next((p for k in plausible.FACTS if (p := plausible.fact_problem(k, getattr(profile, k)))), None)
        if bad:
            return f"has an impossible device fact: {bad}"
    return None


def _without_bad_name(item: NewRun, notes: list[str]) -> NewRun:
    """The run with its name dropped, and a note saying so, when the name breaks the rule for names."""
    name = item.run.name
    problem = name_problem(name) if name is not None else None
    if problem is None:
        return item
    notes.append(f"run {item.run.id[:SHORT_ID]}: name {plausible.shown(name)} dropped (a name must {problem}); "
                 "the run is kept, reachable by its id" if problem.startswith("start") else
                 f"run {item.run.id[:SHORT_ID]}: name {plausible.shown(name)} dropped ({problem}); "
                 "the run is kept, reachable by its id")
    return dataclasses.replace(item, run=dataclasses.replace(item.run, name=None))


def _json_kind(doc: Any) -> str:
    """What a JSON document that is not an object is, in words: `null`, a list, a number, …"""
    if doc is None or isinstance(doc, bool):
        return "null" if doc is None else str(doc).lower()
    kinds: dict[type, str] = {list: "a list", str: "a string"}
    return kinds.get(type(doc), "a number")


def _refuse_too_many(where: Path | str, samples: int, telemetry: int) -> None:
    """More samples or telemetry rows than one import takes (IMPORT_LIMITS): refused in one line."""
    for n, limit, what in ((samples, MAX_IMPORT_SAMPLES, "samples"), (telemetry, MAX_IMPORT_TELEMETRY, "telemetry rows")):
        if n > limit:
            raise ImportFailed(f"{where}: holds {n:,} {what}; one import takes at most {limit:,} {what}: "
                               "export fewer runs per file (`rooftop export RUN`) and import the files one by one")


def _listed(runs: list[Any], key: str) -> int:
    """How many items the runs' `key` lists hold: counted before any item is read."""
    return sum(len(r[key]) for r in runs if isinstance(r, dict) and isinstance(r.get(key), list))


def _json_source(p: Path, text: str) -> Source:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFailed(f"{p}: invalid JSON ({exc.msg} at line {exc.lineno}); accepted: {IMPORT_FORMATS}") from None
    except RecursionError:
        raise ImportFailed(f"{p}: JSON nested too deeply to be a rooftop export; accepted: {IMPORT_FORMATS}") from None
    except ValueError:  # an integer of more digits than Python converts (4300)
        raise ImportFailed(f"{p}: JSON with a number of more than 4300 digits, which no export writes; "
                           f"accepted: {IMPORT_FORMATS}") from None
    if not isinstance(doc, dict):
        raise ImportFailed(f"{p}: the JSON is {_json_kind(doc)}, not a rooftop export (an object with \"format\": "
                           f"\"{FORMAT}\"); accepted: {IMPORT_FORMATS}")
    if doc.get("format") != FORMAT:
        raise ImportFailed(f"{p}: JSON but not a rooftop export (no \"format\": \"{FORMAT}\"); accepted: {IMPORT_FORMATS}")
    version = doc.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ImportFailed(f"{p}: format_version {version!r} is not a whole number")
    if version > FORMAT_VERSION:
        raise ImportFailed(f"{p}: written by a newer rooftop (format {version}, this one reads {FORMAT_VERSION}); "
                           "upgrade rooftop")
    if not isinstance(doc.get("runs", []), list):
        raise ImportFailed(f"{p}: \"runs\" must be a list of runs")
    runs = doc.get("runs", [])
    _refuse_too_many(p, _listed(runs, "samples"), _listed(runs, "telemetry"))
    source = Source(str(p), "json")
    for i, d in enumerate(doc.get("runs", []), start=1):
        try:
            item = _json_run(d, str(p))
        except KeyError as exc:
            raise ImportFailed(f"{p}: run {i} is malformed (no {exc} field)") from None
        except Malformed as exc:
            raise ImportFailed(f"{p}: run {i} is malformed ({exc})") from None
        except ValueError as exc:  # a value the checks (models.plausible) refuse, or text that is not a number
            raise ImportFailed(f"{p}: run {i} has an impossible value: {exc}") from None
        except (TypeError, AttributeError, OverflowError, RecursionError):  # a shape the checks above did not foresee
            raise ImportFailed(f"{p}: run {i} is malformed (a field holds a value of another kind than "
                               "`rooftop export` writes there); export the run again") from None
        problem = run_problem(item)
        if problem:
            raise ImportFailed(f"{p}: run {i} ({item.run.id[:8]}) {problem}")
        source.runs.append(_without_bad_name(item, source.notes))
    return source


# -- CSV export ----------------------------------------------------------------------


def _csv_text(rows: list[dict[str, str]], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows({k: refcsv.csv_cell(v) for k, v in row.items()} for row in rows)
    return buf.getvalue()


def csv_target(run: Run) -> str:
    """The `target` a run gets in the CSVs: the reference's own for a CSV import, else the run's label."""
    return str(run.device.get("target") or run.label) if run.backend == "reference-csv" else run.label


def _targets(runs: Iterable[Run]) -> list[tuple[Run, str]]:
    """Each run with a target no other run of the export has (an import would merge runs sharing one)."""
    used: set[str] = set()
    out = []
    for run in runs:
        target = next(t for t in (csv_target(run), run.label, run.id) if t not in used)
        used.add(target)
        out.append((run, target))
    return out


def export_csv(store: Store, runs: Iterable[Run]) -> dict[str, str]:
    """The reference pair for the runs: {'summary.csv': text, 'roofs.csv': text}. `target`: see csv_target.
    A fleet run has no points or ceilings of its own: its members' are written."""
    summary: list[dict[str, str]] = []
    roofs: list[dict[str, str]] = []
    for run, target in _targets(with_members(store, runs)):
        profile = store.stored_profile(run.id)
        l2 = (profile.l2_bytes if profile else None) or run.device.get("l2_bytes")
        l2 = None if plausible.fact_problem("l2_bytes", l2) else l2  # a store older than the checks may hold text
        summary += refcsv.summary_rows(target, run.device_name, l2, store.samples(run.id))
        if profile:
            roofs += refcsv.roofs_rows(target, profile)
    return {
        SUMMARY: _csv_text(summary, refcsv.SUMMARY_COLUMNS),
        ROOFS: _csv_text(roofs, refcsv.ROOFS_COLUMNS),
    }


# -- CSV import --------------------------------------------------------------------------


@dataclass
class CsvFile:
    """One reference CSV, read and checked: summary.csv's groups by target, or roofs.csv's roofs by target."""

    path: Path
    kind: str  # SUMMARY or ROOFS
    digest: str  # of the file's bytes: fixes the ids of the runs it gives
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # summary.csv: see refcsv.group_summary
    roofs: dict[str, refcsv.Roofs] = field(default_factory=dict)  # roofs.csv
    notes: list[str] = field(default_factory=list)


def read_csv(p: Path, text: str, digest: str) -> CsvFile:
    """Tell summary.csv from roofs.csv by their columns and read every row; ImportFailed naming the row."""
    try:
        reader = csv.DictReader(io.StringIO(text))
        header = [h.strip() for h in reader.fieldnames or []]
        reader.fieldnames = header
        rows = [{k: refcsv.csv_value(v) if isinstance(v, str) else v for k, v in r.items()}
                for r in reader if any((v or "").strip() for v in r.values() if isinstance(v, str))]
        if set(refcsv.ROOFS_COLUMNS[:4]) <= set(header):
            roofs, notes = refcsv.read_roofs(rows)
            return CsvFile(p, ROOFS, digest, roofs=roofs, notes=notes)
        if set(refcsv.SUMMARY_REQUIRED) <= set(header):
            return CsvFile(p, SUMMARY, digest, groups=refcsv.group_summary(rows))
    except refcsv.CsvFormatError as exc:
        raise ImportFailed(f"{p}: {exc}") from None
    except csv.Error as exc:
        raise ImportFailed(f"{p}: not a readable CSV ({exc}); accepted: {IMPORT_FORMATS}") from None
    raise ImportFailed(f"{p}: unrecognised columns ({', '.join(header[:6]) or 'none'}…); accepted: {IMPORT_FORMATS}")


def _csv_run(kind: str, target: str, digest: str, device: dict[str, Any], source: str, now: float) -> Run:
    return Run(
        id=uuid.uuid5(CSV_NAMESPACE, f"{kind}\n{digest}\n{target}").hex,
        name=_import_name(target),
        device_key=f"reference-csv/{target}",
        host="",
        device=device,
        backend="reference-csv",
        plan=kind,
        started_at=now,
        ended_at=now,
        status="complete",
        imported_from=source,
    )


def _import_name(target: str) -> str | None:
    """A readable name for a CSV import: 'h100-imported'; 'run-298d77dc-imported' for a run exported by id.

    Dropped on insert when another run has it; the run stays reachable by id.
    """
    by_id = len(target) == SHORT_ID and HEX_RE.fullmatch(target)  # an unnamed run's label
    base = f"run-{target}" if by_id or not target[:1].isalpha() else target
    return None if name_problem(f"{base}-imported") else f"{base}-imported"


def _summary_source(f: CsvFile, now: float) -> Source:
    """summary.csv alone: each target's points, and ceilings by the reference's definitions."""
    source = Source(str(f.path), SUMMARY)
    for target, g in f.groups.items():
        device = {"name": g["device"], "target": target, "l2_bytes": g["l2_bytes"]}
        bandwidth, peak = refcsv.reference_ceilings(g["samples"])
        prof = DeviceProfile(id=target, name=g["device"], source="imported", bandwidth=bandwidth, peak=peak,
                             l2_bytes=g["l2_bytes"]) if (bandwidth or peak) else None
        run = _csv_run(SUMMARY, target, f.digest, device, f.path.name, now)
        source.runs.append(NewRun(run, g["samples"], (), prof))
    return source


def _roofs_source(f: CsvFile, now: float) -> Source:
    """roofs.csv alone: each target's ceilings, no points."""
    source = Source(str(f.path), ROOFS, notes=list(f.notes))
    for target, r in f.roofs.items():
        prof = DeviceProfile(id=target, name=target, source="imported", bandwidth=r.bandwidth, peak=r.peak)
        run = _csv_run(ROOFS, target, f.digest, {"name": target, "target": target}, f.path.name, now)
        source.runs.append(NewRun(run, (), (), prof))
    return source


def _stability(c: Ceiling, samples: Sequence[Sample], path: str | None) -> Ceiling:
    """roofs.csv has no column for a ceiling's stability; its points in summary.csv do (their IQR)."""
    same = [s for s in samples if s.stats and case_of(s) == c.case and (path is None or s.path == path)]
    return c if not same or any(s.stable for s in same) else dataclasses.replace(c, stable=False)


def _pair_profile(
    target: str, name: str, l2: float | None, samples: Sequence[Sample], r: refcsv.Roofs
) -> DeviceProfile:
    """roofs.csv's ceilings as they were, plus what calibration gets back from the points: the launch
    overhead and the list of unstable points (the device kind only moves B, which roofs.csv gives)."""
    cal = calibrate(samples, Hardware(kind="gpu", name=name, l2_bytes=l2)).profile
    launch = dataclasses.replace(cal.launch_overhead, source="imported") if cal.launch_overhead else None
    return DeviceProfile(
        id=target, name=name, source="imported", l2_bytes=l2, launch_overhead=launch, extra=dict(cal.extra),
        bandwidth={k: _stability(c, samples, None) for k, c in r.bandwidth.items()},
        peak={k: _stability(c, samples, k) for k, c in r.peak.items()},
    )


def _pair_source(summary: CsvFile, roofs: CsvFile, now: float) -> Source:
    """One export: per target, ONE run with summary.csv's points and roofs.csv's ceilings."""
    source = Source(f"{summary.path} + {roofs.path}", PAIR, notes=list(roofs.notes))
    digest = f"{summary.digest}\n{roofs.digest}"
    for target in dict.fromkeys([*summary.groups, *roofs.roofs]):
        g = summary.groups.get(target, {"device": target, "l2_bytes": None, "samples": []})
        r = roofs.roofs.get(target)
        device = {"name": g["device"], "target": target, "l2_bytes": g["l2_bytes"]}
        prof = _pair_profile(target, g["device"], g["l2_bytes"], g["samples"], r) if r else None
        run = _csv_run(PAIR, target, digest, device, f"{summary.path.name} + {roofs.path.name}", now)
        source.runs.append(NewRun(run, g["samples"], (), prof))
    return source


def _csv_sources(files: list[CsvFile], now: float) -> list[Source]:
    """The CSVs of one folder: a summary.csv with a roofs.csv is one pair; otherwise each file on its own."""
    summaries = [f for f in files if f.kind == SUMMARY]
    roofs = [f for f in files if f.kind == ROOFS]
    if summaries and roofs:
        if len(summaries) > 1 or len(roofs) > 1:
            raise ImportFailed(
                f"{files[0].path.parent}: {len(summaries)} summary.csv and {len(roofs)} roofs.csv files from one "
                "folder; a folder's summary.csv and roofs.csv import together, so give one pair at a time"
            )
        return [_pair_source(summaries[0], roofs[0], now)]
    return [_summary_source(f, now) if f.kind == SUMMARY else _roofs_source(f, now) for f in files]


# -- import ------------------------------------------------------------------------------


def _files(paths: Iterable[str | Path]) -> list[Path]:
    """The files to read: each path, a folder as its summary.csv and roofs.csv; each file once."""
    out: dict[Path, Path] = {}
    for p in map(Path, paths):
        found = [f for f in (p / SUMMARY, p / ROOFS) if f.is_file()] if p.is_dir() else [p]
        if not found:
            raise ImportFailed(f"{p}: a folder without {SUMMARY} or {ROOFS}; a folder import reads the pair "
                               "`rooftop export --format csv` writes")
        for f in found:
            out.setdefault(f.resolve(), f)
    return list(out.values())


def _read_text(p: Path) -> tuple[str, str]:
    """The file's text and the digest of its bytes."""
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ImportFailed(f"cannot read {p}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig"), hashlib.sha256(raw).hexdigest()
    except UnicodeDecodeError:
        raise ImportFailed(f"{p}: not a text file; accepted: {IMPORT_FORMATS}") from None


def read_sources(paths: Iterable[str | Path]) -> list[Source]:
    """Read and check every file (format from content) without touching a store; ImportFailed on the first problem."""
    now = time.time()
    order: list[Source | Path] = []
    folders: dict[Path, list[CsvFile]] = {}
    for p in _files(paths):
        text, digest = _read_text(p)
        if not text.strip():
            raise ImportFailed(f"{p}: the file is empty; accepted: {IMPORT_FORMATS}")
        if p.suffix.lower() == ".json" or text.lstrip().startswith(("{", "[")):
            order.append(_json_source(p, text))  # a .json file is read as JSON, and refused for JSON's reasons
            continue
        f = read_csv(p, text, digest)
        folder = p.resolve().parent
        if folder not in folders:
            order.append(folder)
        folders.setdefault(folder, []).append(f)
    sources = [s for item in order for s in ([item] if isinstance(item, Source) else _csv_sources(folders[item], now))]
    items = [item for source in sources for item in source.runs]  # all files together
    _refuse_too_many(", ".join(s.path for s in sources), sum(len(i.samples) for i in items),
                     sum(len(i.telemetry) for i in items))
    for source in sources:  # JSON runs were checked as they were read; the CSVs' runs here, by the same rules
        for item in source.runs:
            problem = run_problem(item) if source.kind != "json" else None
            if problem:
                target = item.run.device.get("target", item.run.id[:8])
                raise ImportFailed(f"{source.path}: target {target!r} {problem}")
    return sources


def add_sources(store: Store, sources: Sequence[Source]) -> list[ImportResult]:
    """Store what `read_sources` read: all runs in one transaction, or nothing; runs already present are kept."""
    added = iter(store.insert_runs([item for s in sources for item in s.runs]))
    results = []
    for s in sources:
        res = ImportResult(s.path, s.kind, notes=list(s.notes))
        for item in s.runs:
            if not next(added):
                res.skipped.append(item.run.id)
                continue
            run = store.run(item.run.id)
            res.added.append(run)
            if item.run.name and run.name != item.run.name and s.kind == "json":  # a CSV's own names are told apart
                res.notes.append(f"run {run.short_id}: name {plausible.shown(item.run.name)} dropped (another run "
                                 "has it); the run is kept, reachable by its id")
        results.append(res)
    return results


def import_paths(store: Store, paths: Iterable[str | Path]) -> list[ImportResult]:
    """Import files and folders: every file is read and checked before anything is stored."""
    return add_sources(store, read_sources(paths))


def import_file(store: Store, path: str | Path) -> ImportResult:
    """Import one file (or a folder holding a CSV export) in one transaction."""
    return import_paths(store, [path])[0]
