"""A small MLP run for a few steps on the CPU: the program `rooftop profile` is tested on.

Usage: python tiny_model.py [STEPS] [--fail]
"""

import sys

import torch

torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 5
model = torch.nn.Sequential(
    torch.nn.Linear(256, 512),
    torch.nn.GELU(),
    torch.nn.LayerNorm(512),
    torch.nn.Linear(512, 128),
)
x = torch.randn(64, 256)
with torch.no_grad():
    for _ in range(steps):
        y = model(x)
        y = torch.softmax(y, dim=-1)
print(f"tiny_model: {steps} steps, checksum {float(y.sum()):.3f}")
if "--fail" in sys.argv:
    raise RuntimeError("asked to fail")
