"""A job's size never sets how much one reconcile builds: creations and deletions come in
passes of at most ``max_writes_per_reconcile``, and ``max_pods_per_job`` refuses a job whole."""

from __future__ import annotations

from plan_fixtures import DemoFramework, FakeCluster, condition, new_job

from jobcontroller.core import POD, SERVICE, CreateObject, DeleteObject, PlanConfig


def test_a_huge_job_is_planned_in_bounded_passes_that_add_up_to_every_replica() -> None:
    config = PlanConfig(max_writes_per_reconcile=50)
    cluster = FakeCluster(new_job(replicas={"Chief": 1, "Worker": 200}))
    fw = DemoFramework()
    passes = []
    for _ in range(20):
        result = cluster.step(fw, config=config)
        if not result.actions:
            break
        passes.append((len(result.actions), result.requeue_after))
    # 402 objects: eight full passes, each asking to be looked at again soon whatever events
    # arrive, then the last two.
    assert [size for size, _ in passes] == [50] * 8 + [2]
    assert all(after is not None for _, after in passes[:-1])
    assert len(cluster.names(POD)) == 201
    assert len(cluster.names(SERVICE)) == 201


def test_the_first_pass_starts_with_the_leading_replicas() -> None:
    cluster = FakeCluster(new_job(replicas={"Chief": 1, "Worker": 10_000}))
    result = cluster.plan(DemoFramework(), config=PlanConfig(max_writes_per_reconcile=10))
    names = [a.name for a in result.actions if isinstance(a, CreateObject)]
    assert len(names) == 10
    assert names[0] == "demo-chief-0"


def test_deletions_share_the_budget() -> None:
    cluster = FakeCluster(new_job(replicas={"Worker": 30}))
    fw = DemoFramework()
    cluster.settle(fw, rounds=2, config=PlanConfig(max_writes_per_reconcile=0))
    cluster.job["spec"]["demoReplicaSpecs"]["Worker"]["replicas"] = 2
    result = cluster.plan(fw, config=PlanConfig(max_writes_per_reconcile=7))
    assert sum(isinstance(a, DeleteObject) for a in result.actions) == 7


def test_no_limit_when_the_budget_is_zero() -> None:
    cluster = FakeCluster(new_job(replicas={"Worker": 300}))
    result = cluster.plan(DemoFramework(), config=PlanConfig(max_writes_per_reconcile=0))
    assert len(result.actions) == 600
    assert result.requeue_after is None


def test_a_job_over_the_pod_limit_fails_validation_and_creates_nothing() -> None:
    cluster = FakeCluster(new_job(replicas={"Chief": 1, "Worker": 10_000}))
    result = cluster.plan(DemoFramework(), config=PlanConfig(max_pods_per_job=5000))
    assert not result.actions
    failed = condition(result, "Failed")
    assert failed.reason == "DemoJobFailedValidation"
    assert "asks for 10001 pods, more than the 5000" in failed.message
    assert "--max-pods-per-job" in failed.message


def test_a_job_at_the_pod_limit_runs() -> None:
    cluster = FakeCluster(new_job(replicas={"Chief": 1, "Worker": 4}))
    result = cluster.plan(DemoFramework(), config=PlanConfig(max_pods_per_job=5))
    assert condition(result, "Failed") is None
    assert len(result.actions) == 10
