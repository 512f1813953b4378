"""`rooftop measure --all-gpus` / `--fleet`, and `rooftop check`: a fleet measured at once, and the gate.

--all-gpus starts one process per visible GPU on this host (torch's start_processes); --fleet runs
inside a torchrun job (one rank per GPU, on as many hosts as torchrun spans; `srun torchrun` under
Slurm), and rank 0 gathers the rows. Either way the result is one fleet run: a row per member, the
median row, the stragglers. torch is imported only once a measurement starts.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any, Mapping, Sequence

from rooftop.models.catalog import find_by_name, lookup_device
from rooftop.models.fleet import fleet_report, member_from_dict
from rooftop.models.profile import DeviceProfile
from rooftop.models.safetext import safe_text
from rooftop.store.db import StoreError
from rooftop.store.fleets import fleet_of, fleet_runs, is_fleet, member_ids
from rooftop.tui.commands.common import UsageError, add_db_option
from rooftop.tui.render.jsonout import print_json
from rooftop.tui.render.report import make_console
from rooftop.tui.services.context import open_store, store_profiles
from rooftop.tui.services.keeper import RunKeeper


def members_from_payloads(payloads: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The payloads as fleet members (their profiles read back, leniently: they were measured, not typed)."""
    out = []
    for i, p in enumerate(payloads):
        prof = DeviceProfile.from_dict(p["profile"], strict=False) if p.get("profile") else None
        out.append(member_from_dict({**p, "rank": p.get("rank", i)}, prof))
    return out


def _keep(args: argparse.Namespace, payloads: list[dict[str, Any]], mode: str, plan: str, started_at: float,
          err: Any) -> tuple[str | None, Any]:
    """Keep the fleet through the run keeper, as other runs are kept; its id (None when it could not be
    kept: told once) and, read back as kept, its report (None when not read: told once)."""
    # deferred: the fleet's measuring half (the probes: ~85 ms of imports), only when a fleet is measured
    from rooftop.tui.services.fleet import store_warning

    def warn(exc: object, kept_as: str | None = None) -> None:
        err.print(safe_text(store_warning(exc, kept_as)), style="yellow")

    keeper = RunKeeper(args.db, on_error=lambda exc, _begun: warn(exc))
    try:
        run_id = keeper.keep_whole(fleet_runs(payloads, mode, plan, started_at))
        if run_id is None or keeper.store is None:
            return None, None
        try:  # as kept, the report also knows each device alone (earlier runs): what sharing the budget cost
            return run_id, fleet_of(keeper.store, keeper.store.run(run_id))
        except StoreError as exc:
            warn(exc, run_id)
            return run_id, None
    finally:
        keeper.close()


def _members_said(report: Any) -> str:
    """What each member came to, for the one line a stopped fleet ends with: by rank up to 8 members."""
    def said(m: Any) -> str:
        if m.profile is None and m.status not in ("complete", "cancelled"):
            return "lost"
        return m.status if m.status != "cancelled" else "stopped"

    if len(report.members) <= 8:
        return ", ".join(f"rank {m.rank} {said(m)}" for m in report.members)
    counts: dict[str, int] = {}
    for m in report.members:
        counts[said(m)] = counts.get(said(m), 0) + 1
    return ", ".join(f"{n} {what}" for what, n in counts.items())


def _report(args: argparse.Namespace, payloads: list[dict[str, Any]], mode: str, plan: str, wall: float,
            stopped_by: str | None = None, on_kept: Any = None) -> int:
    """Keep the fleet (unless --no-save), then print its report or JSON; 1 when a member gave no result or the
    fleet run could not be kept (the report is printed either way). `on_kept(run_id)` hears at once how the
    keeping went (the other ranks wait for it); a stop (`stopped_by`) ends in one line saying what was kept."""
    # deferred: the fleet's measuring half (the probes: ~85 ms of imports), only when a fleet is measured
    from rooftop.tui.services.fleet import store_warning

    err = make_console(stderr=True)
    run_id, report = (_keep(args, payloads, mode, plan, time.time() - wall, err) if not args.no_save
                      else (None, None))
    if on_kept is not None:
        on_kept(run_id)
    if report is None:
        report = fleet_report(members_from_payloads(payloads))
    for p in payloads:  # a member kept its own run as it measured (--all-gpus) until the store failed it
        if p.get("store_error") and p.get("run_id"):
            err.print(safe_text(store_warning(p["store_error"], member=f"rank {p.get('rank')}")), style="yellow")
    bad = [m for m in report.members if m.profile is None]
    not_kept = not args.no_save and run_id is None
    kept = (f"saved as run {run_id[:8]}" if run_id else "not kept in the store" if not_kept
            else "not kept (--no-save)")
    if stopped_by:
        err.print(f"rooftop measure: fleet of {len(report.members)} stopped by {stopped_by} after {wall:.1f} s; "
                  f"what each member measured is {kept.replace('saved as', 'kept as')} ({_members_said(report)})",
                  soft_wrap=True)  # one line, however narrow the terminal
    else:
        err.print(f"rooftop measure: fleet of {len(report.members)} in {wall:.1f} s"
                  + (f", {len(bad)} without a result" if bad else "") + f"; {kept}")
    status = 1 if bad or not_kept else 0  # a script must know the fleet is not in the store
    if args.json:
        print_json({"mode": mode, "plan": plan, "run_id": run_id, "wall_s": wall, "stopped_by": stopped_by,
                    **report.to_dict()})
        return status
    # deferred: the fleet tables (with the check rules: ~8 ms of imports), only to print a fleet's report
    from rooftop.tui.render.fleet import fleet_flag_lines, fleet_tables

    console = make_console()
    console.print(fleet_tables(report))
    for line in fleet_flag_lines(report):
        console.print(line, style="yellow" if line.startswith("!") else "")
    return status


def _job(args: argparse.Namespace, only: Sequence[str], **kw: Any) -> dict[str, Any]:
    return {"plan": args.plan, "only": list(only), "db": args.db, **kw}


def _signal_name(stopped: Sequence[int]) -> str | None:
    return signal.Signals(stopped[0]).name if stopped else None


def cmd_all_gpus(args: argparse.Namespace, only: Sequence[str], cancel: Any, stopped: Sequence[int] = ()) -> int:
    """One process per visible GPU, all at once; each GPU's run kept as it is measured. A stop signal (`cancel`,
    `stopped`) ends every GPU's plan at its next point, and what each measured is kept as the fleet."""
    if args.device or args.threads:
        raise UsageError("--all-gpus measures every visible GPU: leave out --device and --threads "
                      "(CUDA_VISIBLE_DEVICES chooses which GPUs)")
    # deferred: torch (seconds to load), only when GPUs are measured
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < 1:
        raise UsageError(f"--all-gpus: torch sees no CUDA GPU here (torch {torch.__version__}); measure the CPU with "
                      "--device cpu, or many CPU ranks with torchrun … rooftop measure --fleet --device cpu")
    # deferred: the fleet's measuring half (the probes: ~85 ms of imports), only when a fleet is measured
    from rooftop.probes.fleet import run_local
    from rooftop.tui.services.fleet import measure_member

    jobs = [_job(args, only, device=f"cuda:{i}", local_rank=i, store=not args.no_save) for i in range(n)]
    sys.stderr.write(f"rooftop measure: {args.plan} plan on {n} GPU{'s' if n > 1 else ''} at once\n")
    t0 = time.perf_counter()
    payloads = run_local(measure_member, jobs, wait_s=args.wait, cancel=cancel,
                         on_payload=lambda r, p: sys.stderr.write(
                             f"rooftop measure: rank {r} ({p.get('device') or '?'}): {p.get('status')}\n"))
    stopped_by = _signal_name(stopped)
    for p in payloads:
        _stopped_error(p, stopped_by)
    return _report(args, payloads, "all-gpus", args.plan, time.perf_counter() - t0, stopped_by)


def _stopped_error(payload: dict[str, Any], stopped_by: str | None) -> None:
    """A member the stop ended says so, with how far it got (its error, shown beside its row)."""
    if stopped_by and payload.get("status") == "cancelled" and not payload.get("error"):
        payload["error"] = f"stopped by {stopped_by} after {payload.get('points', 0)} points"


def cmd_fleet(args: argparse.Namespace, only: Sequence[str], cancel: Any = None, stopped: Sequence[int] = ()) -> int:
    """This rank of a torchrun job: measure the local device and post the row; the keeper (rank 0, or the lowest
    rank alive when rank 0 is gone) keeps the fleet. A stop signal (`cancel`, `stopped`) ends the measurement at
    its next point: what it measured is sent and kept, within the 30 s torchrun allows before it kills."""
    # deferred: the fleet's measuring half (the probes: ~85 ms of imports), only when a fleet is measured
    from rooftop.probes.fleet import NOT_ASKED, RankEnv, RankGroup, cpu_share

    env = RankEnv.from_env()  # FleetError where torchrun's variables cannot be read
    if env is None:
        raise UsageError("--fleet runs in each rank of a torchrun job (torchrun --nproc-per-node G … --no-python "
                      "rooftop measure --fleet); for every GPU of this machine use --all-gpus")
    device = (args.device or "").strip().lower()
    if device not in ("", "cpu", "cuda"):
        raise UsageError(f"--fleet --device {args.device}: each rank measures its own device (cuda:LOCAL_RANK, or its "
                      "share of the CPUs); give --device cpu or cuda, or leave it out")

    # deferred: torch (seconds to load), only when GPUs are measured
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device cuda: torch sees no CUDA device here (torch {torch.__version__})")
    on_gpu = device == "cuda" or (not device and torch.cuda.is_available())
    job = _job(args, only, store=False, local_rank=env.local_rank)
    if on_gpu:
        if env.local_rank >= torch.cuda.device_count():
            raise UsageError(f"LOCAL_RANK {env.local_rank}: this host has {torch.cuda.device_count()} GPUs; "
                          "start at most one rank per GPU (--nproc-per-node)")
        job["device"] = f"cuda:{env.local_rank}"
    else:
        try:
            have = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            have = list(range(os.cpu_count() or 1))
        cpus = cpu_share(env.local_rank, env.local_world, have)
        job.update(device="cpu", cpus=cpus, threads=args.threads or len(cpus))
    group = RankGroup(env, wait_s=args.wait, cancel=cancel)  # FleetError where the ranks cannot meet
    t0 = time.perf_counter()
    try:
        sys.stderr.write(f"rooftop measure: rank {env.rank} of {env.world}: {args.plan} plan on {job['device']}"
                         + (f" ({len(job['cpus'])} CPUs)" if job.get("cpus") else "") + "\n")
        payload = _rank_payload(env, job, group, args.wait, cancel)
        _stopped_error(payload, _signal_name(stopped))
        if payload.get("status") == "lost":
            sys.stderr.write(f"rooftop measure: rank {env.rank}: no result: {payload.get('error')}\n")
        payloads = group.gather(payload)
        if payloads is None:  # another rank keeps the fleet
            return _sent(env, group, payload, _signal_name(stopped))
        return _report(args, payloads, "torchrun", args.plan, time.perf_counter() - t0, _signal_name(stopped),
                       on_kept=lambda run_id: group.kept(NOT_ASKED if args.no_save else run_id))
    finally:
        group.close()


def _sent(env: Any, group: Any, payload: dict[str, Any], stopped_by: str | None) -> int:
    """A rank whose row another rank keeps: quiet when the keeper kept it; one line when stopped or when the
    keeper never said (exit 1: the row may not be in any store)."""
    # deferred: the fleet's measuring half (the probes: ~85 ms of imports), only when a fleet is measured
    from rooftop.probes.fleet import NOT_ASKED

    said = group.said
    what = f"its row ({payload.get('points', 0)} points)" if payload.get("status") != "lost" else "its row (no result)"
    who = f"rooftop measure: rank {env.rank}" + (f" stopped by {stopped_by}" if stopped_by else "")
    if said == NOT_ASKED:
        if stopped_by:
            sys.stderr.write(f"{who}: {what} was sent to the keeper, which keeps nothing (--no-save)\n")
        return 0
    if not said:
        how = "the keeper never said it kept it" if said is None else "the keeper could not keep the fleet"
        sys.stderr.write(f"{who}: {what} was sent, but {how}\n")
        return 1
    if stopped_by:
        sys.stderr.write(f"{who}: {what} is kept in fleet run {said[:8]}\n")
    return 0


def _rank_payload(env: Any, job: dict[str, Any], group: Any, wait_s: float, cancel: Any) -> dict[str, Any]:
    """Measure in a child process (torch's starter, one job), so a measurement that dies (a signal, a CUDA
    fault, os._exit) or hangs leaves this rank alive to send a row naming how: torchrun would otherwise end
    the whole job, and rank 0 could keep none of the others' rows. A stop signal (cancel) asks the child to
    hand in what it measured."""
    # deferred: the fleet's measuring half (the probes: ~85 ms of imports), only when a fleet is measured
    from rooftop.probes.fleet import run_local
    from rooftop.tui.services.fleet import measure_member

    (payload,) = run_local(measure_member, [job], wait_s=wait_s, cancel=cancel, peers_done=group.peers_done)
    return {"device": job["device"], **payload, "rank": env.rank, "local_rank": env.local_rank}


# -- rooftop check ---------------------------------------------------------------------------


def add_check_command(sub: Any) -> None:
    ck = sub.add_parser(
        "check", help="gate a run (or a fleet run) on a baseline: exit 1 if a ceiling falls short",
        description="Compare a run's ceilings with a baseline's, each within a tolerance: a bandwidth or peak "
                    "below (1 − tolerance) × the baseline's, or a launch floor above (1 + tolerance) × it, falls "
                    "short. A fleet run also holds each member to its model's median. Exit 0 when all hold, "
                    "1 when any falls short (each named with both figures), 2 for bad input. For CI jobs and "
                    "node admission.",
        epilog="examples:\n  rooftop check --against h100\n  rooftop check 3fa2c1d0 --against baseline-node --json\n"
               "  rooftop check --against golden --tolerance 0.03",
    )
    ck.add_argument("run", nargs="?", metavar="RUN", help="run id or name (default: the latest run with ceilings, "
                                                          "or fleet run)")
    ck.add_argument("--against", metavar="RUN|DEVICE",
                    help="the baseline: a run id or name, or a device id (default: the reference profile of the "
                         "run's GPU; a fleet run without one is held to its median only)")
    ck.add_argument("--tolerance", type=float, default=0.05, metavar="T",
                    help="fraction each ceiling may fall short (default 0.05)")
    ck.add_argument("--json", action="store_true", help="print the results as JSON (SI units)")
    add_db_option(ck)
    ck.set_defaults(func=cmd_check)


def _latest(store: Any) -> Any:
    members = member_ids(store)
    runs = [r for r in store.runs() if r.status == "complete" and (is_fleet(r) or r.has_ceilings)
            and r.id not in members]
    if not runs:
        raise UsageError("no complete run with ceilings in the store to check; `rooftop measure` makes one")
    return runs[-1]


def _baseline(args: argparse.Namespace, run: Any, model: str) -> Any:
    """The --against profile; without one, the catalog's reference for the run's device (or None)."""
    if args.against is not None:
        if not args.against.strip():
            raise UsageError("--against '': give a run id or name, or a device id from `rooftop devices`")
        return lookup_device(args.against, store_profiles(args.db, [args.against]))

    return find_by_name(model) if model else None


def cmd_check(args: argparse.Namespace) -> int:
    """Exit 0 when every ceiling holds, 1 when one falls short or a fleet member gave no result, 2 for bad
    input (one line)."""
    # deferred: the check rules (~5 ms of imports), only for `rooftop check`
    from rooftop.models.check import (check_fleet, check_profile, fleet_notes, model_notes, tolerance_problem,
                                      unchecked, verdict)

    problem = tolerance_problem(args.tolerance)
    if problem:
        raise UsageError(problem)
    with open_store(args.db) as store:
        run = store.run(args.run) if args.run else _latest(store)
        notes: list[str] = []
        lost: list[str] = []
        nothing = ""
        if is_fleet(run):
            fleet = fleet_of(store, run)
            models = [g.model for g in fleet.groups]
            base = _baseline(args, run, models[0] if len(models) == 1 else "")
            results = check_fleet(fleet, base, args.tolerance)
            lost, notes = fleet_notes(fleet, base)
            if base is None:
                notes.append("no baseline: each member held to its peers only")
                nothing = (f"fleet run {run.label} has fewer than two members measured to the end and no baseline "
                           "to hold one to; give --against RUN or a device id from `rooftop devices`")
        else:
            if not run.has_ceilings:
                raise UsageError(f"run {run.label} ({run.status}) has no ceilings to check; "
                                 "give a run from `rooftop runs` whose roofs column says yes")
            profile = store.profile(run.id)
            base = _baseline(args, run, profile.name)
            if base is None:
                raise UsageError(f"no baseline for {profile.name}: give --against RUN or a device id "
                                 "from `rooftop devices`")
            results = check_profile(f"run {run.label}", profile, base, args.tolerance)
            notes += model_notes([profile.name], base) + unchecked(profile, base)
            if run.status != "complete":
                notes.append(f"run {run.label} is {run.status}: only what it measured is checked")
    v = verdict(results, notes, lost, nothing)  # CheckError where nothing could be checked
    if args.json:
        print_json({"run": run.id, "baseline": base.id if base is not None else None, "tolerance": args.tolerance,
                    **v.to_dict()})
        return 0 if v.ok else 1
    # deferred: the verdict's lines (with the fleet tables: ~8 ms of imports), only to print a verdict
    from rooftop.tui.render.fleet import verdict_lines

    for line in verdict_lines(v):
        sys.stdout.write(line + "\n")
    return 0 if v.ok else 1
