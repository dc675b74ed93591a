"""cleanPodPolicy once a job has finished, on success and on every failure path (#3419)."""

from __future__ import annotations

import datetime as dt

import pytest
from plan_fixtures import NOW, DemoFramework, FakeCluster, new_job, running_job

from jobcontroller.core import DeleteObject, Plan

ALL = ["demo-chief-0", "demo-worker-0", "demo-worker-1"]


def deleted(result: Plan) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"Pod": [], "Service": []}
    for action in result.actions:
        if isinstance(action, DeleteObject):
            out[action.kind].append(action.name)
    return {kind: sorted(names) for kind, names in out.items()}


def succeed(policy: str) -> tuple[DemoFramework, FakeCluster, Plan]:
    """Chief succeeded, worker 0 running, worker 1 pending."""
    fw = DemoFramework()
    cluster = FakeCluster(new_job(run_policy={"cleanPodPolicy": policy}))
    running_job(fw, cluster)
    cluster.set_pod("Chief", 0, "Succeeded", exit_code=0)
    cluster.set_pod("Worker", 1, "Pending")
    return fw, cluster, cluster.step(fw)


def test_success_policy_none_deletes_nothing() -> None:
    _, _, result = succeed("None")
    assert deleted(result) == {"Pod": [], "Service": []}


def test_success_policy_running_deletes_running_and_pending_with_services() -> None:
    _, _, result = succeed("Running")
    assert deleted(result) == {
        "Pod": ["demo-worker-0", "demo-worker-1"],
        "Service": ["demo-worker-0", "demo-worker-1"],
    }


def test_success_policy_all_deletes_everything() -> None:
    _, _, result = succeed("All")
    assert deleted(result) == {"Pod": ALL, "Service": ALL}


@pytest.mark.parametrize("policy", ["None", "Running", "All"])
def test_cleanup_converges(policy: str) -> None:
    fw, cluster, _ = succeed(policy)
    assert cluster.plan(fw).actions == ()


def fail_by_deadline(policy: str) -> Plan:
    fw = DemoFramework()
    run_policy = {"cleanPodPolicy": policy, "activeDeadlineSeconds": 60}
    cluster = FakeCluster(new_job(run_policy=run_policy))
    running_job(fw, cluster)
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    return cluster.plan(fw, now=NOW + dt.timedelta(seconds=60))


def test_failure_path_honours_policy_none() -> None:
    result = fail_by_deadline("None")
    assert result.status is not None and result.status.is_finished()
    assert deleted(result) == {"Pod": [], "Service": []}


def test_failure_path_policy_running_keeps_the_failed_pod() -> None:
    result = fail_by_deadline("Running")
    assert deleted(result) == {
        "Pod": ["demo-chief-0", "demo-worker-0"],
        "Service": ["demo-chief-0", "demo-worker-0"],
    }


def test_failure_path_policy_all() -> None:
    assert deleted(fail_by_deadline("All")) == {"Pod": ALL, "Service": ALL}


def test_terminating_pods_are_not_deleted_again() -> None:
    fw, cluster, _ = succeed("None")
    cluster.job["spec"]["runPolicy"]["cleanPodPolicy"] = "All"
    for pod in cluster.pods():
        pod["metadata"]["deletionTimestamp"] = "2024-01-01T12:00:00Z"
    assert deleted(cluster.plan(fw)) == {"Pod": [], "Service": ALL}


def test_orphaned_services_go_under_policy_running() -> None:
    fw, cluster, _ = succeed("Running")
    # A Service whose pod is already gone (its deletion happened earlier) is useless.
    del cluster.objects[("Pod", "demo-chief-0")]
    assert deleted(cluster.plan(fw))["Service"] == ["demo-chief-0"]
