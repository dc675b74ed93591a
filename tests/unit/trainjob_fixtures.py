"""TrainJobs, runtimes and JobSets as Trainer v2.3.0's test wrappers build them
(pkg/util/testing/wrapper.go), as JSON, so its test cases port field for field."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from jobcontroller import Observed

Obj = dict[str, Any]

NODE, DATASET, MODEL = "node", "dataset-initializer", "model-initializer"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
RANK_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
NOW = dt.datetime(2026, 8, 10, 12, 0, tzinfo=dt.UTC)
CREATED = "2026-08-10T11:00:00Z"


def _rjob(name: str, ancestor: str, container: Obj) -> Obj:
    return {
        "name": name,
        "groupName": "default",
        "template": {
            "metadata": {"labels": {ANCESTOR: ancestor}},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [container],
                        "volumes": [
                            {
                                "name": "initializer",
                                "persistentVolumeClaim": {"claimName": "initializer"},
                            }
                        ],
                    }
                }
            },
        },
    }


def jobset_spec() -> Obj:
    """``MakeTrainingRuntimeWrapper``'s template spec (and ``MakeJobSetWrapper``'s): the dataset
    and model initializers and the trainer's ``node``, sharing the ``initializer`` volume."""
    mount = lambda path: {"name": "initializer", "mountPath": path}  # noqa: E731
    return {
        "replicatedJobs": [
            _rjob(
                DATASET, DATASET, {"name": DATASET, "volumeMounts": [mount("/workspace/dataset")]}
            ),
            _rjob(MODEL, MODEL, {"name": MODEL, "volumeMounts": [mount("/workspace/model")]}),
            _rjob(
                NODE,
                "trainer",
                {
                    "name": NODE,
                    "volumeMounts": [mount("/workspace/dataset"), mount("/workspace/model")],
                },
            ),
        ]
    }


def rjob(spec: Obj, name: str) -> Obj:
    found: Obj = next(r for r in spec["replicatedJobs"] if r["name"] == name)
    return found


def pod_spec(spec: Obj, name: str) -> Obj:
    result: Obj = rjob(spec, name)["template"]["spec"]["template"]["spec"]
    return result


def container(spec: Obj, job: str, name: str) -> Obj:
    containers = pod_spec(spec, job).setdefault("containers", [])
    for c in containers:
        if c["name"] == name:
            return c  # type: ignore[no-any-return]  # JSON
    containers.append({"name": name})
    return containers[-1]  # type: ignore[no-any-return]  # JSON


def set_container(
    spec: Obj, job: str, name: str, image: str, command: list[str], args: list[str], requests: Obj
) -> Obj:
    """``Container(rJob, name, image, command, args, requests)`` of the wrappers."""
    c = container(spec, job, name)
    c.update(
        {"image": image, "command": command, "args": args, "resources": {"requests": requests}}
    )
    return spec


def runtime(
    spec: Obj | None = None,
    *,
    ml_policy: Obj | None = None,
    kind: str = "TrainingRuntime",
    name: str = "test-runtime",
    namespace: str = "default",
    template_meta: Obj | None = None,
) -> Obj:
    meta: Obj = {"name": name, "uid": "runtime-uid", "resourceVersion": "7"}
    if kind == "TrainingRuntime":
        meta["namespace"] = namespace
    body: Obj = {"template": {"spec": spec if spec is not None else jobset_spec()}}
    if template_meta:
        body["template"]["metadata"] = template_meta
    if ml_policy is not None:
        body["mlPolicy"] = ml_policy
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": meta,
        "spec": body,
    }


def trainjob(
    name: str = "test-job",
    *,
    namespace: str = "default",
    uid: str = "uid",
    runtime_kind: str = "TrainingRuntime",
    runtime_name: str = "test-runtime",
    **spec: Any,
) -> Obj:
    body: Obj = {
        "runtimeRef": {
            "name": runtime_name,
            "apiGroup": "trainer.kubeflow.org",
            "kind": runtime_kind,
        },
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
        "suspend": False,
    }
    body.update(spec)
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "creationTimestamp": CREATED,
            "resourceVersion": "1",
        },
        "spec": body,
    }


def owner(name: str = "test-job", uid: str = "uid") -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def torch_env(name: str, *, nodes: int, procs: str | int) -> list[Obj]:
    return [
        {"name": "PET_NNODES", "value": str(nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": str(procs)},
        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": RANK_FIELD}}},
        {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": "29500"},
    ]


def observed(
    *,
    runtime: Obj | None = None,
    jobsets: list[Obj] | None = None,
    configmaps: list[Obj] | None = None,
    others: dict[tuple[str, str], Obj] | None = None,
) -> Observed:
    owned = {"JobSet": list(jobsets or []), "ConfigMap": list(configmaps or [])}
    by_name = {(k, o["metadata"]["name"]): o for k, objs in owned.items() for o in objs}
    by_name.update(others or {})
    return Observed(
        owned=owned,
        lookup=lambda kind, name: by_name.get((kind, name)),
        extra={"runtime": runtime},
    )


def stored(body: Obj, *, uid: str = "jobset-uid", rv: str = "5", status: Obj | None = None) -> Obj:
    """``body`` as the API server would return it (uid, resourceVersion, status)."""
    out = copy.deepcopy(body)
    out["metadata"].update({"uid": uid, "resourceVersion": rv})
    if status is not None:
        out["status"] = status
    return out
