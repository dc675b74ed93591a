"""The ML policies: what a runtime's ``mlPolicy`` makes the trainer's pods know about each
other, as Trainer v2.3.0's plugins write it (pkg/runtime/framework/plugins/{torch,jax,xgboost,
plainml}).

Every policy takes the trainer's node count from the TrainJob when it names one. Then:

- torch: torchrun's ``PET_*`` env (node count, processes per node, the node's rank from the
  Job's completion index, the master's address and port) and the trainer port on the ``node``
  container, and on the containers the policy's ``envInjection`` names;
- jax: ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``, ``JAX_COORDINATOR_ADDRESS`` and the port;
- xgboost: the Rabit tracker's ``DMLC_*`` env (one worker per GPU, else one per node) and the
  port;
- mpi: the launcher's hostfile, SSH keys and Open MPI env (:mod:`trainer_operator.mpi`);
- plain (no policy, or one of the others that have no plugin of their own here): the
  TrainJob's env on the trainer.

The master (rank 0) is pod 0 of Job 0 of the ``node`` replicated job, reached through the
JobSet's headless Service, named after the TrainJob: ``<name>-node-0-0.<name>``.
"""

from __future__ import annotations

from typing import Any

from trainer_operator.info import (
    NODE,
    TRAINER,
    Container,
    Info,
    RuntimeProblem,
    apply_env,
    by_name,
    by_port,
    upsert,
)
from trainer_operator.mpi import enforce_mpi
from trainer_operator.resources import node_resources, num_cpu, num_gpu

__all__ = [
    "COMPLETION_INDEX_FIELD",
    "TRAINER_PORT",
    "enforce_ml_policy",
    "node_resources",
    "num_gpu",
]

Obj = dict[str, Any]

TRAINER_PORT = 29500
"""``constants.ContainerTrainerPort``: rendezvous, coordinator and tracker port."""
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
TORCHTUNE_ENTRYPOINT = ["tune", "run"]


def _rank_env(name: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}}


def _master(trainjob: Obj) -> str:
    name = trainjob["metadata"]["name"]
    return f"{name}-{NODE}-0-0.{name}"


def _per_node_resources(info: Info, trainer: Obj) -> Obj:
    given = trainer.get("resourcesPerNode")
    if isinstance(given, dict):
        return given
    return node_resources(info) or {}


def _set_count(info: Info, trainer: Obj | None) -> None:
    ps = info.pod_set_of_ancestor(TRAINER)
    if ps is not None and trainer is not None and trainer.get("numNodes") is not None:
        ps.count = int(trainer["numNodes"])


def _node_count(info: Info) -> int:
    ps = info.pod_set_of_ancestor(TRAINER)
    return ps.count if ps is not None else 1


def _torch(info: Info, trainjob: Obj, trainer: Obj | None, torch: Obj) -> None:
    _set_count(info, trainer)
    trainer_fields = trainer or {}
    proc: int | str = "auto"
    if trainer_fields.get("numProcPerNode") is not None:
        proc = int(trainer_fields["numProcPerNode"])
    resources = _per_node_resources(info, trainer_fields)
    gpus = num_gpu(resources)
    if proc == "auto" and gpus == 0:
        proc = max(1, num_cpu(resources))
    pet = [
        {"name": "PET_NNODES", "value": str(_node_count(info))},
        {"name": "PET_NPROC_PER_NODE", "value": str(proc)},
        _rank_env("PET_NODE_RANK"),
    ]
    master = [
        {"name": "PET_MASTER_ADDR", "value": _master(trainjob)},
        {"name": "PET_MASTER_PORT", "value": str(TRAINER_PORT)},
    ]
    container: Container | None = None
    if trainer is not None:
        container = info.container_of_ancestor(TRAINER, NODE)
    if container is not None:
        assert trainer is not None
        if list(trainer.get("command") or []) == TORCHTUNE_ENTRYPOINT:
            raise RuntimeProblem("torchtune recipes ('tune run') are not supported")
        upsert(container.env, apply_env(trainer.get("env") or ()), by_name)
        upsert(container.env, pet, by_name)
        upsert(container.env, master, by_name)
        upsert(container.ports, [{"containerPort": TRAINER_PORT}], by_port)
    targets = ((torch.get("envInjection") or {}).get("targets")) or ()
    for target in targets:
        for name in target.get("containerNames") or ():
            found = info.container_of_pod_set(str(target.get("jobName")), str(name))
            if found is None:
                raise RuntimeProblem(
                    f"envInjection target podSet {target.get('jobName')!r} container "
                    f"{name!r} not found in runtime template"
                )
            upsert(found.env, pet, by_name)
            upsert(found.env, master, by_name)


def _jax(info: Info, trainjob: Obj, trainer: Obj | None) -> None:
    _set_count(info, trainer)
    if trainer is None:
        return
    container = info.container_of_ancestor(TRAINER, NODE)
    if container is None:
        return
    env = [
        {"name": "JAX_NUM_PROCESSES", "value": str(_node_count(info))},
        _rank_env("JAX_PROCESS_ID"),
        {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{_master(trainjob)}:{TRAINER_PORT}"},
    ]
    upsert(container.env, env, by_name)
    upsert(container.ports, [{"containerPort": TRAINER_PORT}], by_port)


def _xgboost(info: Info, trainjob: Obj, trainer: Obj | None) -> None:
    if info.pod_set_of_ancestor(TRAINER) is None:
        return
    _set_count(info, trainer)
    if trainer is None:
        return
    container = info.container_of_ancestor(TRAINER, NODE)
    if container is None:
        return
    workers_per_node = num_gpu(_per_node_resources(info, trainer)) or 1
    env = [
        {"name": "DMLC_TRACKER_URI", "value": _master(trainjob)},
        {"name": "DMLC_TRACKER_PORT", "value": str(TRAINER_PORT)},
        _rank_env("DMLC_TASK_ID"),
        {"name": "DMLC_NUM_WORKER", "value": str(_node_count(info) * workers_per_node)},
    ]
    upsert(container.env, env, by_name)
    upsert(container.ports, [{"containerPort": TRAINER_PORT}], by_port)


def _plain(info: Info, trainer: Obj | None) -> None:
    _set_count(info, trainer)
    if trainer is None:
        return
    container = info.container_of_ancestor(TRAINER, NODE)
    if container is not None:
        upsert(container.env, apply_env(trainer.get("env") or ()), by_name)


def enforce_ml_policy(info: Info, trainjob: Obj) -> None:
    """Apply the runtime's ML policy to ``info`` for ``trainjob`` (its pod sets change)."""
    trainer = (trainjob.get("spec") or {}).get("trainer")
    trainer = trainer if isinstance(trainer, dict) else None
    policy = info.ml_policy or {}
    if policy.get("flux") is not None:
        raise RuntimeProblem("the flux ML policy is not supported")
    if policy.get("mpi") is not None:
        enforce_mpi(info, trainjob, trainer)
        return
    if policy.get("torch") is not None:
        _torch(info, trainjob, trainer, policy["torch"] or {})
        return
    if policy.get("jax") is not None:
        _jax(info, trainjob, trainer)
        return
    # Upstream runs the plain policy for XGBoost runtimes too, and in no fixed order with the
    # XGBoost plugin: the TrainJob's env first, then the tracker's, is one of its two orders.
    _plain(info, trainer)
    if policy.get("xgboost") is not None:
        _xgboost(info, trainjob, trainer)
