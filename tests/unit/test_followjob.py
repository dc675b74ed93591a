"""The base's rule for a job whose state follows a child batch Job (core/followjob.py): the
Job's counts, its verdict with its reason, the pod replicas counted zero once it is done."""

from __future__ import annotations

import datetime as dt
from typing import Any

from jobcontroller import Event, Observed, batch_job_child
from jobcontroller.api import JobStatus, ReplicaStatus
from jobcontroller.core.followjob import follow_batch_jobs
from mpi_operator.api import MPIJob, default_mpijob

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
SUCCEEDED = JobStatus.model_validate(
    {"conditions": [{"type": "Succeeded", "status": "True", "reason": "Done"}]}
)


def job(**run_policy: Any) -> MPIJob:
    template = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
    raw = {
        "metadata": {"name": "pi", "namespace": "ns", "uid": "u"},
        "spec": {
            "runPolicy": run_policy,
            "mpiReplicaSpecs": {
                "Launcher": {"template": template},
                "Worker": {"replicas": 2, "template": template},
            },
        },
    }
    return default_mpijob(MPIJob.parse(raw))


def launcher_obj(*conditions: dict[str, str], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "pi-launcher", "uid": "j"},
        "spec": {},
        "status": {"conditions": list(conditions), **status},
    }


def pod(phase: str, created: str, **status: str) -> dict[str, Any]:
    return {"metadata": {"creationTimestamp": created}, "status": {"phase": phase, **status}}


def follow(
    status: JobStatus,
    launcher: dict[str, Any],
    pods: list[dict[str, Any]] | None = None,
    *,
    mpijob: MPIJob | None = None,
    decides: bool = True,
) -> list[Event]:
    mpijob = mpijob or job()
    observed = Observed(
        owned={"Job": [launcher]},
        controlled_by=lambda kind, uid: (pods or []) if (kind, uid) == ("Pod", "j") else [],
    )
    child = batch_job_child(
        mpijob,
        observed,
        status,
        name="pi-launcher",
        spec={},
        rtype="Launcher",
        decides=decides,
    )
    return follow_batch_jobs(mpijob, status, [child], observed, pod_rtypes=["Worker"], now=NOW)


def test_running_launcher_counts_running_pods_only() -> None:
    status = JobStatus()
    pods = [pod("Running", "t1"), pod("Pending", "t2")]
    assert follow(status, launcher_obj(active=2), pods) == []
    assert status.replica_statuses["Launcher"].active == 1
    assert status.conditions == []


def test_complete_launcher_succeeds_the_job_at_its_completion_time() -> None:
    status = JobStatus()
    status.replica_statuses["Worker"] = ReplicaStatus(active=2)
    launcher = launcher_obj(
        {"type": "Complete", "status": "True"}, completionTime="2024-01-01T11:59:00Z", succeeded=1
    )
    events = follow(status, launcher)
    assert [e.reason for e in events] == ["MPIJobSucceeded"]
    succeeded = status.condition("Succeeded")
    assert succeeded is not None and succeeded.message == "MPIJob ns/pi successfully completed."
    assert status.completion_time == dt.datetime(2024, 1, 1, 11, 59, tzinfo=dt.UTC)
    counts = status.replica_statuses["Launcher"]
    assert (counts.active, counts.succeeded) == (0, 1)
    # The workers never exit; once the launcher is done they count nowhere.
    assert status.replica_statuses["Worker"] == ReplicaStatus()
    # Planned again on the result, nothing more happens (no second event).
    assert follow(status, launcher) == []


def test_backoff_limit_failure_names_the_last_failed_pod() -> None:
    status = JobStatus()
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit",
    }
    pods = [
        pod("Failed", "2024-01-01T11:00:00Z", reason="OOMKilled", message="first"),
        pod("Failed", "2024-01-01T11:30:00Z", reason="Evicted", message="node pressure"),
    ]
    events = follow(status, launcher_obj(failed, failed=2), pods)
    cond = status.condition("Failed")
    assert cond is not None and cond.reason == "BackoffLimitExceeded/Evicted"
    assert cond.message == "Job has reached the specified backoff limit: node pressure"
    assert [(e.type, e.reason) for e in events] == [("Warning", "BackoffLimitExceeded/Evicted")]
    assert status.replica_statuses["Launcher"].failed == 2 and status.completion_time == NOW


def test_failure_without_pod_details_keeps_the_jobs_reason() -> None:
    status = JobStatus()
    failed = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "x"}
    follow(status, launcher_obj(failed))
    cond = status.condition("Failed")
    assert cond is not None and (cond.reason, cond.message) == ("DeadlineExceeded", "x")


def test_failure_without_reason_or_message_uses_the_kinds_words() -> None:
    status = JobStatus()
    follow(status, launcher_obj({"type": "Failed", "status": "True"}))
    cond = status.condition("Failed")
    assert cond is not None
    assert (cond.reason, cond.message) == ("MPIJobFailed", "MPIJob ns/pi has failed")


def test_long_failure_messages_are_truncated() -> None:
    status = JobStatus()
    failed = {"type": "Failed", "status": "True", "reason": "R", "message": "m" * 2000}
    follow(status, launcher_obj(failed))
    cond = status.condition("Failed")
    assert cond is not None and cond.message is not None
    assert len(cond.message) == 1024 and cond.message.endswith("...")


def test_suspended_job_only_counts() -> None:
    status = JobStatus()
    done = launcher_obj({"type": "Complete", "status": "True"})
    assert follow(status, done, mpijob=job(suspend=True)) == []
    assert status.conditions == [] and status.replica_statuses["Launcher"].succeeded == 1


def test_a_finished_job_keeps_the_launcher_counts_it_last_wrote() -> None:
    status = SUCCEEDED.model_copy(deep=True)
    status.replica_statuses["Launcher"] = ReplicaStatus(active=1)
    assert follow(status, launcher_obj(active=0), [pod("Running", "t")]) == []
    assert status.replica_statuses["Launcher"] == ReplicaStatus(active=1)


def test_a_child_job_that_does_not_decide_is_left_to_the_framework() -> None:
    status = JobStatus()
    done = launcher_obj({"type": "Complete", "status": "True"})
    assert follow(status, done, decides=False) == []
    assert status.conditions == [] and "Launcher" not in status.replica_statuses
