"""Which updates of cached objects wake a job (controller/watch.py): a change only to a field
no plan reads does not, and neither does the watch bringing back the status this process is
writing before the write's answer comes (tests/unit/test_cache_projection.py checks that no
plan reads those fields)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from controller_fakes import FakeApi, tf_controller, tf_job, worker_pod

from jobcontroller.controller.state import InFlightStatus
from jobcontroller.controller.watch import (
    CHILD_UPDATE_BATCH_SECONDS,
    own_status_echo,
    unread_change_only,
)
from jobcontroller.runtime.kube import ApiError


def _launcher(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi-launcher", "namespace": "ns", "resourceVersion": "10"},
        "spec": {"suspend": False},
        "status": {"active": 1, "ready": 0, **status},
    }


def _moved(obj: dict[str, Any], **status: Any) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["metadata"]["resourceVersion"] = "11"
    new["status"].update(status)
    return new


def test_a_batch_job_counting_its_ready_pod_wakes_no_one() -> None:
    old = _launcher()
    assert unread_change_only("Job", old, _moved(old, ready=1))


def test_a_batch_job_whose_counts_move_wakes_its_owner() -> None:
    old = _launcher()
    assert not unread_change_only("Job", old, _moved(old, ready=0, active=0, succeeded=1))
    assert not unread_change_only("Job", old, _moved(old, ready=1, failed=1))
    suspended = _moved(old)
    suspended["spec"]["suspend"] = True
    assert not unread_change_only("Job", old, suspended)


def test_a_pod_losing_its_tracking_finalizer_wakes_no_one() -> None:
    old = {
        "metadata": {
            "name": "pi-launcher-x",
            "resourceVersion": "5",
            "finalizers": ["batch.kubernetes.io/job-tracking"],
        },
        "status": {"phase": "Succeeded"},
    }
    new = copy.deepcopy(old)
    new["metadata"].update(resourceVersion="6", finalizers=[])
    assert unread_change_only("Pod", old, new)
    deleted = copy.deepcopy(new)
    deleted["metadata"]["deletionTimestamp"] = "2026-11-27T18:00:00Z"
    assert not unread_change_only("Pod", old, deleted)
    failed = copy.deepcopy(new)
    failed["status"]["phase"] = "Failed"
    assert not unread_change_only("Pod", old, failed)


def test_kinds_without_unread_fields_always_wake() -> None:
    old = {"metadata": {"name": "svc", "resourceVersion": "1"}, "spec": {}}
    new = copy.deepcopy(old)
    new["metadata"]["resourceVersion"] = "2"
    assert not unread_change_only("Service", old, new)


def _job(status: dict[str, Any], rv: str = "7") -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ns", "resourceVersion": rv, "generation": 1},
        "spec": {"slotsPerWorker": 1},
        "status": status,
    }


def test_the_echo_of_our_status_write_is_recognised() -> None:
    sent = {"conditions": [{"type": "Running", "status": "True"}]}
    old = _job({"conditions": [{"type": "Created", "status": "True"}]})
    echo = _job(copy.deepcopy(sent), rv="8")
    assert own_status_echo(old, echo, sent)


def test_anything_else_in_the_update_is_not_an_echo() -> None:
    sent = {"conditions": [{"type": "Running", "status": "True"}]}
    old = _job({"conditions": [{"type": "Created", "status": "True"}]})
    assert not own_status_echo(old, _job(copy.deepcopy(sent), rv="8"), None)
    other = _job({"conditions": [{"type": "Failed", "status": "True"}]}, rv="8")
    assert not own_status_echo(old, other, sent)
    edited = _job(copy.deepcopy(sent), rv="8")
    edited["spec"]["slotsPerWorker"] = 2
    edited["metadata"]["generation"] = 2
    assert not own_status_echo(old, edited, sent)
    labelled = _job(copy.deepcopy(sent), rv="8")
    labelled["metadata"]["labels"] = {"team": "a"}
    assert not own_status_echo(old, labelled, sent)


class _Capturing:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def add_handlers(self, **handlers: Any) -> None:
        self.handlers = handlers


async def test_only_an_update_a_plan_reads_queues_the_job() -> None:
    job = tf_job()
    controller = tf_controller(FakeApi(job), cached=[job])
    informer = _Capturing()
    controller.watch.settle_on_events("Pod", informer)  # type: ignore[arg-type]  # only add_handlers is used
    queue = controller.watch.queue
    pod = worker_pod(0, phase="Running")
    pod["metadata"].update(resourceVersion="5", finalizers=["example.com/keep"])
    unfinalized = copy.deepcopy(pod)
    unfinalized["metadata"].update(resourceVersion="6", finalizers=[])
    informer.handlers["on_update"](pod, unfinalized)
    await asyncio.sleep(CHILD_UPDATE_BATCH_SECONDS + 0.1)
    assert len(queue) == 0
    ended = copy.deepcopy(unfinalized)
    ended["metadata"]["resourceVersion"] = "7"
    ended["status"]["phase"] = "Succeeded"
    informer.handlers["on_update"](unfinalized, ended)
    await asyncio.sleep(CHILD_UPDATE_BATCH_SECONDS + 0.1)
    assert len(queue) == 1


class _Status:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.data)


class _EchoingApi(FakeApi):
    """Its status PUT takes effect and the watch's echo of it arrives before the answer; with
    ``lose_answer`` the answer is lost and the client's retry meets its own change (409)."""

    def __init__(self, job: dict[str, Any], *, lose_answer: bool) -> None:
        super().__init__(job)
        self.lose_answer = lose_answer
        self.echo: Any = None

    async def replace(self, resource: Any, body: dict[str, Any], **kwargs: Any) -> Any:
        written = await super().replace(resource, body, **kwargs)
        self.echo(written)
        if self.lose_answer:
            raise ApiError(status=409, reason="Conflict", message="the object has been modified")
        return written


@pytest.mark.parametrize("lose_answer", [False, True], ids=["answered", "answer-lost"])
async def test_the_echo_of_the_status_in_flight_queues_the_job_only_if_the_write_failed(
    lose_answer: bool,
) -> None:
    job = tf_job()
    api = _EchoingApi(job, lose_answer=lose_answer)
    controller = tf_controller(api, cached=[job])
    watch, queue = controller.watch, controller.watch.queue
    cached = copy.deepcopy(api.job)
    api.echo = lambda written: watch._job_updated(cached, written)
    status = _Status({"conditions": [{"type": "Created", "status": "True"}]})
    ok = await controller.status_writer.write(cached, status)
    assert ok is not lose_answer
    # Answered: the echo was our write, planned from already. Lost: the reconciler waits for
    # the newer job, which was that echo, so the writer queues the job in its stead.
    assert len(queue) == (1 if lose_answer else 0)
    assert not controller.states.status_in_flight


async def test_an_update_that_is_not_the_status_in_flight_queues_the_job() -> None:
    job = tf_job()
    controller = tf_controller(FakeApi(job), cached=[job])
    watch, queue = controller.watch, controller.watch.queue
    key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
    sent = {"conditions": [{"type": "Created", "status": "True"}]}
    echo = {**copy.deepcopy(job), "status": sent}
    echo["metadata"]["resourceVersion"] = "99"
    controller.states.status_in_flight[key] = InFlightStatus({"conditions": []})
    watch._job_updated(job, echo)  # another status than ours: someone else's write
    assert len(queue) == 1
