"""The environment torch.distributed and torchrun read, as the training-operator sets it.

Every container of every pod gets it (not init containers). The names with a ``PET_`` prefix
are torchrun's flags as environment variables (``PET_NNODES`` is ``--nnodes``); the others are
what ``init_process_group("env://")`` reads.

- With a Master: ``MASTER_ADDR`` is ``<job>-master-0``, a short name that resolves through the
  pod's DNS search path (the per-replica headless Service), and ranks are master 0, worker i
  i+1.
- Without a Master and without elasticPolicy, worker 0 takes the master's place
  (``<job>-worker-0``, ranks i). The anchor sets no address and no rank here, which leaves such
  a job unable to rendezvous; this only adds variables, so nothing that worked before changes.
- Elastic without a Master: no address, rank or world size at all, as in the anchor. The
  rendezvous (``PET_RDZV_*``) assigns ranks, and the world changes size as workers come and go.

The operator's values win over the user's, as in v1.9 (which appends its own after the
user's, and the kubelet takes the last definition): otherwise a user's ``MASTER_PORT`` would
disagree with ``PET_MASTER_PORT`` and with the port the init container waits for. Unlike
v1.9, the user's definition is dropped rather than shadowed, so the pod carries one definition
of each name (the API server warns about duplicates).
"""

from __future__ import annotations

from jobcontroller.api import replica_port
from pytorch_operator.api import (
    PYTORCH_PORT,
    PYTORCH_PORT_NAME,
    PyTorchJob,
    PyTorchReplicaType,
)

__all__ = [
    "DEFAULT_RDZV_BACKEND",
    "master_address",
    "nproc_per_node_int",
    "pod_env",
    "pytorch_port",
    "total_replicas",
    "world_size",
]

DEFAULT_RDZV_BACKEND = "c10d"

_MASTER = PyTorchReplicaType.MASTER
_WORKER = PyTorchReplicaType.WORKER


def pytorch_port(job: PyTorchJob, rtype: str) -> int:
    """The ``pytorchjob-port`` of the ``pytorch`` container of ``rtype`` (23456 if absent)."""
    return replica_port(job, rtype, port_name=PYTORCH_PORT_NAME, default=PYTORCH_PORT)


def total_replicas(job: PyTorchJob) -> int:
    return sum(spec.replicas or 0 for spec in job.spec.pytorch_replica_specs.values())


def nproc_per_node_int(job: PyTorchJob) -> int:
    """Processes per pod as a number: the integer value, or 1 for auto, cpu, gpu (unknown
    until torchrun runs). The deprecated ``elasticPolicy.nProcPerNode`` counts too; the anchor
    ignores it here and undercounts the world size of such jobs."""
    value = job.spec.nproc_per_node
    if value is not None:
        try:
            return int(value)
        except ValueError:
            return 1
    elastic = job.spec.elastic_policy
    if elastic is not None and elastic.n_proc_per_node is not None:
        return elastic.n_proc_per_node
    return 1


def world_size(job: PyTorchJob) -> int:
    return total_replicas(job) * nproc_per_node_int(job)


def master_address(job: PyTorchJob) -> tuple[str, int] | None:
    """Host and port every pod rendezvouses at with ``env://``; None in elastic mode without a
    Master (the rendezvous backend takes that role)."""
    specs = job.spec.pytorch_replica_specs
    if _MASTER in specs:
        return f"{job.name}-master-0", pytorch_port(job, _MASTER)
    if job.spec.elastic_policy is None and _WORKER in specs:
        return f"{job.name}-worker-0", pytorch_port(job, _WORKER)
    return None


def _rank(job: PyTorchJob, *, rtype: str, index: int) -> int:
    if _MASTER in job.spec.pytorch_replica_specs and rtype == _WORKER:
        return index + 1
    return index


def _elastic_env(job: PyTorchJob) -> list[tuple[str, str]]:
    elastic = job.spec.elastic_policy
    assert elastic is not None
    host = elastic.rdzv_host or f"{job.name}-worker-0"
    port = elastic.rdzv_port or pytorch_port(job, _WORKER)
    env = [
        ("PET_RDZV_ENDPOINT", f"{host}:{port}"),
        ("PET_RDZV_BACKEND", elastic.rdzv_backend or DEFAULT_RDZV_BACKEND),
    ]
    if elastic.min_replicas is not None and elastic.max_replicas is not None:
        env.append(("PET_NNODES", f"{elastic.min_replicas}:{elastic.max_replicas}"))
    else:
        worker = job.spec.pytorch_replica_specs.get(_WORKER)
        env.append(("PET_NNODES", str(worker.replicas if worker and worker.replicas else 0)))
    if elastic.max_restarts is not None:
        env.append(("PET_MAX_RESTARTS", str(elastic.max_restarts)))
    if elastic.n_proc_per_node is not None:
        env.append(("PET_NPROC_PER_NODE", str(elastic.n_proc_per_node)))
    if elastic.rdzv_id is not None:
        env.append(("PET_RDZV_ID", elastic.rdzv_id))
    if elastic.rdzv_conf is not None:
        conf = ",".join(f"{c.key or ''}={c.value or ''}" for c in elastic.rdzv_conf)
        env.append(("PET_RDZV_CONF", conf))
    if elastic.standalone:
        # torchrun's --standalone is a flag: present (empty) means on.
        env.append(("PET_STANDALONE", ""))
    return env


def pod_env(job: PyTorchJob, *, rtype: str, index: int) -> list[tuple[str, str]]:
    """The variables for replica ``rtype``/``index`` of a defaulted job, in v1.9's order."""
    env = [("PYTHONUNBUFFERED", "1")]
    master = master_address(job)
    if master is not None:
        host, port = master
        env += [
            ("MASTER_PORT", str(port)),
            ("PET_MASTER_PORT", str(port)),
            ("MASTER_ADDR", host),
            ("PET_MASTER_ADDR", host),
        ]
        rank = str(_rank(job, rtype=rtype, index=index))
        env += [("WORLD_SIZE", str(world_size(job))), ("RANK", rank), ("PET_NODE_RANK", rank)]
    if job.spec.nproc_per_node is not None:
        env.append(("PET_NPROC_PER_NODE", job.spec.nproc_per_node))
    if job.spec.elastic_policy is not None:
        env += _elastic_env(job)
    else:
        env.append(("PET_NNODES", str(total_replicas(job))))
    return env
