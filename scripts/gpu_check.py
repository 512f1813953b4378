"""The Python half of scripts/gpu-check.sh: what the machine has, and the measured-vs-reference table.

    python scripts/gpu_check.py preflight
    python scripts/gpu_check.py report MEASURE.json [DB]

`report` reads what `rooftop measure --json` printed, also when the run was cut short (status
cancelled after the stage's timeout). When that output is missing or unreadable (the process was
killed), it shows the newest run of the store DB instead, whose samples were saved one by one.
Neither subcommand raises: each problem is one line, and the exit status says whether it worked.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from typing import Any

GOAL = 0.97  # of the reference's B and bf16 F
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


def _fmt(value: float | None, scale: float, width: int = 12) -> str:
    return f"{value / scale:{width}.1f}" if value else f"{'-':>{width}s}"


def table(doc: dict[str, Any]) -> list[str]:
    """The measured ceilings next to the reference's for this card, and what was skipped and why."""
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


def report(path: str, db: str | None = None) -> int:
    """Print the table from `rooftop measure --json` output; 1 when there was none to read."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"no measure output to read ({path}: {exc})")
        return _from_store(db) if db else 1
    print("\n".join(table(doc)))
    return 0  # a run cut short is the measure stage's failure, told there and in the table


def main(argv: list[str]) -> int:
    if argv[:1] == ["preflight"]:
        return preflight()
    if argv[:1] == ["report"] and len(argv) in (2, 3):
        return report(*argv[1:])
    sys.stderr.write("usage: gpu_check.py preflight | report MEASURE.json [DB]\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
