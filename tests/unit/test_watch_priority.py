"""Under a backlog of new jobs, a started job whose children or status changed is reconciled
before the backlog (issue 27: jobs were marked Running only after every job's first pass)."""

from __future__ import annotations

import asyncio
from typing import Any

from controller_fakes import FakeApi, tf_controller, tf_job, worker_pod

from jobcontroller.controller.watch import CHILD_UPDATE_BATCH_SECONDS
from jobcontroller.runtime.store import Store
from jobcontroller.runtime.workqueue import LOW, NORMAL, WorkQueue


class CapturingInformer:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}
        self.store = Store()

    def add_handlers(self, **handlers: Any) -> None:
        self.handlers = handlers


def new_job(name: str) -> dict[str, Any]:
    job = tf_job()
    job["metadata"] = {**job["metadata"], "name": name, "uid": f"uid-{name}"}
    return job


def _wired() -> tuple[WorkQueue[str], CapturingInformer, CapturingInformer, Any]:
    controller = tf_controller(FakeApi(tf_job()), cached=[])
    queue = WorkQueue[str](name="test", passed_over_limit=100)
    jobs, pods = CapturingInformer(), CapturingInformer()
    controller.watch.watch_jobs(jobs, queue)  # type: ignore[arg-type]  # handlers and store only
    controller.watch.settle_on_events("Pod", pods)  # type: ignore[arg-type]  # handlers only
    return queue, jobs, pods, controller


async def taken(queue: WorkQueue[str]) -> list[tuple[str, int]]:
    out = []
    while len(queue):
        got = await queue.get_with_priority()
        queue.done(got[0])
        out.append(got)
    return out


async def test_a_started_jobs_pod_events_go_before_new_jobs() -> None:
    queue, jobs, pods, _ = _wired()
    for i in range(3):
        jobs.handlers["on_add"](new_job(f"new-{i}"))
    pods.handlers["on_add"](worker_pod(0, phase="Pending"))  # job ns/tf's pod was created
    assert await taken(queue) == [
        ("ns/tf", NORMAL),
        ("ns/new-0", LOW),
        ("ns/new-1", LOW),
        ("ns/new-2", LOW),
    ]
    jobs.handlers["on_add"](new_job("new-3"))
    pending, running = worker_pod(0, phase="Pending"), worker_pod(0, phase="Running")
    pods.handlers["on_update"](pending, running)  # batched: it lands after the batch period
    await asyncio.sleep(CHILD_UPDATE_BATCH_SECONDS + 0.1)
    assert await taken(queue) == [("ns/tf", NORMAL), ("ns/new-3", LOW)]


async def test_a_job_update_is_normal_and_raises_a_queued_new_job() -> None:
    queue, jobs, _, _ = _wired()
    jobs.handlers["on_add"](new_job("a"))
    jobs.handlers["on_add"](new_job("b"))
    jobs.handlers["on_update"](new_job("b"), new_job("b"))  # e.g. suspended before its first pass
    assert await taken(queue) == [("ns/b", NORMAL), ("ns/a", LOW)]


async def test_a_resync_queues_every_job_low() -> None:
    queue, jobs, pods, controller = _wired()
    jobs.store.upsert(new_job("a"))
    jobs.store.upsert(new_job("b"))
    controller.watch.resync()
    pods.handlers["on_add"](worker_pod(1, phase="Pending"))
    assert await taken(queue) == [("ns/tf", NORMAL), ("ns/a", LOW), ("ns/b", LOW)]
