"""backoffLimit counts the training containers' in-place restarts (not init containers', not
those of pods that succeeded, as v1.9) and the operator's pod recreations (#2045)."""

from __future__ import annotations

from plan_fixtures import DemoFramework, FakeCluster, condition, new_job, reasons, running_job

from jobcontroller.core import RESTART_COUNT_ANNOTATION, DeleteObject, JobMetric, PatchObject

BACKOFF_MESSAGE = "Job demo has failed because it has reached the specified backoff limit"


def job_with(limit: int, policy: str) -> tuple[DemoFramework, FakeCluster]:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(restart_policy=policy, run_policy={"backoffLimit": limit}))
    running_job(fw, cluster)
    return fw, cluster


def test_in_place_restarts_below_the_limit_keep_running() -> None:
    fw, cluster = job_with(3, "OnFailure")
    cluster.set_pod("Worker", 0, "Running", restarts=1)
    cluster.set_pod("Worker", 1, "Running", restarts=1)
    result = cluster.step(fw)
    assert condition(result, "Failed") is None
    assert condition(result, "Running").status == "True"


def test_in_place_restarts_reaching_the_limit_fail_the_job() -> None:
    fw, cluster = job_with(3, "OnFailure")
    cluster.set_pod("Worker", 0, "Running", restarts=2)
    cluster.set_pod("Chief", 0, "Running", restarts=1)
    result = cluster.step(fw)
    failed = condition(result, "Failed")
    assert (failed.reason, failed.message) == ("DemoJobFailed", BACKOFF_MESSAGE)
    assert [e.type for e in result.events if e.reason == "DemoJobFailed"] == ["Normal"]
    assert result.metrics.count(JobMetric.FAILED) == 1
    assert condition(result, "Running").status == "False"


def test_restarts_of_a_succeeded_pod_do_not_count() -> None:
    # Where v1.9 and the first versions of ours disagreed: 2 restarts of a worker that then
    # succeeded and 1 of a running one is not 3 against a limit of 3.
    fw, cluster = job_with(3, "OnFailure")
    cluster.set_pod("Worker", 0, "Succeeded", exit_code=0, restarts=2)
    cluster.set_pod("Worker", 1, "Running", restarts=1)
    assert condition(cluster.step(fw), "Failed") is None


def test_init_container_restarts_do_not_count() -> None:
    fw, cluster = job_with(2, "OnFailure")
    waiting = cluster.set_pod("Worker", 1, "Pending")
    waiting["status"]["initContainerStatuses"] = [{"name": "init", "restartCount": 5}]
    assert condition(cluster.step(fw), "Failed") is None
    cluster.set_pod("Worker", 0, "Running", restarts=2)
    assert condition(cluster.step(fw), "Failed").message == BACKOFF_MESSAGE


def test_limit_zero_fails_on_the_first_failure_without_recreating() -> None:
    fw, cluster = job_with(0, "OnFailure")
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    result = cluster.step(fw)
    assert condition(result, "Failed").message == BACKOFF_MESSAGE
    assert not [a for a in result.actions if isinstance(a, PatchObject)]
    assert "DemoJobRestarting" not in reasons(result)
    # The failed pod is kept (cleanPodPolicy None), the running ones are stopped.
    deleted = {a.name for a in result.actions if isinstance(a, DeleteObject) and a.kind == "Pod"}
    assert deleted == {"demo-chief-0", "demo-worker-0"}


def test_exit_code_recreations_count_towards_the_limit() -> None:
    fw, cluster = job_with(2, "ExitCode")
    cluster.set_pod("Worker", 1, "Failed", exit_code=137)
    first = cluster.step(fw)
    assert condition(first, "Failed") is None
    assert cluster.job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "1"
    cluster.settle(fw)  # the pod is recreated
    cluster.set_pod("Worker", 1, "Failed", exit_code=137)
    second = cluster.step(fw)
    assert condition(second, "Failed").message == BACKOFF_MESSAGE
    # The failing pod is not recreated (nor deleted): the job is over; the running ones stop.
    deleted = {a.name for a in second.actions if isinstance(a, DeleteObject) and a.kind == "Pod"}
    assert deleted == {"demo-chief-0", "demo-worker-0"}


def test_restarts_of_a_recreated_pod_are_kept() -> None:
    fw, cluster = job_with(4, "OnFailure")
    cluster.set_pod("Worker", 1, "Failed", exit_code=1, restarts=2)
    cluster.step(fw)
    # 1 recreation + 2 in-place restarts of the pod that is gone.
    assert cluster.job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "3"
    cluster.settle(fw)
    cluster.set_pod("Worker", 0, "Running", restarts=1)
    assert condition(cluster.step(fw), "Failed").message == BACKOFF_MESSAGE


def test_never_replicas_do_not_count() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(restart_policy="Never", run_policy={"backoffLimit": 1}))
    running_job(fw, cluster)
    cluster.set_pod("Worker", 0, "Running", restarts=5)
    assert condition(cluster.step(fw), "Failed") is None


def test_no_limit_means_unbounded_restarts() -> None:
    fw, cluster = job_with(0, "OnFailure")
    cluster.job["spec"]["runPolicy"] = {}
    cluster.set_pod("Worker", 0, "Running", restarts=50)
    assert condition(cluster.step(fw), "Failed") is None
