"""A profiled program kept as a run: plan "profile", one sample per op group.

So `rooftop runs`, `show`, `export` / `import` and the History tab handle it
like any run: each op group is a Sample of family "profile" (W, Q and the
per-call time; `shape` holds the op model's dimensions) whose `conditions`
carry the rest (op name, recorded input shapes, calls, total time, regime,
bound). The step split (span, device busy, idle, MFU) is kept with the run's
device facts under "profile". A profile run has no ceilings: it is never a
device's measured profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypedDict, cast

from rooftop.models import plausible
from rooftop.models.program.critpath import CriticalPath
from rooftop.models.program.jobpath import Joined
from rooftop.models.profile import DeviceProfile
from rooftop.models.trace.launchqueue import LaunchQueue
from rooftop.models.sample import Sample, TimeStats
from rooftop.models.trace.timeline import IdleCause, StepSplit
from rooftop.models.program.workload import MEASURED, Flag, OpGroup, TopKernel, Transfer, Workload

from .critpath import PATH_KEYS, path_doc, path_problem
from .runs import PROFILE_PLAN, Run, Store

PLAN = PROFILE_PLAN
FAMILY = "profile"


class ProfileSummary(TypedDict, total=False):
    """The step split a profile run keeps with its device facts (Workload.summary(), then the source and
    notes). Read from a file or an old store, any of it may be missing: readers say n/a."""

    device: str  # the id of the roofs it was placed on
    trace_device: str
    on_device: bool
    kernels: int
    gpus: int  # the GPUs the trace's kernels ran on
    span_s: float
    device_busy_s: float
    idle_s: float
    idle_share: float | None
    op_time_s: float
    bound_s: float
    flops: float
    bytes: float
    mfu: float | None
    mfu_path: str
    bandwidth_utilisation: float | None
    step_at_roof_s: float
    step_without_gaps_s: float
    speedup_at_roof: float | None
    speedup_without_gaps: float | None
    largest_share: str  # "idle" or the top op's name
    overlap_s: float  # time two or more device activities ran at once
    transfer_time_s: float
    transfer_bytes: float
    device_note: str  # how the device was chosen, or that the trace's own has no reference here
    shares: dict[str, float]  # idle, overlap, ops, transfers: the span's split (adds up to 1)
    graph_capture: dict[str, Any]  # a replay joined to its graph capture: how much was joined (GraphJoin.to_dict)
    busy_fraction: float | None  # busy over the span: MFU and bandwidth utilisation are held within it
    headline: dict[str, Any]  # Workload.headline(): the op groups MFU and bandwidth leave out, where they were held
    coverage: dict[str, Any]  # Workload.coverage(): the kernel time with an owner (by kind) and with a W and Q model
    source: str  # the trace file, or the program's command line
    notes: list[str]
    rows: dict[str, Any]  # Workload.rows(): transfers, overlap, idle_causes, top_kernels, steps, flags
    kernel_times: str  # "measured", or "counter ranges" (a trace of CUPTI ranges: the profiler's split of its window)
    counted_by: str  # how the trace's GPU counters gave the measured W and Q; "" (or absent) without counters
    measured_flops: float | None  # the program's W and Q as counted (None: not counted for every group)
    measured_bytes: float | None
    critical_path: dict[str, Any]  # the step's critical path, what-ifs and fix first (store.critpath.path_doc)
    what_if: list[dict[str, Any]]
    fix_first: list[dict[str, Any]]


def profile_summary(run: Run) -> ProfileSummary:
    """The step split of a profile run, as stored ({} when it holds none): the one reader of it."""
    s = run.device.get("profile")
    return cast(ProfileSummary, dict(s)) if isinstance(s, Mapping) else {}


def placed_on(run: Run) -> str:
    """The id of the device whose roofs the profile was placed on ('' when not said)."""
    return str(profile_summary(run).get("device") or "")


def job_collectives(run: Run) -> list[Mapping[str, Any]]:
    """A kept distributed job's collective groups (`CollectiveGroup.to_dict`), [] for a profile of one program."""
    job = profile_summary(run).get("job")
    colls = job.get("collectives") if isinstance(job, Mapping) else None
    return [c for c in colls if isinstance(c, Mapping)] if isinstance(colls, list) else []


def _group_records(samples: Sequence[Sample]) -> list[Mapping[str, Any]]:
    """Each sample's op group as `save_profile` stored it (conditions["profile"]); samples without one left out.
    Raw: views read them typed, through `stored_groups`."""
    out = []
    for s in samples:
        g = s.conditions.get("profile") if isinstance(s.conditions, Mapping) else None
        if isinstance(g, Mapping) and g:
            out.append(g)
    return out


def group_sample(g: OpGroup) -> Sample:
    """One op group as a sample: per-call time as the median, the calls as repeats."""
    per_call = g.time_s / g.calls if g.calls else g.time_s
    stats = TimeStats(median_s=per_call, p10_s=per_call, p90_s=per_call, min_s=per_call, iqr_ratio=0.0,
                      repeats=max(1, g.calls), calls=1)
    return Sample(
        family=FAMILY, dtype=g.dtype or "", shape={k: int(v) for k, v in g.shape.items()},
        flops=g.flops / g.calls if g.calls else g.flops, bytes=g.bytes / g.calls if g.calls else g.bytes,
        cache="warm", stats=stats if per_call > 0 else None, path=g.path or None,
        skipped="" if per_call > 0 else "no time recorded",
        conditions={"profile": {k: v for k, v in g.to_dict().items() if k not in ("flops", "bytes")}},
    )


def profile_device_info(work: Workload, source: str, job: Mapping[str, Any] | None = None,
                        path: CriticalPath | None = None, joined: Joined | None = None) -> dict[str, Any]:
    """The run's device facts for a profile: the device, and the step split under "profile", with the critical
    path, what-ifs and fix first where `path` is given. A distributed job's ranks, straggler and collectives
    (`rooftop.models.program.job.Job.to_dict`) are kept there under "job"; `work` is then its lowest rank's."""
    info: dict[str, Any] = {
        "name": work.device_name or ("CPU" if not work.on_device else "GPU"),
        "kind": "gpu" if work.on_device else "cpu",
        "profile": {**work.summary(), "source": source, "notes": list(work.notes), "rows": work.rows(),
                    **(path_doc(path, joined) if path is not None else {})},
    }
    if job is not None:
        info["profile"]["job"] = dict(job)
    return info


def save_profile(store: Store, work: Workload, source: str, backend: str,
                 versions: Mapping[str, Any] | None = None, path: CriticalPath | None = None) -> str:
    """Keep a finished `work` (and its critical path) as a complete run in one go; returns its id. (`rooftop
    profile` keeps its runs through tui.services.keeper, with the same device facts and samples.)"""
    run_id = store.begin_run(profile_device_info(work, source, path=path), plan=PLAN, backend=backend,
                             versions=versions)
    try:
        store.add_samples(run_id, [group_sample(g) for g in work.groups])
    except BaseException:
        store.finish_run(run_id, "failed")
        raise
    store.finish_run(run_id, "complete")
    return run_id


# The step split's figures (ProfileSummary), by what each must be; a figure may be absent or null (n/a).
SUMMARY_SECONDS = ("span_s", "device_busy_s", "idle_s", "op_time_s", "bound_s", "step_at_roof_s",
                   "step_without_gaps_s", "overlap_s", "transfer_time_s")
SUMMARY_AMOUNTS = ("flops", "bytes", "transfer_bytes", "mfu", "bandwidth_utilisation", "speedup_at_roof",
                   "speedup_without_gaps", "measured_flops", "measured_bytes")
SUMMARY_SHARES = ("idle_share", "busy_fraction")
SUMMARY_COUNTS = ("kernels", "gpus")
SUMMARY_TEXTS = ("device", "trace_device", "mfu_path", "largest_share", "device_note", "source", "kernel_times",
                 "counted_by")
WITHIN_SPAN = ("device_busy_s", "idle_s", "overlap_s")  # parts of the span: none can be longer than it
ROW_READERS = {"transfers": Transfer.from_dict, "idle_causes": IdleCause.from_dict,
               "top_kernels": TopKernel.from_dict, "steps": StepSplit.from_dict, "flags": Flag.from_dict}
SPAN_SLACK = 1e-6  # relative: the figures are sums of float times


def _figure_problem(s: Mapping[str, Any]) -> str | None:
    """The first figure of the split that is not what `rooftop profile` writes there, in words."""
    checks = [plausible.real_problem(k, s[k], 0.0, plausible.MAX_AMOUNT) for k in SUMMARY_SECONDS + SUMMARY_AMOUNTS
              if s.get(k) is not None]
    checks += [plausible.real_problem(k, s[k], 0.0, 1.0) for k in SUMMARY_SHARES if s.get(k) is not None]
    checks += [plausible.whole_problem(k, s[k]) for k in SUMMARY_COUNTS if s.get(k) is not None]
    checks += [f"{k} = {plausible.shown(s[k])} is not text" for k in SUMMARY_TEXTS
               if s.get(k) is not None and not isinstance(s[k], str)]
    return next((c for c in checks if c), None)


def _span_problem(s: Mapping[str, Any]) -> str | None:
    """A part of the span (busy, idle, overlap) longer than the span itself."""
    span = s.get("span_s")
    if not isinstance(span, (int, float)):
        return None
    for k in WITHIN_SPAN:
        v = s.get(k)
        if isinstance(v, (int, float)) and v > span * (1 + SPAN_SLACK) + 1e-12:
            return f"{k} = {plausible.shown(v)} s is longer than the span_s of {plausible.shown(span)} s"
    return None


def _shares_problem(shares: Any) -> str | None:
    """The span's split (idle, overlap, ops, transfers): an object of parts of one, each in [0, 1]."""
    if shares is None:
        return None
    if not isinstance(shares, Mapping):
        return f"shares = {plausible.shown(shares)} is not an object"
    return next((p for k, v in shares.items()
                 if (p := plausible.real_problem(f"shares.{k}", v, 0.0, 1.0 + SPAN_SLACK))), None)


def _coverage_problem(cov: Any) -> str | None:
    """The coverage (Workload.coverage): an object whose shares, and shares by owner, are parts of one."""
    if cov is None:
        return None
    if not isinstance(cov, Mapping):
        return f"coverage = {plausible.shown(cov)} is not an object"
    by = cov.get("by_owner") or {}
    if not isinstance(by, Mapping):
        return f"coverage.by_owner = {plausible.shown(by)} is not an object"
    parts = [(f"coverage.{k}", cov.get(k)) for k in ("owned", "modelled", "comm_sized", "comm_unsized")] + \
        [(f"coverage.by_owner.{k}", v) for k, v in by.items()]
    return next((p for k, v in parts if v is not None and (p := plausible.real_problem(k, v, 0.0, 1.0 + SPAN_SLACK))),
                None)


def _rows_problem(rows: Any) -> str | None:
    """The rows beside the op groups: an object of lists of rows `Workload.rows` writes, each one readable."""
    if rows is None:
        return None
    if not isinstance(rows, Mapping):
        return f"rows = {plausible.shown(rows)} is not an object"
    if "overlap" in rows and not isinstance(rows["overlap"], Mapping):
        return f"rows.overlap = {plausible.shown(rows['overlap'])} is not an object"
    if rows.get("launch_queue") is not None:
        try:
            LaunchQueue.from_dict(rows["launch_queue"])
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
            return f"rows.launch_queue = {plausible.shown(rows['launch_queue'])} is not the launch queue " \
                   "`rooftop profile` writes"
    for key, read in ROW_READERS.items():
        given = rows.get(key) or []
        if not isinstance(given, list):
            return f"rows.{key} = {plausible.shown(given)} is not a list"
        for i, row in enumerate(given):
            try:
                read(row)
            except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
                return f"rows.{key}[{i}] = {plausible.shown(row)} is not a row `rooftop profile` writes"
    return None


def _group_problem(samples: Sequence[Sample]) -> str | None:
    """Each sample's op group (conditions.profile): an object `save_profile` could have written."""
    for i, s in enumerate(samples, start=1):
        g = s.conditions.get("profile") if isinstance(s.conditions, Mapping) else None
        if g is None:
            continue
        if not isinstance(g, Mapping):
            return f"sample {i} conditions.profile = {plausible.shown(g)} is not an object (an op group)"
        try:
            stored_groups([s])
        except ValueError:
            return f"sample {i} conditions.profile is not an op group `rooftop profile` writes"
    return None


def profile_problem(run: Run, samples: Sequence[Sample]) -> str | None:
    """What makes a profile run's stored split or op groups impossible to show, in words; None when fine.

    An import refuses such a run; `rooftop show` of a store that holds one shows its samples as stored.
    """
    s = run.device.get("profile")
    if s is None:
        return _group_problem(samples)
    if not isinstance(s, Mapping):
        return f"device.profile = {plausible.shown(s)} is not an object (the step split)"
    notes = s.get("notes") or []
    bad = _figure_problem(s) or _span_problem(s)
    bad = bad or (None if isinstance(notes, list) and all(isinstance(n, str) for n in notes)
                  else f"notes = {plausible.shown(notes)} is not a list of text")
    bad = bad or _shares_problem(s.get("shares")) or _coverage_problem(s.get("coverage"))
    bad = bad or _rows_problem(s.get("rows")) or path_problem(s)
    return f"device.profile {bad}" if bad else _group_problem(samples)


def is_profile(run: Run) -> bool:
    return run.kind == "profile"


def stored_groups(samples: Sequence[Sample]) -> list[OpGroup]:
    """The op groups of a stored profile, as `save_profile` kept them (W and Q back to all calls), largest first.

    Raises ValueError when a sample's stored group is not one `save_profile` could have written (an edited import).
    """
    groups = []
    for s, g in ((s, g) for s in samples for g in _group_records([s])):
        try:
            calls = int(g.get("calls") or 0)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a stored op group is malformed ({exc})") from None
        groups.append(OpGroup.from_dict(g, flops=s.flops * calls if calls else s.flops,
                                        nbytes=s.bytes * calls if calls else s.bytes))
    return sorted(groups, key=lambda g: -g.time_s)


@dataclass(frozen=True)
class StoredRows:
    """The rows beside the op groups (memcpy / memset, overlap, idle causes, top kernels, steps, flags, the launch
    queue) as `Workload` keeps them: each of its fields is the Workload field of that name."""

    transfers: tuple[Transfer, ...] = ()
    overlap_s: float = 0.0
    idle_causes: tuple[IdleCause, ...] = ()
    top_kernels: tuple[TopKernel, ...] = ()
    steps: tuple[StepSplit, ...] = ()
    flags: tuple[Flag, ...] = ()
    device_note: str = ""
    launch_queue: LaunchQueue | None = None

    def fields(self) -> dict[str, Any]:
        """The rows as `Workload` keyword arguments."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def stored_rows(s: Mapping[str, Any]) -> StoredRows:
    """The rows beside the op groups of a stored profile (none for a profile kept before they were).

    Raises TypeError, ValueError, KeyError or AttributeError when a row is not one `Workload.rows` writes.
    """
    rows: Mapping[str, Any] = r if isinstance(r := s.get("rows"), Mapping) else {}
    overlap: Mapping[str, Any] = o if isinstance(o := rows.get("overlap"), Mapping) else {}
    return StoredRows(
        transfers=tuple(Transfer.from_dict(d) for d in rows.get("transfers") or ()),
        overlap_s=float(overlap.get("time_s") or 0.0),
        idle_causes=tuple(IdleCause.from_dict(d) for d in rows.get("idle_causes") or ()),
        top_kernels=tuple(TopKernel.from_dict(d) for d in rows.get("top_kernels") or ()),
        steps=tuple(StepSplit.from_dict(d) for d in rows.get("steps") or ()),
        flags=tuple(Flag.from_dict(d) for d in rows.get("flags") or ()),
        device_note=str(s.get("device_note") or ""),
        launch_queue=LaunchQueue.from_dict(q) if isinstance(q := rows.get("launch_queue"), Mapping) else None,
    )


@dataclass(frozen=True)
class StoredProfile:
    """A kept profile read back, typed: its step split as stored, its op groups (largest first) and the rows beside
    them. What every view of a kept profile reads (the Profile and History tabs, `show`, `profile --compare`); its
    figures are the stored ones, with no roofs needed to read them."""

    summary: ProfileSummary
    groups: tuple[OpGroup, ...] = ()
    rows: StoredRows = StoredRows()


def stored_profile(run: Run, samples: Sequence[Sample]) -> StoredProfile:
    """The kept profile of `run` and its samples, as `save_profile` kept it.

    Raises ValueError when an op group or a row is malformed (an edited import, or a store written before imports
    were checked).
    """
    s = profile_summary(run)
    try:
        return StoredProfile(summary=s, groups=tuple(stored_groups(samples)), rows=stored_rows(s))
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"the stored profile is malformed ({exc})") from None


def stored_workload(run: Run, samples: Sequence[Sample], device: DeviceProfile) -> Workload:
    """The profile as `rooftop profile` reported it, rebuilt from the run on the roofs it was placed on.

    Raises ValueError when the stored split, an op group or a row is malformed.
    """
    kept = stored_profile(run, samples)
    s = kept.summary
    try:
        return Workload(groups=kept.groups, device=device, on_device=bool(s.get("on_device")),
                        kernels=int(s.get("kernels") or 0), span_s=float(s.get("span_s") or 0.0),
                        busy_s=float(s.get("device_busy_s") or 0.0), device_name=str(s.get("trace_device") or ""),
                        notes=tuple(str(n) for n in (s.get("notes") or ())), gpus=max(1, int(s.get("gpus") or 1)),
                        graph_capture=dict(gc) if isinstance(gc := s.get("graph_capture"), Mapping) else {},
                        counted_by=str(s.get("counted_by") or ""), kernel_times=str(s.get("kernel_times") or MEASURED),
                        **kept.rows.fields())
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"the stored profile is malformed ({exc})") from None


def profile_json(run: Run, samples: Sequence[Sample]) -> dict[str, Any]:
    """{ops, summary, notes, critical_path, what_if, fix_first} as `rooftop profile --json` gave them: the ops from
    the samples, the split and the path as stored (a profile kept before the path was: without its keys)."""
    s: dict[str, Any] = dict(profile_summary(run))
    path = {k: s.pop(k) for k in PATH_KEYS if k in s}
    span = v if isinstance(v := s.get("span_s"), (int, float)) else 0.0
    ops = [{**g.to_dict(), "share": g.alone_s / span if span > 0 else None} for g in stored_groups(samples)]
    notes = list(s.pop("notes", None) or [])
    rows = s.pop("rows", None)
    s.pop("source", None)
    return {"ops": ops, "summary": s, "notes": notes, **(rows if isinstance(rows, Mapping) else {}), **path}


def profile_document(run: Run, samples: Sequence[Sample]) -> dict[str, Any]:
    """The document `rooftop profile --json` printed when the profile was taken (what its HTML report is made of):
    `profile_json`, with a job's ranks, straggler and collectives at the top level as that command puts them, and
    the run's id. Raises ValueError when the stored profile is malformed."""
    doc = profile_json(run, samples)
    job = doc["summary"].pop("job", None)
    if isinstance(job, Mapping):
        doc.update(job)
    doc["run_id"] = run.id
    return doc
