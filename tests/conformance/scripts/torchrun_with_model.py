"""A TrainJob's trainer after its model-initializer step: every process loads the model the
initializer left in the shared volume, checks where it came from, and the processes
all-reduce what the model computes at their rank (w*rank + b), which must equal
w*n(n-1)/2 + n*b on every rank."""

from pathlib import Path

import torch
import torch.distributed as dist

source = Path("/workspace/model/SOURCE").read_text()
model = torch.nn.Linear(1, 1)
model.load_state_dict(torch.load("/workspace/model/model.pt"))
w, b = model.weight.item(), model.bias.item()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
with torch.no_grad():
    t = model(torch.tensor([[float(rank)]])).reshape(1)
dist.all_reduce(t)
expected = w * world * (world - 1) / 2 + world * b
print(
    f"MODEL rank={rank} world={world} source={source} w={w:g} b={b:g} "
    f"sum={t.item():g} expected={expected:g}",
    flush=True,
)
if abs(t.item() - expected) > 1e-6:
    raise SystemExit(f"all-reduce gave {t.item()}, expected {expected}")
dist.destroy_process_group()
