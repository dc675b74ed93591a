"""What ``kfjob get``/``wait``/``describe`` print for a v1 job whose pods report progress: the
same bar as a TrainJob's, from the v1 job's ``status.trainerStatus``; nothing extra for one
that reported none (as before the field existed)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from kfjob import describe as describe_module
from kfjob.tables import jobs_table, progress_line
from pytorch_operator.api import PyTorchJob

NOW = "2026-01-01T00:00:00Z"
REPORTED = {
    "progressPercentage": 45,
    "estimatedRemainingSeconds": 130,
    "metrics": [{"name": "loss", "value": "0.21"}],
    "lastUpdatedTime": NOW,
}


def pytorchjob(name: str, trainer_status: dict[str, Any] | None = None) -> PyTorchJob:
    status: dict[str, Any] = {
        "conditions": [
            {"type": "Running", "status": "True", "reason": "R", "lastTransitionTime": NOW}
        ],
        "replicaStatuses": {"Master": {"active": 1}},
    }
    if trainer_status is not None:
        status["trainerStatus"] = trainer_status
    template = {"spec": {"containers": [{"name": "pytorch", "image": "torch"}]}}
    return PyTorchJob.parse(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": NOW},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template}}},
            "status": status,
        }
    )


def render(table: Any) -> list[str]:
    buf = io.StringIO()
    Console(file=buf, width=1000, no_color=True).print(table)
    return buf.getvalue().splitlines()


def test_get_shows_a_progress_column_for_a_v1_job_that_reported() -> None:
    header, *rows = render(jobs_table([pytorchjob("quiet")], namespaces=False))
    assert "PROGRESS" not in header and "[" not in rows[0]
    header, *rows = render(
        jobs_table([pytorchjob("quiet"), pytorchjob("pt", REPORTED)], namespaces=False)
    )
    assert header.split()[-1] == "PROGRESS"
    assert rows[1].split()[:3] == ["PyTorchJob", "pt", "Running"]
    assert rows[1].endswith("[#########-----------] 45%  ETA 2m10s  loss=0.21")
    assert "[" not in rows[0]


def test_wait_line_carries_the_bar_only_when_reported() -> None:
    assert progress_line(pytorchjob("pt"), 5) == "[   5s] PyTorchJob pt Running  Master 1/0/0"
    assert progress_line(pytorchjob("pt", REPORTED), 5) == (
        "[   5s] PyTorchJob pt Running  Master 1/0/0  "
        "[#########-----------] 45%  ETA 2m10s  loss=0.21"
    )


class _Client:
    def __init__(self, job: PyTorchJob) -> None:
        self.job = job

    def get(self, name: str, *, job_kind: str) -> PyTorchJob:
        return self.job

    def get_pods(self, name: str, namespace: str) -> list[dict[str, Any]]:
        return []

    def events(self, name: str, namespace: str, kind: str) -> list[dict[str, Any]]:
        return []


def test_describe_shows_the_progress_and_every_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.StringIO()
    monkeypatch.setattr(
        describe_module, "out_console", lambda: Console(file=buf, width=200, no_color=True)
    )
    client = _Client(pytorchjob("pt", REPORTED))
    describe_module.describe(client, kind="PyTorchJob", name="pt", events=5)  # type: ignore[arg-type]  # the three reads describe makes
    out = buf.getvalue()
    assert "Progress:" in out and "[#########-----------] 45%  ETA 2m10s" in out
    assert "loss=0.21" in out and "Reported:" in out

    buf.truncate(0)
    describe_module.describe(_Client(pytorchjob("pt")), kind="PyTorchJob", name="pt", events=5)  # type: ignore[arg-type]  # the same stand-in
    assert "Progress:" not in buf.getvalue()
