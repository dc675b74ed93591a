"""A TrainJob's process under torchrun: torchrun made the process group's env (RANK,
WORLD_SIZE, LOCAL_RANK, GROUP_RANK, MASTER_ADDR) from the PET_* env the TrainJob controller
wrote; an all-reduce of the ranks must give 0+1+...+(n-1) on every rank, and an all-gather of
each process's pod and node rank shows where torchrun placed the processes."""

import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank)])
dist.all_reduce(t)
expected = world * (world - 1) / 2
print(
    f"ALLREDUCE rank={rank} local_rank={os.environ['LOCAL_RANK']} "
    f"node_rank={os.environ['GROUP_RANK']} world={world} sum={t.item():g} expected={expected:g}",
    flush=True,
)
if t.item() != expected:
    raise SystemExit(f"all-reduce gave {t.item()}, expected {expected}")

placement: list[object] = [None] * world
dist.all_gather_object(placement, (socket.gethostname(), int(os.environ["GROUP_RANK"])))
if rank == 0:
    print("PLACEMENT " + " ".join(f"{r}:{h}/{n}" for r, (h, n) in enumerate(placement)), flush=True)
dist.barrier()
dist.destroy_process_group()
