"""PaddlePaddle's collective mode on CPU, started by ``python -m paddle.distributed.launch``
with only the env the operator wrote: PADDLE_MASTER (worker 0's pod IP on worker 0, its
Service's name elsewhere), PADDLE_NNODES and PADDLE_JOB_ID. The launchers meet at the master
(worker 0's launcher serves it), which hands out the ranks; the launcher then starts this
script with PADDLE_TRAINER_ID, PADDLE_TRAINER_ENDPOINTS and, with no accelerator,
PADDLE_DISTRI_BACKEND=gloo. Each rank contributes rank + 1 to an all_reduce, gathers the
pods' names, then fits y = 3x + 2 with DataParallel (gradients all-reduced), so every rank
ends with the same weights."""

import os
import socket

import numpy as np
import paddle
import paddle.distributed as dist

dist.init_parallel_env()
rank, world = dist.get_rank(), dist.get_world_size()

value = paddle.to_tensor([float(rank + 1)])
dist.all_reduce(value)
total = float(value.numpy()[0])
expected = world * (world + 1) / 2
hosts: list[str] = []
dist.all_gather_object(hosts, socket.gethostname())
print(
    f"ALLREDUCE rank={rank} world={world} sum={total:g} expected={expected:g} "
    f"backend={os.environ.get('PADDLE_DISTRI_BACKEND')} device={paddle.get_device()} "
    f"host={socket.gethostname()} hosts={','.join(hosts)}",
    flush=True,
)
if total != expected:
    raise SystemExit(f"the all_reduce gave {total}, expected {expected}")

paddle.seed(0)
rng = np.random.default_rng(100 + rank)
x = rng.uniform(-1, 1, size=(256, 1)).astype(np.float32)
y = (3 * x + 2 + 0.01 * rng.standard_normal((256, 1))).astype(np.float32)
x, y = paddle.to_tensor(x), paddle.to_tensor(y)
model = paddle.DataParallel(paddle.nn.Linear(1, 1))
opt = paddle.optimizer.SGD(learning_rate=0.2, parameters=model.parameters())
first = None
for _ in range(150):
    loss = paddle.mean((model(x) - y) ** 2)
    loss.backward()
    opt.step()
    opt.clear_grad()
    first = float(loss) if first is None else first
w = float(model._layers.weight.numpy().item())
b = float(model._layers.bias.numpy().item())
print(
    f"TRAINED rank={rank} first_loss={first:.4f} final_loss={float(loss):.6f} w={w:.4f} b={b:.4f}",
    flush=True,
)
