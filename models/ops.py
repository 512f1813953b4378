"""Op cost models: each op's W (FLOP), Q (bytes) and the compute path it uses.

Counting is algorithmic, as in the reference measurements: every array is read
or written once, an FMA is 2 FLOP, and Q is the compulsory
traffic to the memory level, so T = max(W/F, Q/B) stays a lower bound. Each
cost says how it counted in `counting`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from .comm import bus_factor, reduce_flops, wire_bytes
from .dtypes import DTYPES, SCALE_GROUP, output_size, weight_scale_bytes, weight_size
from .paths import fma_path, matmul_path, vector_path


@dataclass(frozen=True)
class Cost:
    flops: float  # W
    bytes: float  # Q
    path: str  # compute path the op runs on
    level: str = "dram"  # memory level it streams from
    terms: tuple[tuple[str, float], ...] = ()  # Q broken down, bytes
    counting: str = ""  # how W and Q were counted, in words

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")


def _size(dtype: str) -> float:
    return DTYPES[dtype].size


@dataclass(frozen=True)
class Op:
    """Base of every op: a kind, a dtype and the memory level it is analysed at."""

    kind: ClassVar[str] = ""
    dtype: str = "bf16"
    level: str = "dram"

    def cost(self) -> Cost:  # pragma: no cover - every subclass defines it
        raise TypeError(f"{type(self).__name__} defines no cost model")

    def spec(self) -> str:
        """The canonical one-line spec that parses back to this op."""
        raise TypeError(f"{type(self).__name__} defines no spec")

    def describe(self) -> str:
        return self.spec()

    def _level_suffix(self) -> str:
        return "" if self.level == "dram" else f" level={self.level}"


# GEMMs whose inputs are this narrow write a wider output in practice: torch._scaled_mm(out_dtype=bf16)
# for fp8, the block-scaled fp4 GEMMs likewise; an 8-bit output would lose what the accumulator kept.
# int8 writes its int32 accumulator, as torch._int_mm does (out=int8 for a kernel that requantises).
NARROW_OUT = {"fp8": "bf16", "fp4": "bf16", "mxfp4": "bf16", "nvfp4": "bf16", "int8": "int32"}


@dataclass(frozen=True)
class Gemm(Op):
    """Y[M×N] = X[M×K]·A[K×N], `batch` independent ones.

    W = 2·batch·M·N·K; Q = batch·(sizeof(dtype)·MK + sizeof(wdtype)·KN + scales + sizeof(out)·MN).
    For an LLM linear layer M is the tokens per batch, K×N the weight. `dtype`
    is the activations' (and the tensor-core path's); `wdtype` the weights' when
    they are stored narrower (weight-only quantisation: int4 weights, bf16
    activations). fp32 runs with TF32 off (fp32-matmul); ask for tf32 to get the
    tensor-core path.
    """

    kind: ClassVar[str] = "gemm"
    m: int | float = 1  # whole for a kernel; an LLM's MoE expert GEMM has a fractional average (models.llm)
    n: int = 1
    k: int = 1
    batch: int = 1
    out: str | None = None  # output dtype; default: the input dtype, bf16 for fp8 / fp4, int32 for int8
    wdtype: str | None = None  # weight dtype; default: dtype

    @property
    def out_dtype(self) -> str:
        return self.out or NARROW_OUT.get(self.dtype, self.dtype)

    @property
    def weight_dtype(self) -> str:
        return self.wdtype or self.dtype

    def cost(self) -> Cost:
        s, so, b = _size(self.dtype), output_size(self.out_dtype), self.batch
        weights = b * self.k * self.n
        x, y = b * s * self.m * self.k, b * so * self.m * self.n
        a = weights * weight_size(self.weight_dtype)
        scales = weight_scale_bytes(self.weight_dtype, weights)
        terms = [("X (M×K)", x), (f"A (K×N, weights{', ' + self.weight_dtype if self.wdtype else ''})", a)]
        counting = "W = 2·M·N·K; Q = each matrix read or written once"
        if scales:
            terms.append((f"weight scales (fp16 per {SCALE_GROUP})", scales))
            counting += f", 4-bit weights with one fp16 scale per {SCALE_GROUP}"
        out = f", {self.out_dtype}" if self.out_dtype != self.dtype else ""  # fp8 writes bf16: say so beside its bytes
        terms.append((f"Y (M×N{out})", y))
        return Cost(
            flops=2.0 * b * self.m * self.n * self.k,
            bytes=x + a + scales + y,
            path=matmul_path(self.dtype),
            level=self.level,
            terms=tuple(terms),
            counting=counting,
        )

    def spec(self) -> str:
        s = f"gemm m={self.m} n={self.n} k={self.k} {self.dtype}"
        if self.batch != 1:
            s += f" batch={self.batch}"
        if self.out:
            s += f" out={self.out}"
        if self.wdtype and self.wdtype != self.dtype:
            s += f" wdtype={self.wdtype}"
        return s + self._level_suffix()

    def describe(self) -> str:
        name = "GEMV" if self.m == 1 else "GEMM"
        b = f"{self.batch}× " if self.batch != 1 else ""
        w = f" ({self.wdtype} weights)" if self.wdtype and self.wdtype != self.dtype else ""
        m = int(self.m) if float(self.m).is_integer() else f"{self.m:.3g}"  # an average of rows, to three figures
        return f"{name} {b}{m}×{self.n}×{self.k} {self.dtype}{w}"


@dataclass(frozen=True)
class Elementwise(Op):
    """y = f(x) over n elements: `flops` per element, `reads` and `writes` arrays.

    The default is the reference's y = x·a + b: one FMA (2 FLOP), one read, one
    write, so I = 1/sizeof.
    """

    kind: ClassVar[str] = "ew"
    dtype: str = "fp32"
    n: int | float = 1  # elements; fractional where it is an average (MoE experts' rows)
    flops: float = 2.0
    reads: int = 1
    writes: int = 1

    def cost(self) -> Cost:
        s = _size(self.dtype)
        r, w = self.n * s * self.reads, self.n * s * self.writes
        return Cost(
            flops=self.flops * self.n,
            bytes=r + w,
            path=vector_path(self.dtype),
            level=self.level,
            terms=(("reads", r), ("writes", w)),
            counting=f"W = {self.flops:g}·n; Q = ({self.reads} reads + {self.writes} writes)·n·sizeof",
        )

    def spec(self) -> str:
        return (
            f"ew n={self.n} {self.dtype} flops={self.flops:g} reads={self.reads} writes={self.writes}"
            + self._level_suffix()
        )

    def describe(self) -> str:
        n = int(self.n) if float(self.n).is_integer() else f"{self.n:.4g}"  # an average (MoE experts' rows)
        return f"elementwise n={n} {self.dtype} ({self.flops:g} FLOP/elem)"


@dataclass(frozen=True)
class FmaSweep(Op):
    """The FMA sweep: each element read, R FMAs in registers, written.

    W = 2·R·n; Q = 2·n·sizeof; I = R/sizeof. Its slope retraces B and its
    plateau is the FMA-unit peak.
    """

    kind: ClassVar[str] = "fma"
    dtype: str = "fp32"
    r: int = 1
    n: int = 64 * 1024 * 1024  # 512 MiB read+write at fp32, as the reference

    def cost(self) -> Cost:
        s = _size(self.dtype)
        return Cost(
            flops=2.0 * self.r * self.n,
            bytes=2.0 * self.n * s,
            path=fma_path(self.dtype),
            level=self.level,
            terms=(("read x", self.n * s), ("write y", self.n * s)),
            counting="W = 2·R·n (an FMA is 2 FLOP); Q = one read + one write per element",
        )

    def spec(self) -> str:
        return f"fma r={self.r} n={self.n} {self.dtype}" + self._level_suffix()

    def describe(self) -> str:
        return f"FMA sweep R={self.r} n={self.n} {self.dtype}"


# Per-element FLOP of the row ops, counted as a fused kernel computes them.
NORM_FLOPS = {"rms": 4.0, "layer": 8.0}  # rms: x², sum, ×rsqrt, ×w; layer adds mean, −μ, +β
SOFTMAX_FLOPS = 5.0  # max, −max, exp, sum, ÷


@dataclass(frozen=True)
class Norm(Op):
    """RMSNorm / LayerNorm over `rows` rows of `cols` (fused: x read once, y written once)."""

    kind: ClassVar[str] = "norm"
    rows: int = 1
    cols: int = 1
    type: str = "rms"

    def cost(self) -> Cost:
        s = _size(self.dtype)
        x = self.rows * self.cols * s
        params = self.cols * s * (1 if self.type == "rms" else 2)
        return Cost(
            flops=NORM_FLOPS[self.type] * self.rows * self.cols,
            bytes=2 * x + params,
            path=vector_path(self.dtype),
            level=self.level,
            terms=(("read x", x), ("write y", x), ("weights", params)),
            counting=f"W = {NORM_FLOPS[self.type]:g} FLOP per element; Q = x read once, y written once, weights once",
        )

    def spec(self) -> str:
        return f"norm rows={self.rows} cols={self.cols} {self.dtype} type={self.type}" + self._level_suffix()

    def describe(self) -> str:
        return f"{'RMSNorm' if self.type == 'rms' else 'LayerNorm'} {self.rows}×{self.cols} {self.dtype}"


@dataclass(frozen=True)
class Softmax(Op):
    """Row softmax over `rows` rows of `cols` (fused: read once, write once)."""

    kind: ClassVar[str] = "softmax"
    rows: int = 1
    cols: int = 1

    def cost(self) -> Cost:
        s = _size(self.dtype)
        x = self.rows * self.cols * s
        return Cost(
            flops=SOFTMAX_FLOPS * self.rows * self.cols,
            bytes=2 * x,
            path=vector_path(self.dtype),
            level=self.level,
            terms=(("read x", x), ("write y", x)),
            counting=f"W = {SOFTMAX_FLOPS:g} FLOP per element; Q = read once, write once",
        )

    def spec(self) -> str:
        return f"softmax rows={self.rows} cols={self.cols} {self.dtype}" + self._level_suffix()

    def describe(self) -> str:
        return f"softmax {self.rows}×{self.cols} {self.dtype}"


ATTN_MODES = ("flash", "naive", "decode")


@dataclass(frozen=True)
class Attention(Op):
    """Scaled dot-product attention, prefill (FlashAttention) and decode over a KV cache.

    b batch, h query heads, kv key/value heads (GQA/MQA when kv < h), d head
    dim, q query length, t key/value length. W counts the two matmuls,
    4·b·h·pairs·d with pairs = q·t (fewer under a causal mask); softmax FLOPs
    are a lower-order term on another unit and are left out.

    Q is the compulsory traffic: read Q, K, V once, write O once. That is the
    FlashAttention case (the score matrix stays on chip) and the decode case
    (q = 1: reading the KV cache dominates). `naive` also writes the score
    matrix S, reads it, writes P and reads P back: 4·b·h·q·t·sizeof more, which
    pins I near d/sizeof whatever the length.
    """

    kind: ClassVar[str] = "attn"
    b: int = 1
    h: int = 1
    kv: int = 0  # 0 means kv = h (multi-head attention)
    d: int = 128
    q: int = 0  # 0 means: 1 for decode, t otherwise
    t: int = 1
    mode: str = "flash"
    causal: bool = False
    kvdtype: str | None = None  # KV-cache dtype (fp8 KV halves its bytes); default: dtype
    window: int = 0  # sliding-window attention: each query sees at most this many keys, its own last (0: all)

    @property
    def kv_heads(self) -> int:
        return self.kv or self.h

    @property
    def q_len(self) -> int:
        return self.q or (1 if self.mode == "decode" else self.t)

    @property
    def pairs(self) -> float:
        """Query-key pairs scored per head: q·t, or the causal triangle's count; under a sliding window
        the query at position p (1-based) scores min(p, window) keys."""
        q, t = self.q_len, self.t
        if self.window:
            return float(_windowed(t, self.window) - _windowed(t - q, self.window))
        if self.causal and q <= t:
            return q * t - q * (q - 1) / 2
        return float(q * t)

    @property
    def kv_read(self) -> int:
        """Key/value positions read: all t, but decoding under a window reads only the window (a rolling
        cache holds no more) — the span its q queries see."""
        if self.window and self.mode == "decode":
            return min(self.t, self.window + self.q_len - 1)
        return self.t

    def cost(self) -> Cost:
        s, skv = _size(self.dtype), _size(self.kvdtype or self.dtype)
        q = self.q_len
        qo = self.b * self.h * q * self.d * s
        kvb = 2 * self.b * self.kv_heads * self.kv_read * self.d * skv
        terms = [("Q read", qo), ("K,V read (KV cache)" if self.mode == "decode" else "K,V read", kvb), ("O write", qo)]
        counting = "W = 4·b·h·pairs·d (QKᵀ and PV); Q = Q, K, V read once, O written once"
        if self.window:
            counting += f"; each query sees at most the last {self.window} keys (sliding window)"
        if self.mode == "naive":
            sp = 4 * self.b * self.h * q * self.t * s
            terms.append(("S, P materialised (write S, read S, write P, read P)", sp))
            counting += ", plus the score matrix written and read twice"
        return Cost(
            flops=4.0 * self.b * self.h * self.pairs * self.d,
            bytes=sum(v for _, v in terms),
            path=matmul_path(self.dtype),
            level=self.level,
            terms=tuple(terms),
            counting=counting,
        )

    def spec(self) -> str:
        s = f"attn b={self.b} h={self.h} kv={self.kv_heads} d={self.d} q={self.q_len} t={self.t} {self.dtype} {self.mode}"
        if self.causal:
            s += " causal"
        if self.kvdtype and self.kvdtype != self.dtype:
            s += f" kvdtype={self.kvdtype}"
        if self.window:
            s += f" window={self.window}"
        return s + self._level_suffix()

    def describe(self) -> str:
        gqa = f" kv={self.kv_heads}" if self.kv_heads != self.h else ""
        kvd = f" (KV {self.kvdtype})" if self.kvdtype and self.kvdtype != self.dtype else ""
        win = f" window={self.window}" if self.window else ""
        mask = " causal" if self.causal else ""  # half the pairs: the two read alike but for W
        return (f"{self.mode} attention b={self.b} h={self.h}{gqa} d={self.d} q={self.q_len} t={self.t}{win}{mask} "
                f"{self.dtype}{kvd}")


def _windowed(n: int, w: int) -> int:
    """Σ_{p=1..n} min(p, w): the keys that queries at positions 1..n see under a window of w."""
    if n <= 0:
        return 0
    if n <= w:
        return n * (n + 1) // 2
    return w * (w + 1) // 2 + (n - w) * w


# Collectives as the op language writes them → models.comm's names (p2p is nccl-tests' sendrecv).
COLLECTIVE_OPS = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reducescatter",
                  "p2p": "sendrecv"}


@dataclass(frozen=True)
class Collective(Op):
    """A collective over `world` ranks on a link: the communication roofline's op.

    `n` elements of `dtype` make the message S (all-gather: the gathered whole;
    reduce-scatter: the input). Q is what each rank puts on its link, S times
    nccl-tests' bus factor (all-reduce 2(n−1)/n, all-gather and reduce-scatter
    (n−1)/n, p2p 1): a ring's traffic, so Q/B is the bandwidth bound. W is the
    reduction's additions, (n−1)/n of the elements, on the vector units.
    """

    kind: ClassVar[str] = "collective"
    dtype: str = "bf16"
    level: str = "nvlink"
    coll: str = "allreduce"  # a key of COLLECTIVE_OPS
    n: int = 1
    world: int = 2

    @property
    def message_bytes(self) -> float:
        return self.n * _size(self.dtype)

    def cost(self) -> Cost:
        name = COLLECTIVE_OPS[self.coll]
        wire = wire_bytes(name, self.world, self.message_bytes)
        return Cost(
            flops=reduce_flops(name, self.world, self.n),
            bytes=wire,
            path=vector_path(self.dtype),
            level=self.level,
            terms=((f"on the wire per rank (S × {bus_factor(name, self.world):.3g})", wire),),
            counting="Q = S × nccl-tests' bus factor (a ring's bytes per rank); W = the reduction's adds",
        )

    def spec(self) -> str:
        return f"{self.coll} n={self.n} {self.dtype} world={self.world} level={self.level}"

    def describe(self) -> str:
        return f"{self.coll} of {self.n} {self.dtype} over {self.world} ranks on {self.level}"


# The field that plays "batch" for each op: what the What-if tab's [ and ] move.
BATCH_FIELDS: dict[type[Op], str] = {
    Gemm: "m", Attention: "b", Elementwise: "n", FmaSweep: "r", Norm: "rows", Softmax: "rows", Collective: "n",
}


def batch_value(op: Op) -> int:
    return int(getattr(op, BATCH_FIELDS[type(op)]))


def with_batch(op: Op, value: int) -> Op:
    """The same op with its batch-like dimension (GEMM M, attention b, …) set to `value` (≥ 1)."""
    batch: dict[str, Any] = {BATCH_FIELDS[type(op)]: max(1, int(value))}
    return replace(op, **batch)
