"""The op language: one line per op, shared by `rooftop op` and the TUI.

    gemm 1 8192 8192 bf16                 positional M N K, then a dtype
    gemm m=4096 n=4096 k=4096 dtype=fp8   key=value
    gemv 8192 8192 bf16 wdtype=int4       int4 weights, bf16 activations (weight-only)
    gemv 8192 8192 fp16                   a GEMM with M = 1
    attn b=8 h=32 kv=8 d=128 t=8192 decode
    ew n=1e9 fp32                         elementwise (default: one FMA per element)
    fma 64 fp32                           the FMA sweep at R = 64
    norm 4096 4096 bf16 type=layer        softmax 4096 4096 fp32
    allreduce n=16M bf16 world=8 level=nvlink   allgather / reducescatter / p2p likewise (level=xgmi on AMD)

Numbers: 8192, 1e9 (or 1E9), 2^20, 8k (= 8192), 16M (= 16·2^20), 1G (= 2^30). Every error is a SpecError whose one
line names the bad token and what is allowed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from .dtypes import DTYPES, OUTPUT_ONLY, WEIGHT_ONLY, lookup_dtype, output_dtype, weight_dtype
from .errors import BadInput
from .links import LINK_LEVELS
from .ops import (
    ATTN_MODES, COLLECTIVE_OPS, NORM_FLOPS, Attention, Collective, Elementwise, FmaSweep, Gemm, Norm,
    Op, Softmax,
)
from .paths import LEVELS


class SpecError(BadInput, ValueError):
    """A bad op spec; the message is one line fit for a user."""


@dataclass(frozen=True)
class Grammar:
    """How one op kind is written: its positional fields, keys and flags."""

    build: Callable[..., Op]
    usage: str
    positional: tuple[str, ...] = ()
    keys: dict[str, str] = field(default_factory=dict)  # alias → field
    flags: dict[str, tuple[str, Any]] = field(default_factory=dict)  # word → (field, value)
    required: tuple[str, ...] = ()
    floats: tuple[str, ...] = ()  # fields taking a real number, not a count
    words: dict[str, tuple[str, ...]] = field(default_factory=dict)  # fields taking one of these words
    dtypes: tuple[str, ...] = tuple(DTYPES)
    defaults: dict[str, Any] = field(default_factory=dict)


def _keys(*names: str, **aliases: str) -> dict[str, str]:
    out = {n: n for n in names}
    out.update(aliases)
    return out


def _gemv(**f: Any) -> Op:
    return Gemm(m=1, **f)


def _collective(coll: str) -> Callable[..., Op]:
    def build(**f: Any) -> Op:
        return Collective(coll=coll, **f)
    return build


def _collective_grammar(coll: str) -> Grammar:
    world = "" if coll == "p2p" else " world=N"
    return Grammar(
        _collective(coll), f"{coll} N [dtype]{world} [level=nvlink|xgmi|pcie|net] (N elements in the message)", ("n",),
        _keys("n", "dtype", "world", "level"), required=("n",) if coll == "p2p" else ("n", "world"),
        defaults={"dtype": "bf16", "level": "nvlink"},
    )


GRAMMARS: dict[str, Grammar] = {
    "gemm": Grammar(
        Gemm, "gemm M N K [dtype] [batch=B] [out=DTYPE] [wdtype=DTYPE]", ("m", "n", "k"),
        _keys("m", "n", "k", "batch", "dtype", "out", "wdtype", "level", b="batch"), required=("m", "n", "k"),
        defaults={"dtype": "bf16"},
    ),
    "gemv": Grammar(
        _gemv, "gemv N K [dtype] [wdtype=DTYPE] (a GEMM with M = 1)", ("n", "k"),
        _keys("n", "k", "batch", "dtype", "out", "wdtype", "level", b="batch"), required=("n", "k"),
        defaults={"dtype": "bf16"},
    ),
    "attn": Grammar(
        Attention, "attn b=B h=H [kv=KV] [d=D] [q=Q] t=T [dtype] [flash|naive|decode] [causal] [kvdtype=DTYPE] "
                   "[window=W]", (),
        _keys("b", "h", "kv", "d", "q", "t", "dtype", "kvdtype", "mode", "level", "window",
              batch="b", heads="h", kv_heads="kv", head_dim="d", q_len="q", kv_len="t", context="t", seq="t"),
        flags={"flash": ("mode", "flash"), "naive": ("mode", "naive"), "decode": ("mode", "decode"),
               "causal": ("causal", True)},
        required=("b", "h", "t"), words={"mode": ATTN_MODES},
        defaults={"dtype": "bf16"},
    ),
    "ew": Grammar(
        Elementwise, "ew N [dtype] [flops=F] [reads=R] [writes=W]", ("n",),
        _keys("n", "flops", "reads", "writes", "dtype", "level"), required=("n",), floats=("flops",),
        defaults={"dtype": "fp32"},
    ),
    "fma": Grammar(
        FmaSweep, "fma R [N] [dtype]  (R FMAs per element over N elements)", ("r", "n"),
        _keys("r", "n", "dtype", "level"), required=("r",), dtypes=("fp64", "fp32", "fp16", "bf16"),
        defaults={"dtype": "fp32"},
    ),
    "norm": Grammar(
        Norm, "norm ROWS COLS [dtype] [rms|layer]", ("rows", "cols"),
        _keys("rows", "cols", "dtype", "type", "level"), flags={"rms": ("type", "rms"), "layer": ("type", "layer")},
        required=("rows", "cols"), words={"type": tuple(NORM_FLOPS)}, defaults={"dtype": "bf16"},
    ),
    "softmax": Grammar(
        Softmax, "softmax ROWS COLS [dtype]", ("rows", "cols"),
        _keys("rows", "cols", "dtype", "level"), required=("rows", "cols"), defaults={"dtype": "bf16"},
    ),
    **{c: _collective_grammar(c) for c in COLLECTIVE_OPS},
}
KIND_ALIASES = {
    "matmul": "gemm", "mm": "gemm", "linear": "gemm", "attention": "attn", "sdpa": "attn",
    "elementwise": "ew", "eltwise": "ew", "rmsnorm": "norm", "layernorm": "norm",
    "all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter", "sendrecv": "p2p",
}
_KIND_PRESETS = {"rmsnorm": {"type": "rms"}, "layernorm": {"type": "layer"}}

# a number as a person writes it: every float literal Python reads (8192, 1e9, 1E+9, .5e1, 5., 1_000, +8), or 2^20,
# with an optional binary suffix (8k, 16M, 1G); a leading '-' is read so it is told "at least 1" / "positive"
_DIGITS = r"[0-9](?:_?[0-9])*"
_FLOAT = rf"(?:{_DIGITS}\.(?:{_DIGITS})?|\.{_DIGITS}|{_DIGITS})(?:[eE][+-]?{_DIGITS})?"
_NUMBER = re.compile(rf"^([+-]?)(?:({_DIGITS})\^({_DIGITS})|({_FLOAT})([kKmMgG]?))$")
_NOT_FINITE = re.compile(r"^[+-]?(?:inf|infinity|nan)$", re.IGNORECASE)  # Python reads these; no size is one
_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
MAX_DIM = 2**62  # beyond any real shape; keeps products finite
MAX_DIGITS = 30  # 2^62 has 19: a longer integer is too large before Python is asked to convert it


def op_kinds() -> list[str]:
    return list(GRAMMARS)


def is_kind(token: str) -> bool:
    t = token.lower()
    return t in GRAMMARS or t in KIND_ALIASES


def _number(text: str, what: str) -> tuple[float, bool]:
    """The value of a number token and whether it had a leading '-'; SpecError when it is no number."""
    t = text.strip()
    m = _NUMBER.match(t)
    shown = _quoted(text)
    if not m:
        if _NOT_FINITE.match(t):
            raise SpecError(f"{what}={shown} is not a finite number (examples: 8192, 1e9, .5e1, 2^20, 8k, 16M)")
        raise SpecError(f"{what}={shown} is not a number (examples: 8192, 1e9, .5e1, 2^20, 8k, 16M)")
    if m.group(2) is not None:
        if len(m.group(2)) > MAX_DIGITS or len(m.group(3)) > MAX_DIGITS:
            raise SpecError(f"{what}={shown} is too large (at most 2^62)")
        base, exp = int(m.group(2)), int(m.group(3))
        if base > 1 and (exp > 62 or base > MAX_DIM):
            raise SpecError(f"{what}={shown} is too large (at most 2^62)")
        return float(base**exp), m.group(1) == "-"
    return float(m.group(4)) * _SUFFIX[m.group(5).lower()], m.group(1) == "-"


def parse_count(text: str, what: str = "value") -> int:
    """A positive whole number: 8192, 1e9 (1E9, .5e1), 2^20, 8k (= 8192), 16M (= 16·2^20), 1G (= 2^30)."""
    value, negative = _number(text, what)
    shown = _quoted(text)
    if negative:
        raise SpecError(f"{what}={shown} must be at least 1")
    if not math.isfinite(value) or value > MAX_DIM:
        raise SpecError(f"{what}={shown} is too large (at most 2^62)")
    if value != int(value):
        raise SpecError(f"{what}={shown} must be a whole number")
    if value < 1:
        raise SpecError(f"{what}={shown} must be at least 1")
    return int(value)


def _quoted(text: str, width: int = 40) -> str:
    """A token for a one-line message: quoted, and cut short when it is long (a pasted 5000-digit number)."""
    return repr(text) if len(text) <= width else repr(text[:width - 1] + "…")


def parse_real(text: str, what: str) -> float:
    """A positive real number below 1e18, written as a count is (2.5, .5e1, 1_000, 2^3, 1k)."""
    value, negative = _number(text, what)
    if negative or not (0 < value < 1e18):
        raise SpecError(f"{what}={_quoted(text)} must be a positive number below 1e18")
    return value


def _dtype(token: str, allowed: Iterable[str], what: str, kind: str) -> str:
    d = lookup_dtype(token)
    allowed = tuple(allowed)
    if d is None or d.name not in allowed:
        raise SpecError(f"{kind}: {what} {token!r} is not allowed; choose one of: {', '.join(allowed)}")
    return d.name


def parse_spec(text: str | Iterable[str]) -> Op:
    """One op from its spec (a string or its tokens)."""
    tokens = text.split() if isinstance(text, str) else [t for part in text for t in str(part).split()]
    if not tokens:
        raise SpecError(f"empty op spec; start with one of: {', '.join(GRAMMARS)}")
    word = tokens[0].lower()
    kind = KIND_ALIASES.get(word, word)
    if kind not in GRAMMARS:
        raise SpecError(f"unknown op {tokens[0]!r}; choose one of: {', '.join(GRAMMARS)}")
    g = GRAMMARS[kind]
    values: dict[str, Any] = dict(g.defaults)
    values.update(_KIND_PRESETS.get(word, {}))
    given: set[str] = set()
    pos = 0

    def put(fieldname: str, value: Any, token: str) -> None:
        if fieldname in given:
            raise SpecError(f"{kind}: {fieldname} given twice (at {token!r})")
        given.add(fieldname)
        values[fieldname] = value

    for tok in tokens[1:]:
        if "=" in tok:
            key, _, raw = tok.partition("=")
            name = g.keys.get(key.lower())
            if name is None:
                raise SpecError(f"{kind}: unknown field {_quoted(tok)}; {kind} takes: {' '.join(sorted(set(g.keys.values())))}")
            put(name, _convert(kind, g, name, raw), tok)
        elif tok.lower() in g.flags:
            name, value = g.flags[tok.lower()]
            put(name, value, tok)
        elif lookup_dtype(tok) is not None:
            put("dtype", _dtype(tok, g.dtypes, "dtype", kind), tok)
        elif _NUMBER.match(tok):
            if pos >= len(g.positional):
                if not g.positional:
                    raise SpecError(f"{kind}: {_quoted(tok)} needs a name; write it as key=value ({g.usage})")
                raise SpecError(f"{kind}: too many numbers at {_quoted(tok)}; {kind} takes {' '.join(g.positional)} in that order")
            name = g.positional[pos]
            pos += 1
            put(name, parse_count(tok, name), tok)
        else:
            raise SpecError(
                f"{kind}: cannot read {_quoted(tok)}; expected a number, a dtype ({', '.join(g.dtypes)}), "
                f"{'a flag (' + ', '.join(g.flags) + '), ' if g.flags else ''}or key=value  [{g.usage}]"
            )
    missing = [f for f in g.required if f not in values]
    if missing:
        raise SpecError(f"{kind}: missing {', '.join(missing)}  [{g.usage}]")
    return _finish(kind, g.build(**values))


def _convert(kind: str, g: Grammar, name: str, raw: str) -> Any:
    if name == "wdtype":
        d = weight_dtype(raw)
        if d is None or d.name == "tf32":
            allowed: Iterable[str] = [w for w in (*DTYPES, *WEIGHT_ONLY) if w != "tf32"]
            raise SpecError(f"{kind}: wdtype {raw!r} is not allowed; choose one of: {', '.join(allowed)}")
        return d.name
    if name == "out":
        d = output_dtype(raw)
        if d is None:
            raise SpecError(f"{kind}: out {raw!r} is not allowed; choose one of: {', '.join((*DTYPES, *OUTPUT_ONLY))}")
        return d.name
    if name in ("dtype", "kvdtype"):
        allowed = g.dtypes if name == "dtype" else tuple(DTYPES)
        return _dtype(raw, allowed, name, kind)
    if name == "level":
        if raw.lower() not in LEVELS:
            raise SpecError(f"{kind}: level {raw!r} is unknown; choose one of: {', '.join(LEVELS)}")
        return raw.lower()
    if name in g.words:
        if raw.lower() not in g.words[name]:
            raise SpecError(f"{kind}: {name}={raw!r} is unknown; choose one of: {', '.join(g.words[name])}")
        return raw.lower()
    if name in g.floats:
        return parse_real(raw, name)
    try:
        return parse_count(raw, name)
    except SpecError as exc:  # a world of 0 or -3 is told the one rule for every too-small world
        if name == "world" and "at least 1" in str(exc):
            raise SpecError(f"{kind}: world={raw.strip()} must be at least 2 (ranks taking part)") from None
        raise


def _finish(kind: str, op: Op) -> Op:
    """Checks that span several fields."""
    if isinstance(op, Gemm) and op.wdtype == op.dtype:
        return replace(op, wdtype=None)  # weights in the activations' dtype: the plain GEMM
    if isinstance(op, Collective):
        if op.level not in LINK_LEVELS:
            raise SpecError(f"{op.coll}: level {op.level!r} is not a link; choose one of: {', '.join(LINK_LEVELS)}")
        if op.world < 2:
            raise SpecError(f"{op.coll}: world={op.world} must be at least 2 (ranks taking part)")
    elif op.level in LINK_LEVELS:  # a kernel's operands sit in memory; only a collective's bytes cross a link
        memory = [lv for lv in LEVELS if lv not in LINK_LEVELS]
        raise SpecError(f"{kind}: level {op.level!r} is a link between devices (for allreduce, allgather, "
                        f"reducescatter, p2p); choose a memory level: {', '.join(memory)}")
    if isinstance(op, Attention):
        if op.kv_heads > op.h or op.h % op.kv_heads:
            raise SpecError(f"attn: kv={op.kv_heads} must divide h={op.h} (grouped-query attention)")
        if op.window and not (op.causal or op.mode == "decode"):
            raise SpecError("attn: window needs causal or decode (a sliding window keeps each query's last "
                            f"{op.window} keys, its own included)")
        if op.window and op.q_len > op.t:
            raise SpecError(f"attn: window needs q ≤ t; q={op.q_len} > t={op.t}")
        if op.mode == "decode" and op.q_len > op.t:
            raise SpecError(f"attn: decode with q={op.q_len} longer than the context t={op.t}")
        if op.causal and op.q_len > op.t:  # the mask aligns the last query with the last key
            raise SpecError(f"attn: causal needs q ≤ t (each of the q queries sees the keys up to its own position, "
                            f"the last query all t); q={op.q_len} > t={op.t} leaves {op.q_len - op.t} queries "
                            "with no key: drop causal, or make q ≤ t")
    return op


def split_specs(tokens: Iterable[str]) -> list[list[str]]:
    """Group command-line words into ops: a new op starts at each op name or ';'."""
    groups: list[list[str]] = []
    for part in tokens:
        for tok in str(part).replace(";", " ; ").split():
            if tok == ";":
                groups.append([])
            elif is_kind(tok) or not groups:
                groups.append([tok])
            else:
                groups[-1].append(tok)
    return [g for g in groups if g]


def parse_specs(tokens: Iterable[str]) -> list[Op]:
    groups = split_specs(tokens)
    if not groups:
        raise SpecError(f"no op given; start with one of: {', '.join(GRAMMARS)}")
    return [parse_spec(g) for g in groups]
