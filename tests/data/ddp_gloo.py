"""A small DDP training loop on gloo (CPU): the distributed program `rooftop profile -- torchrun …` is tested on.

`python ddp_gloo.py [IN HIDDEN OUT STEPS]` (default 64 256 8 5): Linear IN→HIDDEN, ReLU, Linear HIDDEN→OUT.
It ends as many training scripts do: `dist.destroy_process_group()` with the model still a global. A rank
that freed the model as the script ended hung (the model held the destroyed group's last reference);
tests/test_bench_torchrun_hang.py loops that end under load.
"""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

d_in, hidden, d_out, steps = (int(a) for a in sys.argv[1:5]) if len(sys.argv) > 4 else (64, 256, 8, 5)
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(),
                                                    torch.nn.Linear(hidden, d_out)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, d_in)
for _ in range(steps):
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
dist.destroy_process_group()
