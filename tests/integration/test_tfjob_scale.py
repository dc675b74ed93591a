"""Changing a running job's replica count: new slots get pods and Services, removed slots lose
theirs, and the counts follow."""

from __future__ import annotations

import json

from tfjobs import (
    TFJOBS,
    env_of,
    replica,
    replica_status,
    tfjob,
    uid,
    wait_pods,
    wait_services,
)

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for
from tf_operator.controller import TFJobController


def _workers(n: int) -> set[str]:
    return {f"elastic-worker-{i}" for i in range(n)}


async def _scale(kube: KubeApi, ns: str, replicas: int) -> None:
    patch = {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": replicas}}}}
    await kube.merge_patch(TFJOBS, "elastic", patch, namespace=ns)


async def test_scale_workers_up_then_down(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, tfjob("elastic", {"Worker": replica(2)}), namespace=ns)
        before = await wait_pods(kube, ns, _workers(2), phase="Running")

        await _scale(kube, ns, 4)
        up = await wait_pods(kube, ns, _workers(4), phase="Running")
        await wait_services(kube, ns, _workers(4))
        # Existing workers are left running; the new ones see the new cluster.
        assert all(uid(up[name]) == uid(before[name]) for name in before)
        cluster = json.loads(env_of(up["elastic-worker-3"])["TF_CONFIG"])["cluster"]
        assert len(cluster["worker"]) == 4
        job = await wait_for(
            kube,
            TFJOBS,
            "elastic",
            namespace=ns,
            until=lambda j: replica_status(j, "Worker").get("active") == 4,
            timeout=30,
        )
        assert job is not None

        await _scale(kube, ns, 1)
        down = await wait_pods(kube, ns, _workers(1))
        await wait_services(kube, ns, _workers(1))
        assert uid(down["elastic-worker-0"]) == uid(before["elastic-worker-0"])
        job = await wait_for(
            kube,
            TFJOBS,
            "elastic",
            namespace=ns,
            until=lambda j: (
                replica_status(j, "Worker") == {"active": 1, "succeeded": 0, "failed": 0}
            ),
            timeout=30,
        )
        # Removing workers is not a failure.
        assert job is not None
        assert not any(c["type"] in ("Failed", "Restarting") for c in job["status"]["conditions"])
