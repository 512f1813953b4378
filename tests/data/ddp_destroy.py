"""A 2-rank gloo DDP training loop that ends as many do: `dist.destroy_process_group()` with the model still
held by the script's globals. Under `rooftop profile -- torchrun …` it hung in a third of the runs under load
(the model, freed as the script ended, held the destroyed group's last reference); tests/test_bench_torchrun_hang.py
loops it."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                                    torch.nn.Linear(1024, 256)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256)
for _ in range(4):
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
dist.destroy_process_group()
