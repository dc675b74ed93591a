"""Pods on lost nodes (NodeLost): a node NotReady past the grace period, or gone."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from plan_fixtures import NOW, DemoFramework, FakeCluster, condition, new_job, running_job

from jobcontroller.core import DeleteObject, JobMetric, Plan
from jobcontroller.core.nodes import node_state
from jobcontroller.core.planner import plan
from jobcontroller.core.types import NodeState, Obj, PlanConfig

GRACE = 300.0
CONFIG = PlanConfig(node_lost_grace_seconds=GRACE)
LONG_AGO = NOW - dt.timedelta(hours=1)


def on_nodes(fw: DemoFramework, policy: str, **kwargs: Any) -> FakeCluster:
    """A running job (one Chief, two Workers), every pod bound to node-<pod name>."""
    cluster = FakeCluster(new_job(restart_policy=policy, **kwargs))
    running_job(fw, cluster)
    for pod in cluster.pods():
        pod["spec"]["nodeName"] = f"node-{pod['metadata']['name']}"
        pod["metadata"]["creationTimestamp"] = "2024-01-01T10:00:00Z"
    return cluster


def plan_with(
    fw: DemoFramework,
    cluster: FakeCluster,
    nodes: Mapping[str, NodeState] | None,
    *,
    now: dt.datetime = NOW,
    config: PlanConfig = CONFIG,
    gone: frozenset[str] | set[str] = frozenset(),
) -> Plan:
    """Plan with a node cache: the pods' nodes are Ready unless ``nodes`` says otherwise,
    those in ``gone`` do not exist; ``nodes`` None: the cache is not synced."""
    observed = cluster.observed()
    if nodes is not None:
        known = {str(p["spec"].get("nodeName")): NodeState(ready=True) for p in cluster.pods()}
        known.update(nodes)
        for name in gone:
            known.pop(name, None)

        def lookup(name: str) -> NodeState | None:
            return known.get(name)

        observed = msgspec.structs.replace(observed, node=lookup)
    return plan(fw, copy.deepcopy(cluster.job), observed, now=now, config=config)


def step_with(fw: DemoFramework, cluster: FakeCluster, nodes: Any, **kwargs: Any) -> Plan:
    result = plan_with(fw, cluster, nodes, **kwargs)
    cluster.apply(result)
    return result


def deletes(result: Plan) -> list[DeleteObject]:
    return [a for a in result.actions if isinstance(a, DeleteObject)]


def not_ready(since: dt.datetime) -> NodeState:
    return NodeState(ready=False, since=since)


W1 = "node-demo-worker-1"


def test_not_ready_within_the_grace_period_changes_nothing_and_arms_a_timer() -> None:
    fw = DemoFramework()
    cluster = on_nodes(fw, "OnFailure")
    result = plan_with(fw, cluster, {W1: not_ready(NOW - dt.timedelta(seconds=100))})
    assert result.actions == ()
    assert "NodeLost" not in [e.reason for e in result.events]
    assert result.requeue_after == pytest.approx(GRACE - 100)


def test_the_grace_counts_from_the_pods_creation_when_it_came_later() -> None:
    fw = DemoFramework()
    cluster = on_nodes(fw, "OnFailure")
    cluster.get("Pod", "demo-worker-1")["metadata"]["creationTimestamp"] = "2024-01-01T11:59:00Z"
    result = plan_with(fw, cluster, {W1: not_ready(LONG_AGO)})
    assert result.actions == ()
    assert result.requeue_after == pytest.approx(GRACE - 60)


@pytest.mark.parametrize("policy", ["OnFailure", "Always", "ExitCode"])
def test_not_ready_past_the_grace_period_force_deletes_and_recreates(policy: str) -> None:
    fw = DemoFramework()
    cluster = on_nodes(fw, policy)
    old_uid = cluster.get("Pod", "demo-worker-1")["metadata"]["uid"]
    result = step_with(fw, cluster, {W1: not_ready(NOW - dt.timedelta(seconds=GRACE))})
    [delete] = deletes(result)
    assert (delete.name, delete.uid, delete.grace_period_seconds) == (
        "demo-worker-1",
        old_uid,
        0,
    )
    [lost] = [e for e in result.events if e.reason == "NodeLost"]
    assert lost.type == "Warning"
    assert "ns/demo-worker-1" in lost.message and W1 in lost.message
    assert condition(result, "Restarting").status == "True"
    assert condition(result, "Failed") is None
    assert result.metrics.count(JobMetric.RESTARTED) == 1
    assert result.status is not None
    assert result.status.replica_statuses["Worker"].failed == 1
    # The restart is counted in the ledger, and the next pass recreates the slot.
    assert cluster.job["metadata"]["annotations"]["training.kubeflow.org/restart-count"] == "1"
    again = step_with(fw, cluster, {})
    assert [a.body["metadata"]["name"] for a in again.actions if hasattr(a, "body")] == [
        "demo-worker-1"
    ]
    assert cluster.get("Pod", "demo-worker-1")["metadata"]["uid"] != old_uid


def test_a_gone_node_force_deletes_at_once() -> None:
    fw = DemoFramework()
    cluster = on_nodes(fw, "OnFailure")
    result = plan_with(fw, cluster, {}, gone={W1})
    [delete] = deletes(result)
    assert (delete.name, delete.grace_period_seconds) == ("demo-worker-1", 0)
    [lost] = [e for e in result.events if e.reason == "NodeLost"]
    assert "no longer exists" in lost.message
    assert condition(result, "Restarting").status == "True"


def test_under_never_the_job_fails_naming_the_pod() -> None:
    fw = DemoFramework()
    cluster = on_nodes(fw, "Never")
    result = step_with(fw, cluster, {W1: not_ready(LONG_AGO)})
    failed = condition(result, "Failed")
    assert failed.status == "True"
    assert "ns/demo-worker-1" in failed.message and "NodeLost" in failed.message
    assert failed.reason == "DemoJobFailed"
    [delete] = deletes(result)
    assert (delete.name, delete.grace_period_seconds) == ("demo-worker-1", 0)
    assert "NodeLost" in [e.reason for e in result.events]
    assert result.status is not None and result.status.replica_statuses["Worker"].failed == 1
    # Finished: the pod is not recreated.
    again = step_with(fw, cluster, {})
    assert not any(hasattr(a, "body") for a in again.actions)


def test_a_lost_pod_already_terminating_is_force_deleted() -> None:
    fw = DemoFramework()
    cluster = on_nodes(fw, "OnFailure")
    cluster.get("Pod", "demo-worker-1")["metadata"]["deletionTimestamp"] = "2024-01-01T11:00:00Z"
    result = plan_with(fw, cluster, {W1: not_ready(LONG_AGO)})
    [delete] = deletes(result)
    assert (delete.name, delete.grace_period_seconds) == ("demo-worker-1", 0)


def test_no_node_cache_or_a_zero_grace_period_changes_nothing() -> None:
    fw = DemoFramework()
    cluster = on_nodes(fw, "OnFailure")
    assert plan_with(fw, cluster, None).actions == ()
    off = PlanConfig(node_lost_grace_seconds=0)
    assert plan_with(fw, cluster, {W1: not_ready(LONG_AGO)}, config=off).actions == ()
    # Finished pods are left alone whatever their node.
    cluster.set_pod("Worker", 0, "Succeeded", exit_code=0)
    gone = {"node-demo-worker-0"}
    assert deletes(plan_with(fw, cluster, {}, gone=gone)) == []


def test_a_ready_node_is_not_lost_and_converges() -> None:
    fw = DemoFramework()
    cluster = on_nodes(fw, "OnFailure")
    result = plan_with(fw, cluster, {})
    assert result.actions == ()
    assert result.requeue_after is None


def node(conditions: list[Obj] | None, created: str = "2024-01-01T00:00:00Z") -> Obj:
    body: Obj = {"metadata": {"name": "n", "creationTimestamp": created}}
    if conditions is not None:
        body["status"] = {"conditions": conditions}
    return body


def test_node_state_reads_the_ready_condition() -> None:
    since = "2024-01-01T11:00:00Z"
    ready = node([{"type": "Ready", "status": "True", "lastTransitionTime": since}])
    eleven = dt.datetime(2024, 1, 1, 11, tzinfo=dt.UTC)
    assert node_state(ready) == NodeState(ready=True, since=eleven)
    unknown = node([{"type": "Ready", "status": "Unknown", "lastTransitionTime": since}])
    assert node_state(unknown).ready is False
    assert node_state(node(None)) == NodeState(
        ready=False, since=dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    )
