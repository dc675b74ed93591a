"""activeDeadlineSeconds and ttlSecondsAfterFinished: exact timers (#3358, #1533)."""

from __future__ import annotations

import datetime as dt

import pytest
from plan_fixtures import NOW, DemoFramework, FakeCluster, condition, new_job, running_job

from jobcontroller.core import DeleteJob, DeleteObject, JobMetric

DEADLINE_MESSAGE = "Job demo has failed because it was active longer than specified deadline"


def at(seconds: float) -> dt.datetime:
    return NOW + dt.timedelta(seconds=seconds)


def deadline_job(seconds: int, **run_policy: object) -> tuple[DemoFramework, FakeCluster]:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(run_policy={"activeDeadlineSeconds": seconds, **run_policy}))
    running_job(fw, cluster)
    return fw, cluster


def test_deadline_arms_a_timer_for_the_remaining_time() -> None:
    fw, cluster = deadline_job(600)
    assert cluster.plan(fw).requeue_after == 600
    assert cluster.plan(fw, now=at(100.5)).requeue_after == pytest.approx(499.5)


def test_deadline_reached_fails_the_job() -> None:
    fw, cluster = deadline_job(600)
    result = cluster.step(fw, now=at(600))
    failed = condition(result, "Failed")
    assert (failed.reason, failed.message) == ("DemoJobFailed", DEADLINE_MESSAGE)
    assert result.metrics == (JobMetric.FAILED,)
    assert result.status is not None
    assert result.status.completion_time == at(600)
    assert result.requeue_after is None
    assert cluster.plan(fw, now=at(700)).actions == ()


def test_no_deadline_no_timer() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    running_job(fw, cluster)
    assert cluster.plan(fw).requeue_after is None


def finished_job(ttl: int) -> tuple[DemoFramework, FakeCluster]:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(run_policy={"ttlSecondsAfterFinished": ttl}))
    running_job(fw, cluster)
    cluster.set_pod("Chief", 0, "Succeeded", exit_code=0)
    cluster.step(fw)  # completionTime = NOW
    return fw, cluster


def test_ttl_timer_then_job_deletion() -> None:
    fw, cluster = finished_job(60)
    waiting = cluster.plan(fw, now=at(30))
    assert waiting.requeue_after == 30
    assert not [a for a in waiting.actions if isinstance(a, DeleteJob)]
    expired = cluster.plan(fw, now=at(60))
    assert [a for a in expired.actions if isinstance(a, DeleteJob)] == [DeleteJob()]
    assert expired.metrics == (JobMetric.DELETED,)
    assert expired.requeue_after is None


def test_ttl_zero_deletes_in_the_finishing_plan() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(run_policy={"ttlSecondsAfterFinished": 0}))
    running_job(fw, cluster)
    cluster.set_pod("Chief", 0, "Succeeded", exit_code=0)
    result = cluster.plan(fw)
    assert DeleteJob() in result.actions
    assert set(result.metrics) == {JobMetric.SUCCESSFUL, JobMetric.DELETED}


def test_deadline_failure_starts_the_ttl_clock() -> None:
    fw, cluster = deadline_job(600, ttlSecondsAfterFinished=100)
    result = cluster.step(fw, now=at(600))
    assert condition(result, "Failed") is not None
    assert result.requeue_after == 100
    assert DeleteJob() in cluster.plan(fw, now=at(700)).actions


def test_finished_job_without_completion_time_gets_one() -> None:
    fw = DemoFramework()
    status = {
        "conditions": [
            {"type": "Succeeded", "status": "True", "reason": "DemoJobSucceeded"},
        ]
    }
    cluster = FakeCluster(new_job(run_policy={"ttlSecondsAfterFinished": 10}, status=status))
    result = cluster.plan(fw)
    assert result.status is not None
    assert result.status.completion_time == NOW
    assert result.requeue_after == 10
    assert not [a for a in result.actions if isinstance(a, DeleteObject)]
