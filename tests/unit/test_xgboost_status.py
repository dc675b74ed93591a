"""The XGBoostJob success and failure rule (v1.9's UpdateJobStatus): the Master decides; a failed
replica fails the job under Never and restarts it otherwise."""

from __future__ import annotations

import datetime as dt

from jobcontroller import set_condition
from jobcontroller.api import JobStatus, ReplicaStatus
from xgboost_operator.api import XGBoostJob, default_xgboostjob
from xgboost_operator.controller import XGBoostJobController

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(seconds=30)


def _job(*, master: str = "Never", worker: str = "ExitCode", workers: int = 2) -> XGBoostJob:
    def replica(n: int, policy: str) -> dict[str, object]:
        container = {"name": "xgboost", "image": "x"}
        return {
            "replicas": n,
            "restartPolicy": policy,
            "template": {"spec": {"containers": [container]}},
        }

    raw = {
        "metadata": {"name": "xgb", "namespace": "ns"},
        "spec": {
            "xgbReplicaSpecs": {"Master": replica(1, master), "Worker": replica(workers, worker)}
        },
    }
    return default_xgboostjob(XGBoostJob.parse(raw))


def _counts(**counts: tuple[int, int, int]) -> JobStatus:
    return JobStatus(
        replica_statuses={
            rtype: ReplicaStatus(active=a, succeeded=s, failed=f)
            for rtype, (a, s, f) in counts.items()
        }
    )


def _apply(job: XGBoostJob, status: JobStatus, now: dt.datetime = NOW) -> JobStatus:
    XGBoostJobController().update_status(job, status, replicas={}, now=now)
    return status


def _true(status: JobStatus) -> list[str]:
    return [c.type for c in status.conditions if c.status == "True"]


def test_master_running_makes_the_job_running_with_v19s_words() -> None:
    status = _apply(_job(), _counts(Master=(1, 0, 0), Worker=(0, 0, 0)))
    [running] = status.conditions
    assert (running.type, running.status, running.reason, running.message) == (
        "Running",
        "True",
        "XGBoostJobRunning",
        "XGBoostJob xgb is running.",
    )


def test_workers_running_alone_do_not_make_the_job_running() -> None:
    assert _apply(_job(), _counts(Master=(0, 0, 0), Worker=(2, 0, 0))).conditions == []


def test_master_success_decides_even_with_workers_running_or_failed() -> None:
    status = _apply(_job(worker="Never"), _counts(Master=(0, 1, 0), Worker=(1, 0, 1)))
    assert _true(status) == ["Succeeded"]
    succeeded = status.conditions[-1]
    assert (succeeded.reason, succeeded.message) == (
        "XGBoostJobSucceeded",
        "XGBoostJob xgb is successfully completed.",
    )
    # As v1.9, Running is set on the way and turned False by success.
    assert [(c.type, c.status) for c in status.conditions] == [
        ("Running", "False"),
        ("Succeeded", "True"),
    ]


def test_workers_succeeding_do_not_finish_the_job() -> None:
    assert _true(_apply(_job(), _counts(Master=(1, 0, 0), Worker=(0, 2, 0)))) == ["Running"]


def test_a_failed_replica_under_never_fails_the_job() -> None:
    status = _apply(_job(worker="Never"), _counts(Master=(1, 0, 0), Worker=(1, 0, 1)))
    assert _true(status) == ["Failed"]
    failed = status.conditions[-1]
    assert (failed.reason, failed.message) == (
        "XGBoostJobFailed",
        "XGBoostJob xgb is failed because 1 Worker replica(s) failed.",
    )
    master = _apply(_job(), _counts(Master=(0, 0, 1), Worker=(2, 0, 0)))
    assert master.conditions[-1].message == (
        "XGBoostJob xgb is failed because 1 Master replica(s) failed."
    )


def test_a_failed_worker_under_exit_code_restarts_the_job_with_v19s_words() -> None:
    job = _job(worker="ExitCode")
    status = _counts(Master=(1, 0, 0), Worker=(1, 0, 1))
    # What the base has just done: delete the failed pod and say so in its own words.
    set_condition(
        status,
        cond_type="Restarting",
        reason="XGBoostJobRestarting",
        message="job xgb is restarting because Worker replica(s) failed.",
        now=NOW,
    )
    _apply(job, status)
    assert _true(status) == ["Restarting"]
    restarting = status.conditions[-1]
    assert restarting.message == "XGBoostJob xgb is restarting because 1 Worker replica(s) failed."
    assert restarting.last_transition_time == NOW

    # Planned again later while the failed pod is still going: nothing moves, nothing flips.
    before = status.model_copy(deep=True)
    assert _apply(job, status, LATER) == before


def test_on_failure_restarts_rather_than_fails() -> None:
    status = _apply(_job(worker="OnFailure"), _counts(Master=(1, 0, 0), Worker=(1, 0, 1)))
    assert _true(status) == ["Restarting"]


def test_running_again_once_the_failed_pod_is_gone() -> None:
    job = _job()
    status = _apply(job, _counts(Master=(1, 0, 0), Worker=(1, 0, 1)))
    status.replica_statuses["Worker"] = ReplicaStatus(active=2)
    _apply(job, status, LATER)
    assert _true(status) == ["Running"]
    assert "Restarting" not in [c.type for c in status.conditions]
