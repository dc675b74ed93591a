"""An MPIJob's passes through the executor, against an in-memory API server.

- Creations that need others of the same pass: the launcher Job is created in the job's first
  pass, as mpi-operator's one sync creates it, but only after the ConfigMap and Secret its pod
  mounts were created, and not at all when one of them was refused.
- Patches that may wait: the hostfile ConfigMap's ``discover_hosts.sh`` update waits while
  the client's rate limiter has no request to spare (a burst of jobs), is sent once it has,
  or once it has waited ``STATUS_BACKLOG_HOLD_SECONDS``, and is never sent for a launcher
  that finished meanwhile.
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any, cast

import pytest
from controller_fakes import FakeApi

from jobcontroller.controller.executor import PATCH_RECHECK_SECONDS
from jobcontroller.controller.status import STATUS_BACKLOG_HOLD_SECONDS
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


class PatchCountingApi(OrderedApi):
    def __init__(self, *objects: Any) -> None:
        super().__init__(*objects)
        self.patches: list[str] = []

    async def merge_patch(self, resource: Resource, name: str, patch: Any, **kwargs: Any) -> Any:
        self.patches.append(f"{resource.kind}/{name}")
        return await super().merge_patch(resource, name, patch, **kwargs)


def _running_workers(controller: MPIJobController, api: FakeApi) -> None:
    """What the informers show next: every object created, the workers Running."""
    informers = controller.watch.informers
    for (kind, _name), obj in api.objects.items():
        shown = copy.deepcopy(obj)
        if kind == "Pod":
            shown["status"] = {"phase": "Running"}
        informers["job" if kind == "MPIJob" else kind].store.upsert(shown)
    for kind in controller.states.kinds:
        controller.expectations.delete(f"{KEY}/{kind}")


def _hosts(api: FakeApi) -> str:
    return str(api.objects[("ConfigMap", "pi-config")]["data"]["discover_hosts.sh"])


async def test_the_discover_hosts_update_waits_while_the_client_has_no_request_to_spare() -> None:
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api)
    await controller.reconcile(KEY)
    _running_workers(controller, api)
    assert "pi-worker-0" not in _hosts(api)

    api.backlog_seconds = 3.0  # a burst of jobs ahead in the rate limiter's queue
    again = await controller.reconcile(KEY)
    assert api.patches == []
    # Looked at again once the queue ahead has drained, not before PATCH_RECHECK_SECONDS.
    assert again == 3.0
    api.backlog_seconds = 0.01
    assert await controller.reconcile(KEY) == PATCH_RECHECK_SECONDS
    assert api.patches == []

    api.backlog_seconds = 0.0
    await controller.reconcile(KEY)
    assert api.patches == ["ConfigMap/pi-config"]
    assert "pi-worker-0" in _hosts(api) and "pi-worker-1" in _hosts(api)


async def test_a_held_update_goes_out_once_it_has_waited_long_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api)
    await controller.reconcile(KEY)
    _running_workers(controller, api)
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    api.backlog_seconds = 120.0  # the client stays saturated
    await controller.reconcile(KEY)
    clock[0] += STATUS_BACKLOG_HOLD_SECONDS - 1
    assert await controller.reconcile(KEY) == pytest.approx(1.0)
    assert api.patches == []
    clock[0] += 1
    await controller.reconcile(KEY)
    assert api.patches == ["ConfigMap/pi-config"]


async def test_a_held_update_is_never_sent_once_the_launcher_finished() -> None:
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api)
    await controller.reconcile(KEY)
    _running_workers(controller, api)
    api.backlog_seconds = 3.0
    await controller.reconcile(KEY)
    launcher = api.objects[("Job", "pi-launcher")]
    launcher["status"] = {
        "succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True"}],
    }
    controller.watch.informers["Job"].store.upsert(copy.deepcopy(launcher))
    api.backlog_seconds = 0.0
    await controller.reconcile(KEY)
    assert api.patches == []
    assert "Succeeded" in {
        c["type"]
        for c in api.objects[("MPIJob", "pi")]["status"]["conditions"]
        if c["status"] == "True"
    }
