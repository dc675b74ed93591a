"""Replica counting from pods, the framework's status rule, and the success transition."""

from __future__ import annotations

from plan_fixtures import NOW, DemoFramework, FakeCluster, condition, new_job, reasons, running_job

from jobcontroller.core import DeleteObject, JobMetric


def test_counts_active_succeeded_failed_per_type() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(replicas={"Chief": 1, "Worker": 3}, restart_policy="Never"))
    running_job(fw, cluster)
    cluster.set_pod("Worker", 0, "Succeeded", exit_code=0)
    cluster.set_pod("Worker", 1, "Running", terminating=True)
    cluster.set_pod("Worker", 2, "Pending")
    result = cluster.plan(fw)
    assert result.status is not None
    worker = result.status.replica_statuses["Worker"]
    chief = result.status.replica_statuses["Chief"]
    assert (worker.active, worker.succeeded, worker.failed) == (0, 1, 1)
    assert (chief.active, chief.succeeded, chief.failed) == (1, 0, 0)


def test_framework_rule_sets_running() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    running_job(fw, cluster)
    status = cluster.job["status"]
    assert status["conditions"][-1]["type"] == "Running"
    assert status["conditions"][-1]["message"] == "DemoJob ns/demo is running."


def test_success_sets_completion_metric_event_and_moves_active() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    running_job(fw, cluster)
    cluster.set_pod("Chief", 0, "Succeeded", exit_code=0)
    result = cluster.step(fw)
    assert condition(result, "Succeeded").status == "True"
    assert condition(result, "Running").status == "False"
    assert result.status is not None
    assert result.status.completion_time == NOW
    assert JobMetric.SUCCESSFUL in result.metrics
    assert "DemoJobSucceeded" in reasons(result)
    # Workers still running are counted as succeeded once the job has succeeded.
    worker = result.status.replica_statuses["Worker"]
    assert (worker.active, worker.succeeded) == (0, 2)
    again = cluster.plan(fw)
    assert (again.actions, again.events, again.metrics) == ((), (), ())


def test_exited_with_code_reported_once_per_pod() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(replicas={"Chief": 1, "Worker": 2}))
    running_job(fw, cluster)
    cluster.set_pod("Worker", 1, "Succeeded", exit_code=0, finished_at="2024-01-01T11:00:00Z")
    first = cluster.step(fw)
    exited = [e.message for e in first.events if e.reason == "ExitedWithCode"]
    assert exited == ["Pod: ns.demo-worker-1 exited with code 0"]
    assert "ExitedWithCode" not in reasons(cluster.step(fw))
    cluster.set_pod("Worker", 0, "Succeeded", exit_code=0, finished_at="2024-01-01T11:30:00Z")
    exited = [e.message for e in cluster.step(fw).events if e.reason == "ExitedWithCode"]
    assert exited == ["Pod: ns.demo-worker-0 exited with code 0"]


def test_failure_under_never_is_left_to_the_framework() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(restart_policy="Never"))
    running_job(fw, cluster)
    cluster.set_pod("Worker", 1, "Failed", exit_code=137)
    result = cluster.step(fw)
    failed = condition(result, "Failed")
    assert failed.message == "DemoJob ns/demo has failed because 1 Worker replica(s) failed."
    assert JobMetric.FAILED in result.metrics
    assert "DemoJobFailed" in reasons(result)
    # cleanPodPolicy defaults to None: nothing is deleted, not even the failed pod.
    assert not [a for a in result.actions if isinstance(a, DeleteObject)]
