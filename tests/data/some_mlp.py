"""An MLP trained for N steps on the CPU (default 400): the benchmark's program for profiling overhead.

Usage: python some_mlp.py [STEPS]
"""

import sys

import torch

torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, target = torch.randn(64, 512), torch.randn(64, 512)
for _ in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), target)
    loss.backward()
    opt.step()
print(f"some_mlp: {steps} steps, loss {loss.item():.4f}")
