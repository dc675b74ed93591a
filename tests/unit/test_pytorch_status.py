"""The PyTorchJob success and failure rule, and the selector behind the scale subresource."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from jobcontroller.api import JobStatus, ReplicaStatus
from pytorch_operator.api import PyTorchJob, default_pytorchjob
from pytorch_operator.controller import PyTorchJobController

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _job(
    replicas: dict[str, int], *, policy: str = "OnFailure", elastic: bool = False
) -> PyTorchJob:
    specs = {
        rtype: {
            "replicas": n,
            "restartPolicy": policy,
            "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}},
        }
        for rtype, n in replicas.items()
    }
    spec: dict[str, Any] = {"pytorchReplicaSpecs": specs}
    if elastic:
        spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 4}
    raw = {"metadata": {"name": "pt", "namespace": "ns"}, "spec": spec}
    return default_pytorchjob(PyTorchJob.parse(raw))


def _status(job: PyTorchJob, **counts: tuple[int, int, int]) -> JobStatus:
    """Apply the rule to (active, succeeded, failed) per replica type; return the status."""
    status = JobStatus(
        replica_statuses={
            rtype: ReplicaStatus(active=a, succeeded=s, failed=f)
            for rtype, (a, s, f) in counts.items()
        }
    )
    PyTorchJobController().update_status(job, status, replicas={}, now=NOW)
    return status


def _true(status: JobStatus) -> list[str]:
    return [c.type for c in status.conditions if c.status == "True"]


def test_master_running_makes_the_job_running() -> None:
    job = _job({"Master": 1, "Worker": 2})
    status = _status(job, Master=(1, 0, 0), Worker=(0, 0, 0))
    assert _true(status) == ["Running"]
    assert status.conditions[0].reason == "PyTorchJobRunning"
    # v1.9's words: with a Master, the name alone.
    assert status.conditions[0].message == "PyTorchJob pt is running."


def test_master_success_decides_even_with_workers_still_running() -> None:
    status = _status(_job({"Master": 1, "Worker": 2}), Master=(0, 1, 0), Worker=(2, 0, 0))
    assert _true(status) == ["Succeeded"]
    assert status.conditions[-1].message == "PyTorchJob pt is successfully completed."


def test_workers_alone_do_not_finish_a_job_with_a_master() -> None:
    status = _status(_job({"Master": 1, "Worker": 2}), Master=(0, 0, 0), Worker=(0, 2, 0))
    assert _true(status) == []


def test_without_master_all_workers_must_succeed() -> None:
    job = _job({"Worker": 3})
    running = _status(job, Worker=(2, 1, 0))
    assert _true(running) == ["Running"]
    # Without a Master, v1.9 names the job with its namespace.
    assert running.conditions[-1].message == "PyTorchJob ns/pt is running."
    done = _status(job, Worker=(0, 3, 0))
    assert _true(done) == ["Succeeded"]
    assert done.conditions[-1].message == "PyTorchJob ns/pt successfully completed."


def test_elastic_without_master_succeeds_when_any_worker_succeeds() -> None:
    assert _true(_status(_job({"Worker": 3}, elastic=True), Worker=(2, 1, 0))) == ["Succeeded"]


@pytest.mark.parametrize("rtype", ["Master", "Worker"])
def test_a_failed_replica_fails_the_job_under_never(rtype: str) -> None:
    job = _job({"Master": 1, "Worker": 2}, policy="Never")
    counts = {"Master": (1, 0, 0), "Worker": (2, 0, 0)}
    active, _, _ = counts[rtype]
    counts[rtype] = (active - 1, 0, 1)
    status = _status(job, **counts)
    failed = status.condition("Failed")
    assert failed is not None and failed.status == "True"
    assert failed.reason == "PyTorchJobFailed"
    assert failed.message == f"PyTorchJob pt is failed because 1 {rtype} replica(s) failed."


@pytest.mark.parametrize("policy", ["OnFailure", "Always", "ExitCode"])
def test_failed_replicas_being_recreated_show_restarting_even_with_the_master_running(
    policy: str,
) -> None:
    job = _job({"Master": 1, "Worker": 2}, policy=policy)
    status = _status(job, Master=(1, 0, 0), Worker=(1, 0, 1))
    assert _true(status) == ["Restarting"]
    assert status.conditions[-1].message == (
        "PyTorchJob pt is restarting because 1 Worker replica(s) failed."
    )


def test_running_replaces_restarting_once_the_failed_pod_is_gone() -> None:
    job = _job({"Master": 1, "Worker": 2})
    status = _status(job, Master=(1, 0, 0), Worker=(1, 0, 1))
    assert _true(status) == ["Restarting"]
    status.replica_statuses["Worker"] = ReplicaStatus(active=2)
    PyTorchJobController().update_status(job, status, replicas={}, now=NOW)
    assert _true(status) == ["Running"]
    assert status.condition("Restarting") is None


def test_every_replica_status_gets_its_pod_selector() -> None:
    status = _status(_job({"Master": 1, "Worker": 2}), Master=(1, 0, 0), Worker=(2, 0, 0))
    assert status.replica_statuses["Worker"].selector == (
        "training.kubeflow.org/job-name=pt,"
        "training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )
    assert status.replica_statuses["Master"].selector is not None
    assert status.replica_statuses["Master"].selector.endswith("replica-type=master")
