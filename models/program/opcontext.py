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
  the `cudnn_convolution_backward` that calls it, which recorded all three;
- an inference framework's attention (vLLM, SGLang, aiter): the per-request
  query and key lengths are tensors' contents, not shapes; the step's iteration
  annotation (`execute_…_context_…(sq…sk…)_generation_…(…)`: an op or a range
  around it, whether or not it owns kernels, else the trace's only one) has their
  sums;
- `aten::index` (`x[idx]`) records its indices, a list of optional tensors, as
  `[]`: the output's shape is the sizes of the source's `as_strided` inside it,
  and each index tensor the input of a `reshape` inside it;
- fbgemm's table-batched embedding (TBE) lookup records its tables, batch and lookups, not total_D (a scalar,
  where `Concrete Inputs` is not recorded), and its backward node records grad_output [B, total_D] alone: each
  backward is paired with the latest forward of its optimizer not yet paired whose batch (or, not pooled, its
  lookups) is the grad_output's first dimension (autograd runs a step's backwards in the reverse order of their
  forwards), and each is costed with both records;
- vLLM's `moe_forward` records the tokens and router logits, not the experts:
  top-k is the `TopK` (or `topk`, `topk_softmax`) inside it, and each expert's
  weights are the E × … tensors the ops inside it read.
Only ops whose own model found nothing are looked at, and only when their cost
is asked for (a GPU trace asks for the ops that launched kernels).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .opcost import embedding, inference, matmul, memory
from .opcost.base import Tensor, parse_ints
from .opcost.inference import Experts, Lengths
from .shapecost import TORCH_TYPES, OpCost, cost_with
from ..trace.read import CpuOp, Trace

# the backward halves PyTorch ≤ 1.9 records as ops of their own: name → (output_mask of the half)
HALVES = {
    "aten::cudnn_convolution_backward_input": (True, False, False),
    "aten::cudnn_convolution_backward_weight": (False, True, False),
    "aten::miopen_convolution_backward_input": (True, False, False),
    "aten::miopen_convolution_backward_weight": (False, True, False),
    "aten::cudnn_convolution_transpose_backward_input": (True, False, False),
    "aten::cudnn_convolution_transpose_backward_weight": (False, True, False),
}
CONTEXT_OPS = frozenset((*matmul.CONVS, *HALVES, *inference.CONTEXT, "aten::index"))
INDEX_TYPES = frozenset(("long int", "long", "int"))  # an index tensor's recorded type (int64, int32)
TBE_PREFIXES = ("fbgemm::split_embedding_codegen_lookup_", "torch::autograd::CppNode<SplitLookupFunction_")
NEXT_OPS = 64  # how far along its thread a convolution's output is looked for


def needs_context(name: str) -> bool:
    """Whether an op's cost may come from the ops around it (where its own record found no model)."""
    return name in CONTEXT_OPS or inference.base_name(name) in CONTEXT_OPS or embedding.is_tbe(name)


def reads_inside(name: str) -> bool:
    """Whether an op's W is read from the ops inside it (a MoE layer's top-k and expert weights): a copy of the op
    (a graph capture's, joined to its replay) needs its whole subtree, not only the ops that launched kernels."""
    return inference.base_name(name) in inference.MOE


def _dims(o: CpuOp, i: int) -> tuple[int, ...] | None:
    d = o.dims[i] if i < len(o.dims) else None
    if isinstance(d, (list, tuple)) and d and all(isinstance(x, int) and not isinstance(x, bool) for x in d):
        return tuple(d)
    return None


class OpContext:
    """The costs the ops around an op give it (`cost(i)`), worked out when first asked for."""

    def __init__(self, trace: Trace) -> None:
        self.ops = trace.ops
        self.iterations = trace.iterations
        self._outputs: dict[tuple, set[tuple[int, ...]]] | None = None
        self._steps: list[tuple[float, float, Lengths]] | None = None
        self._tbe: dict[int, int] | None = None

    def cost(self, i: int) -> OpCost | None:
        """Op i's W and Q from the ops around it, or None where they say nothing more than its own record."""
        o = self.ops[i]
        if o.name in HALVES:
            return self._half(o)
        if o.name in matmul.CONVS:
            return self._conv(i, o)
        if o.name == "aten::index":
            return self._index(o)
        if embedding.is_tbe(o.name):
            return self._tbe_cost(i, o)
        base = inference.base_name(o.name)
        if base in inference.ATTENTION:
            lengths = self.lengths(i)
            return cost_with(o.name, o.dims, o.types, o.concrete, lambda c: inference.attention(c, lengths)) \
                if lengths is not None else None
        if base in inference.MOE:
            experts = self.experts(i)
            return cost_with(o.name, o.dims, o.types, o.concrete, lambda c: inference.moe(c, experts)) \
                if experts is not None else None
        return None

    def lengths(self, i: int) -> Lengths | None:
        """The step's query and key lengths: the iteration annotation enclosing op i (an op around it, else the
        innermost annotation whose time holds its start: a graph's op copied from its capture runs at its replay's
        launch), else the trace's only one."""
        o = self.ops[i]
        j = o.parent
        while j is not None:
            got = inference.lengths_of(self.ops[j].name)
            if got is not None:
                return got
            j = self.ops[j].parent
        if self._steps is None:
            marks = [*self.iterations, *((p.ts, p.end, p.name) for p in self.ops
                                         if p.name.startswith(inference.ITERATION))]
            self._steps = sorted(((ts, end, g) for ts, end, name in marks
                                  if (g := inference.lengths_of(name)) is not None), key=lambda s: s[1] - s[0])
        inside = next((g for ts, end, g in self._steps if ts <= o.ts <= end), None)
        if inside is not None:
            return inside
        every = {g for *_, g in self._steps}
        return next(iter(every)) if len(every) == 1 else None

    def experts(self, i: int) -> Experts | None:
        """Top-k and each expert's weights from the ops inside MoE op i."""
        o = self.ops[i]
        logits = _dims(o, 1)
        if logits is None or len(logits) != 2:
            return None
        e = logits[1]
        top_k = 0
        weights: dict[tuple[int, ...], tuple[float, float]] = {}
        stack = list(o.children)
        while stack:
            p = self.ops[stack.pop()]
            stack.extend(p.children)
            if not top_k:
                top_k = _top_k(p)
            d = _dims(p, 0)
            if d is not None and len(d) == 3 and d[0] == e and d not in weights:
                dtype, size = TORCH_TYPES.get(p.types[0] if p.types else "", ("", 0.0))
                if size and dtype not in ("int32", "int64", "bool"):
                    per = d[1] * d[2]  # one expert's elements; a byte holds two 4-bit weights (mxfp4, int4)
                    weights[d] = (per * (2 if dtype == "uint8" else 1), per * size)
        if not top_k or not weights:
            return None
        return Experts(top_k, tuple(list(weights.values())[:2]))

    def tbe_pairs(self) -> dict[int, int]:
        """Each TBE forward's backward node and each node's forward, by op index (both ways)."""
        if self._tbe is None:
            self._tbe = {}
            tbe = sorted((o.ts, i) for i, o in enumerate(self.ops)
                         if o.name.startswith(TBE_PREFIXES) and embedding.is_tbe(o.name))
            waiting: dict[str, list[int]] = {}  # optimizer → its forwards not yet paired, in time order
            for _, i in tbe:
                o = self.ops[i]
                opt = embedding.optimizer_of(o.name) or ""
                if embedding.FORWARD.match(o.name):
                    waiting.setdefault(opt, []).append(i)
                    continue
                g = _dims(o, 0)
                queue = waiting.get(opt, [])
                for k in range(len(queue) - 1, -1, -1):
                    got = embedding.sizes(self.ops[queue[k]].dims)
                    if g is not None and got is not None and g[0] in got:
                        f = queue.pop(k)
                        self._tbe[f], self._tbe[i] = i, f
                        break
        return self._tbe

    def _tbe_cost(self, i: int, o: CpuOp) -> OpCost | None:
        """A TBE forward costed with its backward's grad_output width (total_D), or a backward node with its
        forward's record."""
        j = self.tbe_pairs().get(i)
        if j is None:
            return None
        p = self.ops[j]
        node = embedding.BACKWARD.match(o.name) is not None
        grad = _tensor(o if node else p, 0)
        if grad is None or len(grad.dims) != 2:
            return None
        g: Tensor = grad
        if node:
            return cost_with(p.name, p.dims, p.types, p.concrete, lambda c: embedding.backward(c, g))
        c = cost_with(o.name, o.dims, o.types, o.concrete, lambda call: embedding.forward(call, g.dims[1], g.size))
        return dataclasses.replace(c, counting=c.counting + "; total_D and the output's element from its backward's "
                                   "grad_output") if c is not None else None

    def _index(self, o: CpuOp) -> OpCost | None:
        """`x[idx]` from the ops inside it, where its record has the indices as `[]`: the `as_strided` of the source
        (same shape) to the output's sizes, and the `reshape` of each integer index tensor."""
        x = _dims(o, 0)
        if x is None:
            return None
        out: list[int] | None = None
        indices: list[Tensor] = []
        for c in o.children:
            p = self.ops[c]
            if p.name == "aten::as_strided" and out is None and _dims(p, 0) == x and len(p.concrete) > 1:
                out = parse_ints(p.concrete[1])
            elif p.name == "aten::reshape" and (d := _dims(p, 0)) is not None and p.types and p.types[0] in INDEX_TYPES:
                dtype, size = TORCH_TYPES[p.types[0]]
                indices.append(Tensor(d, dtype, size))
        if out is None or not indices:
            return None
        return cost_with(o.name, o.dims, o.types, o.concrete,
                         lambda call: memory.index_from_inside(call, out, indices))

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


def _tensor(o: CpuOp, i: int) -> Tensor | None:
    """Input i of op o as a Tensor of a known element type, or None."""
    d = _dims(o, i)
    known = TORCH_TYPES.get(o.types[i]) if d is not None and i < len(o.types) else None
    return Tensor(d, known[0], float(known[1])) if d is not None and known is not None else None


def _top_k(p: CpuOp) -> int:
    """The k of a top-k op inside a MoE layer (triton_kernels' TopK, aten::topk, vLLM's topk_softmax), else 0."""
    if p.name in ("TopK", "aten::topk"):
        k = parse_ints(p.concrete[1], 1) if len(p.concrete) > 1 else None
        return k[0] if k and k[0] > 0 else 0
    if p.name in ("_moe_C::topk_softmax", "_moe_C::topk_sigmoid"):  # (topk_weights [M, k], topk_ids, …)
        d = _dims(p, 0)
        return d[1] if d is not None and len(d) == 2 else 0
    return 0


def _fits(x: Sequence[int], w: Sequence[int], out: Sequence[int]) -> bool:
    """Whether `out` can be the output of a convolution of x by w (a stride ≥ 1, padding under the kernel)."""
    return all(1 <= o <= s + k for o, s, k in zip(out, x[2:], w[2:]))
