"""The `rooftop` command line.

Imports stay light: `rooftop --help`, `rooftop op`, `rooftop devices` and
`rooftop plot` never load torch (a test checks it).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sqlite3
import sys
from typing import Any, Iterator, Sequence

from rooftop.models.analysis import analyze
from rooftop.models.bounds import finite
from rooftop.models.catalog import UnknownDevice, catalog, lookup_device
from rooftop.models.llm import ModelError
from rooftop.models.safetext import safe_text
from rooftop.models.profile import DeviceProfile, NoRoof
from rooftop.models.spec import SpecError, op_kinds, parse_specs
from rooftop.models.units import fmt_count
from rooftop.store.db import StoreError
from rooftop.tui.chart import plot_size
from rooftop.tui.jsonout import dumps_json, print_json

FALLBACK_DEVICE = "h100"

EPILOG_OP = """\
op specs (one or more; a new op starts at each op name):
  gemm M N K [dtype] [batch=B] [out=DTYPE]   or gemm m=M n=N k=K dtype=DTYPE
  gemv N K [dtype]                           a GEMM with M = 1 (batch-1 decode)
  attn b=B h=H [kv=KV] [d=D] [q=Q] t=T [flash|naive|decode] [causal]
       [kvdtype=fp8]
  ew N [dtype] [flops=F] [reads=R] [writes=W] elementwise (y = a*x + b)
  fma R [N] [dtype]                          FMA sweep: R FMAs per element
  norm ROWS COLS [dtype] [rms|layer]         softmax ROWS COLS [dtype]
numbers: 8192, 1e9 (1E9), 2^20, 8k (= 8192), 16M; dtypes: fp64 fp32 tf32 fp16 bf16 fp8
int8 fp4 (default bf16; fp32 for ew and fma); any op takes level=LEVEL to read
from a cache instead of dram, where the profile has that slope: level=l1 or
level=l2 on a GPU, level=l2 (private caches) or level=llc on a CPU.

examples:
  rooftop op gemm 1 8192 8192 bf16 --device h100 --device h200
  rooftop op attn b=8 h=32 d=128 t=8192 decode --device h100 --measured-ms 0.55
  rooftop op gemm 4096 4096 4096 fp32 ew n=1e9 fp32 --json

Bytes and FLOPs are algorithmic: each array read or written once, an FMA is
2 FLOP, so the time shown is a lower bound T = max(W/F, Q/B). JSON is in SI
units (FLOP, bytes, seconds, FLOP/s, bytes/s).
"""
HELP_WIDTH = 80  # columns: --help fits an 80-column terminal, and is no wider on a larger one


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Wraps the prose of descriptions and epilogs, keeps indented lines (example blocks) as written.

    argparse either wraps everything (and flattens the examples) or nothing (and a
    long paragraph runs off an 80-column screen); here a line that starts at the
    margin is prose, joined with its neighbours and wrapped, and an indented one is
    layout. The width is the terminal's, at most HELP_WIDTH.
    """

    def __init__(self, prog: str, **kwargs: Any) -> None:
        import shutil

        kwargs.setdefault("width", min(shutil.get_terminal_size().columns, HELP_WIDTH) - 2)
        super().__init__(prog, **kwargs)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        out: list[str] = []
        prose: list[str] = []

        def wrap_prose() -> None:
            if prose:
                out.extend(textwrap.wrap(" ".join(prose), width, initial_indent=indent, subsequent_indent=indent,
                                         break_on_hyphens=False))
                prose.clear()

        for line in text.splitlines():
            if line.strip() and not line[0].isspace():
                prose.append(line.strip())
                continue
            wrap_prose()
            out.append(indent + line if line.strip() else "")
        wrap_prose()
        return "\n".join(out)


class Parser(argparse.ArgumentParser):
    """argparse that reports bad input in one line and exits with 2, and whose help fits 80 columns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


class UsageError(Exception):
    """Bad input found after parsing; reported in one line with exit code 2."""


def _device_list(values: str | list[str] | None, what: str = "-d") -> list[str]:
    """--device values (repeated, comma-separated; or one string from `rooftop -d ID COMMAND`) as ids.

    An empty one is refused, not skipped: `-d ''` (an unset shell variable) must not quietly mean
    the default device.
    """
    raws = [values] if isinstance(values, str) else values or []
    for raw in raws:
        if not all(v.strip() for v in raw.split(",")):
            raise UsageError(f"{what} {safe_text(raw)!r}: an empty device id; give ids from `rooftop devices` "
                             "(or run names), comma-separated" + (", or leave out -d for the default" if what == "-d" else ""))
    return [v.strip() for raw in raws for v in raw.split(",")]


def resolve_devices(ids: list[str], extra: dict[str, DeviceProfile] | None = None) -> list[DeviceProfile]:
    """Profiles for --device ids; with none: this host's measured profile, the detected GPU's reference, else h100."""
    if ids:
        return [lookup_device(i, extra) for i in ids]
    if extra and "local" in extra and extra["local"].is_roofline():
        sys.stderr.write(safe_text(f"rooftop: using local, this machine's latest measured profile "
                                   f"({extra['local'].name})") + "\n")
        return [extra["local"]]
    from rooftop.probes.identify import local_reference_profile

    found = local_reference_profile()
    if found:
        sys.stderr.write(f"rooftop: using {found.id}, the reference profile for this machine's {found.name}\n")
        return [found]
    sys.stderr.write(
        f"rooftop: no --device given and no known GPU found; using {FALLBACK_DEVICE} (reference measurement)\n"
    )
    return [lookup_device(FALLBACK_DEVICE, extra)]


def _measured_times(raw: str | None, n_ops: int) -> list[float | None]:
    if raw is None:
        return [None] * n_ops
    try:
        vals = [float(v) for v in raw.split(",")]
    except ValueError:
        raise UsageError(f"--measured-ms {raw!r}: expected milliseconds, e.g. 0.55 or 0.55,1.2 (one per op)") from None
    if any(not (v > 0 and v < float("inf")) for v in vals):
        raise UsageError(f"--measured-ms {raw!r}: times must be positive milliseconds")
    if len(vals) == 1:
        vals = vals * n_ops
    if len(vals) != n_ops:
        raise UsageError(f"--measured-ms gives {fmt_count(len(vals), 'time')} for {fmt_count(n_ops, 'op')}: "
                         "give one, or one per op")
    return [v / 1e3 for v in vals]


def pinned_ops(args: argparse.Namespace) -> list:  # noqa: ANN201 - models.ops ops
    """The ops pinned in the app (What-if, p), which the store keeps; none when there is no store yet.

    A saved pin that no longer parses is named on stderr and left out: it must not sink the others.
    """
    from rooftop.store.locations import db_path

    if not db_path(getattr(args, "db", None)).exists():
        return []
    ops = []
    with open_store(args) as store:
        for saved in store.saved_ops():
            try:
                ops += parse_specs([str(saved["spec"])])
            except SpecError as exc:
                sys.stderr.write(safe_text(f"rooftop op: left out the saved pin {saved['spec']!r}: {exc}") + "\n")
    return ops


def cmd_op(args: argparse.Namespace) -> int:
    given = parse_specs(args.spec) if args.spec else []
    ops = given + (pinned_ops(args) if args.pinned else [])
    if not ops:
        raise UsageError("no op to analyse: give an op spec (e.g. gemm 1 8192 8192 bf16)"
                         + (", or pin ops in the app (p on the What-if tab)" if args.pinned else ", or --pinned"))
    times = _measured_times(args.measured_ms, len(ops))
    ids = _device_list(args.device)
    devices = resolve_devices(ids, store_profiles(args, ids))
    results = []
    for i, (op, t) in enumerate(zip(ops, times)):
        row = []
        for dev in devices:
            try:
                row.append(analyze(op, dev, t))
            except NoRoof as exc:
                if i < len(given):  # an op the user typed: say so and stop, as always
                    raise
                sys.stderr.write(safe_text(f"rooftop op: left out the pin {op.spec()!r} on {dev.id}: {exc}") + "\n")
        if row:
            results.append(row)
    if args.json:
        print_json([a.to_dict() for rows in results for a in rows])
        return 0
    from rooftop.tui.report import analysis_table, make_console

    console = make_console()
    for i, rows in enumerate(results):
        if i:
            console.print()
        console.print(analysis_table(rows))
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    extra = store_profiles(args, args.ids)
    profiles = [lookup_device(i, extra) for i in args.ids] if args.ids else [*catalog().values(), *extra.values()]
    if args.json:
        out: list[dict[str, Any]] = []
        for p in profiles:
            d = p.to_dict()
            if "dram" in p.bandwidth:
                d["ridge"] = {path: p.ridge(path) for path in p.paths()}
            out.append(d)
        print_json(out)
        return 0
    from rooftop.tui.report import Prose, devices_table, make_console, profile_detail

    console = make_console()
    if args.ids:
        for i, p in enumerate(profiles):
            if i:
                console.print()
            console.print(profile_detail(p))
    else:
        console.print(devices_table(profiles))
        console.print()
        console.print(Prose(
            "sources: ref = published measurement (RealZST/llm-infra-notes, roofline/data); datasheet = vendor "
            "dense figures; "
            "measured / imported = the store's runs (each device's latest complete run, plus named runs; "
            "`rooftop runs`). `rooftop devices ID` shows every roof with the case that produced it."
        ))
    return 0


DEFAULT_PLOT_PATHS = ("fp64-tc", "fp32-fma", "bf16-tc", "fp8-tc")


def cmd_plot(args: argparse.Namespace) -> int:
    from rooftop.models.plotdata import intensity_span, point_series, roof_series
    from rooftop.tui.chart import roofline_text
    from rooftop.tui.report import Prose, make_console, trimmed

    ids = _device_list(args.device)
    devices = resolve_devices(ids, store_profiles(args, ids))
    ops = parse_specs(args.op) if args.op else []
    analyses = [analyze(op, dev) for op in ops for dev in devices[:1]]
    wanted = _path_list(args.paths) if args.paths is not None else None
    for dev in devices:
        for p in wanted or []:
            if p != "all" and p not in dev.peak:
                raise NoRoof(f"{dev.id} has no {p} roof; it has: {', '.join(dev.paths())}")
    points = store_points(args, devices) if args.points else []
    span = intensity_span(devices, [a.intensity for a in analyses] + [x for s in points for x in s.xs])
    series = []
    for dev in devices:
        if wanted == ["all"]:
            paths = dev.paths()
        elif wanted:
            paths = wanted
        else:
            paths = [p for p in DEFAULT_PLOT_PATHS if p in dev.peak] + [a.path for a in analyses]
            paths = list(dict.fromkeys(paths))
        series += roof_series(dev, paths, dev.levels(), span)  # a slope per level: dram, l2, l1 (CPU: llc)
    series += [point_series(a) for a in analyses] + points
    series = [dataclasses.replace(s, label=safe_text(s.label)) for s in series]  # names from a store or a file
    title = safe_text("roofline: " + " vs ".join(f"{d.id} ({d.source})" for d in devices))
    sys.stdout.write(trimmed(roofline_text(series, title, args.width, args.height)) + "\n")
    sys.stdout.flush()  # the chart first, then the console's lines
    console = make_console()
    for a in analyses:
        console.print(Prose(f"{a.op.describe()}: I = {a.intensity:.3g} FLOP/B on {a.path}, {a.regime}-bound on "
                            f"{safe_text(a.device.id)} (I* = {a.ridge:.3g})"))
    return 0


def _path_list(raw: str) -> list[str]:
    """--paths: compute path names, comma-separated, or 'all'; an empty one is refused."""
    items = [v.strip() for v in raw.split(",")]
    if not all(items):
        raise UsageError(f"--paths {safe_text(raw)!r}: an empty path name; give paths such as bf16-tc,fp32-fma "
                         "(`rooftop devices ID` lists a device's), or 'all'")
    return items


def _int_list(raw: str, what: str, one: bool = False) -> list[int]:
    """Comma-separated counts (`one`: a single count); an empty item is an error, not skipped:
    `--batch 1,,2` is more likely a lost number than a wish for two batches."""
    from rooftop.models.spec import parse_count

    items = [v.strip() for v in raw.split(",")]
    if one and (len(items) > 1 or not items[0]):
        raise UsageError(f"--{what} {raw!r}: give one number, e.g. 128")
    if not all(items):
        raise UsageError(f"--{what} {raw!r}: an empty item; give numbers separated by commas, e.g. 1,8,16")
    try:
        return [parse_count(v, what) for v in items]
    except SpecError as exc:
        raise UsageError(f"--{what} {raw!r}: {exc}") from None


def _named_values(raw: str | None, what: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in (raw or "").split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--{what}: {item!r} is not NAME=NUMBER (e.g. attention=17.6,mlp=24)") from None
    return out


def cmd_llm(args: argparse.Namespace) -> int:
    from rooftop.models.dtypes import parse_dtype
    from rooftop.models.llm import Phase, amdahl, compute_bound_batch, step_bound, with_dtype
    from rooftop.store.hfconfig import load_arch

    arch = load_arch(args.model)
    try:
        if args.dtype:
            arch = with_dtype(arch, parse_dtype(args.dtype).name)
        kv_dtype = parse_dtype(args.kv_dtype).name if args.kv_dtype else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    batches = _int_list(args.batch, "batch")
    (prompt,) = _int_list(args.prompt, "prompt", one=True)
    contexts = _int_list(args.context, "context") if args.context else [prompt]
    parts = _named_values(args.parts, "parts")
    if args.speedup and not parts:
        raise UsageError("--speedup needs --parts: the end-to-end time table it applies to")
    split = amdahl(parts, _named_values(args.speedup, "speedup")) if parts else None
    ids = _device_list(args.device)
    device = resolve_devices(ids, store_profiles(args, ids))[0]
    phases = [Phase(args.phase, b, prompt=prompt, context=c, kv_dtype=kv_dtype) for c in contexts for b in batches]
    times = _measured_times(args.measured_ms, len(phases))
    # a --tp / --pp the model does not split into is a ModelError: one line, exit 2
    steps = [step_bound(arch, ph, device, t, tp=args.tp, pp=args.pp) for ph, t in zip(phases, times)]
    flips = {}
    if args.phase == "decode":
        flips = {
            "linear_layers": compute_bound_batch(arch, device, contexts[0], kv_dtype, linear_only=True),
            "whole_step": compute_bound_batch(arch, device, contexts[0], kv_dtype),
        }
    dims = _parallel(args, arch, steps[0])
    if args.json:
        out = {
            "model": arch.name,
            "device": device.id,
            "steps": [s.to_dict() for s in steps],
            **({"parallel": [d.to_dict(device) for d in dims]} if dims else {}),
            "compute_bound_batch": flips or None,
            "amdahl": {"before_ms": dict(split.before), "after_ms": dict(split.after), "speedup": split.speedup}
            if split else None,
        }
        print_json(out)
        return 0
    from rooftop.tui.report import Prose, amdahl_table, llm_ops_table, llm_steps_table, make_console

    console = make_console()
    console.print(llm_steps_table(steps))
    if flips:
        lin, whole = flips["linear_layers"], flips["whole_step"]
        console.print(Prose(
            f"linear layers turn compute-bound from batch ≈ {lin if lin else 'never'} (their I ≈ batch); "
            f"the whole step at context {contexts[0]} "
            + (f"from batch ≈ {whole}" if whole else "never: each request's KV cache keeps attention memory-bound")
        ))
    console.print()
    console.print(llm_ops_table(steps[0]))
    if split:
        console.print()
        console.print(amdahl_table(split))
    if dims:
        from rooftop.tui.report import parallel_table

        console.print()
        console.print(parallel_table(dims, device, steps[0]))
    return 0


def _parallel(args: argparse.Namespace, arch: Any, step: Any) -> list[Any]:
    """--tp / --pp: each dimension's communication for the first step, one rank's (empty when both are 1)."""
    from rooftop.models.parallel import parallel_comm

    try:
        return parallel_comm(arch.layers, arch.hidden, arch.dtype, step.phase.tokens, step.flops, step.compute_s,
                             args.tp, args.pp, per_rank=step.ranks > 1, vocab=arch.vocab, logits_rows=step.phase.batch)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_watch(args: argparse.Namespace) -> int:
    import queue

    from rooftop.probes.telemetry import MIN_INTERVAL_S, Sampler, watch_dict
    from rooftop.tui.report import telemetry_lines

    if not (MIN_INTERVAL_S <= args.interval <= 3600):
        raise UsageError(f"--interval {args.interval:g}: give seconds from {MIN_INTERVAL_S} (20 a second) to 3600")
    if args.gpu is not None and args.gpu < 0:
        raise UsageError(f"--gpu {args.gpu}: GPU indices start at 0")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count {args.count}: must be at least 1")
    snaps: queue.Queue = queue.Queue()
    # every GPU: --gpu is checked against them; `local` (this machine's measured B) is what live DRAM
    # bandwidth is a fraction of, else the GPU's reference profile
    local = store_profiles(args).get("local")
    sampler = Sampler(interval=args.interval, on_snapshot=snaps.put, local=local)
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
    import dataclasses

    if check and not snap.gpus:
        why = snap.state if snap.state != "ok" else "NVML sees no GPU"
        raise UsageError(f"--gpu {index}: there is no GPU to pick ({why}); leave out --gpu to watch the CPU")
    if check and all(g.index != index for g in snap.gpus):
        have = ", ".join(f"{g.index} ({g.name})" for g in snap.gpus)
        raise UsageError(f"--gpu {index}: no such GPU; this machine has {have}")
    return dataclasses.replace(snap, gpus=tuple(g for g in snap.gpus if g.index == index))


def run_app(args: argparse.Namespace) -> int:
    """`rooftop` with no command: the Textual app."""
    if args.device is not None:
        _device_list(args.device)  # `rooftop -d ''`: refused like any other command's
        lookup_device(args.device, store_profiles(args, [args.device]))  # a bad id: one line, before the screen opens
    from rooftop.tui.app import AppConfig, create_app

    app = create_app(AppConfig(device=args.device, db_path=getattr(args, "db", None), autostart=True))
    app.run()
    return app.return_code or 0  # 128 + the signal when SIGHUP / SIGTERM ended it; 1 after a crash


# -- the store ------------------------------------------------------------------------

DB_HELP = "the rooftop database file (default: $ROOFTOP_DB, else rooftop.db in the user data directory)"


def add_db_option(p: argparse.ArgumentParser, top: bool = False) -> None:
    """--db PATH on every command that reads or writes the store, and before the command.

    A command's own --db is left out of the namespace when not given, so that it does not
    overwrite `rooftop --db PATH COMMAND`'s (argparse's subparser defaults would).
    """
    p.add_argument("--db", metavar="PATH", help=DB_HELP, **({} if top else {"default": argparse.SUPPRESS}))


def add_device_option(p: argparse.ArgumentParser, help: str) -> None:  # noqa: A002 - argparse's word
    """-d/--device on a command, repeatable; left out of the namespace when not given, so that it does
    not overwrite `rooftop -d ID COMMAND`'s (as add_db_option does for --db)."""
    p.add_argument("-d", "--device", action="append", metavar="ID", default=argparse.SUPPRESS, help=help)


@contextlib.contextmanager
def open_store(args: argparse.Namespace, create: bool = False) -> Iterator[Any]:
    """The store at --db / ROOFTOP_DB / the data dir, as a context; StoreError if unusable.

    Only commands that add data create the file; the others say there is none yet. Values
    read as unknown (see `warn_unreadable`) are named when the command is done.
    """
    from rooftop.store.locations import db_path
    from rooftop.store.runs import Store

    path = db_path(getattr(args, "db", None))
    if not create and path.is_file() and path.stat().st_size == 0:
        raise StoreError(f"{path} is an empty file, not a rooftop database; point --db PATH / ROOFTOP_DB at one")
    if not create and not path.exists():
        raise StoreError(f"no rooftop database at {path} yet: `rooftop import FILE` or a measurement creates it "
                         "(or point --db PATH / ROOFTOP_DB at one)")
    store = Store.open(path)
    for rid in store.interrupted:
        sys.stderr.write(f"rooftop: run {rid[:8]} was cut off (its process is gone); marked interrupted, samples kept\n")
    try:
        yield store
    finally:
        warn_unreadable(store)
        store.close()


_TOLD: set[str] = set()  # runs warned about by this command; main() starts it afresh


def warn_unreadable(store: Any) -> None:
    """One line for the values a store holds that no import would accept now (written by an older
    rooftop): they were shown as unknown or left out, so the command still did its work. Each run
    is named once per command, however often the store was opened."""
    new = {rid: problems for rid, problems in store.unreadable.items() if rid not in _TOLD and problems}
    store.unreadable.clear()
    if not new:
        return
    _TOLD.update(new)
    first, more = next(iter(new.values()))[0], sum(map(len, new.values())) > 1
    sys.stderr.write(safe_text(
        f"rooftop: warning: run{'s' if len(new) > 1 else ''} {', '.join(rid[:8] for rid in new)} in {store.path} "
        f"hold{'s' if len(new) == 1 else ''} values no import accepts ({first}{', …' if more else ''}); shown as "
        "unknown or left out (`rooftop delete RUN` removes a run)") + "\n")


def store_profiles(args: argparse.Namespace, ids: Sequence[str] = ()) -> dict[str, DeviceProfile]:
    """Measured and imported profiles for --device, plus any run named in `ids` by id or prefix.

    A missing database means none; an unusable one is reported in one line and the
    catalog still works, so `rooftop op --device h100` never depends on the store.
    """
    from rooftop.store.locations import db_path
    from rooftop.store.runs import Store

    path = db_path(getattr(args, "db", None))
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return {}  # nothing stored (an empty file is left alone: reading never creates a database)
    not_profiles: list[str] = []
    try:
        with Store.open(path) as store, contextlib.ExitStack() as later:
            later.callback(warn_unreadable, store)
            found = store.profiles()
            local = store.local_profile()  # the default device, and one of the ids an unknown one is told of
            if local is not None:
                found["local"] = local
            known = {k.lower() for k in [*found, *catalog()]}
            for i in ids:
                if i.lower() in known:
                    continue
                if i.lower() == "local":
                    not_profiles.append(f"no complete run measured on this host yet, so there is no device "
                                        f"'local' in {path}; measure one, or name a device from `rooftop devices`")
                    continue
                try:
                    run = store.run(i)
                except StoreError:
                    continue  # not a run either: lookup_device names what exists
                try:
                    found[i] = store.profile(run.id)
                except StoreError as exc:  # a run without ceilings (running, failed, points only)
                    not_profiles.append(str(exc))
    except StoreError as exc:
        sys.stderr.write(safe_text(f"rooftop: warning: {exc}; showing the built-in catalog only") + "\n")
        return {}
    except sqlite3.DatabaseError as exc:  # a rooftop file damaged inside
        sys.stderr.write(f"rooftop: warning: database {path} is damaged ({exc}); showing the built-in catalog only\n")
        return {}
    if not_profiles:
        raise UsageError(not_profiles[0])
    return found


def store_points(args: argparse.Namespace, devices: list[DeviceProfile]) -> list:
    """Sample points of the devices that are store runs (their profile names the run), as plot series."""
    from rooftop.models.plotdata import sample_series

    runs = [(d.id, d.extra["run_id"]) for d in devices if d.source in ("measured", "imported") and "run_id" in d.extra]
    if not runs:
        return []
    with open_store(args) as store:
        return [s for label, rid in runs for s in sample_series(store.samples(rid), label)]


def _runs_of(store, refs: Sequence[str]) -> list:  # noqa: ANN001
    return [store.run(r) for r in refs]


def cmd_runs(args: argparse.Namespace) -> int:
    from rooftop.store.locations import db_path

    if not db_path(args.db).exists():
        sys.stdout.write("[]\n" if args.json else f"no runs yet: {db_path(args.db)} does not exist; "
                         "`rooftop import FILE` or a measurement creates it\n")
        return 0
    with open_store(args) as store:
        runs = store.runs()
        if args.json:
            print_json([_run_json(r) for r in runs])
            return 0
        from rooftop.tui.report import Prose, make_console, runs_table

        console = make_console()
        if not runs:
            console.print(Prose(f"no runs in {store.path} yet: `rooftop measure` records one, "
                                "`rooftop import FILE` adds some"))
            return 0
        console.print(runs_table(runs))
        console.print()
        console.print(Prose(f"{fmt_count(len(runs), 'run')} in {store.path}. Name a run by its id (4+ hex digits) or a "
                            "name (`rooftop rename RUN NAME`); complete runs with a profile work as --device."))
    return 0


def _run_json(run) -> dict[str, Any]:  # noqa: ANN001
    import dataclasses

    return {**dataclasses.asdict(run), "short_id": run.short_id}


def cmd_show(args: argparse.Namespace) -> int:
    """One run; a profile or a comm run as `rooftop profile` / `rooftop comm` show theirs, after the facts."""
    from rooftop.store.comms import is_comm
    from rooftop.store.profiles import is_profile

    with open_store(args) as store:
        run = store.run(args.run)
        samples = store.samples(run.id)
        if args.json:
            from rooftop.store.io import run_document

            print_json({**run_document(store, run), **_show_extra_json(run, samples)})
            return 0
        from rooftop.tui.report import make_console, profile_detail, run_facts, samples_table

        console = make_console()
        console.print(run_facts(run))
        if run.has_ceilings:
            console.print()
            console.print(profile_detail(store.profile(run.id)))
        shown = _show_comm(console, run, samples) if is_comm(run) else (
            _show_profile(console, args, run, samples) if is_profile(run) else False)
        if samples and not shown:
            console.print()
            console.print(samples_table(samples))
    return 0


def _show_extra_json(run, samples: list) -> dict[str, Any]:  # noqa: ANN001 - a Run
    """What `rooftop comm --json` / `rooftop profile --json` add for such a run: points and fits, ops and summary."""
    from rooftop.store.comms import is_comm
    from rooftop.store.profiles import is_profile, profile_json

    if is_comm(run):
        from rooftop.models.comm import comm_points, fit_points
        from rooftop.tui.comm_cmd import comm_json

        try:
            points = comm_points(samples)
            return comm_json(points, fit_points(points))
        except (KeyError, TypeError, ValueError):  # malformed (an edited import): the samples are in the document
            return {}
    if is_profile(run):
        try:
            return profile_json(run, samples)
        except ValueError:
            return {}
    return {}


def _show_comm(console: Any, run, samples: list) -> bool:  # noqa: ANN001 - a Run
    from rooftop.models.comm import comm_points, fit_points
    from rooftop.tui.comm_cmd import comm_report

    try:
        points = comm_points(samples)
        report = comm_report(points, fit_points(points), run.backend) if points else None
    except (KeyError, TypeError, ValueError) as exc:  # an imported run whose points name no known collective
        sys.stderr.write(safe_text(f"rooftop show: a stored collective is malformed ({exc}): showing the samples "
                                   "as stored") + "\n")
        return False
    if report is None:
        return False
    console.print()
    console.print(report)
    return True


def _same(a: Any, b: Any) -> bool:
    """Two stored figures agree (None with None; numbers to a part in 10⁹, as JSON keeps them)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return a is None and b is None


def _show_profile(console: Any, args: argparse.Namespace, run, samples: list) -> bool:  # noqa: ANN001 - a Run
    """The profile's report on the roofs it was placed on; False (the samples table instead) when those roofs are
    no longer known or the stored profile is malformed."""
    from rooftop.store.profiles import stored_workload
    from rooftop.tui.profile_cmd import profile_report
    from rooftop.tui.profileview import profile_device

    placed = str((run.device.get("profile") or {}).get("device") or "")
    try:  # the roofs may be a measured or named run's: the store knows those
        extra = store_profiles(args, [placed] if placed else [])
    except UsageError:
        extra = {}
    device = profile_device(run, extra)
    if device is None:
        sys.stderr.write(safe_text(f"rooftop show: the roofs this profile was placed on "
                                   f"({placed or '?'}) are not known here: "
                                   "showing its op groups as stored") + "\n")
        return False
    try:
        work = stored_workload(run, samples, device)
    except ValueError as exc:
        sys.stderr.write(safe_text(f"rooftop show: {exc}: showing its op groups as stored") + "\n")
        return False
    stored, now = run.device.get("profile") or {}, work.summary()
    if any(not _same(stored.get(k), now[k]) for k in ("mfu", "bandwidth_utilisation")):
        sys.stderr.write(safe_text(f"rooftop show: the roofs of {placed} have changed since this profile was "
                                   "taken: showing its op groups as stored") + "\n")
        return False
    console.print()
    console.print(profile_report(work))
    return True


def cmd_rename(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        run = store.rename(args.run, args.name)
        sys.stdout.write(safe_text(f"run {run.short_id} is now {run.name}; use it as --device {run.name}") + "\n")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        run = store.delete(args.run)
        sys.stdout.write(safe_text(f"deleted run {run.short_id}{f' ({run.name})' if run.name else ''} "
                                   f"and its {fmt_count(run.samples, 'sample')}") + "\n")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rooftop.store.io import export_csv, export_json

    with open_store(args) as store:
        runs = store.runs() if args.all else _runs_of(store, args.run)
        if not runs:
            raise UsageError("name one or more runs (see `rooftop runs`), or give --all")
        if args.format == "json":
            text = dumps_json(export_json(store, runs))
            if not args.out or args.out == "-":
                sys.stdout.write(text)
                return 0
            out = Path(args.out)
            _refuse_overwrite([out], args.force)
            out.write_text(text, encoding="utf-8")
            sys.stdout.write(safe_text(f"wrote {fmt_count(len(runs), 'run')} to {out}") + "\n")
            return 0
        files = export_csv(store, runs)
    folder = Path(args.out or f"rooftop-{runs[0].short_id if len(runs) == 1 else 'runs'}")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder}: CSV export writes summary.csv and roofs.csv into a folder; {folder} is a file")
    targets = [folder / name for name in files]
    _refuse_overwrite(targets, args.force)
    folder.mkdir(parents=True, exist_ok=True)
    for t in targets:
        t.write_text(files[t.name], encoding="utf-8")
    sys.stdout.write(safe_text(f"wrote {', '.join(str(t) for t in targets)}") + "\n")
    return 0


def _refuse_overwrite(paths: list, force: bool) -> None:  # noqa: ANN001
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise UsageError(f"{', '.join(existing)} already exists; choose another --out, or add --force to overwrite")


def cmd_import(args: argparse.Namespace) -> int:
    from rooftop.store.db import inspect
    from rooftop.store.io import add_sources, read_sources
    from rooftop.store.locations import db_path

    inspect(db_path(args.db))  # an unusable database is named first (read-only: creates nothing)
    sources = read_sources(args.files)  # then a refused file stops the import before the database is created
    with open_store(args, create=True) as store:
        for res in add_sources(store, sources):
            names = ", ".join(r.label for r in res.added)
            line = f"{res.path} ({res.kind}): added {fmt_count(len(res.added), 'run')}"
            line += f" [{names}]" if names else ""
            if res.skipped:
                kept = "it was" if len(res.skipped) == 1 else "they were"
                line += f"; {len(res.skipped)} already present, left as {kept}"
            sys.stdout.write(safe_text("; ".join([line, *res.notes])) + "\n")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from itertools import combinations

    from rooftop.models.compare import common_paths, compare_path, thread_note

    ids = _device_list(args.devices, "DEVICE")
    if len(ids) < 2:
        raise UsageError("compare needs at least two devices: rooftop compare A B [C…] (catalog ids, run ids or names)")
    profiles = resolve_devices(ids, store_profiles(args, ids))
    pairs = []
    for a, b in combinations(profiles, 2):
        if "dram" not in a.bandwidth or "dram" not in b.bandwidth:
            continue
        pairs += [(a, b, compare_path(a, b, path)) for path in common_paths(a, b)]
    if args.json:
        out = {
            "devices": [{**p.to_dict(), "ridge": {k: p.ridge(k) for k in p.paths()} if "dram" in p.bandwidth else {}}
                        for p in profiles],
            "pairs": [{"a": a.id, "b": b.id, "path": c.path, "level": c.level, "crossover": c.crossover.intensity,
                       "higher_below": c.crossover.higher_below, "higher_above": c.crossover.higher_above,
                       "ridges": c.ridges} for a, b, c in pairs],
            "notes": [n for n in (thread_note(profiles),) if n],
        }
        print_json(out)
        return 0
    from rooftop.tui.report import compare_tables, make_console

    make_console().print(compare_tables(profiles, pairs))
    return 0


def add_store_commands(sub: Any) -> None:
    """runs, show, rename, delete, export, import, compare."""
    from rooftop.store.io import CSV_LIMITS  # their help says what the CSVs cannot carry
    rn = sub.add_parser("runs", help="list the measured and imported runs in the store",
                        description="Every run in the store, oldest first: status, device, host, samples.")
    rn.add_argument("--json", action="store_true", help="print JSON")
    add_db_option(rn)
    rn.set_defaults(func=cmd_runs)

    sh = sub.add_parser("show", help="show one run: facts, ceilings, samples",
                        description="One run: where and how it was measured, its ceilings and every sample point; "
                                    "a comm run as `rooftop comm` shows it, a profile as `rooftop profile` does.")
    sh.add_argument("run", metavar="RUN", help="run id (4+ hex digits) or name")
    sh.add_argument("--json", action="store_true", help="print the run as rooftop JSON (SI units)")
    add_db_option(sh)
    sh.set_defaults(func=cmd_show)

    re_ = sub.add_parser("rename", help="give a run a name, usable as --device NAME",
                         description="Name a run; the name works wherever a device id does.")
    re_.add_argument("run", metavar="RUN", help="run id or current name")
    re_.add_argument("name", metavar="NAME", help="letters, digits, '.', '_', '-'; starting with a letter; not hex "
                                                  "digits only (that reads as a run id), not a device id")
    add_db_option(re_)
    re_.set_defaults(func=cmd_rename)

    de = sub.add_parser("delete", help="delete a run and its samples",
                        description="Delete a run with its samples, ceilings and telemetry (not undoable; "
                                    "`rooftop export RUN` first to keep a copy).")
    de.add_argument("run", metavar="RUN", help="run id or name")
    add_db_option(de)
    de.set_defaults(func=cmd_delete)

    ex = sub.add_parser("export", help="write runs as rooftop JSON or the reference CSVs",
                        description="json: rooftop's own complete format (to stdout, or --out FILE). "
                                    "csv: the reference repository's summary.csv (every measured point) and "
                                    "roofs.csv (B per memory level, F per compute path), into --out FOLDER "
                                    "(default rooftop-RUNID); `rooftop import FOLDER` makes each run one run "
                                    f"again. {CSV_LIMITS}")
    ex.add_argument("run", nargs="*", metavar="RUN", help="run ids or names")
    ex.add_argument("--all", action="store_true", help="every run in the store")
    ex.add_argument("--format", choices=("json", "csv"), default="json", help="json (default) or csv")
    ex.add_argument("-o", "--out", metavar="PATH", help="json: a file ('-' = stdout); csv: a folder")
    ex.add_argument("--force", action="store_true", help="overwrite existing files")
    add_db_option(ex)
    ex.set_defaults(func=cmd_export)

    im = sub.add_parser("import", help="import rooftop JSON or the reference roofs.csv / summary.csv",
                        description="Import runs: rooftop JSON exports, or the reference repository's roofs.csv "
                                    "(ceilings) and summary.csv (sample points). A summary.csv and a roofs.csv from "
                                    "one folder (give the folder, or both files) are one export: each target becomes "
                                    "ONE run with the points of the one and the ceilings of the other. Each device "
                                    "becomes a profile; importing a file again adds nothing. Every file is checked "
                                    "before anything is stored: if one is refused, nothing is imported. "
                                    f"{CSV_LIMITS}")
    im.add_argument("files", nargs="+", metavar="FILE", help="a .json or .csv file, or a folder of a CSV export")
    add_db_option(im)
    im.set_defaults(func=cmd_import)

    cp = sub.add_parser("compare", help="profiles side by side: B, F, ridges, crossovers",
                        description="Devices side by side: bandwidth per level, peak per path, ridges, and the "
                                    "intensity where each pair's roofs cross.")
    cp.add_argument("devices", nargs="+", metavar="DEVICE", help="catalog ids, run ids or run names (two or more)")
    cp.add_argument("--json", action="store_true", help="print JSON (SI units)")
    add_db_option(cp)
    cp.set_defaults(func=cmd_compare)


def build_parser() -> Parser:
    p = Parser(
        prog="rooftop",
        description=(
            "rooftop — a terminal roofline lab for GPU servers. It places an op (GEMM, attention, "
            "elementwise, a decode step) on a device's measured or published roofline: the regime that "
            "bounds it, the time it cannot beat, and what to do about it."
        ),
        epilog="With no command, rooftop opens its terminal app:\n"
               "  1–7 switch tabs, m measures this machine, ? lists the keys, q quits\n"
               "Run `rooftop COMMAND --help` for each command's options.",
    )
    p.add_argument("-d", "--device", metavar="ID",
                   help="the app's first device, or the device of op/plot/llm (default: this machine's "
                        "measured profile `local`, else this GPU's reference, else h100)")
    add_db_option(p, top=True)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    from rooftop.tui.measure_cmd import add_measure_command  # light: torch loads only when measuring
    add_measure_command(sub)
    from rooftop.tui.profile_cmd import add_profile_command  # light: torch loads only to run a program
    add_profile_command(sub)
    from rooftop.tui.comm_cmd import add_comm_command  # light: torch loads only when the ranks start
    add_comm_command(sub)

    op = sub.add_parser(
        "op", help="analyse ops on one or more devices", epilog=EPILOG_OP,
        description="Place ops on a device's roofline: W, Q, I, ridge, regime, time bound, advice.",
    )
    op.add_argument("spec", nargs="*", help=f"the op spec words (op kinds: {', '.join(op_kinds())})")
    op.add_argument("--pinned", action="store_true",
                    help="also the ops pinned in the app (p on the What-if tab), which the store keeps")
    add_device_option(op, "device id (repeat or comma-separate for side by side); see `rooftop devices`")
    op.add_argument("--measured-ms", metavar="T", help="a measured kernel time in ms (one, or one per op, comma-separated)")
    op.add_argument("--json", action="store_true", help="print JSON (SI units) instead of the report")
    op.set_defaults(func=cmd_op)

    dv = sub.add_parser("devices", help="list the device catalog with provenance",
                        description="The built-in catalog: reference measurements and vendor datasheets (dense).")
    dv.add_argument("ids", nargs="*", metavar="ID", help="show every roof of these devices")
    dv.add_argument("--json", action="store_true", help="print JSON (SI units)")
    dv.set_defaults(func=cmd_devices)

    pl = sub.add_parser("plot", help="print a log-log roofline with ops' points",
                        description="Print the roofline of one or more devices (overlaid) with the ops' points.")
    add_device_option(pl, "device id (repeat to overlay)")
    pl.add_argument("--op", action="append", metavar="SPEC", help='an op to mark, e.g. --op "gemm 1 8192 8192 bf16"')
    pl.add_argument("--paths", metavar="LIST", help="compute paths to draw, comma-separated, or 'all'")
    pl.add_argument("--width", type=plot_size, metavar="COLS", help="chart width (default: the terminal's)")
    pl.add_argument("--height", type=plot_size, metavar="ROWS", help="chart height (default: the terminal's)")
    pl.add_argument("--points", action="store_true",
                    help="also draw the measured (or imported) sample points of devices that are store runs")
    pl.set_defaults(func=cmd_plot)

    lm = sub.add_parser(
        "llm", help="an LLM's prefill or decode step on the roofline",
        description="Place a transformer's prefill or decode step on a device's roofline: the per-layer ops, the "
                    "step's lower bound (bytes read over B, and the sum of each op's bound), the tokens/s ceiling, "
                    "and the batch at which decode turns compute-bound.",
        epilog="MODEL is a built-in (qwen2.5-7b, llama-3.1-8b, mixtral-8x7b, … — see the error for the list) or a "
               "Hugging Face config.json (or its folder).\n\nexamples:\n"
               "  rooftop llm qwen2.5-7b --device h100 --batch 1,8,16 \\\n"
               "      --measured-ms 11.56,11.9,12.5\n"
               "  rooftop llm llama-3.1-8b --phase prefill --prompt 2048 --device h200\n"
               "  rooftop llm ./config.json --context 4096 --kv-dtype fp8 --json\n"
               "  rooftop llm qwen2.5-7b --parts attention=17.6,mlp=24,runtime=6,comm=10.4 \\\n"
               "      --speedup attention=1.67",
    )
    lm.add_argument("model", metavar="MODEL", help="built-in model name or config.json path")
    lm.add_argument("--phase", choices=("decode", "prefill"), default="decode", help="default: decode")
    lm.add_argument("--batch", default="1", metavar="LIST", help="batch sizes, comma-separated (default 1)")
    lm.add_argument("--prompt", default="128", metavar="N", help="prompt tokens (default 128)")
    lm.add_argument("--context", metavar="LIST", help="decode: tokens in the KV cache, comma-separated (default: the prompt)")
    lm.add_argument("--dtype", metavar="DTYPE", help="weight dtype (default: the config's)")
    lm.add_argument("--kv-dtype", metavar="DTYPE", help="KV-cache dtype, e.g. fp8 (default: the weights')")
    add_device_option(lm, "device id (default: this machine's measured profile `local`, else this GPU's "
                          "reference, else h100)")
    lm.add_argument("--measured-ms", metavar="T", help="measured step times in ms, one per batch × context")
    lm.add_argument("--parts", metavar="NAME=MS,…", help="an end-to-end time table for an Amdahl breakdown")
    lm.add_argument("--speedup", metavar="NAME=X,…", help="speed-up factors of some parts")
    lm.add_argument("--tp", type=int, default=1, metavar="N", help="tensor-parallel ranks: their all-reduces per step")
    lm.add_argument("--pp", type=int, default=1, metavar="N", help="pipeline stages: their sends per step")
    lm.add_argument("--json", action="store_true", help="print JSON (SI units)")
    add_db_option(lm)
    lm.set_defaults(func=cmd_llm)

    wt = sub.add_parser("watch", help="print live GPU (or CPU) telemetry, one line per interval",
                        description="Live telemetry through NVML (utilisation, clocks, power, temperature, memory, "
                                    "PCIe, throttle reasons, the processes on each GPU); on Hopper and newer also "
                                    "DRAM bandwidth (bytes/s, and as a fraction of this machine's measured B, else "
                                    "the reference profile's) and SM and tensor activity, from the second line on. "
                                    "The CPU through psutil when there is no NVML. "
                                    "Runs until Ctrl-C or --count lines.")
    wt.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between lines (default 1; ≥ 0.05)")
    wt.add_argument("--gpu", type=int, metavar="N", help="only this GPU index")
    wt.add_argument("--count", type=int, metavar="N", help="stop after N lines")
    wt.add_argument("--json", action="store_true",
                    help="JSON lines (SI units; null for N/A): every field per GPU, and at the top the first "
                         "GPU's dram_bandwidth, dram_fraction_of_roof, tensor_active, sm_active, and processes")
    add_db_option(wt)
    wt.set_defaults(func=cmd_watch)
    for cmd in (op, dv, pl):
        add_db_option(cmd)
    add_store_commands(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None) or run_app
    name = f"rooftop {args.command}" if args.command else "rooftop"
    _TOLD.clear()
    try:
        return func(args)
    except (SpecError, NoRoof, UnknownDevice, UsageError, ModelError, StoreError) as exc:
        msg = exc.args[0] if exc.args else str(exc)
        sys.stderr.write(f"{name}: error: {safe_text(msg)}\n")  # it may quote a stored name
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside a measurement's own handling (e.g. while torch loads)
        sys.stderr.write(f"\n{name}: interrupted\n")
        return 130
    except BrokenPipeError:  # `rooftop devices | head`: stop quietly, and let the exit flush go nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except sqlite3.DatabaseError as exc:  # damage found mid-command: name the file, never a traceback
        sys.stderr.write(f"{name}: error: database {_db_for(args)} is damaged ({exc}); "
                         "check it with `sqlite3 FILE 'PRAGMA integrity_check'`, or use another --db PATH\n")
        return 2
    except OSError as exc:  # a path that cannot be read or written (export -o /nonexistent/x.json, …)
        sys.stderr.write(f"{name}: error: {exc.strerror or exc}: {exc.filename or ''}\n".replace(": \n", "\n"))
        return 2
    except Exception as exc:  # a bug, not bad input: one line unless asked for the traceback
        if os.environ.get("ROOFTOP_DEBUG"):
            raise
        sys.stderr.write(f"{name}: internal error: {exc!r} (set ROOFTOP_DEBUG=1 for the traceback)\n")
        return 1


def _db_for(args: argparse.Namespace) -> str:
    from rooftop.store.locations import db_path

    return str(db_path(getattr(args, "db", None)))


if __name__ == "__main__":
    raise SystemExit(main())
