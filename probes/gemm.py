"""GEMM probes: the square sweep and the M sweep per dtype (seed 000 §4–5).

F per compute path is the best stable GEMM. Inputs are random (an A100 runs
~15% faster on zeros); fp32 runs with TF32 off and tf32 with it on, and the
user's setting is restored afterwards. Each dtype's kernel is checked once
against a float64 product on a small case (max_error on every sample of that
dtype); a failed check skips the dtype. Unsupported combinations become
skipped samples with the reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from functools import partial
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from rooftop.models.paths import matmul_path
from rooftop.models.sample import Sample

from .backend import Backend, Unsupported
from .steps import Budget, Step

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
# Bytes per element of A/B and of the output C.
IN_SIZE = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}
OUT_SIZE = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 2, "int8": 4}
# Relative max error allowed in the check (|C − C_ref|max / |C_ref|max).
TOLERANCE = {"fp64": 1e-10, "fp32": 1e-4, "tf32": 2e-2, "fp16": 2e-2, "bf16": 5e-2, "fp8": 5e-2, "int8": 0.0}
CHECK_SHAPE = (32, 64, 64)  # m, n, k: M > 16 and multiples of 16 for _int_mm / _scaled_mm


@dataclass(frozen=True)
class GemmSweeps:
    """The shapes a plan times: squares n³ and the M sweep at N = K = `mk`."""

    squares: tuple[int, ...]
    nk: int
    ms: tuple[int, ...]
    dtypes: tuple[str, ...] = DTYPES
    cold_squares: tuple[int, ...] = field(default_factory=tuple)


def _fp32_precisions(torch: Any) -> dict[str, str]:
    """The per-backend fp32 matmul settings of torch ≥ 2.9 (`torch.backends.cuda.matmul.fp32_precision`,
    and mkldnn's); {} on older torch."""
    out = {}
    for name in ("cuda", "mkldnn"):
        try:
            out[name] = getattr(torch.backends, name).matmul.fp32_precision
        except (AttributeError, RuntimeError):
            pass
    return out


@contextlib.contextmanager
def tf32_mode(enabled: bool) -> Iterator[None]:
    """TF32 on or off for fp32 matmuls, restoring the user's setting afterwards.

    Set through `set_float32_matmul_precision`, which keeps torch's legacy flag and (torch ≥ 2.9) the
    per-backend `fp32_precision` settings in agreement: there, cuBLAS asks `Context::allowTF32CuBLAS`,
    which raises when they disagree, as they do after a user sets only
    `torch.backends.cuda.matmul.fp32_precision` (then `get_float32_matmul_precision` raises too).
    Both are restored exactly. torch 2.9's warnings about the legacy call are not the user's concern.
    """
    # deferred: torch, only when a probe runs
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            legacy: str | None = torch.get_float32_matmul_precision()
        except RuntimeError:  # only the new API was used
            legacy = None
        backends = _fp32_precisions(torch)
        torch.set_float32_matmul_precision("high" if enabled else "highest")
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            if legacy is not None:
                torch.set_float32_matmul_precision(legacy)
            for name, value in backends.items():
                getattr(torch.backends, name).matmul.fp32_precision = value


def unsupported(backend: Backend, dtype: str) -> str | None:
    """Why `dtype` GEMMs cannot run on this backend, or None when they can."""
    # deferred: torch, only when a probe runs
    import torch

    cc = backend.info.compute_capability
    major_minor = tuple(int(x) for x in cc.split(".")) if cc else None
    if dtype == "tf32":
        if not backend.is_cuda:
            return "TF32 is a tensor-core mode of CUDA GPUs; the CPU has no TF32 matmul"
        if major_minor and major_minor < (8, 0) and not backend.info.hip_version:
            return f"TF32 needs compute capability ≥ 8.0; this device is {cc}"
    if dtype == "bf16" and backend.is_cuda and major_minor and major_minor < (8, 0) and not backend.info.hip_version:
        return f"bf16 tensor cores need compute capability ≥ 8.0; this device is {cc}"
    if dtype == "fp8":
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return f"torch {torch.__version__} has no float8 / torch._scaled_mm"
        if not backend.is_cuda:
            return "fp8 on the CPU is a slow emulation in torch (torch._scaled_mm), not a hardware path"
        if major_minor and major_minor < (8, 9) and not backend.info.hip_version:
            return f"fp8 (torch._scaled_mm) needs compute capability ≥ 8.9; this device is {cc}"
    if dtype == "int8" and not hasattr(torch, "_int_mm"):
        return f"torch {torch.__version__} has no torch._int_mm"
    return None


def shape_unsupported(dtype: str, m: int, n: int, k: int) -> str | None:
    """Why torch's kernel rejects this shape (its CUDA checks), or None."""
    if dtype == "int8" and (m <= 16 or n % 8 or k % 8):
        return "torch._int_mm needs M > 16 and K, N multiples of 8"
    if dtype == "fp8" and (n % 16 or k % 16):
        return "torch._scaled_mm needs K and N multiples of 16"
    return None


def first_tensor(result: Any) -> Any:
    """torch._scaled_mm returns (out, amax) before torch 2.5 (amax removed by pytorch#128683), the tensor since."""
    return result[0] if isinstance(result, tuple) else result


# B's layout per dtype: the one fast code hands the kernel. torch._int_mm is ~7× slower with B
# row-major (an H200 at 8192³: 125 TOP/s row-major, 914 column-major; the CPU's is ~10× slower too);
# torch._scaled_mm accepts only B column-major. cuBLAS runs float GEMMs NN and NT alike, so those take
# B row-major, as the reference protocol times them. A is row-major throughout.
B_COLUMN_MAJOR = frozenset({"int8", "fp8"})
ROW_MAJOR_FALLBACK = frozenset({"int8"})  # may fall back to B row-major (fp8 has no other layout)
TORCH_DTYPE = {"fp64": "float64", "fp32": "float32", "tf32": "float32", "fp16": "float16",
               "bf16": "bfloat16", "fp8": "float8_e4m3fn", "int8": "int8"}


def matrix(dtype: str, rows: int, cols: int, device: Any, column_major: bool = False) -> Any:
    """A random rows×cols operand in `dtype`: row-major, or column-major (the transpose of a
    contiguous cols×rows tensor, strides (1, rows))."""
    # deferred: torch, only when a probe runs
    import torch

    shape = (cols, rows) if column_major else (rows, cols)
    if dtype == "int8":
        t = torch.randint(-64, 64, shape, dtype=torch.int8, device=device)
    elif dtype == "fp8":
        t = torch.randn(shape, device=device).to(torch.float8_e4m3fn)  # e5m2 × e5m2 is rejected
    else:
        t = torch.randn(shape, dtype=getattr(torch, TORCH_DTYPE[dtype]), device=device)
    return t.t() if column_major else t


def inputs(dtype: str, m: int, n: int, k: int, device: Any, b_column_major: bool | None = None) -> tuple[Any, Any]:
    """A (m×k, row-major) and B (k×n, column-major when `b_column_major`; by default as B_COLUMN_MAJOR
    says): what the kernel is timed on."""
    col = dtype in B_COLUMN_MAJOR if b_column_major is None else b_column_major
    return matrix(dtype, m, k, device), matrix(dtype, k, n, device, column_major=col)


def fp8_inputs(m: int, n: int, k: int, device: Any) -> tuple[Any, Any, Any]:
    """A (m×k, row-major) and B (k×n, column-major) in e4m3 and a tensor-wise fp32 scale of 1: the
    layouts and scale torch._scaled_mm accepts on CUDA."""
    # deferred: torch, only when a probe runs
    import torch

    a, b = inputs("fp8", m, n, k, device)
    return a, b, torch.tensor(1.0, device=device)


def operands(dtype: str, m: int, n: int, k: int, device: Any,
             b_column_major: bool | None = None) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(kernel, float64 reference) for C = A·B with random inputs in `dtype`, laid out by `inputs`."""
    # deferred: torch, only when a probe runs
    import torch

    if dtype == "fp8":
        a, b, one = fp8_inputs(m, n, k, device)
        # Keywords throughout: the scales are keyword-only and optional before torch 2.5, positional since.
        return (
            lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)
        ), (lambda: a.double() @ b.double())
    a, b = inputs(dtype, m, n, k, device, b_column_major)
    if dtype == "int8":
        c = torch.empty(m, n, dtype=torch.int32, device=device)
        return (lambda: torch._int_mm(a, b, out=c)), (lambda: a.double() @ b.double())
    c = torch.empty(m, n, dtype=a.dtype, device=device)
    return (lambda: torch.mm(a, b, out=c)), (lambda: a.double() @ b.double())


def check(dtype: str, device: Any, b_column_major: bool | None = None) -> float:
    """Relative max error of the dtype's kernel against a float64 product on a small case."""
    m, n, k = CHECK_SHAPE
    with tf32_mode(dtype == "tf32"):
        kernel, ref = operands(dtype, m, n, k, device, b_column_major)
        out = first_tensor(kernel()).double()
    want = ref()
    return float((out - want).abs().max() / want.abs().max().clamp_min(1e-30))


def template(dtype: str, m: int, n: int, k: int, cache: str, sweep: str, kind: str = "gpu") -> Sample:
    """The sample one GEMM will fill; its path is named for the device `kind` (bf16-matmul on a CPU)."""
    nbytes = float(IN_SIZE[dtype] * (m * k + k * n) + OUT_SIZE[dtype] * m * n)
    return Sample(
        family="gemm",
        dtype=dtype,
        shape={"m": m, "n": n, "k": k},
        flops=2.0 * m * n * k,
        bytes=nbytes,
        footprint_bytes=nbytes,
        cache=cache,
        path=matmul_path(dtype, kind),
        conditions={"sweep": sweep},
    )


class GemmProbe:
    """Builds the steps; remembers each dtype's check and which sizes were too slow."""

    def __init__(self, backend: Backend, sweeps: GemmSweeps) -> None:
        self.backend = backend
        self.sweeps = sweeps
        self.budget = Budget(backend.protocol.max_call_s)
        self._checked: dict[str, tuple[float, bool]] = {}  # dtype → (max_error, B column-major)

    def _layout(self, dtype: str) -> tuple[float, bool]:
        """The dtype's check and the layout of B it passed in: the fast one, else (int8) B row-major.

        torch's _int_mm_out_cuda notes that "cuBLAS is currently broken for some combination of
        transposed inputs": should the column-major product fail its check on some build, int8 is
        timed in the slow layout, which is right, rather than not at all (its samples say which)."""
        if dtype not in self._checked:
            dev, col = self.backend.torch_device, dtype in B_COLUMN_MAJOR
            err = check(dtype, dev, col)
            if not err <= TOLERANCE[dtype] and dtype in ROW_MAJOR_FALLBACK:
                row = check(dtype, dev, False)
                if row <= TOLERANCE[dtype]:
                    err, col = row, False
            self._checked[dtype] = (err, col)
        err, col = self._checked[dtype]
        if not err <= TOLERANCE[dtype]:
            raise Unsupported(f"result check failed: max_error {err:.3g} > {TOLERANCE[dtype]:g} on {CHECK_SHAPE}")
        return err, col

    def _run(self, tmpl: Sample) -> Sample:
        dtype, sh = tmpl.dtype, tmpl.shape
        m, n, k = sh["m"], sh["n"], sh["k"]
        why = unsupported(self.backend, dtype) or shape_unsupported(dtype, m, n, k)
        if why:
            raise Unsupported(why)
        err, col = self._layout(dtype)
        self.backend.check_fits(tmpl.footprint_bytes * 1.2)

        def timed() -> Sample:
            with tf32_mode(dtype == "tf32"):
                kernel, _ = operands(dtype, m, n, k, self.backend.torch_device, col)
                self.backend.sync()
                flush = self.backend.flush if tmpl.cache == "cold" else None
                stats = self.backend.measure(kernel, before_sample=flush)
            layout = {"b_layout": "column-major" if col else "row-major"}
            return dataclasses.replace(tmpl, stats=stats, max_error=err, conditions={**tmpl.conditions, **layout})

        return self.budget.guard(f"{dtype}:{tmpl.cache}", tmpl.flops, f"{dtype} {m}x{n}x{k}", timed)

    def steps(self) -> list[Step]:
        sw = self.sweeps
        shapes: list[tuple[int, int, int, str, str]] = [(s, s, s, "warm", "square") for s in sw.squares]
        shapes += [(m, sw.nk, sw.nk, "warm", "m") for m in sw.ms]
        shapes += [(s, s, s, "cold", "square") for s in sw.cold_squares]
        out = []
        for dtype in sw.dtypes:
            for m, n, k, cache, sweep in shapes:
                tmpl = template(dtype, m, n, k, cache, sweep, self.backend.info.kind)
                label = f"gemm {dtype} {m}x{n}x{k}" + (" cold" if cache == "cold" else "")
                out.append(Step(label, tmpl, partial(self._run, tmpl)))
        return out
