"""A job's size never sets how much one reconcile builds: creations and deletions come in
passes of at most ``max_writes_per_reconcile``, and ``max_pods_per_job`` refuses a job whole."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import msgspec
from plan_fixtures import DemoFramework, FakeCluster, condition, new_job, template

from jobcontroller.core import POD, SERVICE, CreateObject, DeleteObject, Plan, PlanConfig


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


# -- work bounded by what exists (issue 30) -------------------------------------------------

INT32_MAX = 2**31 - 1
UNLIMITED = PlanConfig(max_pods_per_job=0, max_object_bytes=0)


def _peak_bytes(call: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_job_asking_for_int32_max_pods_is_planned_from_what_exists() -> None:
    # Every limit that would refuse it is off: only the planner's own bounds are left. The
    # pass it plans is the batch; its memory is that batch's, not 2^31 replicas'.
    cluster = FakeCluster(new_job(replicas={"Worker": INT32_MAX}))
    config = msgspec.structs.replace(UNLIMITED, max_writes_per_reconcile=100)
    result, peak = _peak_bytes(lambda: cluster.plan(DemoFramework(), config=config))
    assert isinstance(result, Plan)
    creates = [a for a in result.actions if isinstance(a, CreateObject)]
    assert len(creates) == 100
    assert result.requeue_after is not None  # more to come, soon
    assert peak < 8 * 2**20, f"planning one pass held {peak / 2**20:.1f} MiB"


def test_later_passes_skip_existing_slots_and_fill_the_gaps_first() -> None:
    cluster = FakeCluster(new_job(replicas={"Worker": INT32_MAX}))
    fw = DemoFramework()
    config = msgspec.structs.replace(UNLIMITED, max_writes_per_reconcile=10)
    for _ in range(3):
        cluster.step(fw, config=config)
    del cluster.objects[(POD, "demo-worker-3")]
    result = cluster.plan(fw, config=config)
    pods = [a.name for a in result.actions if isinstance(a, CreateObject) and a.kind == POD]
    assert pods[0] == "demo-worker-3"
    assert pods[1:] == [f"demo-worker-{i}" for i in range(30, 39)]


def test_scale_down_looks_only_at_existing_pods() -> None:
    cluster = FakeCluster(new_job(replicas={"Worker": 5}))
    fw = DemoFramework()
    cluster.settle(fw, config=PlanConfig(max_writes_per_reconcile=0))
    cluster.job["spec"]["demoReplicaSpecs"]["Worker"]["replicas"] = 2
    result = cluster.plan(fw, config=PlanConfig(max_writes_per_reconcile=0))
    deleted = sorted(
        a.name for a in result.actions if isinstance(a, DeleteObject) and a.kind == POD
    )
    assert deleted == [f"demo-worker-{i}" for i in (2, 3, 4)]


def test_the_byte_budget_stops_a_pass_of_big_pods() -> None:
    # Pods of about 300 KB each: a 1 MiB budget plans three of them (the pass always gets one,
    # and stops at the first that would go over), whatever the count budget says.
    big = template()
    big["spec"]["containers"][0]["env"] = [{"name": "BLOB", "value": "x" * 300_000}]
    cluster = FakeCluster(new_job(replicas={"Worker": 50}, templates={"Worker": big}))
    config = PlanConfig(max_writes_per_reconcile=100, max_bytes_per_reconcile=2**20)
    result = cluster.plan(DemoFramework(), config=config)
    pods = [a for a in result.actions if isinstance(a, CreateObject) and a.kind == POD]
    assert len(pods) == 3
    assert result.requeue_after is not None


def test_the_byte_budget_always_lets_one_object_through() -> None:
    big = template()
    big["spec"]["containers"][0]["env"] = [{"name": "BLOB", "value": "x" * 300_000}]
    cluster = FakeCluster(new_job(replicas={"Worker": 5}, templates={"Worker": big}))
    config = PlanConfig(max_writes_per_reconcile=100, max_bytes_per_reconcile=1000)
    result = cluster.plan(DemoFramework(), config=config)
    assert sum(isinstance(a, CreateObject) and a.kind == POD for a in result.actions) == 1


def test_the_pod_ceiling_defaults_to_the_indexed_job_maximum() -> None:
    assert PlanConfig().max_pods_per_job == 100_000
    at = FakeCluster(new_job(replicas={"Worker": 100_000})).plan(DemoFramework())
    assert condition(at, "Failed") is None
    over = FakeCluster(new_job(replicas={"Chief": 1, "Worker": 100_000})).plan(DemoFramework())
    assert "asks for 100001 pods, more than the 100000" in condition(over, "Failed").message
    assert not over.actions
