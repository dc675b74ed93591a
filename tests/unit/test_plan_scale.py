"""Changing replicas: missing indices are created, indices past the count are removed."""

from __future__ import annotations

from plan_fixtures import DemoFramework, FakeCluster, condition, new_job, running_job

from jobcontroller.core import CreateObject, DeleteObject, Plan


def names(result: Plan, action_type: type[CreateObject | DeleteObject]) -> list[tuple[str, str]]:
    return sorted(
        (a.kind, a.name)
        for a in result.actions
        if isinstance(a, (CreateObject, DeleteObject)) and isinstance(a, action_type)
    )


def scaled(
    before: int, after: int, *, restart_policy: str | None = None
) -> tuple[DemoFramework, FakeCluster]:
    fw = DemoFramework()
    job = new_job(replicas={"Chief": 1, "Worker": before}, restart_policy=restart_policy)
    cluster = FakeCluster(job)
    running_job(fw, cluster)
    cluster.job["spec"]["demoReplicaSpecs"]["Worker"]["replicas"] = after
    return fw, cluster


def test_scale_up_creates_new_indices() -> None:
    fw, cluster = scaled(2, 4)
    result = cluster.plan(fw)
    assert names(result, CreateObject) == [
        ("Pod", "demo-worker-2"),
        ("Pod", "demo-worker-3"),
        ("Service", "demo-worker-2"),
        ("Service", "demo-worker-3"),
    ]
    assert names(result, DeleteObject) == []


def test_scale_down_deletes_pods_and_services_past_the_count() -> None:
    fw, cluster = scaled(3, 1)
    result = cluster.plan(fw)
    assert names(result, DeleteObject) == [
        ("Pod", "demo-worker-1"),
        ("Pod", "demo-worker-2"),
        ("Service", "demo-worker-1"),
        ("Service", "demo-worker-2"),
    ]
    assert names(result, CreateObject) == []
    deletes = [a for a in result.actions if isinstance(a, DeleteObject) and a.kind == "Pod"]
    assert {a.expectation for a in deletes} == {"ns/demo/worker/pods"}
    assert {a.reason for a in deletes} == {"scale-down"}


def test_scale_down_converges() -> None:
    fw, cluster = scaled(3, 1)
    cluster.settle(fw)
    assert cluster.names("Pod") == ["demo-chief-0", "demo-worker-0"]
    assert cluster.names("Service") == ["demo-chief-0", "demo-worker-0"]


def test_failed_pod_past_the_count_is_removed_not_restarted() -> None:
    fw, cluster = scaled(3, 2, restart_policy="OnFailure")
    cluster.set_pod("Worker", 2, "Failed", exit_code=1)
    result = cluster.plan(fw)
    assert names(result, DeleteObject) == [("Pod", "demo-worker-2"), ("Service", "demo-worker-2")]
    assert condition(result, "Restarting") is None
    assert condition(result, "Failed") is None
    assert result.status is not None
    worker = result.status.replica_statuses["Worker"]
    assert (worker.active, worker.failed) == (2, 0)
