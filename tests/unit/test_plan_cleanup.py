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


def fail_by_run_policy(policy: str, how: str) -> Plan:
    """Chief and worker 0 running, worker 1 succeeded; then the deadline passes, or the
    backoff limit is reached."""
    fw = DemoFramework()
    limits = {"deadline": {"activeDeadlineSeconds": 60}, "backoff": {"backoffLimit": 2}}[how]
    run_policy = {"cleanPodPolicy": policy, **limits}
    cluster = FakeCluster(new_job(restart_policy="OnFailure", run_policy=run_policy))
    running_job(fw, cluster)
    cluster.set_pod("Worker", 1, "Succeeded", exit_code=0)
    if how == "backoff":
        cluster.set_pod("Chief", 0, "Running", restarts=2)
        return cluster.plan(fw)
    return cluster.plan(fw, now=NOW + dt.timedelta(seconds=60))


RUNNING = ["demo-chief-0", "demo-worker-0"]


@pytest.mark.parametrize("how", ["deadline", "backoff"])
@pytest.mark.parametrize(
    ("policy", "pods"), [("None", RUNNING), ("Running", RUNNING), ("All", ALL)]
)
def test_a_job_stopped_by_its_run_policy_stops_its_running_pods(
    how: str, policy: str, pods: list[str]
) -> None:
    # As a batch/v1 Job: running pods stop whatever the policy; the policy decides only about
    # finished pods (the succeeded worker 1 is kept unless it is All).
    result = fail_by_run_policy(policy, how)
    assert result.status is not None and result.status.is_finished()
    assert deleted(result) == {"Pod": pods, "Service": pods}


def test_other_failures_honour_policy_none() -> None:
    # A permanent exit code under ExitCode fails the job without its run policy: None keeps
    # every pod.
    fw = DemoFramework()
    cluster = FakeCluster(new_job(restart_policy="ExitCode"))
    running_job(fw, cluster)
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    result = cluster.plan(fw)
    assert result.status is not None and result.status.is_finished()
    assert deleted(result) == {"Pod": [], "Service": []}


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
