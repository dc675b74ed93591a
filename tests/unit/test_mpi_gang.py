"""An MPIJob's Volcano PodGroup and pods as mpi-operator v0.8 builds them (issue 13, item 7):
the queue from the ``scheduling.volcano.sh/queue-name`` annotation (the scheduling policy's
wins, and no queue at all lets Volcano choose), the priority class from the launcher's or the
workers' template, the scheduler name forced on every pod, no task-spec annotation."""

from __future__ import annotations

import datetime as dt
from typing import Any

from jobcontroller import CreateObject, Observed, PlanConfig, plan
from mpi_operator.controller import MPIJobController

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
VOLCANO = PlanConfig(gang_scheduler_name="volcano", pod_group_available=True)


def mpijob(
    *, annotations: dict[str, str] | None = None, policy: dict[str, Any] | None = None
) -> dict[str, Any]:
    def template(priority: str | None, scheduler: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{"name": "mpi", "image": "mpi:1"}]}
        if priority:
            spec["priorityClassName"] = priority
        if scheduler:
            spec["schedulerName"] = scheduler
        return {"spec": spec}

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": "pi",
            "namespace": "ns",
            "uid": "uid-pi",
            "annotations": annotations or {},
        },
        "spec": {
            "runPolicy": {"schedulingPolicy": policy} if policy else {},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template(None)},
                "Worker": {"replicas": 2, "template": template("high", scheduler="other")},
            },
        },
    }


def _group(raw: dict[str, Any]) -> dict[str, Any]:
    result = plan(MPIJobController(config=VOLCANO), raw, Observed(), now=NOW, config=VOLCANO)
    groups = [
        a.body for a in result.actions if isinstance(a, CreateObject) and a.kind == "PodGroup"
    ]
    assert len(groups) == 1
    return groups[0]


def test_queue_from_the_annotation_and_priority_from_the_templates() -> None:
    group = _group(mpijob(annotations={"scheduling.volcano.sh/queue-name": "team-a"}))
    assert group["spec"]["queue"] == "team-a"
    assert group["spec"]["priorityClassName"] == "high"  # the launcher names none
    assert group["spec"]["minMember"] == 3


def test_the_scheduling_policy_wins_and_no_queue_is_volcanos_choice() -> None:
    policy = {"queue": "team-b", "priorityClass": "urgent"}
    group = _group(mpijob(annotations={"scheduling.volcano.sh/queue-name": "a"}, policy=policy))
    assert (group["spec"]["queue"], group["spec"]["priorityClassName"]) == ("team-b", "urgent")
    assert "queue" not in _group(mpijob())["spec"]


def test_pods_get_volcano_whatever_scheduler_their_template_names() -> None:
    controller = MPIJobController(config=VOLCANO)
    raw = mpijob()
    group = _group(raw)
    observed = Observed(
        owned={"PodGroup": [{**group, "status": {"phase": "Running"}}]},
    )
    result = plan(controller, raw, observed, now=NOW, config=VOLCANO)
    pods = [a.body for a in result.actions if isinstance(a, CreateObject) and a.kind == "Pod"]
    assert len(pods) == 2
    # Overwritten, as mpi-operator does: no "kept" warning.
    assert "SetPodTemplateSchedulerName" not in [e.reason for e in result.events]
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "volcano"
        annotations = pod["metadata"]["annotations"]
        assert annotations["scheduling.k8s.io/group-name"] == "pi"
        assert "volcano.sh/task-spec" not in annotations
