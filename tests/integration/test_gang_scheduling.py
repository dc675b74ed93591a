"""Gang scheduling with Volcano PodGroups, on the real apiserver.

A minimal copy of Volcano's PodGroup CRD stands in for Volcano (whose scheduler is not here):
the test plays Volcano's part by admitting the group (setting its phase).
"""

from __future__ import annotations

from typing import Any

from jobcontroller import PlanConfig
from jobcontroller.operator import pod_group_crd_installed
from jobcontroller.runtime.kube import PODS, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.volcano import POD_GROUPS, install_volcano_crd
from jobcontroller.testing.waiting import wait_for, wait_for_list
from tf_operator.controller import TFJobController

TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")


def tfjob(name: str) -> dict[str, Any]:
    def spec(n: int) -> dict[str, Any]:
        container = {
            "name": "tensorflow",
            "image": "tf",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        }
        return {"replicas": n, "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": {"PS": spec(1), "Worker": spec(2)}},
    }


async def test_crd_detection(kube: KubeApi) -> None:
    await install_volcano_crd(kube)
    assert await pod_group_crd_installed(kube, "volcano")
    assert not await pod_group_crd_installed(kube, "scheduler-plugins-scheduler")
    assert not await pod_group_crd_installed(kube, "")


async def test_volcano_pod_group_gates_pods_until_admitted(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    await install_volcano_crd(kube)
    config = PlanConfig(gang_scheduler_name="volcano", pod_group_available=True)
    async with running(kubeconfig, TFJobController(config=config)):
        job = await kube.create(TFJOBS, tfjob("gang"), namespace=namespace)
        group = await wait_for(
            kube, POD_GROUPS, "gang", namespace=namespace, until=lambda o: o is not None
        )
        assert group is not None
        assert group["spec"]["minMember"] == 3
        assert group["spec"]["minResources"] == {"cpu": "3", "memory": "3Gi"}
        assert group["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        # Volcano has not admitted the group: no pod may exist yet.
        pods, _ = await kube.list(PODS, namespace=namespace)
        assert pods == []

        # Play Volcano: admit the group. The PodGroup informer wakes the job.
        await kube.merge_patch(
            POD_GROUPS,
            "gang",
            {"status": {"phase": "Inqueue"}},
            namespace=namespace,
            subresource="status",
        )
        pods = await wait_for_list(
            kube, PODS, namespace=namespace, until=lambda items: len(items) == 3
        )
        for pod in pods:
            assert pod["spec"]["schedulerName"] == "volcano"
            annotations = pod["metadata"]["annotations"]
            assert annotations["scheduling.k8s.io/group-name"] == "gang"
            rtype = pod["metadata"]["labels"]["training.kubeflow.org/replica-type"]
            assert annotations["volcano.sh/task-spec"].lower() == rtype

        # Suspending the job releases the gang: pods and the PodGroup go.
        await kube.merge_patch(
            TFJOBS, "gang", {"spec": {"runPolicy": {"suspend": True}}}, namespace=namespace
        )
        gone = await wait_for(
            kube, POD_GROUPS, "gang", namespace=namespace, until=lambda o: o is None
        )
        assert gone is None
        await wait_for_list(kube, PODS, namespace=namespace, until=lambda items: items == [])


PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False
)


async def test_min_resources_count_the_highest_priority_replicas_first(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """As v1.9: with minAvailable below the replica count, minResources sums the requests of
    the members taken highest PriorityClass value first, read from the cluster's classes."""
    await install_volcano_crd(kube)
    high = f"high-{namespace[-6:]}"
    await kube.create(
        PRIORITY_CLASSES,
        {"apiVersion": "scheduling.k8s.io/v1", "metadata": {"name": high}, "value": 1000},
    )
    try:
        job = tfjob("ordered")
        ps = job["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]
        ps["resources"]["requests"]["cpu"] = "4"  # the PS has no class: value 0, last
        worker = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
        worker["priorityClassName"] = high
        job["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 2}}
        config = PlanConfig(gang_scheduler_name="volcano", pod_group_available=True)
        async with running(kubeconfig, TFJobController(config=config)):
            await kube.create(TFJOBS, job, namespace=namespace)
            group = await wait_for(
                kube, POD_GROUPS, "ordered", namespace=namespace, until=lambda o: o is not None
            )
            assert group is not None
            assert group["spec"]["minMember"] == 2
            # The two workers (class value 1000), not the 4-CPU parameter server.
            assert group["spec"]["minResources"] == {"cpu": "2", "memory": "2Gi"}
    finally:
        await kube.delete(PRIORITY_CLASSES, high)
