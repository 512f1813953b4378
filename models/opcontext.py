"""W and Q of the ops whose own record does not say enough, from the ops around them: a pure pass over a trace.

An op's model reads its own `Input Dims`, `Input type` and `Concrete Inputs`
(`models.shapecost`). A few records lack what their W needs, and the ops next
to them recorded it:
- a forward convolution traced by PyTorch ≤ 1.9 (no `Concrete Inputs`: stride
  and padding unknown): its output size is the grad_output of the backward of a
  convolution with the same input and weight shapes (where that is one size),
  else the input of the next op on its thread that reads an N × O × … tensor;
- `cudnn_convolution_backward_input` / `_weight` (PyTorch ≤ 1.9) record
  grad_output and one of the input and the weight: each is costed as its half of
  the `cudnn_convolution_backward` that calls it, which recorded all three.
Only ops whose own model found nothing are looked at, and only when their cost
is asked for (a GPU trace asks for the ops that launched kernels).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .opcost import matmul
from .shapecost import OpCost, cost_with
from .trace import CpuOp, Trace

# the backward halves PyTorch ≤ 1.9 records as ops of their own: name → (output_mask of the half)
HALVES = {
    "aten::cudnn_convolution_backward_input": (True, False, False),
    "aten::cudnn_convolution_backward_weight": (False, True, False),
    "aten::miopen_convolution_backward_input": (True, False, False),
    "aten::miopen_convolution_backward_weight": (False, True, False),
    "aten::cudnn_convolution_transpose_backward_input": (True, False, False),
    "aten::cudnn_convolution_transpose_backward_weight": (False, True, False),
}
CONTEXT_OPS = frozenset((*matmul.CONVS, *HALVES))
NEXT_OPS = 64  # how far along its thread a convolution's output is looked for


def _dims(o: CpuOp, i: int) -> tuple[int, ...] | None:
    d = o.dims[i] if i < len(o.dims) else None
    if isinstance(d, (list, tuple)) and d and all(isinstance(x, int) and not isinstance(x, bool) for x in d):
        return tuple(d)
    return None


class OpContext:
    """The costs the ops around an op give it (`cost(i)`), worked out when first asked for."""

    def __init__(self, trace: Trace) -> None:
        self.ops = trace.ops
        self._outputs: dict[tuple, set[tuple[int, ...]]] | None = None

    def cost(self, i: int) -> OpCost | None:
        """Op i's W and Q from the ops around it, or None where they say nothing more than its own record."""
        o = self.ops[i]
        if o.name in HALVES:
            return self._half(o)
        if o.name in matmul.CONVS:
            return self._conv(i, o)
        return None

    def _half(self, o: CpuOp) -> OpCost | None:
        p = self.ops[o.parent] if o.parent is not None else None
        if p is None or p.name not in matmul.CONV_BACKWARDS:
            return None
        mask = HALVES[o.name]
        c = cost_with(p.name, p.dims, p.types, p.concrete, lambda call: matmul.conv_backward(call, mask))
        if c is None:
            return None
        return dataclasses.replace(c, counting=c.counting + f"; its half of the {p.name} that calls it, whose "
                                   "record has the input, weight and grad_output")

    def _conv(self, i: int, o: CpuOp) -> OpCost | None:
        x, w = _dims(o, 0), _dims(o, 1)
        if x is None or w is None or len(x) < 3 or len(w) != len(x):
            return None
        out = self._backward_output(x, w) or self._next_input(i, x, w)
        if out is None:
            return None
        return cost_with(o.name, o.dims, o.types, o.concrete, lambda call: matmul.conv(call, out))

    def _backward_output(self, x: tuple[int, ...], w: tuple[int, ...]) -> tuple[int, ...] | None:
        """The output size the backward of a convolution with these input and weight shapes recorded, where
        every such backward recorded one size."""
        if self._outputs is None:
            self._outputs = {}
            for b in self.ops:
                where = matmul.CONV_BACKWARDS.get(b.name)
                if where is None:
                    continue
                go, bx, bw = (_dims(b, k) for k in where[:3])
                if go is not None and bx is not None and bw is not None and len(go) == len(bx):
                    self._outputs.setdefault((bx, bw), set()).add(go[2:])
        outs = self._outputs.get((x, w))
        return next(iter(outs)) if outs and len(outs) == 1 else None

    def _next_input(self, i: int, x: tuple[int, ...], w: tuple[int, ...]) -> tuple[int, ...] | None:
        """The spatial size of the first N × O × … tensor an op after this one on its thread reads (the
        convolution's output, as the batch norm, add or activation after it recorded it)."""
        o = self.ops[i]
        n, out_ch, nd = x[0], w[0], len(x)
        for j in range(i + 1, min(len(self.ops), i + 1 + NEXT_OPS)):
            p = self.ops[j]
            if p.tid != o.tid:
                break
            if p.ts < o.end:  # inside the convolution
                continue
            for k in range(len(p.dims)):
                d = _dims(p, k)
                if d is not None and len(d) == nd and d[0] == n and d[1] == out_ch and _fits(x, w, d[2:]):
                    return d[2:]
        return None


def _fits(x: Sequence[int], w: Sequence[int], out: Sequence[int]) -> bool:
    """Whether `out` can be the output of a convolution of x by w (a stride ≥ 1, padding under the kernel)."""
    return all(1 <= o <= s + k for o, s, k in zip(out, x[2:], w[2:]))
