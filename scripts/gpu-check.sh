#!/usr/bin/env bash
# On a CUDA machine: the GPU-marked tests, then `rooftop measure --plan quick --json`,
# then the measured ceilings next to the reference values for this card.
# Budget: under 5 minutes on an H100/H200. Usage: scripts/gpu-check.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-}}
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
out=${ROOFTOP_GPU_CHECK_OUT:-$(mktemp -t rooftop-measure-XXXXXX.json)}

echo "== pytest -m gpu"
timeout 180 "$PY" -m pytest -q -m gpu tests

echo "== rooftop watch: the sampler against real NVML (3 lines)"
timeout 30 "$PY" -m rooftop.tui.cli watch --count 3 --interval 0.25

echo "== rooftop measure --plan quick --json  (> $out)"
start=$(date +%s)
timeout 240 "$PY" -m rooftop.tui.cli measure --plan quick --json --no-save > "$out"
echo "quick plan: $(( $(date +%s) - start )) s wall (target < 30 s on an H100/H200)"

echo "== measured vs reference"
"$PY" - "$out" <<'PY'
import json, sys
from rooftop.models.catalog import find_by_name

doc = json.load(open(sys.argv[1]))
prof, info = doc["profile"], doc["device_info"]
ref = find_by_name(info["name"])
print(f"{info['name']}  cc {info.get('compute_capability')}  driver {info.get('driver_version')}  "
      f"CUDA {info.get('cuda_version')}  torch {info['torch_version']}  clocks {info.get('clocks_mhz')}")
print(f"reference profile: {ref.id if ref else 'none for this card'}")
cases = prof["ceilings"]
rows = [("B", k, v, cases["bandwidth"][k], 1e9, "GB/s", ref.bandwidth.get(k) if ref else None)
        for k, v in prof["bandwidth"].items()]
rows += [("F", k, v, cases["peak"][k], 1e12, "TFLOP/s", ref.peak.get(k) if ref else None)
         for k, v in prof["peak"].items()]
print(f"{'ceiling':16s} {'measured':>12s} {'reference':>12s} {'ratio':>7s}  case")
for kind, key, value, c, scale, unit, r in rows:
    ratio = f"{value / r.value:7.3f}" if r else "      -"
    refv = f"{r.value / scale:12.1f}" if r else f"{'-':>12s}"
    flag = "" if c.get("stable", True) else " (unstable)"
    print(f"{kind + ' ' + key:16s} {value / scale:12.1f} {refv} {ratio}  {c['case']}{flag}  [{unit}]")
if prof.get("launch_overhead"):
    print(f"launch overhead {prof['launch_overhead'] * 1e6:.2f} µs; "
          f"graph {prof['extra'].get('launch_graph_s', float('nan')) * 1e6:.2f} µs per kernel")
if ref and "dram" in prof["bandwidth"] and "bf16-tc" in prof["peak"]:
    b = prof["bandwidth"]["dram"] / ref.B("dram")
    f = prof["peak"]["bf16-tc"] / ref.F("bf16-tc")
    print(f"goal ≥ 0.97 of the reference: B {b:.3f} {'ok' if b >= 0.97 else 'BELOW'}, "
          f"bf16 F {f:.3f} {'ok' if f >= 0.97 else 'BELOW'}")
skipped = [s for s in doc["samples"] if s["skipped"]]
print(f"{len(doc['samples'])} samples, {len(skipped)} skipped")
for reason in sorted({s["skipped"] for s in skipped}):
    print(f"  skipped: {reason}")
PY
