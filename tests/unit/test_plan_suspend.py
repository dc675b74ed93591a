"""runPolicy.suspend: everything is removed; resuming restarts the clock and the pods."""

from __future__ import annotations

import datetime as dt

from plan_fixtures import (
    NOW,
    DemoFramework,
    FakeCluster,
    condition,
    new_job,
    reasons,
    running_job,
    template,
)

from jobcontroller.core import CreateObject, DeleteObject, PlanConfig

LATER = NOW + dt.timedelta(hours=1)


def test_created_suspended_job_creates_nothing() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(run_policy={"suspend": True}))
    result = cluster.step(fw)
    assert result.actions == ()
    suspended = condition(result, "Suspended")
    assert (suspended.status, suspended.reason, suspended.message) == (
        "True",
        "DemoJobSuspended",
        "DemoJob demo is suspended.",
    )
    assert result.status is not None and result.status.start_time is None
    assert reasons(result) == ["DemoJobSuspended"]
    again = cluster.plan(fw, now=LATER)
    assert (again.actions, again.events) == ((), ())
    assert again.status is not None and again.status.to_dict() == cluster.job["status"]


def suspend_running() -> tuple[DemoFramework, FakeCluster]:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    running_job(fw, cluster)
    cluster.job["spec"]["runPolicy"]["suspend"] = True
    return fw, cluster


def test_suspending_deletes_pods_and_services_and_stops_running() -> None:
    fw, cluster = suspend_running()
    result = cluster.step(fw, now=LATER)
    deletes = sorted((a.kind, a.name) for a in result.actions if isinstance(a, DeleteObject))
    assert [k for k, _ in deletes].count("Pod") == 3
    assert [k for k, _ in deletes].count("Service") == 3
    running = condition(result, "Running")
    assert (running.status, running.reason) == ("False", "DemoJobSuspended")
    assert condition(result, "Suspended").status == "True"
    assert result.status is not None
    assert result.status.start_time == NOW  # unchanged
    assert all(r.active == 0 for r in result.status.replica_statuses.values())
    assert reasons(result) == ["DemoJobSuspended"]
    assert cluster.settle(fw, now=LATER)[-1].events == ()
    assert cluster.names("Pod") == [] and cluster.names("Service") == []


def test_suspending_ignores_clean_pod_policy_none() -> None:
    fw, cluster = suspend_running()
    cluster.job["spec"]["runPolicy"]["cleanPodPolicy"] = "None"
    assert any(isinstance(a, DeleteObject) for a in cluster.plan(fw).actions)


def test_resume_restarts_clock_and_uses_the_current_template() -> None:
    fw, cluster = suspend_running()
    cluster.settle(fw)
    cluster.job["spec"]["runPolicy"]["suspend"] = False
    cluster.job["spec"]["runPolicy"]["activeDeadlineSeconds"] = 600
    new_template = template()
    new_template["spec"]["containers"][0]["image"] = "demo:2"
    cluster.job["spec"]["demoReplicaSpecs"]["Worker"]["template"] = new_template
    result = cluster.step(fw, now=LATER)
    suspended = condition(result, "Suspended")
    assert (suspended.status, suspended.reason, suspended.message) == (
        "False",
        "DemoJobResumed",
        "DemoJob demo is resumed.",
    )
    assert result.status is not None and result.status.start_time == LATER
    assert reasons(result) == ["DemoJobResumed"]
    assert result.requeue_after == 600
    images = {
        a.name: a.body["spec"]["containers"][0]["image"]
        for a in result.actions
        if isinstance(a, CreateObject) and a.kind == "Pod"
    }
    assert images == {
        "demo-chief-0": "demo:1",
        "demo-worker-0": "demo:2",
        "demo-worker-1": "demo:2",
    }
    assert "DemoJobResumed" not in reasons(cluster.step(fw, now=LATER))


def test_suspend_removes_the_pod_group() -> None:
    fw, cluster = suspend_running()
    config = PlanConfig(gang_scheduler_name="scheduler-plugins", pod_group_available=True)
    cluster.add(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": "demo",
                "ownerReferences": [{"uid": "uid-demo", "controller": True}],
            },
        }
    )
    result = cluster.plan(fw, config=config)
    assert ("PodGroup", "demo") in [
        (a.kind, a.name) for a in result.actions if isinstance(a, DeleteObject)
    ]
    assert "JobTerminated" in reasons(result)
