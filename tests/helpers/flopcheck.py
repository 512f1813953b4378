"""rooftop's op models against torch's FlopCounterMode on one training step of two small CPU models.

Each model runs one step (forward, backward, optimizer) under torch.profiler
(record_shapes) and the same step again under FlopCounterMode. The trace is
read with rooftop's reader, each op costed with `cost_op`, and only the ops
that own work (`work_ops`, as the workload keeps them: each op's own share) are summed, per op
family and phase. FlopCounterMode's count is adjusted only where rooftop's
convention differs, and by its own figures: causal attention at half
(Megatron's convention), and a grouped convolution's weight gradient, which
FlopCounterMode counts `groups` times over. CPU flash attention is not in
FlopCounterMode's table: its formulas for the CUDA flash ops are mapped onto
the CPU op, whose inputs come in the same order.

Run it to print the table: `.venv/bin/python tests/helpers/flopcheck.py`.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PHASES = ("fwd", "bwd", "opt")
FC_FAMILY = {"mm": "gemm", "addmm": "gemm", "bmm": "gemm", "baddbmm": "gemm", "_scaled_mm": "gemm",
             "convolution": "conv", "_convolution": "conv", "cudnn_convolution": "conv", "convolution_backward": "conv",
             "_slow_conv2d_forward": "conv", "convolution_overrideable": "conv"}


@dataclass
class Check:
    """Per (phase, family): rooftop's FLOPs and bytes, FlopCounterMode's FLOPs and what the convention expects."""

    name: str
    ours: dict = field(default_factory=lambda: defaultdict(float))
    bytes: dict = field(default_factory=lambda: defaultdict(float))
    counter: dict = field(default_factory=lambda: defaultdict(float))
    expected: dict = field(default_factory=lambda: defaultdict(float))
    ops: list = field(default_factory=list)  # (phase, op name, OpCost) of every op that owns work

    def rows(self) -> list[tuple[str, str, float, float, float]]:
        keys = sorted(set(self.ours) | set(self.counter), key=lambda k: (PHASES.index(k[0]), k[1]))
        return [(p, f, self.ours.get((p, f), 0.0), self.counter.get((p, f), 0.0), self.expected.get((p, f), 0.0))
                for p, f in keys]


def _models():
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d: int, h: int, causal: bool, norm: str):
            super().__init__()
            self.h, self.causal = h, causal
            self.n1 = nn.LayerNorm(d) if norm == "layer" else nn.RMSNorm(d)
            self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.n2 = nn.LayerNorm(d)
            self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(self.n2(x))))

    class LM(nn.Module):
        def __init__(self, vocab: int = 64, d: int = 32, h: int = 4):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.causal = Block(d, h, True, "layer")
            self.full = Block(d, h, False, "rms")
            self.head = nn.Linear(d, vocab)

        def forward(self, idx):
            return self.head(self.full(self.causal(self.emb(idx))))

    def lm_batch():
        return torch.randint(0, 64, (2, 24)), torch.randint(0, 64, (2, 24))

    def lm_loss(m, batch):
        idx, tgt = batch
        return F.cross_entropy(m(idx).view(-1, 64), tgt.view(-1))

    def conv_net():
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1, groups=4), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=16, bias=False), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def conv_batch():
        return torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))

    def conv_loss(m, batch):
        x, y = batch
        return F.cross_entropy(m(x), y)

    return {"transformer": (LM, lm_batch, lm_loss), "convnet": (conv_net, conv_batch, conv_loss)}


def _flop_counter(causal: list[float]):
    """FlopCounterMode, with its own SDPA formulas (sdpa_flop_count, sdpa_backward_flop_count) for CPU flash;
    the FLOPs of the causal calls are also added to `causal`."""
    import torch
    from torch.utils.flop_counter import (
        FlopCounterMode,
        sdpa_backward_flop_count,
        sdpa_flop_count,
    )

    aten = torch.ops.aten

    def fwd(q, k, v, dropout_p=0.0, is_causal=False, *args, out_shape=None, **kwargs):
        n = sdpa_flop_count(q, k, v)
        causal.append(n if is_causal else 0.0)
        return n

    def bwd(grad_out, q, k, v, out, lse, dropout_p=0.0, is_causal=False, *args, out_shape=None, **kwargs):
        n = sdpa_backward_flop_count(grad_out, q, k, v)
        causal.append(n if is_causal else 0.0)
        return n

    cpu = {aten._scaled_dot_product_flash_attention_for_cpu: fwd,
           aten._scaled_dot_product_flash_attention_for_cpu_backward: bwd}
    return FlopCounterMode(display=False, custom_mapping=cpu)


def _fc_family(op: str) -> str:
    name = op.split(".")[-1]
    return FC_FAMILY.get(name, "attention" if "attention" in name else name)


def _grouped_weight_grads(model, batch) -> tuple[float, float]:
    """(forward FLOPs of causal attention, what FlopCounterMode over-counts on grouped conv weight gradients),
    from the modules themselves (hooks on this step's shapes), independent of rooftop."""
    from torch import nn

    over = 0.0
    hooks = []

    def conv_hook(mod, inp, out):
        nonlocal over
        g = mod.groups
        if g > 1 and mod.weight.requires_grad:
            n, o = out.shape[0], out.shape[1]
            true = 2.0 * n * o * (mod.in_channels // g) * mod.weight[0, 0].numel() * out[0, 0].numel()
            over += (g - 1) * true
    for mod in model.modules():
        if isinstance(mod, nn.Conv2d):
            hooks.append(mod.register_forward_hook(conv_hook))
    return hooks, lambda: over


def run(name: str, optimizer: str = "fused", tmp: Path | None = None) -> Check:
    """One training step of the named model, costed by rooftop and counted by FlopCounterMode."""
    import torch
    from rooftop.models.program.shapecost import cost_op
    from rooftop.models.program.workload import work_ops
    from rooftop.store.tracefile import load_trace

    torch.manual_seed(0)
    make, batch_of, loss_of = _models()[name]
    model = make()
    opts = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}[optimizer]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **opts)
    batch = batch_of()

    def step(mark):
        with mark("fwd"):
            loss = loss_of(model, batch)
        with mark("bwd"):
            loss.backward()
        with mark("opt"):
            opt.step()
            opt.zero_grad(set_to_none=False)

    step(lambda p: torch.profiler.record_function(f"phase:{p}"))  # the optimizer's state exists from here on
    tmp = Path(tmp or tempfile.mkdtemp(prefix="rooftop-flopcheck-"))
    path = tmp / f"{name}-{optimizer}.trace.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        step(lambda p: torch.profiler.record_function(f"phase:{p}"))
    prof.export_chrome_trace(str(path))

    counters: dict = {}
    causal: dict = {}
    hooks, over = _grouped_weight_grads(model, batch)

    class _Phase:
        def __init__(self, p):
            self.p = p

        def __enter__(self):
            self.causal = causal[self.p] = []
            self.fc = counters[self.p] = _flop_counter(self.causal)
            self.fc.__enter__()

        def __exit__(self, *exc):
            return self.fc.__exit__(*exc)
    step(_Phase)
    for h in hooks:
        h.remove()

    check = Check(name)
    for p, fc in counters.items():
        counts = fc.get_flop_counts()
        for op, n in counts.get("Global", {}).items():
            check.counter[(p, _fc_family(str(op)))] += n
            check.expected[(p, _fc_family(str(op)))] += n
        if sum(causal[p]):
            check.expected[(p, "attention")] -= sum(causal[p]) / 2  # Megatron's convention: half the causal scores
    if over():
        check.expected[("bwd", "conv")] -= over()

    trace = load_trace(path)
    at = trace.origin_us  # the reader counts times from the trace's first event
    windows = [(e["name"].split(":")[1], (e["ts"] - at) * 1e-6, (e["ts"] + e["dur"] - at) * 1e-6)
               for e in json.loads(path.read_text())["traceEvents"]
               if e.get("ph") == "X" and str(e.get("name", "")).startswith("phase:")]
    costs = [cost_op(o.name, o.dims, o.types, None, o.concrete) for o in trace.ops]
    for o, own in zip(trace.ops, work_ops(trace, costs)):
        if own is None:
            continue
        phase = next((p for p, s, e in windows if s <= o.ts < e), None)
        if phase is None:
            continue
        check.ours[(phase, own.model)] += own.flops
        check.bytes[(phase, own.model)] += own.bytes
        check.ops.append((phase, o.name, own))
    return check


def table(checks: list[Check]) -> str:
    head = (f"{'model':<12} {'phase':<5} {'family':<12} {'rooftop FLOP':>14} {'FlopCounterMode':>16} "
            f"{'expected':>14} {'ratio':>7}")
    lines = [head]
    for c in checks:
        for p, f, ours, fc, exp in c.rows():
            ratio = f"{ours / exp:.4f}" if exp else ("—" if not ours else "n/a")
            lines.append(f"{c.name:<12} {p:<5} {f:<12} {ours:>14,.0f} {fc:>16,.0f} {exp:>14,.0f} {ratio:>7}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table([run("transformer"), run("convnet")]))
    print("expected = FlopCounterMode, causal attention halved (Megatron), grouped conv weight gradients "
          "counted once; ratio = rooftop / expected; families FlopCounterMode does not count show 0 there")
