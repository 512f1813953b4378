#!/usr/bin/env bash
# On a CUDA machine, in one call: what is there (preflight), `rooftop measure --plan quick --json`,
# plain torch's read_reduce at 1 and 2 GiB by the reference protocol right after it, and the measured
# ceilings next to the reference values for this card with the hierarchy (B dram against that
# read_reduce, l2, l1, against their goals), the sampler against real NVML (and its GPM DRAM bandwidth
# against a known copy load), then the GPU-marked tests.
#
# Each stage runs under its own timeout and the script goes on when one fails or hangs; the
# measurement comes first, so nothing after it can cost the figures. A measurement cut short by
# its timeout stops like Ctrl-C and still prints what it measured; killed outright, its samples
# are in a scratch store, shown instead. Budget: the limits add up to 485 s (plus 10 s grace per
# stage); expected about 90 s on an H100/H200, plus the quick plan again on every GPU at once
# (the fleet stage). Exit status 0 when every stage passed, else 1.
#
# Usage: [ROOFTOP_GPU_CHECK_OUT=FILE] scripts/gpu-check.sh [PYTHON]; FILE keeps the measure JSON (default:
# a scratch folder, named in the summary). Nothing is installed: this checkout is imported as `rooftop`
# through a folder of links (a device box has no network). Pure-Python dependencies the box lacks
# can be put in .gpu-deps/ (added to the end of PYTHONPATH).
set -uo pipefail  # no -e: a failing stage must not stop the stages after it
out=${ROOFTOP_GPU_CHECK_OUT:-}
case $out in "" | /*) ;; *) out=$PWD/$out ;; esac  # a relative FILE is the caller's, not the checkout's
cd "$(dirname "$0")/.."
root=$PWD
PY=${1:-${PYTHON:-}}
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ] && .venv/bin/python -c "" 2>/dev/null; then PY=.venv/bin/python; else PY=python3; fi
fi
work=$(mktemp -d -t rooftop-gpu-check-XXXXXX)
out=${out:-$work/measure.json}
mkdir -p "$(dirname "$out")"
db=$work/rooftop.db
mkdir -p "$work/site/rooftop"  # a namespace package: pyproject.toml's package-dir mapping, by links
for pkg in models probes store tui; do ln -s "$root/$pkg" "$work/site/rooftop/$pkg"; done
export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
if [ -d "$root/.gpu-deps" ]; then export PYTHONPATH="$PYTHONPATH:$root/.gpu-deps"; fi
export ROOFTOP_HOME="$work"  # never the user's store or settings

# Stage limits in seconds (overridable for the script's own test).
T_PRE=${ROOFTOP_GPU_CHECK_PREFLIGHT_S:-25}
T_MEASURE=${ROOFTOP_GPU_CHECK_MEASURE_S:-150}
T_PROTO=${ROOFTOP_GPU_CHECK_PROTOCOL_S:-30}
T_REPORT=${ROOFTOP_GPU_CHECK_REPORT_S:-15}
T_WATCH=${ROOFTOP_GPU_CHECK_WATCH_S:-20}
T_NVML=${ROOFTOP_GPU_CHECK_NVML_S:-20}
T_GPM=${ROOFTOP_GPU_CHECK_GPM_S:-20}
T_FLEET=${ROOFTOP_GPU_CHECK_FLEET_S:-120}
T_PYTEST=${ROOFTOP_GPU_CHECK_PYTEST_S:-70}
read -r -a measure_args <<< "${ROOFTOP_GPU_CHECK_MEASURE_ARGS:---plan quick --device cuda}"  # never the CPU by mistake
read -r -a pytest_args <<< "${ROOFTOP_GPU_CHECK_PYTEST_ARGS:--m gpu tests/test_probes_gpu.py}"

summary=()
failed=0
child=""
interrupted=0
# Ctrl-C or a closed SSH session: stop the stage in flight (a measurement then prints what it has, as
# on a timeout), show the figures, and stop. `timeout` runs each stage in its own process group, so the
# terminal's signal reaches only this script: it passes it on.
on_signal() {
    interrupted=1
    [ -n "$child" ] && kill -TERM "$child" 2>/dev/null
}
trap on_signal INT HUP TERM

# stage NAME LIMIT OUTFILE COMMAND...: run COMMAND under `timeout` (TERM, then KILL 10 s later), its
# stdout to OUTFILE ("-": the terminal); record how it ended; never stop the script by itself failing.
# The stage runs in the background and is waited for, so that a signal is handled at once.
stage() {
    local name=$1 limit=$2 dest=$3 t0=$SECONDS rc how
    shift 3
    echo "== $name (limit ${limit} s)"
    if [ "$dest" = - ]; then
        timeout -s TERM -k 10 "$limit" "$@" &
    else
        timeout -s TERM -k 10 "$limit" "$@" > "$dest" &
    fi
    child=$!
    while :; do
        wait "$child"
        rc=$?
        kill -0 "$child" 2>/dev/null || break  # gone: rc is its status (else a signal woke the wait)
    done
    child=""
    case $rc in
        0) how="ok" ;;
        124 | 137) how="TIMED OUT after ${limit} s" ;;
        *) how="FAILED (exit $rc)" ;;
    esac
    [ "$interrupted" -eq 1 ] && how="$how, interrupted"
    [ "$rc" -eq 0 ] || failed=1
    summary+=("$(printf '%-10s %s, %d s' "$name" "$how" $((SECONDS - t0)))")
}

finish() {
    echo "== summary (measure output: $out)"
    printf '%s\n' "${summary[@]}"
    exit "$1"
}

# SIGTERM (timeout's signal) and SIGINT raise KeyboardInterrupt, so a measurement cut short ends
# as `cancelled` and still prints its JSON, even where the shell started it with SIGINT ignored.
as_ctrl_c='import signal, sys
signal.signal(signal.SIGTERM, signal.default_int_handler)
signal.signal(signal.SIGINT, signal.default_int_handler)
from rooftop.tui.cli import main
sys.exit(main(sys.argv[1:]))'

stage preflight "$T_PRE" - "$PY" scripts/gpu_check.py preflight
[ "$interrupted" -eq 1 ] && finish 130
stage measure "$T_MEASURE" "$out" "$PY" -c "$as_ctrl_c" measure "${measure_args[@]}" --json --db "$db"
proto=$work/protocol.json
[ "$interrupted" -eq 1 ] || stage protocol "$T_PROTO" - "$PY" scripts/gpu_check.py protocol "$proto"
stage report "$T_REPORT" - "$PY" scripts/gpu_check.py report "$out" "$db" "$proto"  # also after an interrupt
[ "$interrupted" -eq 1 ] && finish 130
stage watch "$T_WATCH" - "$PY" -c "$as_ctrl_c" watch --count 3 --interval 0.25
[ "$interrupted" -eq 1 ] && finish 130
stage nvml "$T_NVML" - "$PY" -c 'import statistics, time
from rooftop.probes.telemetry import NvmlSource
src = NvmlSource()
ok = src.available
print(f"NVML: {src.state}, {len(src.read())} GPU(s)")
times = []
for _ in range(8):
    t0 = time.perf_counter(); src.read(); times.append(time.perf_counter() - t0)
print(f"one read of every GPU: median {statistics.median(times) * 1e3:.1f} ms (the sampler reads every 250 ms)")
src.close()
raise SystemExit(0 if ok else 1)'
[ "$interrupted" -eq 1 ] && finish 130
stage gpm "$T_GPM" - "$PY" scripts/gpu_check.py gpm 4
[ "$interrupted" -eq 1 ] && finish 130
# every GPU at once: one row each, the wall time against the single GPU's quick plan above (≤ 1.2x)
stage fleet "$T_FLEET" "$work/fleet.json" "$PY" -c "$as_ctrl_c" measure --all-gpus --plan quick --json --db "$db"
[ "$interrupted" -eq 1 ] && finish 130
stage fleetrep "$T_REPORT" - "$PY" scripts/gpu_check.py fleet "$work/fleet.json" "$out"
[ "$interrupted" -eq 1 ] && finish 130
stage pytest "$T_PYTEST" - "$PY" -m pytest -q -p no:cacheprovider "${pytest_args[@]}"
[ "$interrupted" -eq 1 ] && finish 130
finish "$failed"
