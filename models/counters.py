"""What the GPU's own counters count: one table of metric meanings, and a kernel's measured W and Q from them.

Two inputs name the same (perfworks) metrics: a trace taken with
`torch.profiler._ExperimentalConfig(profiler_metrics=[…])`, where Kineto's CUPTI
range profiler writes one `cuda_profiler_range` event per kernel with the
counters in its args, and Nsight Compute's raw CSV (`rooftop.models.ncu`). The
rule, per kernel:

- W (FLOP), from the instruction counters:
  `smsp__sass_thread_inst_executed_op_{d,f,h}{fma,mul,add}_pred_on.sum` are the
  FP64 / FP32 / FP16 instructions its threads executed (predicated on): an FMA
  is 2 FLOP, a multiply or an add 1. These are Kineto's `kineto__cuda_core_flops`
  set, weighted as HTA 0.5.0 weighs them (`CUDA_SASS_INSTRUCTION_COUNTER_FLOPS`
  in hta/analyzers/cupti_counter_analysis.py). The tensor pipes' operations
  `sm__ops_path_tensor_src_<type>[_dst_<type>][_sparsity_on|off].sum` add 1 FLOP
  each, as ncu counts them. On Blackwell (B200, B300) the FP8 and FP4 MMAs
  (tcgen05's UTCQMMA, UTCOMMA) are counted instead by the instruction's own
  family, `sm__ops_path_tensor_op_utcqmma_src_fp8_dst_<type>.sum` and
  `…_utcomma_src_fp4_dst_fp32.sum`: 2·M·N·K for a GEMM (NVIDIA/DCGM#251), while
  the `tensor_src` ones read zero. Per path the larger of the two families
  counts, so an export with both counts the work once; within a family a
  counter's total is taken over its `_sparsity_on|off` parts, and the
  `_realtime` copies are not read. `sm__inst_executed_pipe_tensor.sum` (Kineto's
  `kineto__tensor_core_insts`) counts warp-level tensor instructions, whose FLOPs
  depend on the MMA shape: it is no W, and a kernel that ran some with no tensor
  op counter beside them has W unknown (None), not its CUDA-core part.
- Q (bytes), DRAM: `dram__bytes_read.sum` + `dram__bytes_write.sum`, else
  `dram__bytes.sum` (read and written together).
A kernel has no measured W (or Q) where its range carried no metric of that kind.

Pure: names and numbers in, dataclasses out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

RANGE_CAT = "cuda_profiler_range"  # Kineto's category for a CUPTI range (one per kernel in auto-range mode)

SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
SASS_PATHS = {"d": "fp64-fma", "f": "fp32-fma", "h": "fp16-fma"}  # the instruction's precision → its path
# each FP instruction counter → (FLOP per instruction, the path it runs on)
FLOP_METRICS: dict[str, tuple[float, str]] = {
    SASS.format(p + op): (2.0 if op == "fma" else 1.0, path)
    for p, path in SASS_PATHS.items() for op in ("fma", "mul", "add")
}
# the tensor pipes' operations, one FLOP each (ncu's count: a 4096³ bf16 GEMM's is 2·4096³), by source type
TENSOR_RE = re.compile(r"^sm__ops_path_tensor_(src|op_utc[a-z]*mma_src)_([a-z0-9]+?)(_dst_[a-z0-9]+)?"
                       r"(?:_sparsity_(on|off))?\.sum$")
TENSOR_PATHS = {"bf16": "bf16-tc", "fp16": "fp16-tc", "tf32": "tf32-tc", "fp8": "fp8-tc", "int8": "int8-tc",
                "fp64": "fp64-tc", "fp4": "fp4-tc"}
TENSOR_INSTS = "sm__inst_executed_pipe_tensor.sum"  # warp-level tensor instructions: not FLOPs
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DRAM_BYTES = "dram__bytes.sum"  # read + written, where the two are not given apart


@dataclass(frozen=True, slots=True)
class Counted:
    """One kernel's W and Q as its counters measured them; None where no counter of that kind was recorded."""

    flops: float | None = None
    bytes: float | None = None
    path: str = ""  # the compute path with most of its FLOPs (fp32-fma, bf16-tc, …); "" with none


def tensor_path(metric: str) -> str | None:
    """The compute path a tensor-pipe op counter counts on (bf16-tc, …); None for another metric."""
    m = TENSOR_RE.match(metric)
    return TENSOR_PATHS.get(m.group(2)) if m else None


def tensor_ops(values: Mapping[str, float]) -> dict[str, float]:
    """Tensor-pipe ops per compute path, each op counted once: a counter's plain total, else the sum of its
    sparsity on and off parts; the path totals (`tensor_src`) and Blackwell's per-instruction counters
    (`tensor_op_utc*mma`) each summed, and the larger of the two kept for the path."""
    parts: dict[tuple[str, str, str], dict[str, float]] = {}  # (family, src, dst) → {"": total, "on", "off"}
    for name, v in values.items():
        m = TENSOR_RE.match(name)
        if m and m.group(2) in TENSOR_PATHS:
            family = "src" if m.group(1) == "src" else m.group(1)
            parts.setdefault((family, m.group(2), m.group(3) or ""), {})[m.group(4) or ""] = v
    by_family: dict[tuple[str, str], float] = {}
    for (family, src, _), p in parts.items():
        key = ("src" if family == "src" else "op", TENSOR_PATHS[src])
        by_family[key] = by_family.get(key, 0.0) + (p[""] if "" in p else sum(p.values()))
    out: dict[str, float] = {}
    for (_, path), ops in by_family.items():
        out[path] = max(out.get(path, 0.0), ops)
    return out


def value(v: object) -> float | None:
    """A counter's value: a finite, non-negative number; None for anything else (text, NaN, a negative)."""
    if v.__class__ not in (int, float) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def counted(values: Mapping[str, float]) -> Counted:
    """A kernel's W and Q from its counters by the rule above (`values`: metric name → count)."""
    by_path = tensor_ops(values)
    flop_metric = bool(by_path)
    for name, v in values.items():
        known = FLOP_METRICS.get(name)
        if known:
            flop_metric = True
            by_path[known[1]] = by_path.get(known[1], 0.0) + v * known[0]
    has_tensor = any(tensor_path(n) for n in values)
    uncounted = values.get(TENSOR_INSTS, 0.0) > 0 and not has_tensor  # tensor work with no FLOP count
    flops = sum(by_path.values()) if flop_metric and not uncounted else None
    if DRAM_READ in values or DRAM_WRITE in values:
        nbytes: float | None = values.get(DRAM_READ, 0.0) + values.get(DRAM_WRITE, 0.0)
    else:
        nbytes = values.get(DRAM_BYTES)
    top = max((p for p in by_path if by_path[p] > 0), key=by_path.__getitem__, default="")
    return Counted(flops, nbytes, top if flops is not None else "")


def rule(metrics: Iterable[str]) -> str:
    """How W and Q were counted from the metrics a trace (or export) carried, in a line."""
    names = set(metrics)
    sass = [n for n in FLOP_METRICS if n in names]
    tensor = sorted(n for n in names if tensor_path(n))
    parts = []
    if sass:
        precisions = [label for p, label in (("d", "FP64"), ("f", "FP32"), ("h", "FP16"))
                      if any(n == SASS.format(p + op) for n in sass for op in ("fma", "mul", "add"))]
        parts.append(f"{'/'.join(precisions)} instructions (smsp__sass_thread_inst_executed_op_*_pred_on.sum, "
                     "an FMA 2 FLOP, a multiply or an add 1)")
    if tensor:
        parts.append(f"tensor-pipe ops, 1 FLOP each ({', '.join(tensor)})")
    if not parts:
        w = "W: no FLOP-counting metric recorded"
    else:
        w = "W counted from " + " and ".join(parts)
        if not tensor:
            w += "; no tensor-pipe op counter, so tensor-core work is not in it" + (
                f" (kernels with {TENSOR_INSTS} > 0: W unknown)" if TENSOR_INSTS in names else "")
    if DRAM_READ in names or DRAM_WRITE in names:
        q = f"Q counted as {DRAM_READ} + {DRAM_WRITE}"
    elif DRAM_BYTES in names:
        q = f"Q counted as {DRAM_BYTES}"
    else:
        q = "Q: no DRAM counter recorded"
    return f"{w}; {q}"


@dataclass(frozen=True)
class TraceCounters:
    """The counters a trace carried (its `cuda_profiler_range` events), matched to its kernels."""

    kernels: Mapping[int, Counted]  # by index in Trace.kernels: each counted kernel's W and Q
    metrics: tuple[str, ...]  # the metric names the ranges carried
    ranges: int  # the range events read
    matched: int  # those matched to a kernel (or, with no kernel events, to its launch)
    as_kernels: bool  # the trace has no kernel events: each range stands for its kernel, timed by the profiler

    @property
    def rule(self) -> str:
        return rule(self.metrics)
