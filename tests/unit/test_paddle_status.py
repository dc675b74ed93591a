"""The PaddleJob plan and status rule without a cluster: what the docs example creates, a job
that escaped admission, and v1.9's UpdateJobStatus conditions and words."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

from jobcontroller import CreateObject, Observed, PlanConfig, plan
from jobcontroller.api import JobStatus, ReplicaStatus
from paddle_operator.api import PaddleJob, default_paddlejob
from paddle_operator.controller import PaddleJobController

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
EXAMPLE = Path(__file__).parents[2] / "examples" / "paddlejob-simple-cpu.yaml"


def _example() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    raw["metadata"]["uid"] = "uid-1"
    return raw


def test_docs_example_plans_a_pod_and_a_service_per_worker() -> None:
    result = plan(PaddleJobController(), _example(), Observed(), now=NOW, config=PlanConfig())
    created = [(a.kind, a.name) for a in result.actions if isinstance(a, CreateObject)]
    names = ["paddle-simple-cpu-worker-0", "paddle-simple-cpu-worker-1"]
    assert created == [("Pod", n) for n in names] + [("Service", n) for n in names]


def test_a_job_that_escaped_admission_fails_validation_without_pods() -> None:
    raw = _example()
    raw["spec"]["paddleReplicaSpecs"]["PS"] = raw["spec"]["paddleReplicaSpecs"]["Worker"]
    result = plan(PaddleJobController(), raw, Observed(), now=NOW, config=PlanConfig())
    assert result.actions == ()
    assert result.status is not None
    failed = result.status.condition("Failed")
    assert failed is not None and failed.reason == "PaddleJobFailedValidation"
    assert 'spec.paddleReplicaSpecs[PS]: Unsupported value: "PS"' in (failed.message or "")


def _job(replicas: dict[str, int], policy: str = "OnFailure") -> PaddleJob:
    container = {"name": "paddle", "image": "x"}
    specs = {
        rtype: {
            "replicas": n,
            "restartPolicy": policy,
            "template": {"spec": {"containers": [container]}},
        }
        for rtype, n in replicas.items()
    }
    raw = {"metadata": {"name": "pd", "namespace": "ns"}, "spec": {"paddleReplicaSpecs": specs}}
    return default_paddlejob(PaddleJob.parse(raw))


def _status(job: PaddleJob, **counts: tuple[int, int, int]) -> JobStatus:
    """Apply the rule to (active, succeeded, failed) per replica type."""
    status = JobStatus(
        replica_statuses={
            rtype: ReplicaStatus(active=a, succeeded=s, failed=f)
            for rtype, (a, s, f) in counts.items()
        }
    )
    PaddleJobController().update_status(job, status, replicas={}, now=NOW)
    return status


def _true(status: JobStatus) -> dict[str, str | None]:
    return {c.type: c.message for c in status.conditions if c.status == "True"}


def test_master_decides_in_parameter_server_mode() -> None:
    job = _job({"Master": 2, "Worker": 2})
    assert _true(_status(job, Master=(2, 0, 0), Worker=(2, 0, 0))) == {
        "Running": "PaddleJob pd is running."
    }
    # One parameter server done is not enough; all of them are, whatever the workers do.
    assert "Succeeded" not in _true(_status(job, Master=(1, 1, 0), Worker=(2, 0, 0)))
    assert _true(_status(job, Master=(0, 2, 0), Worker=(2, 0, 0))) == {
        "Succeeded": "PaddleJob pd is successfully completed."
    }


def test_all_workers_decide_in_collective_mode() -> None:
    job = _job({"Worker": 3})
    assert _true(_status(job, Worker=(1, 2, 0))) == {"Running": "PaddleJob ns/pd is running."}
    assert _true(_status(job, Worker=(0, 3, 0))) == {
        "Succeeded": "PaddleJob ns/pd successfully completed."
    }


def test_a_failed_replica_restarts_or_fails_by_restart_policy() -> None:
    restarting = _status(_job({"Master": 1, "Worker": 2}), Master=(1, 0, 0), Worker=(1, 0, 1))
    assert _true(restarting)["Restarting"] == (
        "PaddleJob pd is restarting because 1 Worker replica(s) failed."
    )
    failed = _status(_job({"Worker": 2}, policy="Never"), Worker=(1, 0, 1))
    assert _true(failed)["Failed"] == "PaddleJob pd is failed because 1 Worker replica(s) failed."
    # A failed pod whose slot is filled again (running or succeeded) is no longer a failure.
    assert "Failed" not in _true(_status(_job({"Worker": 2}, "Never"), Worker=(2, 0, 1)))
