"""Creations that need others of the same pass: an MPIJob's launcher Job is created in the
job's first pass, as mpi-operator's one sync creates it, but only after the ConfigMap and
Secret its pod mounts were created, and not at all when one of them was refused."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

import pytest
from controller_fakes import FakeApi

from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from jobcontroller.runtime.manager import Manager
from jobcontroller.runtime.workqueue import WorkQueue
from mpi_operator.controller import MPIJobController

KEY = "ns/pi"
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
MPIJOB = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "pi", "namespace": "ns", "uid": "job-uid", "resourceVersion": "10"},
    "spec": {
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": TEMPLATE},
            "Worker": {"replicas": 2, "template": TEMPLATE},
        }
    },
}


class OrderedApi(FakeApi):
    """Answers the ConfigMap's and Secret's creations last (slow), records when each creation
    starts and ends, and refuses the kinds in ``refuse`` (a quota: 403)."""

    def __init__(self, *objects: Any, refuse: tuple[str, ...] = ()) -> None:
        super().__init__(*objects)
        self.log: list[tuple[str, str]] = []
        self.refuse = refuse

    async def create(self, resource: Resource, body: dict[str, Any], **kwargs: Any) -> Any:
        name = f"{resource.kind}/{body['metadata']['name']}"
        self.log.append(("start", name))
        if resource.kind in ("ConfigMap", "Secret"):
            await asyncio.sleep(0.05)
        if resource.kind in self.refuse:
            self.log.append(("refused", name))
            raise ApiError(status=403, reason="Forbidden", message="exceeded quota")
        created = await super().create(resource, body, **kwargs)
        self.log.append(("end", name))
        return created

    def with_own_budget(self) -> OrderedApi:
        return self  # MPIJob status goes through a budget of its own (one API here)


def mpi_controller(api: FakeApi) -> MPIJobController:
    controller = MPIJobController()
    controller.setup(Manager(cast(KubeApi, api), component="test"), WorkQueue(name="test"))
    controller.watch.informers["job"].store.upsert(copy.deepcopy(MPIJOB))
    return controller


async def test_the_launcher_is_created_in_the_first_pass_after_its_mounts() -> None:
    api = OrderedApi(MPIJOB)
    await mpi_controller(api).reconcile(KEY)
    created = {name for event, name in api.log if event == "end"}
    assert created == {
        "Service/pi",
        "ConfigMap/pi-config",
        "Secret/pi-ssh",
        "Pod/pi-worker-0",
        "Pod/pi-worker-1",
        "Job/pi-launcher",
    }
    launcher = api.log.index(("start", "Job/pi-launcher"))
    for mount in ("ConfigMap/pi-config", "Secret/pi-ssh"):
        assert api.log.index(("end", mount)) < launcher


async def test_a_refused_mount_keeps_the_launcher_from_being_created() -> None:
    api = OrderedApi(MPIJOB, refuse=("Secret",))
    controller = mpi_controller(api)
    with pytest.raises(ApiError):
        await controller.reconcile(KEY)
    started = {name for event, name in api.log if event == "start"}
    assert "Secret/pi-ssh" in started
    assert "Job/pi-launcher" not in started
    assert ("Job", "pi-launcher") not in api.objects
