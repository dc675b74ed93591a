"""TFJob's status rule while a failed replica is being replaced: the job shows Restarting until
the replacement runs, even while other replicas keep running (the anchor let Running retire
Restarting in the very pass that restarted the pod)."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from jobcontroller.core import CreateObject, DeleteObject, Observed, Plan, PlanConfig, plan
from tf_operator.controller import TFJobController

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
Obj = dict[str, Any]


def _job() -> Obj:
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tf", "namespace": "ns", "uid": "job-uid", "generation": 1},
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {"replicas": 2, "restartPolicy": "ExitCode", "template": template}
            }
        },
    }


def _step(job: Obj, pods: dict[str, Obj]) -> Plan:
    result = plan(
        TFJobController(),
        copy.deepcopy(job),
        Observed(pods=list(pods.values())),
        now=NOW,
        config=PlanConfig(),
    )
    assert result.status is not None
    job["status"] = result.status.to_dict()
    for action in result.actions:
        if isinstance(action, CreateObject) and action.kind == "Pod":
            pod = copy.deepcopy(action.body)
            pod["metadata"]["uid"] = f"uid-{action.name}-{len(pods)}"
            pod["status"] = {"phase": "Pending"}
            pods[action.name] = pod
    return result


def _set(pod: Obj, phase: str, exit_code: int | None = None) -> None:
    state: Obj = {"running": {}} if exit_code is None else {"terminated": {"exitCode": exit_code}}
    pod["status"] = {
        "phase": phase,
        "containerStatuses": [{"name": "tensorflow", "restartCount": 0, "state": state}],
    }


def _true(job: Obj) -> set[str]:
    return {c["type"] for c in job["status"]["conditions"] if c["status"] == "True"}


def test_restarting_holds_until_the_replacement_runs() -> None:
    job: Obj = _job()
    pods: dict[str, Obj] = {}
    _step(job, pods)
    for pod in pods.values():
        _set(pod, "Running")
    _step(job, pods)
    assert "Running" in _true(job)

    _set(pods["tf-worker-1"], "Failed", exit_code=137)
    restart = _step(job, pods)
    assert [a.name for a in restart.actions if isinstance(a, DeleteObject)] == ["tf-worker-1"]
    assert _true(job) == {"Created", "Restarting"}

    del pods["tf-worker-1"]  # deleted; the next pass creates the replacement (Pending)
    _step(job, pods)
    assert pods["tf-worker-1"]["status"]["phase"] == "Pending"
    _step(job, pods)
    assert _true(job) == {"Created", "Restarting"}

    _set(pods["tf-worker-1"], "Running")
    _step(job, pods)
    assert _true(job) == {"Created", "Running"}


def test_a_failed_never_replica_fails_the_job_once_the_restart_is_over() -> None:
    """A slot under restartPolicy Never that failed is never replaced: it must not keep the job
    Restarting for ever (which also hid that replica's failure: the job never failed)."""
    job: Obj = _job()
    template = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    job["spec"]["tfReplicaSpecs"] = {
        "PS": {"replicas": 1, "restartPolicy": "Never", "template": copy.deepcopy(template)},
        "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template},
    }
    pods: dict[str, Obj] = {}
    _step(job, pods)
    for pod in pods.values():
        _set(pod, "Running")
    _step(job, pods)
    assert "Running" in _true(job)

    _set(pods["tf-worker-1"], "Failed", exit_code=137)  # evicted: recreated
    _set(pods["tf-ps-0"], "Failed", exit_code=1)  # Never: stays failed
    _step(job, pods)
    assert "Restarting" in _true(job)
    del pods["tf-worker-1"]
    _step(job, pods)
    _set(pods["tf-worker-1"], "Running")
    for _ in range(3):
        _step(job, pods)
    assert "Failed" in _true(job)
