"""Gang scheduling: the PodGroup, pod decoration, Volcano's hold, clean-up."""

from __future__ import annotations

import datetime as dt
from typing import Any

from plan_fixtures import (
    NOW,
    DemoFramework,
    FakeCluster,
    new_job,
    reasons,
    running_job,
    template,
)

from jobcontroller.core import CreateObject, DeleteObject, PatchObject, Plan, PlanConfig

VOLCANO = PlanConfig(gang_scheduler_name="volcano", pod_group_available=True)
PLUGINS = PlanConfig(gang_scheduler_name="scheduler-plugins", pod_group_available=True)


def created(result: Plan, kind: str) -> dict[str, CreateObject]:
    return {a.name: a for a in result.actions if isinstance(a, CreateObject) and a.kind == kind}


def resourced_job() -> dict[str, Any]:
    t = template(resources={"requests": {"cpu": "1", "memory": "2Gi"}})
    return new_job(templates={"Chief": t, "Worker": t})


def test_scheduler_plugins_creates_group_and_pods_together() -> None:
    result = FakeCluster(resourced_job()).plan(DemoFramework(), config=PLUGINS)
    group = created(result, "PodGroup")["demo"].body
    assert group["spec"] == {"minMember": 3, "minResources": {"cpu": "3", "memory": "6Gi"}}
    pods = created(result, "Pod")
    assert len(pods) == 3
    pod = pods["demo-worker-0"].body
    assert pod["spec"]["schedulerName"] == "scheduler-plugins"
    assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "demo"


def test_gang_off_when_the_crd_is_missing() -> None:
    config = PlanConfig(gang_scheduler_name="volcano", pod_group_available=False)
    result = FakeCluster(new_job()).plan(DemoFramework(), config=config)
    assert "PodGroup" not in {a.kind for a in result.actions if isinstance(a, CreateObject)}
    assert len(created(result, "Pod")) == 3


def test_volcano_holds_pods_until_the_group_is_admitted() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    first = cluster.step(fw, config=VOLCANO)
    assert len(first.actions) == 1
    assert list(created(first, "PodGroup")) == ["demo"]
    assert first.requeue_after is None
    assert first.status is not None and first.status.condition("Created") is not None
    assert fw.status_calls == 0
    # As v1.9, the hold stamps lastReconcileTime; once, not on every pass.
    assert first.status.last_reconcile_time == NOW
    cluster.get("PodGroup", "demo")["status"] = {"phase": "Pending"}
    held = cluster.plan(fw, config=VOLCANO, now=NOW + dt.timedelta(seconds=30))
    assert held.actions == ()
    assert held.status is not None and held.status.last_reconcile_time == NOW
    cluster.get("PodGroup", "demo")["status"] = {"phase": "Inqueue"}
    pods = created(cluster.plan(fw, config=VOLCANO), "Pod")
    assert len(pods) == 3
    annotations = pods["demo-worker-1"].body["metadata"]["annotations"]
    assert annotations["scheduling.k8s.io/group-name"] == "demo"
    assert annotations["volcano.sh/task-spec"] == "worker"
    assert pods["demo-worker-1"].body["spec"]["schedulerName"] == "volcano"


def test_changed_spec_patches_the_group_once() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    cluster.settle(fw, config=PLUGINS)
    cluster.job["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 1}
    result = cluster.step(fw, config=PLUGINS)
    patches = [a for a in result.actions if isinstance(a, PatchObject)]
    assert [(p.kind, p.name, p.patch) for p in patches] == [
        ("PodGroup", "demo", {"spec": {"minMember": 1}})
    ]
    assert cluster.plan(fw, config=PLUGINS).actions == ()


def test_user_scheduler_is_kept_with_a_warning() -> None:
    job = new_job(templates={"Worker": template(schedulerName="my-scheduler")})
    result = FakeCluster(job).plan(DemoFramework(), config=PLUGINS)
    assert created(result, "Pod")["demo-worker-0"].body["spec"]["schedulerName"] == "my-scheduler"
    assert reasons(result).count("SetPodTemplateSchedulerName") == 1


def test_group_deleted_when_the_job_finishes() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    running_job(fw, cluster, config=PLUGINS)
    cluster.set_pod("Chief", 0, "Succeeded", exit_code=0)
    result = cluster.step(fw, config=PLUGINS)
    assert [(a.kind, a.name) for a in result.actions if isinstance(a, DeleteObject)] == [
        ("PodGroup", "demo")
    ]
    assert "JobTerminated" in reasons(result)
    assert cluster.plan(fw, config=PLUGINS).actions == ()


def test_group_carries_the_job_name_label_the_informers_select_on() -> None:
    """Without it the operator's label-filtered PodGroup informer never sees the group: under
    Volcano the pods then wait for an admission the operator cannot observe."""
    for config in (VOLCANO, PLUGINS):
        result = FakeCluster(resourced_job()).plan(DemoFramework(), config=config)
        group = created(result, "PodGroup")["demo"].body
        assert group["metadata"]["labels"] == {"training.kubeflow.org/job-name": "demo"}
