"""A small DDP training loop on gloo (CPU): the distributed program `rooftop profile -- torchrun …` is tested on.

`python ddp_gloo.py [IN HIDDEN OUT STEPS [drop]]` (default 64 256 8 5): Linear IN→HIDDEN, ReLU, Linear
HIDDEN→OUT. It ends as training scripts do, with `dist.destroy_process_group()`; then the model is still a
global, or with `drop` the script frees it itself (as a `main()` that returns frees its locals). A profiled
rank that freed such a model hung: the model held the destroyed group's last reference.
tests/test_bench_torchrun_hang.py loops both ends under load.
"""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def train(d_in: int, hidden: int, d_out: int, steps: int) -> DistributedDataParallel:
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
    return model


model = train(*(int(a) for a in sys.argv[1:5])) if len(sys.argv) > 4 else train(64, 256, 8, 5)
if "drop" in sys.argv[5:]:
    del model
