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
