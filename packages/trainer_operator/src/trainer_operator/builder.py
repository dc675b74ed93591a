"""The JobSet a TrainJob runs as: Trainer v2.3.0's jobset plugin (``SyncParallelCount``,
``Build``) and its builder (plugins/jobset/builder.go), on plain JSON.

From the runtime's JobSet spec (as :mod:`trainer_operator.info` patched it) and the pod sets
the ML policy filled in: each replicated job runs as many pods as its pod set counts
(parallelism and completions); each pod set's containers get their image and command when the
policy set them, and its env, ports, volume mounts and volumes upserted; then the initializers
get the TrainJob's dataset and model sources, the trainer's ``node`` container the TrainJob's
image, command, args and env, and the JobSet the TrainJob's ``suspend``. The JobSet has the
TrainJob's name and namespace and the TrainJob as its controller.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from jobcontroller import LABEL_JOB_NAME
from trainer_operator.info import (
    ANCESTOR_LABEL,
    DATASET_INITIALIZER,
    MODEL_INITIALIZER,
    NODE,
    TRAINER,
    Info,
    RuntimeProblem,
    apply_env,
    by_mount_path,
    by_name,
    by_port,
    upsert,
)

__all__ = ["JOBSET_API_VERSION", "build_jobset", "owner_reference"]

Obj = dict[str, Any]

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
TRAINER_API_VERSION = "trainer.kubeflow.org/v1alpha1"
STORAGE_URI = "STORAGE_URI"


def owner_reference(trainjob: Obj) -> Obj:
    meta = trainjob["metadata"]
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainJob",
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _add(obj: Obj, key: str, items: list[Obj], same: Callable[[Obj, Obj], bool]) -> None:
    """Upsert ``items`` into the list ``obj[key]``, creating it only when there is some."""
    if items:
        upsert(obj.setdefault(key, []), items, same)


def _pod_spec(rjob: Obj) -> Obj:
    template: Obj = rjob.setdefault("template", {})
    job_spec: Obj = template.setdefault("spec", {})
    pod_template: Obj = job_spec.setdefault("template", {})
    spec: Obj = pod_template.setdefault("spec", {})
    return spec


def _ancestor(rjob: Obj) -> str | None:
    labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}
    value = labels.get(ANCESTOR_LABEL)
    return None if value is None else str(value)


def _sync_counts(info: Info, jobs: list[Obj]) -> None:
    """Each replicated job runs its pod set's count of pods (``SyncParallelCount``)."""
    for ps in info.pod_sets:
        for rjob in jobs:
            if rjob.get("name") == ps.name:
                job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
                job_spec["parallelism"] = ps.count
                job_spec["completions"] = ps.count
                break


def _fill_containers(info: Info, jobs: list[Obj]) -> None:
    """What the pod sets say, into the replicated job at the same position."""
    if len(jobs) < len(info.pod_sets):
        raise RuntimeProblem(
            f"runtime template has {len(jobs)} replicatedJobs but runtime info has "
            f"{len(info.pod_sets)} podSets"
        )
    for ps, rjob in zip(info.pod_sets, jobs, strict=False):
        pod_spec = _pod_spec(rjob)
        _add(pod_spec, "volumes", ps.volumes, by_name)
        containers = pod_spec.get("containers") or []
        for target, container in zip(containers, ps.containers, strict=False):
            if container.command:
                target["command"] = list(container.command)
            if container.image:
                target["image"] = container.image
            _add(target, "env", container.env, by_name)
            _add(target, "ports", container.ports, by_port)
            _add(target, "volumeMounts", container.volume_mounts, by_mount_path)
        for index, container in enumerate(ps.init_containers):
            inits = pod_spec.setdefault("initContainers", [])
            if index >= len(inits):
                inits.append({"name": container.name})
            target = inits[index]
            if container.command:
                target["command"] = list(container.command)
            if container.image:
                target["image"] = container.image
            _add(target, "env", container.env, by_name)
            _add(target, "ports", container.ports, by_port)
            _add(target, "volumeMounts", container.volume_mounts, by_mount_path)


def _initializer(jobs: list[Obj], trainjob: Obj) -> None:
    """The dataset and model initializers: one replica, the TrainJob's source (storage URI,
    env, Secret) on the container of the step's name."""
    initializer = (trainjob.get("spec") or {}).get("initializer") or {}
    for rjob in jobs:
        step = _ancestor(rjob)
        if step not in (DATASET_INITIALIZER, MODEL_INITIALIZER):
            continue
        rjob["replicas"] = 1
        source = initializer.get("dataset" if step == DATASET_INITIALIZER else "model")
        if not isinstance(source, dict):
            continue
        for container in _pod_spec(rjob).get("containers") or ():
            if container.get("name") != step:
                continue
            env: list[Obj] = []
            if source.get("storageUri") is not None:
                env.append({"name": STORAGE_URI, "value": source["storageUri"]})
            env += apply_env(source.get("env") or ())
            _add(container, "env", env, by_name)
            secret = source.get("secretRef")
            if isinstance(secret, dict):
                container.setdefault("envFrom", []).append(
                    {"secretRef": {"name": secret.get("name", "")}}
                )


def _trainer(info: Info, jobs: list[Obj], trainjob: Obj) -> None:
    """The trainer: one replica; its ``node`` container runs the TrainJob's image, command
    and args, with the TrainJob's env (also an MPI launcher that runs as a node)."""
    trainer = (trainjob.get("spec") or {}).get("trainer")
    mpi = (info.ml_policy or {}).get("mpi") or {}
    launcher_as_node = bool(mpi.get("runLauncherAsNode"))
    for rjob in jobs:
        is_trainer = _ancestor(rjob) == TRAINER
        if is_trainer:
            rjob["replicas"] = 1
        if not (is_trainer or (launcher_as_node and rjob.get("name") == NODE)):
            continue
        if not isinstance(trainer, dict):
            continue
        for container in _pod_spec(rjob).get("containers") or ():
            if container.get("name") != NODE:
                continue
            if is_trainer:
                for field in ("image", "command", "args"):
                    if trainer.get(field) is not None:
                        container[field] = copy.deepcopy(trainer[field])
            _add(container, "env", apply_env(trainer.get("env") or ()), by_name)


def build_jobset(info: Info, trainjob: Obj) -> Obj:
    """The JobSet for ``trainjob`` from its ``info`` (after the ML policy)."""
    meta = trainjob["metadata"]
    spec = copy.deepcopy(info.spec)
    jobs: list[Obj] = spec.setdefault("replicatedJobs", [])
    _sync_counts(info, jobs)
    _fill_containers(info, jobs)
    _initializer(jobs, trainjob)
    _trainer(info, jobs, trainjob)
    for key, values in (("labels", info.pod_labels), ("annotations", info.pod_annotations)):
        if not values:
            continue
        for rjob in jobs:
            pod_template = rjob["template"]["spec"]["template"]
            pod_template.setdefault("metadata", {}).setdefault(key, {}).update(values)
    suspend = (trainjob.get("spec") or {}).get("suspend")
    if suspend is not None:
        spec["suspend"] = bool(suspend)
    # The job-name label is ours, not upstream's: the operator's informers select on it.
    labels = {**info.labels, LABEL_JOB_NAME: meta["name"]}
    metadata: Obj = {
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "labels": labels,
    }
    if info.annotations:
        metadata["annotations"] = dict(info.annotations)
    metadata["ownerReferences"] = [owner_reference(trainjob)]
    return {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": metadata, "spec": spec}
