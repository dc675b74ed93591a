"""A JobController wired to an in-memory apiserver, for unit tests of its executor.

``FakeApi`` keeps objects by (kind, name) with resourceVersions, answers 409 to a stale status
PUT and to creating an existing name, and 404 to a missing one. ``tf_controller`` builds a
TFJobController whose caches hold what the test says (the informers are never started).
"""

from __future__ import annotations

import copy
from typing import Any, cast

from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from jobcontroller.runtime.manager import Manager
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.workqueue import WorkQueue
from tf_operator.controller import TFJobController

Obj = dict[str, Any]
KEY = "ns/tf"


def _merge(target: Obj, patch: Obj) -> None:
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


class FakeApi:
    def __init__(self, *objects: Obj) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}
        self.status_writes = 0
        self.created: list[str] = []
        self.backlog_seconds = 0.0
        """What :meth:`backlog` answers: the client-side rate limiter's queue, in seconds."""
        self._rv = 100
        for obj in objects:
            self.objects[(obj["kind"], obj["metadata"]["name"])] = copy.deepcopy(obj)

    @property
    def job(self) -> Obj:
        return self.objects[("TFJob", "tf")]

    def backlog(self) -> float:
        return self.backlog_seconds

    def spare(self) -> int:
        return 0 if self.backlog_seconds > 0 else 30

    def with_own_budget(self) -> FakeApi:
        return self  # a status budget of its own (MPIJob's): one API here

    def _bump(self, obj: Obj) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)

    def _find(self, resource: Resource, name: str) -> Obj:
        obj = self.objects.get((resource.kind, name))
        if obj is None:
            raise ApiError(status=404, reason="NotFound", message=f"{name} not found")
        return obj

    async def get(self, resource: Resource, name: str, **kwargs: Any) -> Obj:
        return copy.deepcopy(self._find(resource, name))

    async def create(self, resource: Resource, body: Obj, **kwargs: Any) -> Obj:
        name = body["metadata"]["name"]
        if (resource.kind, name) in self.objects:
            raise ApiError(status=409, reason="AlreadyExists", message=f"{name} already exists")
        obj = copy.deepcopy(body)
        obj["metadata"]["uid"] = f"uid-{name}"
        self._bump(obj)
        self.objects[(resource.kind, name)] = obj
        self.created.append(name)
        return copy.deepcopy(obj)

    async def merge_patch(self, resource: Resource, name: str, patch: Obj, **kwargs: Any) -> Obj:
        obj = self._find(resource, name)
        _merge(obj, patch)
        self._bump(obj)
        return copy.deepcopy(obj)

    async def replace(self, resource: Resource, body: Obj, **kwargs: Any) -> Obj:
        assert kwargs.get("subresource") == "status"
        obj = self._find(resource, body["metadata"]["name"])
        if body["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise ApiError(status=409, reason="Conflict", message="the object has been modified")
        obj["status"] = copy.deepcopy(body["status"])
        self.status_writes += 1
        self._bump(obj)
        return copy.deepcopy(obj)

    async def delete(self, resource: Resource, name: str, **kwargs: Any) -> None:
        self.objects.pop((resource.kind, name), None)


#: A TFJob of two workers, both running, as the operator wrote it.
RUNNING_STATUS = {
    "conditions": [
        {
            "type": "Created",
            "status": "True",
            "reason": "TFJobCreated",
            "message": "TFJob tf is created.",
        },
        {
            "type": "Running",
            "status": "True",
            "reason": "TFJobRunning",
            "message": "TFJob ns/tf is running.",
        },
    ],
    "replicaStatuses": {"Worker": {"active": 2, "succeeded": 0, "failed": 0}},
    "startTime": "2024-01-01T00:00:00Z",
}


def worker_pod(index: int, *, phase: str, exit_code: int | None = None) -> Obj:
    """A worker pod of job ``tf`` as the pod cache holds it."""
    state: Obj = {"running": {}} if exit_code is None else {"terminated": {"exitCode": exit_code}}
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"tf-worker-{index}",
            "namespace": "ns",
            "uid": f"pod-{index}",
            "labels": {
                "training.kubeflow.org/job-name": "tf",
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": str(index),
            },
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "TFJob",
                    "name": "tf",
                    "uid": "job-uid",
                    "controller": True,
                }
            ],
        },
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "tensorflow", "restartCount": 0, "state": state}],
        },
    }


def tf_job(
    *, replicas: int = 2, restart_policy: str = "ExitCode", status: Obj | None = None
) -> Obj:
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}}
    job: Obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": "tf",
            "namespace": "ns",
            "uid": "job-uid",
            "generation": 1,
            "resourceVersion": "10",
        },
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": replicas,
                    "restartPolicy": restart_policy,
                    "template": template,
                }
            }
        },
    }
    if status is not None:
        job["status"] = status
    return job


def tf_controller(
    api: FakeApi, *, cached: list[Obj], metrics: Metrics | None = None
) -> TFJobController:
    """A controller whose caches hold ``cached`` (the job and its pods) and nothing else."""
    controller = TFJobController()
    manager = Manager(cast(KubeApi, api), component="test", metrics=metrics)
    controller.setup(manager, WorkQueue(name="test"))
    informers = controller.watch.informers  # the caches a reconcile reads; filled by hand here
    for obj in cached:
        informers["job" if obj["kind"] == "TFJob" else obj["kind"]].store.upsert(copy.deepcopy(obj))
    return controller


def true_conditions(job: Obj) -> set[str]:
    return {c["type"] for c in job["status"]["conditions"] if c["status"] == "True"}


def catch_up(controller: TFJobController, api: FakeApi) -> None:
    """What the informers would do next: show every object that wears the job-name label (and
    the job), and settle the expectations their events would settle."""
    informers = controller.watch.informers
    for (kind, _), obj in api.objects.items():
        if kind == "TFJob":
            informers["job"].store.upsert(copy.deepcopy(obj))
        elif "training.kubeflow.org/job-name" in (obj["metadata"].get("labels") or {}):
            informers[kind].store.upsert(copy.deepcopy(obj))
    for kind in ("Pod", "Service"):
        controller.expectations.delete(f"{KEY}/{kind}")
