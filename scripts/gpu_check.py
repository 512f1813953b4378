"""The Python half of scripts/gpu-check.sh: what the machine has, and the measured-vs-reference table.

    python scripts/gpu_check.py preflight
    python scripts/gpu_check.py protocol OUT.json
    python scripts/gpu_check.py report MEASURE.json [DB [PROTOCOL.json]]
    python scripts/gpu_check.py gpm [SECONDS]

`protocol` times plain torch's read_reduce (`x.sum()`) at 1 and 2 GiB by the reference protocol (CUDA
events around back-to-back calls filling 20 ms, at most 200; 5 warm-ups, 7 samples, median), right
after the measurement: the anchor the measured B dram is held against, and the hierarchy next to it.

`report` reads what `rooftop measure --json` printed, also when the run was cut short (status
cancelled after the stage's timeout). When that output is missing or unreadable (the process was
killed), it shows the newest run of the store DB instead, whose samples were saved one by one.
`gpm` runs a known copy load on cuda:0 while the sampler reads NVML GPM, and compares the DRAM
bandwidth GPM reports with the copy's own (bytes read + written over CUDA-event time): within 10% is
the goal. None of the subcommands raises: each problem is one line, and the exit status says whether it worked.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from typing import Any

GOAL = 0.97  # of the reference's B and bf16 F
DRAM_GOAL = (0.97, 1.06)  # B dram against plain torch's read_reduce at ≥ 1 GiB, timed at the same time
# The cache levels a card should reach (published microbenchmarks; the L1's top is its physical limit).
LEVEL_GOALS = {"h200": {"l2": (9e12, None), "l1": (20e12, 33.4e12)}}
L1_BYTES_PER_CLOCK = 128  # per SM per clock
PROTOCOL_SIZES = (1 << 30, 2 << 30)  # ≥ 1 GiB: far above any L2
MODULES = ("torch", "triton", "pynvml", "psutil", "numpy", "rich", "platformdirs", "plotext", "textual", "pytest",
           "hypothesis")


def _version(name: str) -> str:
    try:
        mod = importlib.import_module(name)
    except Exception as exc:  # a broken install raises more than ImportError
        return f"MISSING ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    return str(getattr(mod, "__version__", "present"))


def preflight() -> int:
    """Print the versions and the device as torch, the driver and NVML see it; 1 when torch sees no GPU."""
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    for name in MODULES:
        print(f"  {name:13s} {_version(name)}")
    import rooftop.probes

    print(f"rooftop from {rooftop.probes.__path__[0]}")
    print(f"C compiler for Triton's launcher: {shutil.which('gcc') or shutil.which('cc') or 'NONE (Triton kernels will fail)'}")
    try:
        import torch
    except Exception:
        return 1
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuda available: {torch.cuda.is_available()}")
    if not torch.cuda.is_available():
        return 1
    from rooftop.probes.devinfo import cuda_info

    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        print(f"cuda:{i} {props!r}; torch has L2_cache_size: {hasattr(props, 'L2_cache_size')}")
    info = cuda_info(0)
    print("cuda:0 facts: " + json.dumps({k: v for k, v in info.to_dict().items() if k != "caches"}))
    return 0


def _timed(fn: Any) -> float:
    """The reference protocol's median seconds per call (CUDA events; harness_protocol.py's `timed`)."""
    import statistics

    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record(); torch.cuda.synchronize()  # noqa: E702
    calls = max(1, min(200, int(0.020 / max(s.elapsed_time(e) / 1e3, 1e-7))))
    times = []
    for _ in range(7):
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3 / calls)
    return statistics.median(times)


def protocol(path: str) -> int:
    """Time plain torch's read_reduce at PROTOCOL_SIZES on cuda:0 and write {size: bytes/s, "best": …}; 1 without a GPU."""
    try:
        import torch
    except Exception as exc:
        print(f"no torch: {exc}")
        return 1
    if not torch.cuda.is_available():
        print("no CUDA device: the reference protocol's read_reduce needs one")
        return 1
    res: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "read_reduce": {}}
    for nbytes in PROTOCOL_SIZES:
        x = torch.rand(nbytes // 4, device="cuda")
        res["read_reduce"][str(nbytes)] = nbytes / _timed(lambda: x.sum())  # noqa: F821 - timed before the del
        print(f"read_reduce {nbytes / 2**30:g} GiB: {res['read_reduce'][str(nbytes)] / 1e9:.0f} GB/s (plain torch)")
        del x
        torch.cuda.empty_cache()
    res["best"] = max(res["read_reduce"].values())
    with open(path, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
    return 0


def hierarchy(doc: dict[str, Any], proto: dict[str, Any] | None, ref_id: str | None) -> list[str]:
    """The measured levels against plain torch's read_reduce (run at the same time) and the card's goals."""
    prof, info = doc.get("profile") or {}, doc.get("device_info") or {}
    bw = prof.get("bandwidth") or {}
    lines = ["hierarchy (TB/s):"]
    rr = (proto or {}).get("best")
    dram = bw.get("dram")
    if rr and dram:
        ratio = dram / rr
        lo, hi = DRAM_GOAL
        lines.append(f"  B dram {dram / 1e12:.3f} / plain torch read_reduce ≥ 1 GiB {rr / 1e12:.3f} = {ratio:.3f} "
                     f"(goal {lo}–{hi}: {'ok' if lo <= ratio <= hi else 'OUTSIDE'})")
    else:
        lines.append(f"  B dram {dram / 1e12:.3f}" if dram else "  B dram: not measured")
        lines.append("  plain torch read_reduce: " + (f"{rr / 1e12:.3f}" if rr else "not measured (no protocol run)"))
    clock = (info.get("clocks_mhz") or {}).get("sm_max")
    units = info.get("units")
    limit = units * L1_BYTES_PER_CLOCK * clock * 1e6 if units and clock else None
    goals = LEVEL_GOALS.get(ref_id or "", {})
    for level in ("l2", "l1"):
        value = bw.get(level)
        lo, hi = goals.get(level, (None, None))
        if level == "l1" and limit:
            hi = min(hi, limit) if hi else limit
        want = (f"≥ {lo / 1e12:g}" if lo and not hi else f"{lo / 1e12:g}–{hi / 1e12:.1f}" if lo and hi
                else f"≤ {hi / 1e12:.1f} (SMs × 128 B × clock)" if hi else "")
        if value is None:
            verdict = "not measured"
        elif (lo and value < lo) or (hi and value > hi):
            verdict = "OUTSIDE"
        else:
            verdict = "ok" if want else "not judged"
        shown = f"{value / 1e12:.3f}" if value else "-"
        lines.append(f"  B {level} {shown}" + (f" (goal {want}: {verdict})" if want else f" ({verdict})"))
    for level, f in ((prof.get("extra") or {}).get("flagged") or {}).items():
        lines.append(f"  flagged: B {level} {float(f.get('value', 0)) / 1e12:.3f} ({f.get('case')}): {f.get('why')}")
    return lines


def _fmt(value: float | None, scale: float, width: int = 12) -> str:
    return f"{value / scale:{width}.1f}" if value else f"{'-':>{width}s}"


def table(doc: dict[str, Any], proto: dict[str, Any] | None = None) -> list[str]:
    """The measured ceilings next to the reference's for this card, the hierarchy against plain torch's
    read_reduce (`proto`, from `protocol`), and what was skipped and why."""
    from rooftop.models.catalog import find_by_name
    from rooftop.models.profile import NoRoof

    prof, info = doc.get("profile") or {}, doc.get("device_info") or {}
    ref = find_by_name(str(info.get("name", "")))
    lines = [
        f"{info.get('name')}  cc {info.get('compute_capability')}  driver {info.get('driver_version')}  "
        f"CUDA {info.get('cuda_version')}  torch {info.get('torch_version')}  L2 {info.get('l2_bytes')} B  "
        f"clocks {info.get('clocks_mhz')}",
        f"run: {doc.get('status')}, {doc.get('wall_s') or 0:.1f} s inside the plan"
        + (" (quick-plan target: 30 s on an H100/H200)" if doc.get("plan") == "quick" else "")
        + (" — cut short: the figures are what was measured before" if doc.get("interrupted") else ""),
        f"reference profile: {ref.id if ref else 'none for this card'}",
        f"{'ceiling':16s} {'measured':>12s} {'reference':>12s} {'ratio':>7s}  case",
    ]
    prov = prof.get("ceilings") or {}
    for kind, group, scale, unit in (("B", "bandwidth", 1e9, "GB/s"), ("F", "peak", 1e12, "TFLOP/s")):
        for key, value in (prof.get(group) or {}).items():
            r = (ref.bandwidth if group == "bandwidth" else ref.peak).get(key) if ref else None
            case = (prov.get(group) or {}).get(key) or {}
            ratio = f"{value / r.value:7.3f}" if r and value else "      -"
            flag = "" if case.get("stable", True) else " (unstable)"
            lines.append(f"{kind + ' ' + key:16s} {_fmt(value, scale)} {_fmt(r.value if r else None, scale)} {ratio}"
                         f"  {case.get('case', '')}{flag}  [{unit}]")
    if prof.get("launch_overhead"):
        graph = (prof.get("extra") or {}).get("launch_graph_s")
        lines.append(f"launch overhead {prof['launch_overhead'] * 1e6:.2f} µs; graph "
                     + (f"{graph * 1e6:.2f} µs per kernel" if graph else "-"))
    if ref:
        try:
            b = prof["bandwidth"]["dram"] / ref.B("dram")
            f = prof["peak"]["bf16-tc"] / ref.F("bf16-tc")
            lines.append(f"goal ≥ {GOAL} of the reference: B {b:.3f} {'ok' if b >= GOAL else 'BELOW'}, "
                         f"bf16 F {f:.3f} {'ok' if f >= GOAL else 'BELOW'}")
        except (KeyError, TypeError, NoRoof):
            lines.append("goal: not judged (no B dram or no bf16 F measured)")
    lines += hierarchy(doc, proto, ref.id if ref else None)
    samples = doc.get("samples") or []
    skipped = [s for s in samples if s.get("skipped")]
    lines.append(f"{len(samples)} samples, {len(skipped)} skipped; throttled: {', '.join(doc.get('throttled') or []) or 'none'}")
    lines += [f"  - {reason}" for reason in sorted({s['skipped'] for s in skipped})]
    return lines


def _from_store(db: str) -> int:
    """Show the newest run of the store (its samples were committed as they came)."""
    cli = [sys.executable, "-m", "rooftop.tui.cli"]
    listing = subprocess.run([*cli, "runs", "--json", "--db", db], capture_output=True, text=True)
    try:
        runs = json.loads(listing.stdout)
    except json.JSONDecodeError:
        runs = []
    if not runs:
        print(f"the store {db} has no run either: nothing was measured ({listing.stderr.strip()[:200]})")
        return 1
    run = runs[-1]
    print(f"from the store: run {run.get('short_id')} ({run.get('status')})")
    subprocess.run([*cli, "show", str(run.get("short_id") or run.get("id")), "--db", db])
    return 1  # the figures are there, but the measurement did not end on its own


def report(path: str, db: str | None = None, proto_path: str | None = None) -> int:
    """Print the table from `rooftop measure --json` output; 1 when there was none to read."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"no measure output to read ({path}: {exc})")
        return _from_store(db) if db else 1
    proto = None
    if proto_path:
        try:
            with open(proto_path, encoding="utf-8") as f:
                proto = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            print(f"no reference-protocol output to read ({proto_path}: {exc})")
    print("\n".join(table(doc, proto)))
    return 0  # a run cut short is the measure stage's failure, told there and in the table


GPM_GOAL = 0.10  # GPM's DRAM bandwidth within 10% of a known copy load's


def gpm(seconds: float = 4.0) -> int:
    """A device-to-device copy loop on cuda:0 for `seconds`, timed by CUDA events, beside the sampler at
    4 Hz: print both bandwidths and the fraction of B; 1 when they differ by more than GPM_GOAL (0 with a
    note where there is no GPU or no GPM: nothing to compare)."""
    import statistics
    import time

    try:
        import torch
    except Exception as exc:
        print(f"no torch ({exc}): skipped")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    from rooftop.probes.telemetry import Sampler

    n = 2**28  # 1 GiB of fp32 each way: far past any cache
    src, dst = torch.ones(n, device="cuda"), torch.empty(n, device="cuda")
    dst.copy_(src)
    torch.cuda.synchronize()
    with Sampler(interval=0.25, cpu=False) as sampler:
        time.sleep(0.6)  # the first GPM pair
        start_ev, end_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0, copies = time.time(), 0
        start_ev.record()
        while time.time() - t0 < seconds:
            for _ in range(50):
                dst.copy_(src)
            copies += 50
            torch.cuda.synchronize()
        end_ev.record()
        torch.cuda.synchronize()
        t1 = time.time()
        snaps = sampler.history(since=t0 + 0.5)
    copy_bw = 2 * 4 * n * copies / (start_ev.elapsed_time(end_ev) / 1e3)
    print(f"copy load: {copies} copies of {4 * n / 2**30:.0f} GiB, {copy_bw / 1e9:,.0f} GB/s (CUDA events)")
    gpus = sorted({g.index for s in snaps for g in s.gpus})
    best = None
    for i in gpus:
        g = [x for s in snaps if s.time <= t1 for x in s.gpus if x.index == i]
        bws = [x.dram_bandwidth for x in g if x.dram_bandwidth is not None]
        if not bws:
            print(f"gpu{i}: no GPM bandwidth ({next((x.gpm_note for x in g if x.gpm_note), 'no pair of samples')})")
            continue
        frac = [x.dram_fraction_of_roof for x in g if x.dram_fraction_of_roof is not None]
        roof = next((x.dram_roof_source for x in g if x.dram_roof_source), None)
        med = statistics.median(bws)
        print(f"gpu{i}: GPM DRAM {med / 1e9:,.0f} GB/s over {len(bws)} samples = {med / copy_bw:.3f} of the copy's"
              + (f"; {100 * statistics.median(frac):.0f}% of B ({roof})" if frac else "")
              + f"; tensor {statistics.median([x.tensor_active or 0 for x in g]):.2f}, "
              f"SM {statistics.median([x.sm_active or 0 for x in g]):.2f} active; "
              f"processes: {[(p.pid, p.name) for p in g[-1].processes]}")
        if best is None or abs(med / copy_bw - 1) < abs(best - 1):
            best = med / copy_bw
    if best is None:
        return 0  # no GPM here: said above
    ok = abs(best - 1) <= GPM_GOAL
    print(f"GPM vs the copy: {best:.3f} ({'within' if ok else 'OFF BY MORE THAN'} {GPM_GOAL:.0%})")
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["preflight"]:
        return preflight()
    if argv[:1] == ["protocol"] and len(argv) == 2:
        return protocol(argv[1])
    if argv[:1] == ["report"] and len(argv) in (2, 3, 4):
        return report(*argv[1:])
    if argv[:1] == ["gpm"] and len(argv) in (1, 2):
        return gpm(*(float(x) for x in argv[1:]))
    sys.stderr.write(
        "usage: gpu_check.py preflight | protocol OUT.json | report MEASURE.json [DB [PROTOCOL.json]] | gpm [SECONDS]\n"
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
