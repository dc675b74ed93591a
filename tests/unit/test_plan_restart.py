"""Failed pods under each restart policy and exit code."""

from __future__ import annotations

import pytest
from plan_fixtures import KIND, DemoFramework, FakeCluster, condition, new_job, reasons, running_job

from jobcontroller.core import (
    RESTART_COUNT_ANNOTATION,
    RESTARTED_PODS_ANNOTATION,
    CreateObject,
    DeleteObject,
    JobMetric,
    PatchObject,
    Plan,
)


def deleted(result: Plan) -> list[str]:
    return sorted(a.name for a in result.actions if isinstance(a, DeleteObject))


def failed_worker(policy: str, exit_code: int | None) -> tuple[DemoFramework, FakeCluster]:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(restart_policy=policy))
    running_job(fw, cluster)
    cluster.set_pod("Worker", 1, "Failed", exit_code=exit_code)
    return fw, cluster


@pytest.mark.parametrize(
    ("policy", "exit_code"),
    [("OnFailure", 1), ("Always", 2), ("ExitCode", 137), ("ExitCode", None)],
)
def test_retryable_failure_deletes_the_pod_and_marks_restarting(
    policy: str, exit_code: int | None
) -> None:
    fw, cluster = failed_worker(policy, exit_code)
    result = cluster.step(fw)
    assert deleted(result) == ["demo-worker-1"]
    restarting = condition(result, "Restarting")
    assert (restarting.status, restarting.reason, restarting.message) == (
        "True",
        "DemoJobRestarting",
        "job demo is restarting because Worker replica(s) failed.",
    )
    assert condition(result, "Running") is None  # Restarting replaced it
    assert condition(result, "Failed") is None
    assert [e.type for e in result.events if e.reason == "DemoJobRestarting"] == ["Warning"]
    assert result.metrics.count(JobMetric.RESTARTED) == 1


def test_deleted_pod_is_recreated_next_and_the_job_runs_again() -> None:
    fw, cluster = failed_worker("OnFailure", 1)
    cluster.step(fw)
    recreate = cluster.step(fw)
    assert len(recreate.actions) == 1
    assert [a.name for a in recreate.actions if isinstance(a, CreateObject)] == ["demo-worker-1"]
    cluster.set_pod("Worker", 1, "Running")
    result = cluster.step(fw)
    assert condition(result, "Running").status == "True"
    assert condition(result, "Restarting") is None
    assert cluster.plan(fw).actions == ()


def test_restart_is_recorded_on_the_job_before_the_delete() -> None:
    fw, cluster = failed_worker("OnFailure", 1)
    uid = cluster.get("Pod", "demo-worker-1")["metadata"]["uid"]
    result = cluster.plan(fw)
    patch = result.actions[0]
    assert isinstance(patch, PatchObject)
    assert (patch.kind, patch.name, patch.namespace) == (KIND, "demo", "ns")
    assert patch.patch == {
        "metadata": {
            "annotations": {
                RESTART_COUNT_ANNOTATION: "1",
                RESTARTED_PODS_ANNOTATION: f'{{"demo-worker-1":"{uid}"}}',
            }
        }
    }


def test_lost_delete_is_retried_without_counting_twice() -> None:
    fw, cluster = failed_worker("OnFailure", 1)
    first = cluster.plan(fw)
    # Only the job patch lands; the delete is lost.
    cluster.apply(Plan(actions=first.actions[:1], status=first.status))
    retry = cluster.plan(fw)
    assert deleted(retry) == ["demo-worker-1"]
    assert not [a for a in retry.actions if isinstance(a, PatchObject)]
    assert "DemoJobRestarting" not in reasons(retry)
    assert JobMetric.RESTARTED not in retry.metrics


def test_terminating_failed_pod_is_not_deleted_again() -> None:
    fw, cluster = failed_worker("OnFailure", 1)
    cluster.get("Pod", "demo-worker-1")["metadata"]["deletionTimestamp"] = "2024-01-01T11:00:00Z"
    result = cluster.plan(fw)
    assert deleted(result) == []
    assert not [a for a in result.actions if isinstance(a, CreateObject)]


@pytest.mark.parametrize("code", [1, 127])
def test_permanent_exit_code_fails_the_job(code: int) -> None:
    fw, cluster = failed_worker("ExitCode", code)
    result = cluster.step(fw)
    failed = condition(result, "Failed")
    assert (failed.reason, failed.message) == (
        "DemoJobFailed",
        'job "demo" is failing because "Worker" replica(s) failed.',
    )
    assert [e.type for e in result.events if e.reason == "DemoJobFailed"] == ["Warning"]
    assert result.metrics.count(JobMetric.FAILED) == 1
    assert deleted(result) == []  # cleanPodPolicy None
    assert condition(result, "Running").status == "False"


def test_never_keeps_the_failed_pod() -> None:
    fw, cluster = failed_worker("Never", 137)
    result = cluster.step(fw)
    assert deleted(result) == []
    assert condition(result, "Restarting") is None


def test_framework_may_forbid_recreation() -> None:
    fw = DemoFramework(no_recreate={"Worker"})
    cluster = FakeCluster(new_job(restart_policy="OnFailure"))
    running_job(fw, cluster)
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    result = cluster.step(fw)
    assert deleted(result) == []
    assert condition(result, "Failed") is not None  # the framework's rule decided
