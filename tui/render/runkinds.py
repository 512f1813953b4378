"""Each kind of stored run, read once and shown the one way: the History tab's detail and points, the JSON
`rooftop show --json` adds.

`read_run` takes from the store all a view of one run needs (`StoredRun`), so the app can do it in a
worker and draw from what came back; `RUN_KINDS` says, for each kind (`Run.kind`), how its detail reads, which
points it draws on which roofs, and what `--json` adds after the run's document.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from rich.text import Text

from rooftop.models.comm import comm_points, fit_points
from rooftop.models.fleet import FleetReport
from rooftop.models.plotdata import Series, intensity_span, roof_series, sample_series
from rooftop.models.profile import DeviceProfile
from rooftop.models.safetext import safe_text
from rooftop.models.sample import Sample
from rooftop.models.units import fmt_bandwidth, fmt_count, fmt_flops_rate
from rooftop.store.fleets import fleet_of
from rooftop.store.runs import Run, RunKind, Store
from rooftop.store.workloads import profile_json
from rooftop.tui.render.comm import comm_json, fit_lines
from rooftop.tui.render.fleet import fleet_flag_lines, member_lines
from rooftop.tui.render.profile import profile_detail, profile_device

SKIPPED_LISTED = 5  # skipped samples the detail names, one line each


@dataclass(frozen=True)
class StoredRun:
    """One run and what the store holds of it that a view draws: its samples, its ceilings, a fleet's report."""

    run: Run
    samples: list[Sample]
    ceilings: DeviceProfile | None  # as stored (Store.stored_profile); None without ceilings
    fleet: FleetReport | None = None  # a fleet run's members and flags


def read_run(store: Store, run_id: str) -> StoredRun:
    """Everything a view of the run reads from the store, in one go (the app calls it in a worker)."""
    run = store.run(run_id)
    return StoredRun(run, store.samples(run.id), store.stored_profile(run.id),
                     fleet_of(store, run) if run.kind == "fleet" else None)


@dataclass(frozen=True)
class KindView:
    """How a kind of run is shown: its detail lines, the roofs under its points, its points, its --json extra."""

    detail: Callable[[StoredRun], Text]
    roofs: Callable[[StoredRun], DeviceProfile | None] = lambda d: d.ceilings
    points: Callable[[StoredRun], list[Series]] = lambda d: sample_series(d.samples, d.run.label)
    json_extra: Callable[[Run, list[Sample]], dict[str, Any]] = lambda run, samples: {}


def _ceilings_detail(d: StoredRun) -> Text:
    """A measurement's ceilings, a line each (none: it did not complete)."""
    prof = d.ceilings
    if prof is None:
        return Text("no ceilings: the run did not complete\n", style="yellow")
    text = Text()
    for lv in prof.levels():
        c = prof.bandwidth[lv]
        text.append(safe_text(f"B {lv}: {fmt_bandwidth(c.value)}  [{c.case}]") + "\n")
    for p in prof.paths():
        c = prof.peak[p]
        text.append(safe_text(f"F {p}: {fmt_flops_rate(c.value)}  [{c.case}]") + "\n")
    return text


def _comm_detail(d: StoredRun) -> Text:
    """A collectives sweep: its α-β fit per collective."""
    return Text("".join(line + "\n" for line in fit_lines(d.samples)))


def _fleet_detail(d: StoredRun) -> Text:
    """Many devices at once: a line per member, then what was flagged."""
    text = Text()
    assert d.fleet is not None  # read_run reads a fleet run's report
    for line in member_lines(d.fleet) + fleet_flag_lines(d.fleet):
        text.append(line + "\n", style="yellow" if line.startswith("!") else "")
    text.append(f"`rooftop show {d.run.short_id}` prints its table\n", style="dim")
    return text


def _comm_json(run: Run, samples: list[Sample]) -> dict[str, Any]:
    """`rooftop comm --json`'s points and fits; {} for a malformed sweep (an edited import: the samples say it)."""
    try:
        points = comm_points(samples)
        return comm_json(points, fit_points(points))
    except (KeyError, TypeError, ValueError):
        return {}


def _profile_json(run: Run, samples: list[Sample]) -> dict[str, Any]:
    """`rooftop profile --json`'s ops and summary; {} for a malformed profile (the samples are in the document)."""
    try:
        return profile_json(run, samples)
    except ValueError:
        return {}


RUN_KINDS: dict[RunKind, KindView] = {
    "measurement": KindView(_ceilings_detail),
    # a profiled program: its split and ops, its op groups on the roofs it was placed on
    "profile": KindView(lambda d: profile_detail(d.run, d.samples), roofs=lambda d: profile_device(d.run),
                        json_extra=_profile_json),
    "comm": KindView(_comm_detail, points=lambda d: [], json_extra=_comm_json),  # no roofline points
    "fleet": KindView(_fleet_detail),
}


def run_detail(d: StoredRun) -> Text:
    """The History tab's text of a run: who and where, what its kind holds, its samples and the first skipped."""
    run, samples = d.run, d.samples
    units = run.device.get("units")  # a CPU's ceilings scale with the threads it was measured with
    threads = f", {fmt_count(units, 'thread')}" if run.backend == "cpu" and isinstance(units, int) and units > 0 else ""
    text = Text(safe_text(f"{run.label} — {run.device_name} ({run.backend}{threads}, {run.plan}, {run.status})") + "\n",
                style="bold")
    text.append_text(RUN_KINDS[run.kind].detail(d))
    skipped = [s for s in samples if s.skipped]
    unstable = [s for s in samples if s.stats and not s.stable]
    text.append(f"{fmt_count(len(samples), 'sample')}, {len(unstable)} unstable, {len(skipped)} skipped\n",
                style="dim")
    for s in skipped[:SKIPPED_LISTED]:
        text.append(safe_text(f"  skipped {s.family} {s.dtype} {s.shape_text}: {s.skipped}") + "\n", style="dim")
    return text


def run_series(d: StoredRun) -> list[Series]:
    """The run's points on the roofs its kind draws them on (the roofs named by the run, as the points are)."""
    view = RUN_KINDS[d.run.kind]
    points, prof = view.points(d), view.roofs(d)
    if prof is None or not prof.peak or not prof.bandwidth:
        return points
    span = intensity_span([prof], [x for p in points for x in p.xs])
    return roof_series(dataclasses.replace(prof, id=d.run.label), prof.paths(), prof.levels(), span) + points


def show_json_extra(run: Run, samples: list[Sample]) -> dict[str, Any]:
    """What `rooftop show --json` adds after the run's document: as the command that made the run gives it."""
    return RUN_KINDS[run.kind].json_extra(run, samples)
