"""The executor's status write.

After our own patch of the job (the restart ledger) the status PUT must carry the patched
resourceVersion: sent with the cached one it always answered 409, and the status planned with
the restart (Restarting) was dropped for good, since the next plan no longer sees the pod.

After writing the status the controller keeps the written job in its cache, so the reconcile
its own writes queue at once does not plan from the old status and finish the job twice.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from controller_fakes import (
    KEY,
    RUNNING_STATUS,
    FakeApi,
    catch_up,
    tf_controller,
    tf_job,
    true_conditions,
    worker_pod,
)

from jobcontroller.controller.status import (
    BACKLOG_RECHECK_SECONDS,
    RUNNING_BACKLOG_HOLD_SECONDS,
    STATUS_BACKLOG_HOLD_SECONDS,
    STATUS_COALESCE_SECONDS,
    news,
    pods_starting,
)
from jobcontroller.core.types import Observed
from jobcontroller.runtime.kube import ApiError
from jobcontroller.runtime.metrics import Metrics
from tf_operator.controller import TFJobController


async def test_status_planned_with_a_restart_is_written_after_the_ledger_patch() -> None:
    job = tf_job(status=RUNNING_STATUS)
    api = FakeApi(job)
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Failed", exit_code=137)]
    await tf_controller(api, cached=[job, *pods]).reconcile(KEY)
    assert api.job["metadata"]["annotations"]["training.kubeflow.org/restart-count"] == "1"
    assert api.status_writes == 1
    assert "Restarting" in true_conditions(api.job)


async def test_status_written_by_someone_else_meanwhile_is_not_overwritten() -> None:
    job = tf_job(status=RUNNING_STATUS)
    api = FakeApi(job)
    api.job["status"]["conditions"].append(
        {"type": "Suspended", "status": "True", "reason": "Elsewhere", "message": "not ours"}
    )
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Failed", exit_code=137)]
    await tf_controller(api, cached=[job, *pods]).reconcile(KEY)
    assert api.status_writes == 0
    assert "Suspended" in true_conditions(api.job)


async def test_a_job_finishes_once_although_the_watch_has_not_shown_the_write_yet() -> None:
    job = tf_job(status=RUNNING_STATUS)
    api = FakeApi(job)
    metrics = Metrics()
    # Exit code 1 under ExitCode is permanent: the job fails.
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Failed", exit_code=1)]
    controller = tf_controller(api, cached=[job, *pods], metrics=metrics)
    await controller.reconcile(KEY)
    await controller.reconcile(KEY)  # queued again by the first one's events, before the watch
    assert "Failed" in true_conditions(api.job)
    assert api.status_writes == 1
    labels = {"job_namespace": "ns", "framework": "tensorflow"}
    assert metrics.registry.get_sample_value("training_operator_jobs_failed_total", labels) == 1


class _DeleteFails(FakeApi):
    """An apiserver that refuses to delete (a webhook, RBAC, an outage of one kind)."""

    async def delete(self, resource: Any, name: str, **kwargs: Any) -> None:
        raise ApiError(status=500, reason="InternalError", message="no deletes today")


async def test_a_failing_clean_up_neither_hides_the_outcome_nor_counts_it_twice() -> None:
    job = tf_job(status=RUNNING_STATUS)
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "All"}
    api = _DeleteFails(job)
    metrics = Metrics()
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Failed", exit_code=1)]
    controller = tf_controller(api, cached=[job, *pods], metrics=metrics)
    for _ in range(2):  # the work queue retries the failed reconcile
        with pytest.raises(ApiError):
            await controller.reconcile(KEY)
    assert "Failed" in true_conditions(api.job)
    labels = {"job_namespace": "ns", "framework": "tensorflow"}
    assert metrics.registry.get_sample_value("training_operator_jobs_failed_total", labels) == 1


class _JobDeleteFails(FakeApi):
    fail = True

    async def delete(self, resource: Any, name: str, **kwargs: Any) -> None:
        if resource.kind == "TFJob" and self.fail:
            raise ApiError(status=500, reason="InternalError", message="try later")
        await super().delete(resource, name, **kwargs)


async def test_a_job_deleted_after_its_ttl_is_counted_once_however_often_it_is_tried() -> None:
    status = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "TFJobCreated", "message": "c"},
            {"type": "Failed", "status": "True", "reason": "TFJobFailed", "message": "f"},
        ],
        "startTime": "2024-01-01T00:00:00Z",
        "completionTime": "2024-01-01T00:00:00Z",
    }
    job = tf_job(status=status)
    job["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 0}
    api = _JobDeleteFails(job)
    metrics = Metrics()
    controller = tf_controller(api, cached=[job], metrics=metrics)
    labels = {"job_namespace": "ns", "framework": "tensorflow"}
    for _ in range(2):
        with pytest.raises(ApiError):
            await controller.reconcile(KEY)
    deleted = "training_operator_jobs_deleted_total"
    assert not metrics.registry.get_sample_value(deleted, labels)
    api.fail = False
    await controller.reconcile(KEY)
    assert ("TFJob", "tf") not in api.objects
    assert metrics.registry.get_sample_value(deleted, labels) == 1


async def test_counter_only_changes_right_after_a_write_wait_and_are_written_by_the_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pods of a job turning Running one after another cost one status write, not one each;
    the wait is bounded and the pass that ends it writes the counters then."""
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    job = tf_job(status=RUNNING_STATUS)
    api = FakeApi(job)
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Pending")]
    controller = tf_controller(api, cached=[job, *pods])
    controller.states.of(KEY).status_written = clock[0]  # the job's status was just written
    after = await controller.reconcile(KEY)
    assert api.status_writes == 0  # active 2 -> 1 only: held back...
    assert after is not None and 0 < after <= STATUS_COALESCE_SECONDS  # ...with a timer
    clock[0] += STATUS_COALESCE_SECONDS
    catch_up(controller, api)  # the services the first pass created are in the caches now
    await controller.reconcile(KEY)
    assert api.status_writes == 1
    assert api.job["status"]["replicaStatuses"]["Worker"]["active"] == 1


async def test_a_condition_change_is_written_at_once_however_recent_the_last_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    job = tf_job(status=RUNNING_STATUS)
    api = FakeApi(job)
    pods = [worker_pod(0, phase="Succeeded", exit_code=0), worker_pod(1, phase="Succeeded")]
    controller = tf_controller(api, cached=[job, *pods])
    controller.states.of(KEY).status_written = clock[0]
    await controller.reconcile(KEY)
    assert api.status_writes == 1
    assert "Succeeded" in true_conditions(api.job)


async def test_the_first_write_of_a_job_never_waits() -> None:
    job = tf_job(status=RUNNING_STATUS)
    api = FakeApi(job)
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Pending")]
    await tf_controller(api, cached=[job, *pods]).reconcile(KEY)
    assert api.status_writes == 1


async def test_counters_are_written_at_once_when_no_pod_is_still_starting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a client reads once the last pod runs is complete (an SDK user waiting for Running
    and then reading `active`)."""
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    status = {**RUNNING_STATUS, "replicaStatuses": {"Worker": {"active": 1}}}
    job = tf_job(status=status)
    api = FakeApi(job)
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Running")]
    controller = tf_controller(api, cached=[job, *pods])
    controller.states.of(KEY).status_written = clock[0]
    await controller.reconcile(KEY)
    assert api.status_writes == 1
    assert api.job["status"]["replicaStatuses"]["Worker"]["active"] == 2


async def test_a_pass_that_creates_pods_holds_a_counters_only_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the pass just created is still to start: its counters are written with what it
    becomes (an MPIJob's launcher Job, created once the workers run, is one such pass)."""
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    job = tf_job(status=RUNNING_STATUS)
    api = FakeApi(job)
    controller = tf_controller(api, cached=[job, worker_pod(0, phase="Running")])
    controller.states.of(KEY).status_written = clock[0] - 60.0
    after = await controller.reconcile(KEY)
    assert "tf-worker-1" in api.created
    assert api.status_writes == 0  # active 2 -> 1 while worker 1 is being made: held back
    assert after is not None and 0 < after <= STATUS_COALESCE_SECONDS


async def test_the_hold_is_bounded_from_the_first_held_change_not_the_last_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job written long ago still coalesces the steps of its start, and a pod that never
    leaves Pending delays its counters by STATUS_COALESCE_SECONDS at most."""
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    job = tf_job(status=RUNNING_STATUS)
    api = FakeApi(job)
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Pending")]
    controller = tf_controller(api, cached=[job, *pods])
    controller.states.of(KEY).status_written = clock[0] - 60.0
    catch_up(controller, api)
    await controller.reconcile(KEY)
    assert api.status_writes == 0
    clock[0] += STATUS_COALESCE_SECONDS / 2
    catch_up(controller, api)
    after = await controller.reconcile(KEY)
    assert api.status_writes == 0
    assert after is not None and after == pytest.approx(STATUS_COALESCE_SECONDS / 2)
    assert controller.spare_waiters.due(KEY) is None  # a start's hold is its own timer's
    clock[0] += STATUS_COALESCE_SECONDS / 2
    catch_up(controller, api)
    await controller.reconcile(KEY)
    assert api.status_writes == 1
    assert api.job["status"]["replicaStatuses"]["Worker"]["active"] == 1


def _launcher(**status: Any) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {"name": "pi-launcher", "uid": "j"},
        "spec": {},
        "status": status,
    }


def test_a_launcher_job_without_its_pod_yet_is_still_starting() -> None:
    """MPI's workers all Running and its launcher Job just created: the Job controller has not
    made the launcher's pod yet, so the counters wait for it (and for the Running it brings)."""
    running = [worker_pod(0, phase="Running"), worker_pod(1, phase="Running")]
    pod: dict[str, Any] = {"metadata": {"name": "pi-launcher-x"}, "status": {"phase": "Running"}}

    def observed(job: dict[str, Any], *launcher_pods: dict[str, Any]) -> Observed:
        return Observed(
            pods=running,
            owned={"Job": [job]},
            controlled_by=lambda kind, uid: launcher_pods if (kind, uid) == ("Pod", "j") else (),
        )

    assert pods_starting(observed(_launcher()))
    assert not pods_starting(observed(_launcher(active=1), pod))
    # Its pod runs, but the Job controller has not counted it yet: the Job's status is coming
    # (and with it the Launcher's counters and the job's Running).
    assert pods_starting(observed(_launcher(), pod))
    leaving = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2024-01-01T00:00:00Z"}}
    assert not pods_starting(observed(_launcher(active=1), pod, leaving))
    ended = {**pod, "status": {"phase": "Succeeded"}}
    assert pods_starting(observed(_launcher(), ended))  # the Job's Complete is coming
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert not pods_starting(observed(_launcher(**done)))
    suspended = {**_launcher(), "spec": {"suspend": True}}
    assert not pods_starting(observed(suspended))


ONE_ACTIVE = {**RUNNING_STATUS, "replicaStatuses": {"Worker": {"active": 1}}}


def _second_worker_running(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[float], FakeApi, TFJobController]:
    """A job written a minute ago with one worker active, whose second worker runs now (a
    counters-only change); the clock a list to move."""
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    job = tf_job(status=ONE_ACTIVE)
    api = FakeApi(job)
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Running")]
    controller = tf_controller(api, cached=[job, *pods])
    controller.states.of(KEY).status_written = clock[0] - 60.0
    catch_up(controller, api)
    return clock, api, controller


async def test_counters_wait_while_the_client_is_saturated_and_are_written_once_it_drains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A burst of jobs at --kube-api-qps: a counters-only write would queue behind the pods
    other jobs wait for, so it waits for the backlog to drain (bounded) instead."""
    clock, api, controller = _second_worker_running(monkeypatch)
    api.backlog_seconds = 4.0
    after = await controller.reconcile(KEY)
    assert api.status_writes == 0
    # No timer of its own: it waits with the others for the client, 30 s at most.
    assert after is None
    assert _waits_for_spare(controller, clock) == pytest.approx(STATUS_BACKLOG_HOLD_SECONDS)
    waiters = controller.spare_waiters
    assert waiters.fire() == []  # still saturated
    clock[0] += 4.0
    api.backlog_seconds = 0.0
    queue = controller.watch.queue
    assert queue is not None and len(queue) == 0
    assert waiters.fire() == [KEY]  # the client has requests to spare: queued again
    assert len(queue) == 1
    catch_up(controller, api)
    await controller.reconcile(KEY)
    assert api.status_writes == 1
    assert api.job["status"]["replicaStatuses"]["Worker"]["active"] == 2
    assert waiters.due(KEY) is None and len(waiters) == 0


async def test_a_saturated_client_delays_counters_by_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, api, controller = _second_worker_running(monkeypatch)
    api.backlog_seconds = 1000.0  # never drains
    await controller.reconcile(KEY)
    assert api.status_writes == 0
    clock[0] += STATUS_BACKLOG_HOLD_SECONDS
    catch_up(controller, api)
    await controller.reconcile(KEY)
    assert api.status_writes == 1


def _waits_for_spare(controller: TFJobController, clock: list[float]) -> float | None:
    """Seconds until the spare waiters queue the job at the latest (None: it is not waiting)."""
    due = controller.spare_waiters.due(KEY)
    return None if due is None else due - clock[0]


def _cond(kind: str, status: str = "True", reason: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason or f"TFJob{kind}"}


def test_what_a_status_change_brings_decides_whether_it_may_wait() -> None:
    created = {"conditions": [_cond("Created")], "replicaStatuses": {"Worker": {"active": 1}}}
    counted = {**created, "replicaStatuses": {"Worker": {"active": 2}}}
    running = {**counted, "conditions": [_cond("Created"), _cond("Running")]}
    assert news(created, counted, "Running") == "counters"
    assert news(created, running, "Running") == "running"
    assert news(created, running, None) is None  # a kind without a Running condition
    restarting = {**created, "conditions": [_cond("Created"), _cond("Restarting")]}
    assert news(restarting, running, "Running") == "running"  # Running retires Restarting
    succeeded = {**counted, "conditions": [_cond("Created"), _cond("Succeeded")]}
    assert news(created, succeeded, "Running") is None
    both = {**running, "conditions": [*running["conditions"], _cond("Succeeded")]}
    assert news(created, both, "Running") is None
    assert news({**created, "startTime": "x"}, {**running, "startTime": "y"}, "Running") is None
    assert news(running, {**running, "conditions": [_cond("Created")]}, "Running") is None
    stopped = {**running, "conditions": [_cond("Created"), _cond("Running", "False")]}
    assert news(stopped, running, "Running") == "running"  # running again after a suspension
    # A new job's first write: Created alone, with what a first pass stamps.
    first = {**created, "startTime": "x", "lastReconcileTime": "y"}
    assert news({}, first, "Running", "Created") == "created"
    assert news({}, first, "Running") is None  # a kind whose first write never waits
    runs = {**first, "conditions": [_cond("Created"), _cond("Running")]}
    assert news({}, runs, "Running", "Created") == "created"  # Running by then: together
    assert news({}, runs, None, "Created") is None  # a kind without a Running condition
    assert news({}, runs, "Running") is None
    suspended = {**first, "conditions": [_cond("Created"), _cond("Suspended")]}
    assert news({}, suspended, "Running", "Created") is None
    assert news({}, {**first, "completionTime": "z"}, "Running", "Created") is None
    assert news({"conditions": [_cond("Running", "False")]}, first, "Running", "Created") is None


async def test_a_new_jobs_first_write_and_its_count_wait_while_the_client_is_saturated() -> None:
    """A burst of jobs: the first pass creates the job's pods and services, while its Created
    write, and the jobs_created count that goes with it, wait for the client (bounded); the
    pass that writes it counts the job once."""
    job = tf_job()
    api = FakeApi(job)
    metrics = Metrics()
    controller = tf_controller(api, cached=[job], metrics=metrics)
    created = "training_operator_jobs_created_total"
    labels = {"job_namespace": "ns", "framework": "tensorflow"}
    api.backlog_seconds = 2.0
    assert await controller.reconcile(KEY) is None
    assert api.created and api.status_writes == 0
    assert not metrics.registry.get_sample_value(created, labels)
    due = controller.spare_waiters.due(KEY)
    assert due is not None
    assert due - time.monotonic() == pytest.approx(RUNNING_BACKLOG_HOLD_SECONDS, abs=0.5)
    catch_up(controller, api)
    await controller.reconcile(KEY)
    assert api.status_writes == 0 and not metrics.registry.get_sample_value(created, labels)
    api.backlog_seconds = 0.0
    await controller.reconcile(KEY)
    assert api.status_writes == 1 and true_conditions(api.job) == {"Created"}
    assert metrics.registry.get_sample_value(created, labels) == 1
    await controller.reconcile(KEY)
    assert metrics.registry.get_sample_value(created, labels) == 1


async def test_a_new_jobs_first_write_waits_a_few_seconds_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    job = tf_job()
    api = FakeApi(job)
    controller = tf_controller(api, cached=[job])
    api.backlog_seconds = 1000.0  # never drains
    await controller.reconcile(KEY)
    assert api.status_writes == 0
    catch_up(controller, api)
    clock[0] += RUNNING_BACKLOG_HOLD_SECONDS
    await controller.reconcile(KEY)
    assert api.status_writes == 1 and "Created" in true_conditions(api.job)


async def test_a_new_jobs_first_write_goes_at_once_when_the_client_has_requests_to_spare() -> None:
    job = tf_job()
    api = FakeApi(job)
    controller = tf_controller(api, cached=[job])
    await controller.reconcile(KEY)
    assert api.status_writes == 1 and "Created" in true_conditions(api.job)
    assert controller.spare_waiters.due(KEY) is None


async def test_running_waits_while_the_client_is_saturated_but_not_while_pods_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TFJob's Running, under a backlog of creations: held; while a pod is still Pending
    and the client has requests to spare: written at once (only counters coalesce a start)."""
    clock = [1000.0]
    monkeypatch.setattr("jobcontroller.controller.status.time.monotonic", lambda: clock[0])
    created = {
        "conditions": [RUNNING_STATUS["conditions"][0]],
        "replicaStatuses": {"Worker": {"active": 0}},
        "startTime": RUNNING_STATUS["startTime"],
    }
    job = tf_job(status=created)
    api = FakeApi(job)
    pods = [worker_pod(0, phase="Running"), worker_pod(1, phase="Pending")]
    controller = tf_controller(api, cached=[job, *pods])
    controller.states.of(KEY).status_written = clock[0]
    catch_up(controller, api)
    api.backlog_seconds = 2.0
    assert await controller.reconcile(KEY) is None
    assert _waits_for_spare(controller, clock) == pytest.approx(RUNNING_BACKLOG_HOLD_SECONDS)
    assert api.status_writes == 0
    api.backlog_seconds = 0.0
    catch_up(controller, api)
    await controller.reconcile(KEY)
    assert api.status_writes == 1 and "Running" in true_conditions(api.job)


async def test_any_backlog_holds_counters_and_they_are_looked_at_again_no_sooner_than_1s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client whose next request would wait at all has no request to spare; the client is
    not asked again every few milliseconds while the queue drains at its QPS."""
    clock, api, controller = _second_worker_running(monkeypatch)
    api.backlog_seconds = 0.05  # one request ahead at QPS 20
    assert await controller.reconcile(KEY) is None
    assert api.status_writes == 0
    look = controller.spare_waiters.next_look
    assert look is not None and look - clock[0] == pytest.approx(BACKLOG_RECHECK_SECONDS)


async def test_a_hold_ends_when_its_change_is_wanted_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What was held got stored meanwhile (a newer job came): a later change, under a client
    still saturated, is held afresh rather than sent at once on the old hold's expiry."""
    clock, api, controller = _second_worker_running(monkeypatch)
    api.backlog_seconds = 2.0
    await controller.reconcile(KEY)  # active 1 -> 2: held
    state = controller.states.get(KEY)
    assert state is not None and state.status_backlogged == 1000.0
    jobs = controller.watch.informers["job"].store
    two = {"active": 2, "succeeded": 0, "failed": 0}
    counted = {**ONE_ACTIVE, "replicaStatuses": {"Worker": two}}
    catch_up(controller, api)  # the services the first pass created
    jobs.upsert(tf_job(status=counted))
    await controller.reconcile(KEY)  # nothing left to write: the hold ends
    assert state.status_backlogged is None
    assert controller.spare_waiters.due(KEY) is None  # and nothing queues the job for it
    clock[0] += STATUS_BACKLOG_HOLD_SECONDS + 1
    jobs.upsert(tf_job(status=ONE_ACTIVE))
    assert await controller.reconcile(KEY) is None  # much later: held afresh, for 30 s
    assert _waits_for_spare(controller, clock) == pytest.approx(STATUS_BACKLOG_HOLD_SECONDS)
    assert api.status_writes == 0
