"""A name the job needs is taken by a pod that is not the job's.

The operator must never modify or delete someone else's pod. It leaves that slot empty, says
so (an event, and the Created condition's reason and message), and still creates the rest.
"""

from __future__ import annotations

import pytest
from tfjobs import (
    JOB_NAME_LABEL,
    TFJOBS,
    Obj,
    condition,
    has,
    pods,
    replica,
    tfjob,
    uid,
    wait_pods,
)

from jobcontroller.runtime.kube import EVENTS, PODS, KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for, wait_for_list
from tf_operator.controller import TFJobController


def _foreign_pod(labels: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "clash-worker-0", "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "someone-elses:1"}]},
    }


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({"app": "unrelated"}, id="unrelated-pod"),
        # A leftover of an earlier job of the same name wears our label.
        pytest.param({JOB_NAME_LABEL: "clash", "app": "leftover"}, id="labelled-leftover"),
    ],
)
async def test_foreign_pod_with_a_replica_name_is_left_alone_and_reported(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    labels: dict[str, str],
) -> None:
    ns = namespace
    foreign = await kube.create(PODS, _foreign_pod(labels), namespace=ns)
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, tfjob("clash", {"Worker": replica(2)}), namespace=ns)
        # The other replica is created as usual.
        await wait_pods(kube, ns, {"clash-worker-0", "clash-worker-1"}, phase="Running")
        job = await wait_for(
            kube,
            TFJOBS,
            "clash",
            namespace=ns,
            until=lambda j: (condition(j, "Created") or {}).get("reason") == "ErrResourceExists",
            timeout=30,
            what="the Created condition reporting the conflict",
        )
        created = condition(job, "Created")
        assert created is not None and created["status"] == "True"
        assert "clash-worker-0" in created["message"]
        assert "already exists" in created["message"]
        assert not has(job, "Failed")
        # The Warning event is recorded beside the status write, not before it: wait for it.
        await wait_for_list(
            kube,
            EVENTS,
            namespace=ns,
            until=lambda items: any(
                e["type"] == "Warning" and "clash-worker-0" in e["message"] for e in items
            ),
            timeout=30,
            what="a Warning event naming clash-worker-0",
        )

        # Untouched: same object, no owner, its own labels and spec.
        now = (await pods(kube, ns))["clash-worker-0"]
        assert uid(now) == uid(foreign)
        assert not now["metadata"].get("ownerReferences")
        assert now["metadata"]["labels"] == labels
        assert now["spec"]["containers"][0]["image"] == "someone-elses:1"
        assert not now["metadata"].get("deletionTimestamp")


async def test_the_slot_is_filled_once_the_foreign_pod_is_gone(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    foreign = await kube.create(PODS, _foreign_pod({JOB_NAME_LABEL: "clash"}), namespace=ns)
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, tfjob("clash", {"Worker": replica(2)}), namespace=ns)
        await wait_for(
            kube,
            TFJOBS,
            "clash",
            namespace=ns,
            until=lambda j: (condition(j, "Created") or {}).get("reason") == "ErrResourceExists",
            timeout=30,
        )
        # The uid makes the delete touch the foreign pod only: a retried DELETE must not take
        # the pod the operator creates in its place.
        await kube.delete(PODS, "clash-worker-0", namespace=ns, uid=uid(foreign))

        def ours(items: list[Obj]) -> bool:
            return any(
                p["metadata"]["name"] == "clash-worker-0"
                and p["metadata"].get("ownerReferences")
                and not p["metadata"].get("deletionTimestamp")
                for p in items
            )

        # Both outcomes, each waited for (the condition is written in the pass that creates
        # the pod, but the test reads them with two requests).
        await wait_for_list(kube, PODS, namespace=ns, until=ours, timeout=30, what="our worker-0")
        await wait_for(
            kube,
            TFJOBS,
            "clash",
            namespace=ns,
            until=lambda j: (condition(j, "Created") or {}).get("reason") == "TFJobCreated",
            timeout=30,
            what="the conflict cleared from the Created condition",
        )
        assert ours(list((await pods(kube, ns)).values()))
