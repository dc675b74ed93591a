"""A multi-process JAX program on the env the operator wrote: a TrainJob's jax policy writes
JAX_COORDINATOR_ADDRESS (host:port), JAX_NUM_PROCESSES and JAX_PROCESS_ID; a JAXJob (v1)
COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID. Every process
contributes one CPU device to a global mesh: a sum over an array sharded across the processes
must give 0+1+...+(n-1) everywhere, then y = 3x + 2 is fitted by gradient descent on data
sharded the same way, each gradient reduced across processes (gloo), so every process ends
with the same weights."""

import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

if "JAX_PROCESS_ID" in os.environ:
    coordinator = os.environ["JAX_COORDINATOR_ADDRESS"]
    processes, pid = int(os.environ["JAX_NUM_PROCESSES"]), int(os.environ["JAX_PROCESS_ID"])
else:
    coordinator = f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}"
    processes, pid = int(os.environ["NUM_PROCESSES"]), int(os.environ["PROCESS_ID"])
jax.distributed.initialize(coordinator_address=coordinator, num_processes=processes, process_id=pid)
mesh = jax.make_mesh((jax.device_count(),), ("p",))
sharded = NamedSharding(mesh, P("p"))
replicated = NamedSharding(mesh, P())

ranks = jax.make_array_from_process_local_data(sharded, np.array([float(pid)]))
total = float(jax.jit(jnp.sum, out_shardings=replicated)(ranks).addressable_data(0))
expected = processes * (processes - 1) / 2
print(
    f"ALLREDUCE process={pid} processes={jax.process_count()} devices={jax.device_count()} "
    f"sum={total:g} expected={expected:g}",
    flush=True,
)
if total != expected:
    raise SystemExit(f"the sum gave {total}, expected {expected}")

rng = np.random.default_rng(100 + pid)
x_local = rng.uniform(-1, 1, size=(256,)).astype(np.float32)
y_local = (3 * x_local + 2 + 0.01 * rng.standard_normal(256)).astype(np.float32)
x = jax.make_array_from_process_local_data(sharded, x_local)
y = jax.make_array_from_process_local_data(sharded, y_local)


def loss(params: tuple[jax.Array, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    w, b = params
    return jnp.mean((w * x + b - y) ** 2)


@jax.jit
def step(
    params: tuple[jax.Array, jax.Array], x: jax.Array, y: jax.Array
) -> tuple[tuple[jax.Array, ...], jax.Array]:
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return tuple(p - 0.2 * g for p, g in zip(params, grads, strict=True)), value


params = (jnp.zeros(()), jnp.zeros(()))
first = None
for _ in range(150):
    params, value = step(params, x, y)
    first = float(value) if first is None else first
w, b = (float(p) for p in params)
print(
    f"TRAINED process={pid} first_loss={first:.4f} final_loss={float(value):.6f} "
    f"w={w:.4f} b={b:.4f}",
    flush=True,
)
jax.distributed.shutdown()
