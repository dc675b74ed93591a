"""An MPIJob's passes through the executor, against an in-memory API server.

- Creations that need others of the same pass: the launcher Job is created in the job's first
  pass, as mpi-operator's one sync creates it, but only after the ConfigMap and Secret its pod
  mounts were created, and not at all when one of them was refused.
- Patches that may wait: the hostfile ConfigMap's ``discover_hosts.sh`` update waits while
  the client's rate limiter has no request to spare (a burst of jobs), is sent once it has,
  or once it has waited ``STATUS_BACKLOG_HOLD_SECONDS``, and is never sent for a launcher
  that finished meanwhile. The job waits with the others for the client (the spare waiters),
  not on a timer of its own.
- The Running condition waits, with its Event, while the operator's creations are backlogged
  (a burst of jobs): the pass that writes it emits the Event, and a job that finishes meanwhile
  goes from Created to Succeeded in one write, with no Running Event.
- So does a new job's first write (Created, and Running if it runs already) with its Events;
  a job that finishes meanwhile is written once, Created to Succeeded.
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any, cast

import pytest
from controller_fakes import FakeApi

from jobcontroller import PatchObject
from jobcontroller.controller.status import (
    RUNNING_BACKLOG_HOLD_SECONDS,
    STATUS_BACKLOG_HOLD_SECONDS,
)
from jobcontroller.runtime.events import EventRecorder
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


class Recorded:
    """The Events the controller records, by reason."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def record(self, obj: Any, *, type: str, reason: str, message: str, **kwargs: Any) -> None:
        self.reasons.append(reason)


def mpi_controller(api: FakeApi, events: Recorded | None = None) -> MPIJobController:
    controller = MPIJobController()
    manager = Manager(
        cast(KubeApi, api), component="test", events=cast(EventRecorder, events or Recorded())
    )
    controller.setup(manager, WorkQueue(name="test"))
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
    await controller.reconcile(KEY)
    assert api.patches == []
    assert controller.spare_waiters.due(KEY) is not None  # queued again when it drains

    api.backlog_seconds = 0.0
    assert controller.spare_waiters.fire() == [KEY]
    await controller.reconcile(KEY)
    assert controller.spare_waiters.due(KEY) is None
    assert api.patches == ["ConfigMap/pi-config"]
    assert "pi-worker-0" in _hosts(api) and "pi-worker-1" in _hosts(api)


def _hosts_patch() -> PatchObject:
    return PatchObject(
        kind="ConfigMap", namespace="ns", name="pi-config", patch={"data": {}}, can_wait=True
    )


def test_a_held_patch_is_held_so_long_at_most() -> None:
    """The seconds a hold returns are those left to its bound: the spare waiters queue the
    job then if the client has had no request to spare by then."""
    api = FakeApi(MPIJOB)
    executor = mpi_controller(api).executor
    clock = [1000.0]
    executor._clock = lambda: clock[0]
    other = PatchObject(kind="ConfigMap", namespace="ns", name="other", patch={})
    actions = (_hosts_patch(), other)

    api.backlog_seconds = 3.0
    assert executor.hold_patches(KEY, actions) == ((other,), STATUS_BACKLOG_HOLD_SECONDS)
    api.backlog_seconds = 120.0  # the client stays saturated: held 30 s in a row at most
    clock[0] += STATUS_BACKLOG_HOLD_SECONDS - 0.5
    assert executor.hold_patches(KEY, actions) == ((other,), pytest.approx(0.5))
    clock[0] += 0.5
    assert executor.hold_patches(KEY, actions) == (actions, 0.0)
    # The next change is held afresh.
    assert executor.hold_patches(KEY, actions) == ((other,), STATUS_BACKLOG_HOLD_SECONDS)
    api.backlog_seconds = 0.0
    assert executor.hold_patches(KEY, actions) == (actions, 0.0)


def test_a_hold_ends_when_the_patch_is_wanted_no_more() -> None:
    api = FakeApi(MPIJOB)
    executor = mpi_controller(api).executor
    clock = [1000.0]
    executor._clock = lambda: clock[0]
    api.backlog_seconds = 3.0
    executor.hold_patches(KEY, (_hosts_patch(),))
    assert executor.hold_patches(KEY, ()) == ((), 0.0)  # the worker went back to Pending
    clock[0] += 100  # a new change, much later, under a saturated client: held afresh
    assert executor.hold_patches(KEY, (_hosts_patch(),)) == ((), STATUS_BACKLOG_HOLD_SECONDS)


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


async def test_a_mount_held_by_an_object_the_caches_cannot_see_keeps_the_launcher_back() -> None:
    foreign = {"kind": "ConfigMap", "metadata": {"name": "pi-config", "namespace": "ns"}}
    api = OrderedApi(MPIJOB, foreign)
    controller = mpi_controller(api)
    await controller.reconcile(KEY)
    started = {name for event, name in api.log if event == "start"}
    assert "ConfigMap/pi-config" in started  # answered AlreadyExists: someone else's
    assert "Job/pi-launcher" not in started
    assert api.objects[("ConfigMap", "pi-config")] == foreign
    state = controller.states.get(KEY)
    assert state is not None and ("ConfigMap", "pi-config") in state.foreign


class StartingApi(PatchCountingApi):
    """Runs ``during_patch`` while a patch is on its way: the caches move on meanwhile."""

    during_patch: Any = None

    async def merge_patch(self, resource: Resource, name: str, patch: Any, **kwargs: Any) -> Any:
        if self.during_patch is not None:
            self.during_patch()
        return await super().merge_patch(resource, name, patch, **kwargs)


async def test_counters_are_held_by_what_the_pass_planned_from_not_by_what_came_after() -> None:
    """The workers run, the launcher's pod is still Pending: the counters (Worker active 2)
    wait for the Running the launcher brings. That pod starts while the pass's hostfile patch
    is on its way; the pass still holds its counters, and the next pass writes Running and
    the counters at once."""
    api = StartingApi(MPIJOB)
    controller = mpi_controller(api)
    await controller.reconcile(KEY)
    assert api.status_writes == 1  # Created
    _running_workers(controller, api)
    pod = _show_launcher(controller, api, phase="Pending")
    pods = controller.watch.informers["Pod"].store

    def launcher_starts() -> None:
        pods.upsert({**copy.deepcopy(pod), "status": {"phase": "Running"}})

    api.during_patch = launcher_starts
    await controller.reconcile(KEY)
    assert api.patches == ["ConfigMap/pi-config"]
    assert api.status_writes == 1  # the counters wait for the Running they lead to
    api.during_patch = None
    await controller.reconcile(KEY)
    assert api.status_writes == 2
    status = api.objects[("MPIJob", "pi")]["status"]
    assert "Running" in {c["type"] for c in status["conditions"] if c["status"] == "True"}


def _show_launcher(controller: MPIJobController, api: FakeApi, *, phase: str) -> dict[str, Any]:
    """What the caches show next: the launcher Job with its pod in ``phase`` (the Job active,
    or Complete once the pod Succeeded); returns the pod."""
    launcher = copy.deepcopy(api.objects[("Job", "pi-launcher")])
    launcher["status"] = (
        {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        if phase == "Succeeded"
        else {"active": 1}
    )
    controller.watch.informers["Job"].store.upsert(launcher)
    ref = {"kind": "Job", "uid": launcher["metadata"]["uid"], "controller": True}
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "pi-launcher-x",
            "namespace": "ns",
            "uid": "launcher-pod",
            "labels": {"training.kubeflow.org/job-name": "pi"},
            "ownerReferences": [ref],
        },
        "status": {"phase": phase},
    }
    controller.watch.informers["Pod"].store.upsert(copy.deepcopy(pod))
    return pod


def _waits_for_spare(controller: MPIJobController, clock: list[float]) -> float | None:
    """Seconds until the spare waiters queue the job at the latest (None: it is not waiting)."""
    due = controller.spare_waiters.due(KEY)
    return None if due is None else due - clock[0]


def _true(api: FakeApi) -> set[str]:
    status = api.objects[("MPIJob", "pi")]["status"]
    return {c["type"] for c in status["conditions"] if c["status"] == "True"}


async def test_running_waits_with_its_event_while_creations_are_backlogged() -> None:
    events = Recorded()
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api, events)
    await controller.reconcile(KEY)
    assert api.status_writes == 1 and events.reasons == ["MPIJobCreated"]
    _running_workers(controller, api)
    _show_launcher(controller, api, phase="Running")

    api.backlog_seconds = 4.0  # a burst of jobs ahead in the rate limiter's queue
    after = await controller.reconcile(KEY)
    assert after is None  # no timer of its own: queued again once the client has room
    assert controller.spare_waiters.due(KEY) is not None
    assert api.status_writes == 1 and _true(api) == {"Created"}
    assert "MPIJobRunning" not in events.reasons

    api.backlog_seconds = 0.0
    assert controller.spare_waiters.fire() == [KEY]
    await controller.reconcile(KEY)
    assert api.status_writes == 2 and "Running" in _true(api)
    assert events.reasons.count("MPIJobRunning") == 1


async def test_a_job_done_before_the_backlog_drains_is_written_once_without_running() -> None:
    events = Recorded()
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api, events)
    await controller.reconcile(KEY)
    _running_workers(controller, api)
    _show_launcher(controller, api, phase="Running")
    api.backlog_seconds = 4.0
    await controller.reconcile(KEY)
    _show_launcher(controller, api, phase="Succeeded")
    await controller.reconcile(KEY)  # a finished job is written at once, saturated or not
    assert api.status_writes == 2
    assert _true(api) == {"Created", "Succeeded"}
    assert "Running" not in {
        c["type"] for c in api.objects[("MPIJob", "pi")]["status"]["conditions"]
    }
    assert "MPIJobRunning" not in events.reasons and "MPIJobSucceeded" in events.reasons


async def test_running_is_written_at_once_when_the_client_has_requests_to_spare() -> None:
    events = Recorded()
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api, events)
    await controller.reconcile(KEY)
    _running_workers(controller, api)
    _show_launcher(controller, api, phase="Running")
    await controller.reconcile(KEY)
    assert api.status_writes == 2 and "Running" in _true(api)
    assert events.reasons.count("MPIJobRunning") == 1


async def test_running_is_late_by_a_few_seconds_at_most_however_long_the_burst(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = Recorded()
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api, events)
    await controller.reconcile(KEY)
    # The status writer's clock only from here: the creations above sleep on the loop's.
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    _running_workers(controller, api)
    _show_launcher(controller, api, phase="Running")
    api.backlog_seconds = 1000.0  # never drains
    await controller.reconcile(KEY)
    assert _waits_for_spare(controller, clock) == pytest.approx(RUNNING_BACKLOG_HOLD_SECONDS)
    clock[0] += RUNNING_BACKLOG_HOLD_SECONDS - 1
    await controller.reconcile(KEY)  # a pass an event brought: the same bound
    assert _waits_for_spare(controller, clock) == pytest.approx(1.0)
    assert api.status_writes == 1 and "MPIJobRunning" not in events.reasons
    clock[0] += 1
    assert controller.spare_waiters.fire() == [KEY]  # its bound: queued, saturated or not
    await controller.reconcile(KEY)
    assert api.status_writes == 2 and "Running" in _true(api)
    assert events.reasons.count("MPIJobRunning") == 1


async def test_running_waits_its_own_bound_after_counters_held_long_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The workers' counters were held from the burst's start; the launcher's Running, 10 s
    later, still waits (up to its own few seconds) rather than going out at once."""
    events = Recorded()
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api, events)
    await controller.reconcile(KEY)
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    _running_workers(controller, api)
    api.backlog_seconds = 1000.0
    await controller.reconcile(KEY)  # the workers' counters: held
    assert api.status_writes == 1
    clock[0] += 10.0
    _show_launcher(controller, api, phase="Running")
    await controller.reconcile(KEY)
    assert _waits_for_spare(controller, clock) == pytest.approx(RUNNING_BACKLOG_HOLD_SECONDS)
    assert api.status_writes == 1 and "MPIJobRunning" not in events.reasons
    clock[0] += RUNNING_BACKLOG_HOLD_SECONDS
    await controller.reconcile(KEY)
    assert api.status_writes == 2 and "Running" in _true(api)


class OwnBudget:
    """MPIJob's status client: the same objects, a rate limiter of its own with room."""

    def __init__(self, api: FakeApi) -> None:
        self._api = api

    def backlog(self) -> float:
        return 0.0

    def spare(self) -> int:
        return 30

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)


class SplitBudgetApi(PatchCountingApi):
    def with_own_budget(self) -> Any:
        return OwnBudget(self)


async def test_the_hold_reads_the_backlog_of_the_client_that_creates() -> None:
    """MPIJob's status writes have a budget of their own, idle in a burst; the creations'
    budget, full, is the one that holds Running."""
    events = Recorded()
    api = SplitBudgetApi(MPIJOB)
    controller = mpi_controller(api, events)
    await controller.reconcile(KEY)
    _running_workers(controller, api)
    _show_launcher(controller, api, phase="Running")
    api.backlog_seconds = 4.0
    await controller.reconcile(KEY)
    assert api.status_writes == 1 and "MPIJobRunning" not in events.reasons


async def test_a_new_jobs_created_waits_with_its_event_while_creations_are_backlogged() -> None:
    """A burst of jobs: a new job's first pass creates its objects, but its first status write
    (Created alone) waits for the client to have requests to spare, and its MPIJobCreated
    Event with it; the pass that writes it emits the Event, once."""
    events = Recorded()
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api, events)
    api.backlog_seconds = 2.0
    assert await controller.reconcile(KEY) is None
    assert len(api.created) == 6  # the job's objects are not held
    assert api.status_writes == 0 and "MPIJobCreated" not in events.reasons
    due = controller.spare_waiters.due(KEY)
    assert due is not None
    assert due - time.monotonic() == pytest.approx(RUNNING_BACKLOG_HOLD_SECONDS, abs=0.5)
    _running_workers(controller, api)
    await controller.reconcile(KEY)  # still saturated: the same hold, the same bound
    assert api.status_writes == 0 and "MPIJobCreated" not in events.reasons
    assert controller.spare_waiters.due(KEY) == pytest.approx(due, abs=0.01)
    api.backlog_seconds = 0.0
    await controller.reconcile(KEY)
    assert api.status_writes == 1 and _true(api) == {"Created"}
    assert events.reasons.count("MPIJobCreated") == 1
    assert api.objects[("MPIJob", "pi")]["status"].get("startTime")


async def test_a_job_running_before_its_created_was_written_gets_both_in_one_write() -> None:
    events = Recorded()
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api, events)
    api.backlog_seconds = 2.0
    await controller.reconcile(KEY)
    _running_workers(controller, api)
    _show_launcher(controller, api, phase="Running")
    await controller.reconcile(KEY)  # Created and Running: held together, with their Events
    assert api.status_writes == 0 and not {"MPIJobCreated", "MPIJobRunning"} & set(events.reasons)
    api.backlog_seconds = 0.0
    await controller.reconcile(KEY)
    assert api.status_writes == 1 and _true(api) == {"Created", "Running"}
    assert events.reasons.count("MPIJobCreated") == 1
    assert events.reasons.count("MPIJobRunning") == 1


async def test_a_job_that_finishes_before_its_created_was_written_is_written_once() -> None:
    events = Recorded()
    api = PatchCountingApi(MPIJOB)
    controller = mpi_controller(api, events)
    api.backlog_seconds = 1000.0  # saturated throughout
    await controller.reconcile(KEY)
    _running_workers(controller, api)
    _show_launcher(controller, api, phase="Succeeded")
    await controller.reconcile(KEY)  # a terminal status is written at once
    assert api.status_writes == 1 and {"Created", "Succeeded"} <= _true(api)
    assert events.reasons.count("MPIJobCreated") == 1
    assert events.reasons.count("MPIJobSucceeded") == 1
