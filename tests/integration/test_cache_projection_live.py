"""The pod and service caches keep only what the controller reads, and nothing the controller
writes from them wipes what they dropped (runtime/projection.py), on a real API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mpijob_fixtures import MPIJOBS, UNSCHEDULABLE, mpijob, worker_pods

from jobcontroller.core.types import POD, SERVICE
from jobcontroller.runtime.kube import PODS, SERVICES, KubeApi
from jobcontroller.runtime.projection import project_pod
from jobcontroller.runtime.store import Store
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for
from mpi_operator.controller import MPIJobController

SELECTOR = {
    "training.kubeflow.org/operator-name": "mpi-operator",
    "training.kubeflow.org/job-name": "pi",
}


async def test_pod_and_service_caches_drop_unread_fields_on_arrival(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, MPIJobController()) as rc:
        body = mpijob("pi", launcher_exit=None, worker_spec=UNSCHEDULABLE)
        await kube.create(MPIJOBS, body, namespace=ns)
        pods = await worker_pods(kube, ns, count=2)
        served = pods["pi-worker-0"]
        assert served["spec"]["volumes"] and served["spec"]["containers"][0]["image"]
        assert served["metadata"]["managedFields"]

        caches = rc.controller.watch.informers
        cached = await _cached(caches[POD].store, ns, "pi-worker-0")
        assert cached["metadata"]["ownerReferences"] == served["metadata"]["ownerReferences"]
        assert cached["metadata"]["labels"] == served["metadata"]["labels"]
        assert cached["spec"]["containers"] == [{"name": "worker"}]
        for dropped in ("volumes", "tolerations", "nodeSelector", "dnsPolicy"):
            assert dropped not in cached["spec"]
        assert "managedFields" not in cached["metadata"]
        assert cached["status"]["phase"] == "Pending"

        service = await _cached(caches[SERVICE].store, ns, "pi")
        assert service["spec"] == {"selector": SELECTOR, "clusterIP": "None"}
        assert "managedFields" not in service["metadata"]


async def test_drift_patch_from_a_projected_service_keeps_what_the_cache_dropped(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """The job-wide Service's selector is put back from the cached (projected) Service by a
    merge patch: the fields the cache never held (type, IP families, session affinity, the
    managers' bookkeeping) are still on the server afterwards."""
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        body = mpijob("pi", launcher_exit=None, worker_spec=UNSCHEDULABLE)
        await kube.create(MPIJOBS, body, namespace=ns)
        before = await wait_for(kube, SERVICES, "pi", namespace=ns, until=bool)
        assert before is not None
        stray = {"spec": {"selector": {"someone": "else"}}}
        await kube.merge_patch(SERVICES, "pi", stray, namespace=ns)
        after = await wait_for(
            kube,
            SERVICES,
            "pi",
            namespace=ns,
            until=lambda s: s is not None and s["spec"]["selector"] == SELECTOR,
            timeout=30,
        )
    assert after is not None
    assert after["spec"] == before["spec"]
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["metadata"]["ownerReferences"] == before["metadata"]["ownerReferences"]


async def test_a_projected_pod_is_never_put_back(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        body = mpijob("pi", launcher_exit=None, worker_spec=UNSCHEDULABLE)
        await kube.create(MPIJOBS, body, namespace=ns)
        pods = await worker_pods(kube, ns, count=2)
    served = pods["pi-worker-0"]
    projected = project_pod(served)
    with pytest.raises(ValueError, match="projection"):
        await kube.replace(PODS, projected, namespace=ns)
    with pytest.raises(ValueError, match="projection"):
        await kube.replace(PODS, {**projected, "spec": served["spec"]}, namespace=ns)
    now = await kube.get(PODS, "pi-worker-0", namespace=ns)
    assert now["spec"] == served["spec"]


async def _cached(store: Store, namespace: str, name: str) -> dict[str, Any]:
    for _ in range(200):
        obj = store.get(namespace, name)
        if obj is not None:
            return dict(obj)
        await asyncio.sleep(0.05)
    raise AssertionError(f"{namespace}/{name} never reached the cache")
