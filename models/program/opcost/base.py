"""The pieces every op model shares: a recorded call's tensors, its scalar arguments, and OpCost.

A recorded call is what torch.profiler writes with `record_shapes`: per input
its `Input Dims` (a list of ints for a tensor, a list of such lists for a
TensorList, [] for a scalar) and `Input type`, and the scalar and list
arguments as text in `Concrete Inputs`. `Call` keeps them by position, so each
op model reads its arguments where the op's schema puts them. A record that
cannot describe real tensors (a negative or non-integer dimension, a TensorList
member that is not a list of ints) raises BadShape: the op is left uncosted.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from ...trace.types import TORCH_TYPES

# torch's type names in `Input type` → (rooftop dtype or a plain name, bytes per element)
FLOAT_DTYPES = ("fp64", "fp32", "fp16", "bf16", "fp8")
# c10::ScalarType codes, as `Concrete Inputs` writes a dtype argument → (dtype, bytes)
SCALAR_TYPES: dict[str, tuple[str, float]] = {
    "0": ("uint8", 1), "1": ("int8", 1), "2": ("int16", 2), "3": ("int32", 4), "4": ("int64", 8),
    "5": ("fp16", 2), "6": ("fp32", 4), "7": ("fp64", 8), "11": ("bool", 1), "15": ("bf16", 2),
    "23": ("fp8", 1), "24": ("fp8", 1),
}
LIST_TYPES = ("TensorList", "TensorList?", "Tensor?[]", "Tensor[]")


class BadShape(ValueError):
    """A recorded call whose shapes or arguments describe no real tensors (the op is left uncosted)."""


@dataclass(frozen=True)
class Tensor:
    dims: tuple[int, ...]
    dtype: str  # a rooftop dtype (fp32, bf16, …) or int64 / bool / …
    size: float  # bytes per element

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> float:
        return self.numel * self.size


@dataclass(frozen=True)
class OpCost:
    """W and Q of one call of an op, how they were counted, and the path it runs on."""

    flops: float
    bytes: float
    path: str
    model: str  # gemm, conv, attention, norm, softmax, loss, elementwise, reduction, copy, index, optimizer,
    #             pool, none (no data moved), tensors (no model: Q from sizes), uncosted (a malformed record)
    counting: str
    shape: Mapping[str, int] = field(default_factory=dict)  # the model's dimensions (m, n, k; b, h, t, d; n)


def _dims(d: Any) -> tuple[int, ...]:
    if not isinstance(d, list):
        raise BadShape(f"a tensor's dims are {d!r}, not a list of sizes")
    for x in d:
        if isinstance(x, bool) or not isinstance(x, int):
            raise BadShape(f"a tensor dimension is {x!r}, not an integer")
        if x < 0:
            raise BadShape(f"a tensor dimension is {x}, below 0")
    return tuple(d)


@dataclass(frozen=True)
class Call:
    """One recorded call: per input a Tensor, a tuple of Tensors (a TensorList) or None (a scalar, absent)."""

    name: str
    args: tuple[Any, ...]
    concrete: tuple[str, ...]
    dtype: str  # the op's element type (op_dtype), or the TensorList members' when it has only lists

    def tensor(self, i: int) -> Tensor | None:
        a = self.args[i] if i < len(self.args) else None
        return a if isinstance(a, Tensor) else None

    def tlist(self, i: int) -> tuple[Tensor, ...]:
        a = self.args[i] if i < len(self.args) else None
        return a if isinstance(a, tuple) else ()

    @property
    def tensors(self) -> list[Tensor]:
        """Every tensor input, a TensorList's members included, in order."""
        out: list[Tensor] = []
        for a in self.args:
            if isinstance(a, Tensor):
                out.append(a)
            elif isinstance(a, tuple):
                out.extend(a)
        return out

    def text(self, i: int) -> str:
        return self.concrete[i].strip() if i < len(self.concrete) else ""

    def ints(self, i: int, n: int | None = None) -> list[int] | None:
        """Argument i as ints ('[2, 2]', '2'; a single value repeated to n); None where not recorded."""
        return parse_ints(self.text(i), n)

    def flag(self, i: int, default: bool = False) -> bool:
        t = self.text(i)
        return {"True": True, "False": False, "1": True, "0": False}.get(t, default)

    def mask(self, i: int, n: int = 3) -> list[bool]:
        """An output_mask argument ('[True, True, False]'); all True where it was not recorded."""
        t = self.text(i).strip("[]")
        parts = [p.strip() for p in t.split(",")] if t else []
        if len(parts) != n or any(p not in ("True", "False") for p in parts):
            return [True] * n
        return [p == "True" for p in parts]


def parse_ints(text: str, n: int | None = None) -> list[int] | None:
    """'[2, 2]' or '1' as ints (a single value repeated to n); None if it is not that (e.g. padding='same')."""
    try:
        v = json.loads(text)
    except (TypeError, ValueError):
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return [v] * (n or 1)
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        if n is None or len(v) == n:
            return v
        if len(v) == 1:
            return v * n
    return None


def make_call(name: str, dims: Sequence[Any], types: Sequence[str], list_element: tuple[str, float],
              concrete: Sequence[str]) -> Call:
    """The call's inputs by position; BadShape where a tensor's record is not a tensor."""
    args: list[Any] = []
    for d, t in zip(dims, types):
        t = str(t)
        if t in LIST_TYPES:
            if not isinstance(d, list):
                raise BadShape(f"a TensorList's dims are {d!r}, not a list")
            args.append(tuple(Tensor(_dims(m), *list_element) for m in d))
            continue
        known = TORCH_TYPES.get(t)
        args.append(Tensor(_dims(d), known[0], float(known[1])) if known is not None else None)
    dtype = op_dtype(types) or (list_element[0] if any(str(t) in LIST_TYPES for t in types) else "")
    return Call(name, tuple(args), tuple(str(c) for c in concrete), dtype)


def op_dtype(types: Sequence[str]) -> str:
    """The op's element type: its first floating input's, else its first tensor's, else ''."""
    return _dtype_of(types if types.__class__ is tuple else tuple(types))


@functools.lru_cache(maxsize=4096)
def _dtype_of(types: tuple[str, ...]) -> str:
    """op_dtype, once per distinct list of types (a trace's ops share a few hundred)."""
    names = [TORCH_TYPES[t][0] for t in types if t in TORCH_TYPES]
    floats = [n for n in names if n in FLOAT_DTYPES]
    return (floats or names or [""])[0]


KERNEL_TYPES = (("c10::BFloat16", ("bf16", 2.0)), ("c10::Half", ("fp16", 2.0)), ("__nv_bfloat16", ("bf16", 2.0)),
                ("OpaqueType<1u>", ("", 1.0)), ("OpaqueType<2u>", ("", 2.0)), ("OpaqueType<4u>", ("", 4.0)),
                ("OpaqueType<8u>", ("", 8.0)), ("<float,", ("fp32", 4.0)), ("<double,", ("fp64", 8.0)))


def element_from_kernel(kernel_name: str) -> tuple[str, float] | None:
    """The element type (or only its size) a templated kernel's name shows, e.g. `OpaqueType<2u>` → 2 bytes."""
    for token, elem in KERNEL_TYPES:
        if token in kernel_name:
            return elem
    return None


def broadcast(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy broadcasting of shapes (the output shape of an elementwise op)."""
    n = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        sizes = [s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0]
        out.append(max(sizes) if sizes else 1)
    return tuple(out)


def dim_index(text: str, ndim: int) -> int | None:
    """A `dim` argument ('-1', '0') as an index into ndim dims; None if it is not one."""
    v = parse_ints(text, 1)
    if v is None or len(v) != 1 or not -max(ndim, 1) <= v[0] < max(ndim, 1):
        return None
    return v[0] % max(ndim, 1)
