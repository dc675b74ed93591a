"""Names taken by objects the job does not control are never touched (ErrResourceExists)."""

from __future__ import annotations

from typing import Any

from plan_fixtures import DemoFramework, FakeCluster, condition, new_job, reasons

from jobcontroller.core import CreateObject, DeleteObject, Plan, PlanConfig

MESSAGE = (
    'Resource "demo-worker-1" of Kind "Pod" already exists and is not managed by DemoJob ns/demo'
)


def foreign(kind: str, name: str, owner_uid: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if owner_uid:
        metadata["ownerReferences"] = [{"uid": owner_uid, "controller": True}]
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata}


def created(result: Plan) -> list[tuple[str, str]]:
    return sorted((a.kind, a.name) for a in result.actions if isinstance(a, CreateObject))


def test_foreign_pod_blocks_only_its_slot() -> None:
    cluster = FakeCluster(new_job())
    cluster.add(foreign("Pod", "demo-worker-1"))
    result = cluster.step(DemoFramework())
    assert ("Pod", "demo-worker-1") not in created(result)
    assert ("Pod", "demo-worker-0") in created(result)
    assert ("Service", "demo-worker-1") in created(result)
    assert not [a for a in result.actions if isinstance(a, DeleteObject)]
    cond = condition(result, "Created")
    assert (cond.status, cond.reason, cond.message) == ("True", "ErrResourceExists", MESSAGE)
    assert [(e.type, e.reason, e.message) for e in result.events] == [
        ("Warning", "ErrResourceExists", MESSAGE)
    ]


def test_conflict_is_reported_once_and_the_job_stays_put() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    cluster.add(foreign("Pod", "demo-worker-1", owner_uid="someone-else"))
    cluster.settle(fw)
    again = cluster.plan(fw)
    assert (again.actions, again.events) == ((), ())
    assert (
        cluster.get("Pod", "demo-worker-1")["metadata"]["ownerReferences"][0]["uid"]
        == "someone-else"
    )


def test_conflict_clears_when_the_object_goes() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    cluster.add(foreign("Service", "demo-chief-0"))
    cluster.settle(fw)
    del cluster.objects[("Service", "demo-chief-0")]
    result = cluster.step(fw)
    assert created(result) == [("Service", "demo-chief-0")]
    cond = condition(result, "Created")
    assert (cond.reason, cond.message) == ("DemoJobCreated", "DemoJob demo is created.")
    assert "ErrResourceExists" not in reasons(result)


def test_several_conflicts_are_summarised() -> None:
    cluster = FakeCluster(new_job())
    cluster.add(foreign("Pod", "demo-worker-1"))
    cluster.add(foreign("Service", "demo-worker-1"))
    cond = condition(cluster.plan(DemoFramework()), "Created")
    assert cond.message == MESSAGE + " (and 1 more)"


def test_own_object_missing_from_owned_cache_is_awaited_not_recreated() -> None:
    cluster = FakeCluster(new_job())
    pod = cluster.add(foreign("Pod", "demo-worker-1", owner_uid="uid-demo"))
    # Labelless: it is not in any slot, but lookup shows it is ours.
    assert "labels" not in pod["metadata"]
    result = cluster.plan(DemoFramework())
    assert ("Pod", "demo-worker-1") not in created(result)
    assert condition(result, "Created").reason == "DemoJobCreated"


def test_foreign_pod_group_blocks_pod_creation() -> None:
    config = PlanConfig(gang_scheduler_name="scheduler-plugins", pod_group_available=True)
    cluster = FakeCluster(new_job())
    cluster.add(foreign("PodGroup", "demo"))
    result = cluster.plan(DemoFramework(), config=config)
    assert created(result) == []
    assert condition(result, "Created").reason == "ErrResourceExists"
