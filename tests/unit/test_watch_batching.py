"""A child's updates queue its job after a short batch period, so the updates of one job's
pods that land together cost one reconcile; creations and deletions queue it at once."""

from __future__ import annotations

import asyncio
from typing import Any

from controller_fakes import FakeApi, tf_controller, tf_job, worker_pod

from jobcontroller.controller.watch import CHILD_UPDATE_BATCH_SECONDS

KEY = "ns/tf"


class CapturingInformer:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def add_handlers(self, **handlers: Any) -> None:
        self.handlers = handlers


def _wired() -> tuple[Any, CapturingInformer]:
    job = tf_job()
    controller = tf_controller(FakeApi(job), cached=[job])
    informer = CapturingInformer()
    controller.watch.settle_on_events("Pod", informer)  # type: ignore[arg-type]  # only add_handlers is used
    return controller, informer


async def test_updates_that_land_together_queue_the_job_once() -> None:
    controller, informer = _wired()
    queue = controller.watch.queue
    pods = [worker_pod(i, phase="Pending") for i in range(4)]
    for pod in pods:
        running = {**pod, "status": {"phase": "Running"}}
        informer.handlers["on_update"](pod, running)
    assert len(queue) == 0  # not yet: the batch period runs
    await asyncio.sleep(CHILD_UPDATE_BATCH_SECONDS + 0.1)
    assert len(queue) == 1
    assert await queue.get() == KEY
    queue.done(KEY)
    await asyncio.sleep(CHILD_UPDATE_BATCH_SECONDS + 0.1)
    assert len(queue) == 0  # four updates, one reconcile


async def test_a_created_or_deleted_child_queues_the_job_at_once() -> None:
    controller, informer = _wired()
    queue = controller.watch.queue
    informer.handlers["on_add"](worker_pod(0, phase="Pending"))
    assert len(queue) == 1
    assert await queue.get() == KEY
    queue.done(KEY)
    informer.handlers["on_delete"](worker_pod(0, phase="Running"))
    assert len(queue) == 1


def _mpi_pod(job_name: str) -> dict[str, Any]:
    """A pod an MPIJob controls: it wears the same job-name label as ours."""
    pod = worker_pod(0, phase="Pending")
    pod["metadata"]["name"] = f"{job_name}-worker-0"
    pod["metadata"]["labels"]["training.kubeflow.org/job-name"] = job_name
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "name": job_name,
            "uid": "mpi-uid",
            "controller": True,
        }
    ]
    return pod


async def test_another_kinds_pods_queue_nothing_when_no_job_of_ours_has_their_name() -> None:
    # The all-in-one runs six controllers on one pod informer: each kind's pods used to queue
    # a reconcile of a job that does not exist in each of the five other controllers.
    controller, informer = _wired()
    queue = controller.watch.queue
    pod = _mpi_pod("mpi")
    informer.handlers["on_add"](pod)
    informer.handlers["on_update"](pod, {**pod, "status": {"phase": "Running"}})
    informer.handlers["on_delete"](pod)
    await asyncio.sleep(CHILD_UPDATE_BATCH_SECONDS + 0.1)
    assert len(queue) == 0


async def test_another_kinds_pod_named_like_our_job_queues_it() -> None:
    # It may hold a name our job needs: the job must see it come and go.
    controller, informer = _wired()
    queue = controller.watch.queue
    informer.handlers["on_add"](_mpi_pod("tf"))
    assert len(queue) == 1
    assert await queue.get() == KEY
    queue.done(KEY)
    informer.handlers["on_delete"](_mpi_pod("tf"))
    assert len(queue) == 1
