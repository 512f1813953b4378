"""`rooftop watch`: live telemetry, one line (or one JSON object) per interval."""

from __future__ import annotations

import argparse
import dataclasses
import json
import queue
import sys
from typing import Any

from rooftop.models.plausible import finite
from rooftop.store.fleets import by_device_key
from rooftop.tui.commands.common import UsageError, add_db_option
from rooftop.tui.render.gpu_rows import COMPACT_FROM, watch_block
from rooftop.tui.render.telemetry import telemetry_lines
from rooftop.tui.services.context import store_profiles


def cmd_watch(args: argparse.Namespace) -> int:
    # deferred: the telemetry sampler (pynvml's reader, ~30 ms of imports), only when watching
    from rooftop.probes.telemetry import MIN_INTERVAL_S, Sampler, watch_dict

    if not (MIN_INTERVAL_S <= args.interval <= 3600):
        raise UsageError(f"--interval {args.interval:g}: give seconds from {MIN_INTERVAL_S} (20 a second) to 3600")
    if args.gpu is not None and args.gpu < 0:
        raise UsageError(f"--gpu {args.gpu}: GPU indices start at 0")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count {args.count}: must be at least 1")
    snaps: queue.Queue = queue.Queue()
    # every GPU: --gpu is checked against them; `local` (this machine's measured B) is what live DRAM
    # bandwidth is a fraction of, else the GPU's reference profile
    stored = store_profiles(args.db)
    local = stored.get("local")  # and each GPU's own measured B, where it has one (a fleet run keeps them)
    sampler = Sampler(interval=args.interval, on_snapshot=snaps.put, local=local, own=by_device_key(stored.values()))
    printed = 0
    said = "ok"  # the sampler's state last told on stderr
    notes_said: set[str] = set()  # why GPM fields are null, told once
    patience = max(5.0, 4 * args.interval)  # the sampler is bounded; this only guards against a bug in it
    try:
        sampler.start()
        while args.count is None or printed < args.count:
            try:
                snap = snaps.get(timeout=patience)
            except queue.Empty:
                sys.stderr.write(f"rooftop watch: no telemetry for {patience:g} s; still waiting\n")
                continue
            if args.gpu is not None:
                snap = only_gpu(snap, args.gpu, check=printed == 0)
            if snap.state != said:  # once, not on every line: why the GPUs are missing, or one was lost
                shown = " (showing the CPU)" if not snap.gpus and snap.cpu is not None else ""
                sys.stderr.write(f"rooftop watch: {snap.state}{shown}\n")
                said = snap.state
            for note in {g.gpm_note for g in snap.gpus if g.gpm_note} - notes_said:
                gpus = ", ".join(f"gpu{g.index}" for g in snap.gpus if g.gpm_note == note)
                sys.stderr.write(f"rooftop watch: {gpus}: {note}\n")
                notes_said.add(note)
            if args.json:
                sys.stdout.write(json.dumps(finite(watch_dict(snap)), allow_nan=False) + "\n")
            elif len(snap.gpus) >= COMPACT_FROM and not args.detail:  # every GPU at once, a row each
                cpu = telemetry_lines(dataclasses.replace(snap, gpus=())) if snap.cpu is not None else []
                sys.stdout.write("\n".join(watch_block(snap, cpu)) + "\n")
            else:
                sys.stdout.write("\n".join(telemetry_lines(snap)) + "\n")
            sys.stdout.flush()
            printed += 1
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
    return 0


def only_gpu(snap: Any, index: int, check: bool) -> Any:
    """The snapshot with GPU `index` only; with `check`, UsageError when there is no such GPU.

    Checked on the first snapshot: without NVML there is nothing for --gpu to pick, and
    quietly printing the CPU instead would answer a question that was not asked.
    """
    if check and not snap.gpus:
        why = snap.state if snap.state != "ok" else "NVML sees no GPU"
        raise UsageError(f"--gpu {index}: there is no GPU to pick ({why}); leave out --gpu to watch the CPU")
    if check and all(g.index != index for g in snap.gpus):
        have = ", ".join(f"{g.index} ({g.name})" for g in snap.gpus)
        raise UsageError(f"--gpu {index}: no such GPU; this machine has {have}")
    return dataclasses.replace(snap, gpus=tuple(g for g in snap.gpus if g.index == index))


def add_watch_command(sub: Any) -> None:
    """watch."""
    wt = sub.add_parser("watch", help="print live GPU (or CPU) telemetry, one line per interval",
                        description="Live telemetry through NVML (utilisation, clocks, power, temperature, memory, "
                                    "PCIe, throttle reasons, the processes on each GPU); on Hopper and newer also "
                                    "DRAM bandwidth (bytes/s, and as a fraction of this machine's measured B, else "
                                    "the reference profile's) and SM and tensor activity, from the second line on. "
                                    "The CPU through psutil when there is no NVML. "
                                    "With 3 or more GPUs each is one compact row (utilisation, DRAM GB/s and % of its "
                                    "measured B, tensor, power, SM clock, temperature, a throttle mark), so 8 fit "
                                    "80×24; --detail for every line. Runs until Ctrl-C or --count lines.")
    wt.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between lines (default 1; ≥ 0.05)")
    wt.add_argument("--gpu", type=int, metavar="N", help="only this GPU index")
    wt.add_argument("--count", type=int, metavar="N", help="stop after N lines")
    wt.add_argument("--detail", action="store_true",
                    help=f"all lines of every GPU (from {COMPACT_FROM} GPUs on, each is one compact row by default)")
    wt.add_argument("--json", action="store_true",
                    help="JSON lines (SI units; null for N/A): every field per GPU, and at the top the first "
                         "GPU's dram_bandwidth, dram_fraction_of_roof, tensor_active, sm_active, and processes")
    add_db_option(wt)
    wt.set_defaults(func=cmd_watch)
