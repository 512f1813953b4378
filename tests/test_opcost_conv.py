"""Convolution W, forward and each backward half, against torch's FlopCounterMode; and a 2021 trace's convolutions.

Each case runs one real convolution (1d, 2d, 3d, transposed; stride, padding, dilation, groups) forward and
backward on the CPU under torch.profiler, three times: with both gradients, with grad_input only (the weight
frozen) and with grad_weight only (the input needs none). rooftop costs the recorded ops as the workload keeps
them (`work_ops`) and must equal FlopCounterMode within 1%, per phase and per half, after its one documented
difference: FlopCounterMode counts a grouped convolution's weight gradient `groups` times over (2·C·O·N·k·out
for what is 2·(C/groups)·O·N·k·out multiply-adds).

The 2021 ResNet-50 trace (PyTorch 1.8, V100) records no stride or padding: the output size comes from the ops
around each convolution (`models.opcontext`), and its W from that equals FlopCounterMode's count of the same
network at the same batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace
from rooftop.tui.cli import main

torch = pytest.importorskip("torch")

RESNET = Path(__file__).parent / "data" / "real-traces" / "more" / "v100-resnet50-train-2021-legacy.json.gz"

# (name, module constructor, input shape)
CASES = [
    ("1d stride 2 pad 1", lambda nn: nn.Conv1d(4, 6, 3, stride=2, padding=1), (2, 4, 17)),
    ("2d plain", lambda nn: nn.Conv2d(3, 8, 3), (2, 3, 12, 12)),
    ("2d stride 2 pad 3 (a stem)", lambda nn: nn.Conv2d(3, 8, 7, stride=2, padding=3, bias=False), (2, 3, 20, 20)),
    ("2d dilation 2 pad 2", lambda nn: nn.Conv2d(4, 4, 3, padding=2, dilation=2), (2, 4, 11, 13)),
    ("2d groups 4, asymmetric", lambda nn: nn.Conv2d(8, 12, (3, 1), stride=(1, 2), padding=(1, 0), groups=4),
     (2, 8, 10, 9)),
    ("2d depthwise", lambda nn: nn.Conv2d(6, 6, 3, padding=1, groups=6, bias=False), (2, 6, 9, 9)),
    ("2d 1x1 stride 2", lambda nn: nn.Conv2d(8, 16, 1, stride=2, bias=False), (2, 8, 14, 14)),
    ("3d stride 2 pad 1", lambda nn: nn.Conv3d(2, 4, 3, stride=2, padding=1), (1, 2, 7, 8, 9)),
    ("transposed 2d stride 2", lambda nn: nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1),
     (2, 6, 7, 7)),
    ("transposed 2d groups 2", lambda nn: nn.ConvTranspose2d(4, 6, 2, stride=2, groups=2), (2, 4, 5, 5)),
    ("transposed 1d dilation 2", lambda nn: nn.ConvTranspose1d(3, 5, 3, dilation=2), (2, 3, 10)),
]
HALVES = {"both": (True, True), "grad_input": (True, False), "grad_weight": (False, True)}


def _rooftop(mod, x, tmp: Path) -> dict[str, float]:
    """rooftop's conv FLOPs per phase of one forward and backward of `mod` on `x`, from its trace."""
    from rooftop.models.program.shapecost import cost_op
    from rooftop.models.program.workload import work_ops

    path = tmp / "conv.trace.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch.profiler.record_function("phase:fwd"):
            y = mod(x)
        with torch.profiler.record_function("phase:bwd"):
            y.sum().backward()
    prof.export_chrome_trace(str(path))
    trace = load_trace(path)
    at = trace.origin_us
    windows = [(e["name"].split(":")[1], (e["ts"] - at) * 1e-6, (e["ts"] + e["dur"] - at) * 1e-6)
               for e in json.loads(path.read_text())["traceEvents"]
               if e.get("ph") == "X" and str(e.get("name", "")).startswith("phase:")]
    costs = [cost_op(o.name, o.dims, o.types, None, o.concrete) for o in trace.ops]
    out = {"fwd": 0.0, "bwd": 0.0}
    for o, own in zip(trace.ops, work_ops(trace, costs)):
        phase = next((p for p, s, e in windows if s <= o.ts < e), None)
        if own is not None and own.model == "conv" and phase:
            out[phase] += own.flops
    return out


def _counter(mod, x) -> dict[str, float]:
    """FlopCounterMode's FLOPs per phase, the weight gradient of a grouped convolution counted once."""
    from torch.utils.flop_counter import FlopCounterMode

    out = {}
    with FlopCounterMode(display=False) as fc:
        y = mod(x)
    out["fwd"] = fc.get_total_flops()
    with FlopCounterMode(display=False) as fc:
        y.sum().backward()
    out["bwd"] = fc.get_total_flops()
    g = mod.groups
    if g > 1 and mod.weight.requires_grad:  # its weight gradient counted `groups` times over: once here
        pixels = (x if mod.transposed else y)[0, 0].numel()
        cin = mod.in_channels
        true = 2.0 * x.shape[0] * mod.out_channels * (cin // g) * mod.weight[0, 0].numel() * pixels
        out["bwd"] -= (g - 1) * true
    return out


@pytest.mark.parametrize("half", list(HALVES))
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_conv_forward_and_each_backward_half_equal_flop_counter(case, half, tmp_path):
    from torch import nn

    _, make, shape = next(c for c in CASES if c[0] == case)
    torch.manual_seed(0)
    mod = make(nn)
    need_x, need_w = HALVES[half]
    x = torch.randn(shape, requires_grad=need_x)
    for p in mod.parameters():
        p.requires_grad_(need_w)
    if not need_x and not need_w:
        pytest.skip("nothing to differentiate")
    ours, fc = _rooftop(mod, x, tmp_path), _counter(mod, x)
    assert fc["fwd"] > 0 and fc["bwd"] > 0
    assert ours["fwd"] == pytest.approx(fc["fwd"], rel=0.01), ours
    assert ours["bwd"] == pytest.approx(fc["bwd"], rel=0.01), ours
    if half != "both":  # one half is the forward's FLOPs
        assert ours["bwd"] == pytest.approx(ours["fwd"], rel=1e-9)


def test_conv_backward_without_stride_and_padding_counts_from_grad_output():
    """A convolution_backward recorded with shapes and no arguments (PyTorch 1.11–1.13 write no Concrete Inputs):
    grad_output holds the output size, so its W needs no stride or padding; the halves are told apart by shape."""
    from rooftop.models.program.shapecost import cost_op

    f = "float"
    plain = cost_op("aten::convolution_backward", [[32, 64, 56, 56], [32, 64, 112, 112], [64, 64, 3, 3], []]
                    + [[]] * 7, [f, f, f] + [""] * 8)
    assert plain.model == "conv" and plain.flops == 2 * (2.0 * 32 * 64 * 64 * 9 * 56 * 56)
    # a transposed one (its weight is C_in × O/groups × k): W from the input's pixels
    up = cost_op("aten::convolution_backward", [[2, 4, 16, 16], [2, 6, 8, 8], [6, 4, 2, 2], []] + [[]] * 7,
                 [f, f, f] + [""] * 8)
    assert up.model == "conv" and up.flops == 2 * (2.0 * 2 * 6 * 4 * 4 * 8 * 8)
    # the old cudnn op: self, grad_output, weight, …, output_mask (two halves)
    old = cost_op("aten::cudnn_convolution_backward", [[32, 512, 7, 7], [32, 2048, 7, 7], [2048, 512, 1, 1]]
                  + [[]] * 8, [f, f, f] + ["GenericList"] * 3 + ["Int", "Bool", "Bool", "Bool", "GenericList"])
    assert old.model == "conv" and old.flops == 2 * (2.0 * 32 * 2048 * 512 * 49)


def _resnet50(nn):
    """torchvision's ResNet-50 (v1.5: the stride on the 3×3), as the 2021 trace ran it."""
    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.c2, self.b2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.c3, self.b3 = nn.Conv2d(width, width * 4, 1, bias=False), nn.BatchNorm2d(width * 4)
            self.down = (nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False), nn.BatchNorm2d(width * 4))
                         if stride != 1 or cin != width * 4 else nn.Identity())

        def forward(self, x):
            y = self.b1(self.c1(x)).relu()
            y = self.b2(self.c2(y)).relu()
            return (self.b3(self.c3(y)) + self.down(x)).relu()

    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))


@pytest.fixture(scope="module")
def resnet():
    return build_workload(load_trace(RESNET), lookup_device("v100-32"))


def test_a_2021_resnet50s_convolutions_from_the_ops_around_them(resnet):
    """PyTorch 1.8 recorded cudnn_convolution with its input and weight and no stride or padding, and its
    backward as cudnn_convolution_backward_input / _weight with one of them each. Before, all three were "no
    model" (W = 0), 66% of the step's kernel time: MFU read 0.3%."""
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    by = {}
    for g in resnet.groups:
        if "convolution" in g.op:
            assert g.model == "conv", (g.op, g.shapes)
            f, n = by.get(g.op, (0.0, 0))
            by[g.op] = (f + g.flops, n + g.calls)
    steps, batch = 6, 32
    with torch.device("meta"), FlopCounterMode(display=False) as fc:
        _resnet50(nn)(torch.empty(batch, 3, 224, 224))
    conv = sum(n for op, n in fc.get_flop_counts()["Global"].items() if "convolution" in str(op))
    fwd, calls = by["aten::cudnn_convolution"]
    assert calls == 53 * steps and fwd / steps == pytest.approx(conv, rel=0.01)
    # the weight gradient of every layer is its forward; the stem's input needs no gradient
    assert by["aten::cudnn_convolution_backward_weight"][0] == pytest.approx(fwd)
    stem = 2.0 * batch * 64 * 3 * 49 * 112 * 112
    assert by["aten::cudnn_convolution_backward_input"] == (pytest.approx(fwd - stem * steps), 52 * steps)
    assert 0.25 < resnet.mfu < 0.40  # 4.7 TFLOP over a 1 s span on a 15.5 TFLOP/s fp32 roof (0.35% before)


def test_the_output_size_from_the_next_op_when_no_backward_says(resnet):
    """With only the forward in the trace (an inference run), the op after each convolution gives its output
    size: the same W as the backward gave."""
    from rooftop.models.program.opcontext import OpContext

    trace = load_trace(RESNET)
    ctx = OpContext(trace)
    ctx._outputs = {}  # as if no backward had been recorded
    fwd = [ctx.cost(i) for i, o in enumerate(trace.ops) if o.name == "aten::cudnn_convolution"]
    assert all(c is not None and c.model == "conv" for c in fwd)
    assert sum(c.flops for c in fwd) == pytest.approx(
        sum(g.flops for g in resnet.groups if g.op == "aten::cudnn_convolution"))
    assert "next op's input" in fwd[0].counting


def test_profile_reports_the_resnet50s_mfu(capsys):
    assert main(["profile", "--trace", str(RESNET), "-d", "v100-32", "--json", "--no-save"]) == 0
    s = json.loads(capsys.readouterr().out)["summary"]
    peak = lookup_device("v100-32").F("fp32-matmul")
    assert s["mfu_path"] == "fp32-matmul"
    assert s["flops"] / s["span_s"] / peak == pytest.approx(0.3055, abs=0.002)  # every op's model FLOPs: was 0.35%
    # the headline leaves out the 3×3 convolutions cuDNN runs as Winograd above 1.5× the fp32 roof (fewer FLOPs
    # than the direct count), and says so
    head = s["headline"]
    assert head["left_out"] and all(g["fraction_of_roof"] > 1.5 for g in head["left_out"])
    assert s["mfu"] == pytest.approx(head["mfu_counted"]) and 0.2 < s["mfu"] < 0.3055
