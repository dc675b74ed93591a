"""The JAXJob success and failure rule (v1.9's UpdateJobStatus), with its exact words."""

from __future__ import annotations

import datetime as dt

import pytest

from jax_operator.api import JAXJob, default_jaxjob
from jax_operator.controller import JAXJobController
from jobcontroller.api import JobStatus, ReplicaStatus

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _status(policy: str, active: int, succeeded: int, failed: int) -> JobStatus:
    """Apply the rule to a two-worker job with these Worker counts."""
    worker = {
        "replicas": 2,
        "restartPolicy": policy,
        "template": {"spec": {"containers": [{"name": "jax", "image": "x"}]}},
    }
    raw = {
        "metadata": {"name": "jx", "namespace": "ns"},
        "spec": {"jaxReplicaSpecs": {"Worker": worker}},
    }
    job = default_jaxjob(JAXJob.parse(raw))
    status = JobStatus(
        replica_statuses={
            "Worker": ReplicaStatus(active=active, succeeded=succeeded, failed=failed)
        }
    )
    JAXJobController().update_status(job, status, replicas={}, now=NOW)
    return status


def _true(status: JobStatus) -> list[tuple[str, str | None, str | None]]:
    return [(c.type, c.reason, c.message) for c in status.conditions if c.status == "True"]


@pytest.mark.parametrize(
    ("policy", "counts", "expected"),
    [
        ("Never", (2, 0, 0), [("Running", "JAXJobRunning", "JAXJob ns/jx is running.")]),
        # Worker 0, the coordinator, finishing first decides nothing.
        ("Never", (1, 1, 0), [("Running", "JAXJobRunning", "JAXJob ns/jx is running.")]),
        (
            "Never",
            (0, 2, 0),
            [("Succeeded", "JAXJobSucceeded", "JAXJob ns/jx successfully completed.")],
        ),
        (
            "Never",
            (1, 0, 1),
            [("Failed", "JAXJobFailed", "JAXJob jx is failed because 1 Worker replica(s) failed.")],
        ),
        (
            "OnFailure",
            (0, 1, 1),
            [
                (
                    "Restarting",
                    "JAXJobRestarting",
                    "JAXJob jx is restarting because 1 Worker replica(s) failed.",
                )
            ],
        ),
        # A failed pod already replaced (counted beside its running successor): no verdict.
        ("OnFailure", (2, 0, 1), [("Running", "JAXJobRunning", "JAXJob ns/jx is running.")]),
    ],
)
def test_rule(policy: str, counts: tuple[int, int, int], expected: list[object]) -> None:
    assert _true(_status(policy, *counts)) == expected


def test_the_scale_selector_is_v19s_label_selector() -> None:
    status = _status("Never", 2, 0, 0)
    assert status.replica_statuses["Worker"].selector == (
        "training.kubeflow.org/job-name=jx,"
        "training.kubeflow.org/operator-name=jaxjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )
