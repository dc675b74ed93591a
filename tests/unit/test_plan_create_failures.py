"""Creations the API server keeps refusing: a permanent refusal fails the job with the
server's message; any other shows on the Created condition until a creation succeeds. And a
job never succeeds while a replica type it asks for has no pod at all."""

from __future__ import annotations

import msgspec
from plan_fixtures import DemoFramework, FakeCluster, condition, new_job, reasons

from jobcontroller.core import POD, CreateFailure, CreateObject, PlanConfig

INVALID = CreateFailure(
    kind="Pod",
    name="demo-worker-0",
    code=422,
    reason="Invalid",
    message='Pod "demo-worker-0" is invalid: spec.containers[0].ports[0].containerPort: '
    "Invalid value: 70000: must be between 1 and 65535, inclusive",
    permanent=True,
)
QUOTA = CreateFailure(
    kind="Pod",
    name="demo-worker-0",
    code=403,
    reason="Forbidden",
    message='pods "demo-worker-0" is forbidden: exceeded quota: small, requested: pods=1',
)


def _with_failure(failure: CreateFailure, count: int) -> FakeCluster:
    cluster = FakeCluster(new_job())
    cluster.settle(DemoFramework(), rounds=2)
    for name in ("demo-worker-0", "demo-worker-1"):
        del cluster.objects[(POD, name)]
    cluster.create_failure = msgspec.structs.replace(failure, count=count)
    return cluster


def _creates(cluster: FakeCluster) -> list[str]:
    result = cluster.plan(DemoFramework())
    return [a.name for a in result.actions if isinstance(a, CreateObject)]


def test_below_the_threshold_the_job_just_retries() -> None:
    cluster = _with_failure(INVALID, 2)
    result = cluster.plan(DemoFramework())
    assert condition(result, "Failed") is None
    assert "demo-worker-0" in _creates(cluster)


def test_a_permanent_refusal_fails_the_job_with_the_servers_message() -> None:
    cluster = _with_failure(INVALID, 3)
    result = cluster.plan(DemoFramework())
    failed = condition(result, "Failed")
    assert failed.reason == "FailedCreatePod"
    assert failed.message == f"Error creating pod demo-worker-0: {INVALID.message}"
    assert "FailedCreatePod" in reasons(result)
    assert not [a for a in result.actions if isinstance(a, CreateObject)]


def test_a_refusal_that_may_pass_shows_on_created_and_keeps_retrying() -> None:
    cluster = _with_failure(QUOTA, 3)
    result = cluster.plan(DemoFramework())
    assert condition(result, "Failed") is None
    created = condition(result, "Created")
    assert created.status == "True"
    assert created.reason == "FailedCreatePod"
    assert "exceeded quota" in created.message
    assert reasons(result).count("FailedCreatePod") == 1
    assert "demo-worker-0" in _creates(cluster)
    # Once a creation succeeds the executor drops the failure, and Created reads as before.
    cluster.apply(result)
    cluster.create_failure = None
    again = cluster.plan(DemoFramework())
    assert condition(again, "Created").reason == "DemoJobCreated"
    assert "FailedCreatePod" not in reasons(again)


def test_the_same_refusal_is_reported_once_not_on_every_pass() -> None:
    cluster = _with_failure(QUOTA, 3)
    cluster.apply(cluster.plan(DemoFramework()))
    cluster.create_failure = msgspec.structs.replace(QUOTA, count=4)
    assert "FailedCreatePod" not in reasons(cluster.plan(DemoFramework()))


def test_never_succeeded_while_a_replica_type_has_no_pod() -> None:
    """The chief decides success; its workers were never created (refused)."""
    cluster = FakeCluster(new_job())
    fw = DemoFramework()
    cluster.step(fw, config=PlanConfig())
    for name in ("demo-worker-0", "demo-worker-1"):
        del cluster.objects[(POD, name)]
    cluster.set_pod("Chief", 0, "Succeeded", exit_code=0)
    result = cluster.plan(fw)
    assert condition(result, "Succeeded") is None
    # Once the workers exist, the chief's success counts.
    cluster.apply(result)
    result = cluster.plan(fw)
    assert condition(result, "Succeeded") is not None
