"""A small DDP training loop on gloo (CPU): the distributed program `rooftop profile -- torchrun …` is tested on."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
for _ in range(5):
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
# The model (its DDP reducer) goes while the process group is still registered: freed at the end with the
# group already gone, the reducer's last reference destroys the gloo group, which joins its worker thread
# with the GIL held while that thread waits for the GIL (torch's teardown deadlock, seen under CPU load).
del model, opt
dist.barrier()
dist.destroy_process_group()
