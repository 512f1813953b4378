"""Moving runs between machines: rooftop JSON, and the reference repository's CSVs.

JSON is rooftop's own complete format: every field of each run, its samples,
telemetry and stored profile, in SI units. Importing it into another store and
exporting again gives the same document (bar `exported_at`).

CSV is the reference repository's pair, `summary.csv` (sample points) and
`roofs.csv` (ceilings), so rooftop's measurements sit beside the published
ones. Importing either makes each `target` a run: roofs.csv rows give its
ceilings; summary.csv rows give its sample points and, by the reference's
definitions, its ceilings.

Run ids of imports are fixed by content (run id in JSON; a hash of the CSV
file and the target otherwise), so importing the same file twice adds nothing.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import hashlib
import io
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from rooftop.models.profile import DeviceProfile
from rooftop.models.sample import Sample

from . import refcsv
from .db import StoreError
from .runs import Run, Store, name_problem

FORMAT = "rooftop-runs"
FORMAT_VERSION = 1
CSV_NAMESPACE = uuid.UUID("8f7c5a1e-2b0d-4d5e-9a40-726f6f66746f")  # fixes CSV-import run ids by content
IMPORT_FORMATS = "rooftop JSON (from `rooftop export --format json`), the reference roofs.csv or summary.csv"


class ImportFailed(StoreError):
    """A file that cannot be imported; one line naming the file, what is wrong, and what is accepted."""


@dataclass
class ImportResult:
    """What one import did: runs added, and runs already in the store (left as they were)."""

    path: str
    kind: str  # "json", "roofs.csv", "summary.csv"
    added: list[Run] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # ids already present


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


def export_json(store: Store, runs: Iterable[Run]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported_at": time.time(),
        "runs": [run_document(store, r) for r in runs],
    }


def _runs_from_json(doc: Any, source: str) -> list[tuple[Run, list[Sample], list[dict[str, Any]], DeviceProfile | None]]:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ImportFailed(f"{source}: JSON but not a rooftop export (no \"format\": \"{FORMAT}\"); accepted: {IMPORT_FORMATS}")
    if int(doc.get("format_version", 0)) > FORMAT_VERSION:
        raise ImportFailed(
            f"{source}: written by a newer rooftop (format {doc.get('format_version')}, this one reads "
            f"{FORMAT_VERSION}); upgrade rooftop"
        )
    out = []
    for i, d in enumerate(doc.get("runs", [])):
        try:
            run = Run(
                id=str(d["id"]).lower(),
                name=d.get("name"),
                device_key=str(d["device_key"]),
                host=str(d.get("host", "")),
                device=dict(d.get("device", {})),
                backend=str(d.get("backend", "")),
                versions=dict(d.get("versions", {})),
                plan=str(d.get("plan", "")),
                started_at=float(d["started_at"]),
                ended_at=float(d["ended_at"]) if d.get("ended_at") is not None else None,
                status=str(d["status"]),
                imported_from=Path(source).name,
            )
            samples = [Sample.from_dict(s) for s in d.get("samples", [])]
            telemetry = [dict(t) for t in d.get("telemetry", [])]
            profile = DeviceProfile.from_dict(d["profile"]) if d.get("profile") else None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ImportFailed(f"{source}: run {i + 1} is malformed ({type(exc).__name__}: {exc})") from None
        if len(run.id) != 32 or any(c not in "0123456789abcdef" for c in run.id):
            raise ImportFailed(f"{source}: run {i + 1} has a bad id {run.id!r} (32 hex digits expected)")
        if run.status not in ("running", "complete", "cancelled", "failed", "interrupted"):
            raise ImportFailed(f"{source}: run {run.id[:8]} has an unknown status {run.status!r}")
        if run.name and name_problem(run.name):
            run = dataclasses.replace(run, name=None)  # never shadow a device or an id (as rename refuses to)
        if profile is not None:
            bad = [f"{kind} {k} = {c.value!r}" for kind, table in (("B", profile.bandwidth), ("F", profile.peak))
                   for k, c in table.items() if not (math.isfinite(c.value) and c.value > 0)]
            if bad:
                raise ImportFailed(f"{source}: run {run.id[:8]} has impossible ceilings ({', '.join(bad[:3])}); "
                                   "roofs must be positive, finite numbers")
        out.append((run, samples, telemetry, profile))
    return out


# -- CSV -------------------------------------------------------------------------------


def _csv_text(rows: list[dict[str, str]], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def csv_target(run: Run) -> str:
    """The `target` a run gets in the CSVs: the reference's own for a CSV import, else the run's label."""
    return str(run.device.get("target") or run.label) if run.backend == "reference-csv" else run.label


def export_csv(store: Store, runs: Iterable[Run]) -> dict[str, str]:
    """The reference pair for the runs: {'summary.csv': text, 'roofs.csv': text}. `target`: see csv_target."""
    summary: list[dict[str, str]] = []
    roofs: list[dict[str, str]] = []
    for run in runs:
        target = csv_target(run)
        profile = store.stored_profile(run.id)
        l2 = (profile.l2_bytes if profile else None) or run.device.get("l2_bytes")
        summary += refcsv.summary_rows(target, run.device_name, l2, store.samples(run.id))
        if profile:
            roofs += refcsv.roofs_rows(target, profile)
    return {
        "summary.csv": _csv_text(summary, refcsv.SUMMARY_COLUMNS),
        "roofs.csv": _csv_text(roofs, refcsv.ROOFS_COLUMNS),
    }


def _csv_run(kind: str, target: str, digest: str, device: dict[str, Any], source: str, now: float) -> Run:
    return Run(
        id=uuid.uuid5(CSV_NAMESPACE, f"{kind}\n{digest}\n{target}").hex,
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


def _import_name(store: Store, target: str) -> str | None:
    """A readable default name for a CSV import: '<target>-imported' while it is free."""
    name = f"{target}-imported"
    if name_problem(name):
        return None
    try:
        store.run(name)
    except StoreError:
        return name
    return None


# -- import ------------------------------------------------------------------------------


def import_file(store: Store, path: str | Path) -> ImportResult:
    """Import one file (format detected from its content); nothing already present is duplicated."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ImportFailed(f"cannot read {p}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportFailed(f"{p}: not a text file; accepted: {IMPORT_FORMATS}") from None
    if text.lstrip().startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ImportFailed(f"{p}: invalid JSON ({exc.msg} at line {exc.lineno}); accepted: {IMPORT_FORMATS}") from None
        result = ImportResult(str(p), "json")
        for run, samples, telemetry, profile in _runs_from_json(doc, str(p)):
            (result.added.append(store.run(run.id)) if store.insert_run(run, samples, telemetry, profile)
             else result.skipped.append(run.id))
        return result
    return _import_csv(store, p, text, hashlib.sha256(raw).hexdigest())


def _import_csv(store: Store, p: Path, text: str, digest: str) -> ImportResult:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    reader.fieldnames = header
    rows = [r for r in reader if any((v or "").strip() for v in r.values() if isinstance(v, str))]
    now = time.time()
    try:
        if set(refcsv.ROOFS_COLUMNS[:4]) <= set(header):
            result = ImportResult(str(p), "roofs.csv")
            for prof in refcsv.profiles_from_roofs(rows):
                run = _csv_run("roofs.csv", prof.id, digest, {"name": prof.id, "target": prof.id}, p.name, now)
                run = dataclasses.replace(run, name=_import_name(store, prof.id))
                _add(store, result, run, [], prof)
            return result
        if set(refcsv.SUMMARY_REQUIRED) <= set(header):
            result = ImportResult(str(p), "summary.csv")
            for target, g in refcsv.group_summary(rows).items():
                device = {"name": g["device"], "target": target, "l2_bytes": g["l2_bytes"]}
                run = _csv_run("summary.csv", target, digest, device, p.name, now)
                run = dataclasses.replace(run, name=_import_name(store, target))
                bandwidth, peak = refcsv.reference_ceilings(g["samples"])
                prof = DeviceProfile(id=target, name=g["device"], source="imported", bandwidth=bandwidth, peak=peak,
                                     l2_bytes=g["l2_bytes"]) if (bandwidth or peak) else None
                _add(store, result, run, g["samples"], prof)
            return result
    except refcsv.CsvFormatError as exc:
        raise ImportFailed(f"{p}: {exc}") from None
    raise ImportFailed(
        f"{p}: unrecognised columns ({', '.join(header[:6]) or 'none'}…); accepted: {IMPORT_FORMATS}"
    )


def _add(store: Store, result: ImportResult, run: Run, samples: list[Sample], prof: DeviceProfile | None) -> None:
    if store.insert_run(run, samples, (), prof):
        result.added.append(store.run(run.id))
    else:
        result.skipped.append(run.id)
