"""Elastic training under torchrun's c10d rendezvous (the operator's PET_* env): train while
the world has 2 nodes; when a third joins, torchrun restarts every worker into a world of 3,
which all-reduces once more and ends."""

import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
restarts = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
print(f"ELASTIC restart={restarts} rank={rank} world={world}", flush=True)
deadline = time.time() + 600
steps = 0
while world < 3 and time.time() < deadline:
    t = torch.ones(1)
    dist.all_reduce(t)  # one step of training among the nodes present
    steps += 1
    time.sleep(0.5)
if world < 3:
    raise SystemExit("the third node never joined")
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"ELASTIC-DONE rank={rank} world={world} sum={t.item():g}", flush=True)
dist.barrier()
dist.destroy_process_group()
