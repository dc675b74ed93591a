"""``kfjob ui``'s pure parts: what a row and a job's sections show for the objects the API
serves (v1 kinds and TrainJob), and that everything from the cluster is escaped."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from jobcontroller.api import JobModel
from kfjob.client import job_state as sdk_job_state
from kfjob.kinds import kind_for
from kfjob.ui.html import job_row_html
from kfjob.ui.model import (
    TRAINJOB,
    V1_KINDS,
    Permission,
    conditions,
    exit_info,
    human,
    job_row,
    job_state,
    pod_row,
    replica_rows,
)
from kfjob.ui.pages import env_html, job_sections

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
PYTORCH = next(k for k in V1_KINDS if k.kind == "PyTorchJob")


def cond(type_: str, status: str = "True", when: str = "2026-01-01T11:00:00Z", **kw: str) -> Any:
    return {"type": type_, "status": status, "lastTransitionTime": when, **kw}


def pytorchjob(*conds: Any, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "mnist",
            "namespace": "team-a",
            "creationTimestamp": "2026-01-01T11:55:00Z",
        },
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": []}}},
                "Worker": {"replicas": 3, "template": {"spec": {"containers": []}}},
            }
        },
        "status": {"conditions": list(conds), **status},
    }


@pytest.mark.parametrize(
    ("conds", "state"),
    [
        ((), "Pending"),
        ((cond("Created"),), "Created"),
        ((cond("Created"), cond("Running")), "Running"),
        ((cond("Created"), cond("Running", "False"), cond("Suspended")), "Suspended"),
        ((cond("Created"), cond("Running", "False"), cond("Failed")), "Failed"),
        ((cond("Created"), cond("Running", "False"), cond("Succeeded")), "Succeeded"),
    ],
)
def test_a_v1_jobs_state_is_the_sdks(conds: tuple[Any, ...], state: str) -> None:
    job = pytorchjob(*conds)
    model: JobModel[Any] = kind_for("PyTorchJob").model.parse(job)
    assert job_state(PYTORCH, job) == sdk_job_state(model) == state


def test_a_row_sums_replicas_and_takes_restarts_given() -> None:
    job = pytorchjob(
        cond("Created"),
        cond("Running"),
        replicaStatuses={
            "Master": {"active": 1},
            "Worker": {"active": 2, "succeeded": 0, "failed": 1},
        },
    )
    row = job_row(PYTORCH, job, restarts=4)
    assert (row.kind, row.namespace, row.name, row.state) == (
        "PyTorchJob",
        "team-a",
        "mnist",
        "Running",
    )
    assert (row.active, row.succeeded, row.failed, row.restarts) == (3, 0, 1, 4)
    assert row.progress == ""  # v1 kinds report no progress
    assert row.key == "pytorchjobs/team-a/mnist"


def trainjob(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llm", "namespace": "t", "creationTimestamp": "2026-01-01T11:00:00Z"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": status,
    }


def test_a_trainjob_row_counts_its_jobs_and_shows_its_progress() -> None:
    job = trainjob(
        jobsStatus=[
            {"name": "node", "active": 2, "ready": 2, "succeeded": 0, "failed": 0, "suspended": 0},
            {"name": "init", "active": 0, "ready": 0, "succeeded": 1, "failed": 0, "suspended": 0},
        ],
        trainerStatus={"progressPercentage": 42, "estimatedRemainingSeconds": 750},
    )
    row = job_row(TRAINJOB, job)
    # No Running condition on a TrainJob: active jobs and no True condition read as Running.
    assert row.state == "Running"
    assert (row.active, row.succeeded, row.failed) == (2, 1, 0)
    assert row.progress == "42%, 12m left"
    assert [r.name for r in replica_rows(TRAINJOB, job)] == ["node", "init"]
    done = trainjob(conditions=[cond("Complete")])
    assert job_state(TRAINJOB, done) == "Complete"


NODE = {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "suspended": 0}


@pytest.mark.parametrize(
    ("conds", "active", "state"),
    [
        ((), 0, "Pending"),
        ((), 2, "Running"),  # no Running condition: its JobSet's active jobs say it
        ((cond("Suspended"),), 0, "Suspended"),
        ((cond("Suspended", "False", reason="Resumed"),), 1, "Running"),
        # Kept in place, not appended: a Complete after a resume is the state, and so is a
        # Failed listed before a Suspended that is True.
        ((cond("Suspended", "False"), cond("Complete")), 0, "Complete"),
        ((cond("Failed"), cond("Suspended")), 0, "Failed"),
        ((cond("Suspended"), cond("Complete")), 0, "Complete"),
    ],
)
def test_a_trainjobs_state_is_its_strongest_true_condition(
    conds: tuple[Any, ...], active: int, state: str
) -> None:
    job = trainjob(conditions=list(conds), jobsStatus=[{**NODE, "active": active}])
    assert job_state(TRAINJOB, job) == state
    assert job_row(TRAINJOB, job).state == state


def test_a_trainjob_without_trainer_status_shows_no_progress() -> None:
    assert job_row(TRAINJOB, trainjob()).progress == ""
    partial = trainjob(trainerStatus={"lastUpdatedTime": "2026-01-01T11:00:00Z"})
    assert job_row(TRAINJOB, partial).progress == ""
    assert job_row(TRAINJOB, trainjob(trainerStatus={"progressPercentage": 100})).progress == (
        "100%"
    )


def test_suspend_is_patched_where_each_kind_keeps_it() -> None:
    assert PYTORCH.suspend_patch(True) == {"spec": {"runPolicy": {"suspend": True}}}
    assert TRAINJOB.suspend_patch(False) == {"spec": {"suspend": False}}
    assert TRAINJOB.suspended({"spec": {"suspend": True}})
    assert not PYTORCH.suspended({"spec": {"suspend": True}})


def test_replica_rows_show_wanted_from_the_spec_and_counts_from_the_status() -> None:
    job = pytorchjob(replicaStatuses={"Worker": {"active": 3}})
    rows = {r.name: r for r in replica_rows(PYTORCH, job)}
    assert (rows["Master"].wanted, rows["Master"].active) == ("1", 0)
    assert (rows["Worker"].wanted, rows["Worker"].active) == ("3", 3)


def test_a_pod_row_has_phase_node_restarts_and_the_failed_exit() -> None:
    pod = {
        "metadata": {
            "name": "mnist-worker-1",
            "labels": {
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "1",
            },
            "creationTimestamp": "2026-01-01T11:56:00Z",
        },
        "spec": {"nodeName": "node-3", "containers": [{"name": "pytorch"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "restartCount": 2,
                    "state": {"running": {}},
                    "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
                }
            ],
        },
    }
    row = pod_row(pod)
    assert (row.replica, row.phase, row.node, row.restarts) == ("worker 1", "Running", "node-3", 2)
    assert (row.exit_code, row.reason) == ("137", "OOMKilled")
    assert row.containers == ("pytorch",)
    assert exit_info({"status": {}}) == ("", "")


def test_conditions_are_a_timeline_oldest_first() -> None:
    job = pytorchjob(
        cond("Running", when="2026-01-01T11:58:00Z"),
        cond("Created", when="2026-01-01T11:55:00Z"),
    )
    assert [c.type for c in conditions(job)] == ["Created", "Running"]


def test_human_durations_read_as_kubectls() -> None:
    assert [human(s) for s in (5, 75, 700, 7500, 200000)] == ["5s", "1m15s", "11m", "2h5m", "2d7h"]


HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_everything_from_the_cluster_is_escaped() -> None:
    job = pytorchjob(cond("Failed", reason=HOSTILE, message=HOSTILE))
    job["metadata"]["annotations"] = {"note": HOSTILE}
    pod = {
        "metadata": {"name": "mnist-master-0", "labels": {}},
        "spec": {"containers": [{"name": "pytorch", "env": [{"name": "X", "value": HOSTILE}]}]},
        "status": {"phase": "Failed", "reason": HOSTILE},
    }
    event = {
        "involvedObject": {"kind": "Pod", "name": "mnist-master-0"},
        "type": "Warning",
        "reason": HOSTILE,
        "message": HOSTILE,
        "lastTimestamp": "2026-01-01T11:59:00Z",
    }
    sections = job_sections(
        PYTORCH,
        job,
        pods=[pod],
        events=[event],
        env=env_html([pod]),
        csrf="token",
        now=NOW,
        permissions={"delete": Permission(False, HOSTILE)},
    )
    for name, html in sections.items():
        assert "<script" not in html and "<img" not in html, name
    assert "&lt;script&gt;" in sections["conditions"]
    assert "&lt;script&gt;" in sections["events"]
    assert "&lt;script&gt;" in sections["env"]
    assert "&lt;script&gt;" in sections["yaml"]
    row = job_row(PYTORCH, job)
    assert "<script" not in job_row_html(row, now=NOW)


def test_a_row_links_to_the_jobs_page_and_carries_its_filters() -> None:
    html = job_row_html(job_row(PYTORCH, pytorchjob(cond("Created"))), now=NOW)
    assert 'href="/jobs/pytorchjobs/team-a/mnist"' in html
    assert 'data-kind="PyTorchJob" data-namespace="team-a" data-state="Created"' in html
    assert '<time datetime="2026-01-01T11:55:00Z"' in html and ">5m0s</time>" in html


def test_the_summary_offers_resume_for_a_suspended_job_and_suspend_otherwise() -> None:
    running = pytorchjob(cond("Running"))
    summary = job_sections(
        PYTORCH, running, pods=[], events=[], env="", csrf="tok", now=NOW, permissions={}
    )["summary"]
    assert 'data-action="suspend"' in summary and 'data-action="resume"' not in summary
    assert 'name="csrf" value="tok"' in summary
    running["spec"]["runPolicy"] = {"suspend": True}
    summary = job_sections(
        PYTORCH, running, pods=[], events=[], env="", csrf="tok", now=NOW, permissions={}
    )["summary"]
    assert 'data-action="resume"' in summary and 'data-action="suspend"' not in summary
