"""A PyTorchJob's real training: the process group forms from the operator's env (MASTER_ADDR,
MASTER_PORT, WORLD_SIZE, RANK), an all-reduce of rank+1 must give n(n+1)/2 on every rank, then
DistributedDataParallel fits y = 3x + 2 on synthetic data, each rank on a shard of its own."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
expected = world * (world + 1) / 2
print(f"ALLREDUCE rank={rank} world={world} sum={t.item():g} expected={expected:g}", flush=True)
if t.item() != expected:
    raise SystemExit(f"all-reduce gave {t.item()}, expected {expected}")

torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.2)
g = torch.Generator().manual_seed(100 + rank)
x = torch.rand(256, 1, generator=g) * 2 - 1
y = 3 * x + 2 + 0.01 * torch.randn(256, 1, generator=g)
first = None
for _ in range(150):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    if first is None:
        first = loss.item()
w, b = model.module.weight.item(), model.module.bias.item()
print(
    f"TRAINED rank={rank} first_loss={first:.4f} final_loss={loss.item():.6f} w={w:.4f} b={b:.4f}",
    flush=True,
)
dist.barrier()
dist.destroy_process_group()
