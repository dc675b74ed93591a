"""Pods on lost nodes (NodeLost), on the local cluster with kwok's fake nodes.

Each test gets a fake node of its own, tainted so that only its job's Worker (pinned to it by
a node selector, with a toleration) runs there, and kills it in one of two ways:

- **NotReady.** kwok keeps a node it manages Ready (its node-initialize stage sets Ready=True
  on any node whose Ready is not True), so the test first takes the node away from kwok (drops
  the ``kwok.x-k8s.io/node`` annotation kwok selects its nodes by) and then writes Ready=False
  to the node's status, as the node lifecycle controller would for a node that stopped
  reporting. The pods on it stay Running, as they do on a dead node.
- **Deleted.** The node object is deleted (again after taking it from kwok, so that kwok does
  nothing to its pods).

The replacement pod is pinned to the dead node, so it stays Pending: the test sees the
recreation and nothing runs it.
"""

from __future__ import annotations

import asyncio
import datetime as dt

from tfjobs import (
    TFJOBS,
    Obj,
    condition,
    events,
    has,
    pods,
    replica,
    tfjob,
    uid,
    wait_event,
    wait_job,
    wait_pods,
)

from jobcontroller.core.types import PlanConfig
from jobcontroller.runtime.kube import NODES, PODS, KubeApi
from jobcontroller.testing.controlplane import FAKE_NODE_ANNOTATION, ControlPlane
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for_list
from tf_operator.controller import TFJobController

GRACE = 3.0
TAINT = "sim.jobcontroller/node-lost"


async def _own_node(control_plane: ControlPlane, kube: KubeApi, ns: str) -> str:
    """A fresh Ready fake node that only this test's pods tolerate."""
    [name] = await asyncio.to_thread(control_plane.add_nodes, 1, prefix=f"lost-{ns}-")
    await kube.merge_patch(
        NODES, name, {"spec": {"taints": [{"key": TAINT, "value": ns, "effect": "NoSchedule"}]}}
    )
    return name


def _pinned(node: str, restart_policy: str) -> Obj:
    spec = replica(1, restart_policy=restart_policy)  # runs until deleted
    spec["template"]["spec"].update(
        nodeSelector={"kubernetes.io/hostname": node},
        tolerations=[{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
    )
    return spec


async def _release_from_kwok(kube: KubeApi, node: str) -> None:
    await kube.merge_patch(NODES, node, {"metadata": {"annotations": {FAKE_NODE_ANNOTATION: None}}})


async def _make_not_ready(kube: KubeApi, node: str) -> None:
    """Ready=False, written until it sticks (kwok may still be finishing a status update)."""
    await _release_from_kwok(kube, node)
    steady = 0
    for _ in range(100):
        current = await kube.get(NODES, node)
        ready = next(
            (c for c in current["status"].get("conditions") or [] if c.get("type") == "Ready"),
            {},
        )
        if ready.get("status") == "True":
            now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            condition_ = {
                "type": "Ready",
                "status": "False",
                "reason": "KubeletNotReady",
                "message": "test: the node died",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            await kube.merge_patch(
                NODES, node, {"status": {"conditions": [condition_]}}, subresource="status"
            )
            steady = 0
        else:
            steady += 1
            if steady >= 4:
                return
        await asyncio.sleep(0.25)
    raise AssertionError(f"node {node} did not stay NotReady")


async def _delete_node(kube: KubeApi, node: str) -> None:
    try:
        await kube.delete(NODES, node)
    except Exception as exc:  # already gone
        if getattr(exc, "is_not_found", False):
            return
        raise


async def test_a_pod_on_a_node_not_ready_past_the_grace_period_is_recreated(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    control_plane: ControlPlane,
) -> None:
    ns = namespace
    node = await _own_node(control_plane, kube, ns)
    controller = TFJobController(config=PlanConfig(node_lost_grace_seconds=GRACE))
    try:
        async with running(kubeconfig, controller):
            job = tfjob("lost", {"Worker": _pinned(node, "OnFailure")})
            await kube.create(TFJOBS, job, namespace=ns)
            first = await wait_pods(kube, ns, {"lost-worker-0"}, phase="Running")
            assert first["lost-worker-0"]["spec"]["nodeName"] == node
            await wait_job(kube, ns, "lost", "Running")

            started = asyncio.get_running_loop().time()
            await _make_not_ready(kube, node)

            def replaced(items: list[Obj]) -> bool:
                pod = next((p for p in items if p["metadata"]["name"] == "lost-worker-0"), None)
                return pod is not None and uid(pod) != uid(first["lost-worker-0"])

            await wait_for_list(kube, PODS, namespace=ns, until=replaced, timeout=30)
            # Not before the grace period: the node's NotReady time starts it.
            assert asyncio.get_running_loop().time() - started >= GRACE - 1
            event = await wait_event(kube, ns, "NodeLost")
            assert event["type"] == "Warning"
            assert f"{ns}/lost-worker-0" in event["message"]
            assert node in event["message"]
            job_now = await wait_job(kube, ns, "lost", "Restarting")
            assert not has(job_now, "Failed")
            annotations = job_now["metadata"].get("annotations") or {}
            assert annotations.get("training.kubeflow.org/restart-count") == "1"
            # The replacement waits for its (dead) node: not lost, not deleted again.
            await asyncio.sleep(GRACE + 1)
            now = await pods(kube, ns)
            assert now["lost-worker-0"]["status"]["phase"] == "Pending"
            assert not now["lost-worker-0"]["spec"].get("nodeName")
            assert len(await events(kube, ns, reason="NodeLost")) == 1
    finally:
        await _delete_node(kube, node)


async def test_a_pod_whose_node_is_deleted_fails_a_never_job_at_once(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    control_plane: ControlPlane,
) -> None:
    ns = namespace
    node = await _own_node(control_plane, kube, ns)
    # A long grace period: a deleted node needs none.
    controller = TFJobController(config=PlanConfig(node_lost_grace_seconds=600))
    try:
        async with running(kubeconfig, controller):
            job = tfjob("gone", {"Worker": _pinned(node, "Never")})
            await kube.create(TFJOBS, job, namespace=ns)
            await wait_pods(kube, ns, {"gone-worker-0"}, phase="Running")
            await wait_job(kube, ns, "gone", "Running")

            await _release_from_kwok(kube, node)
            await _delete_node(kube, node)

            failed_job = await wait_job(kube, ns, "gone", "Failed", timeout=30)
            failed = condition(failed_job, "Failed")
            assert failed is not None
            assert failed["reason"] == "TFJobFailed"
            assert f"{ns}/gone-worker-0" in failed["message"]
            assert "NodeLost" in failed["message"]
            event = await wait_event(kube, ns, "NodeLost")
            assert "no longer exists" in event["message"] and node in event["message"]
            # Force-deleted (no kubelet would confirm a graceful deletion), not recreated.
            await wait_for_list(kube, PODS, namespace=ns, until=lambda items: not items, timeout=30)
            await asyncio.sleep(1)
            assert await pods(kube, ns) == {}
    finally:
        await _delete_node(kube, node)
