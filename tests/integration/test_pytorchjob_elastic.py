"""Elastic PyTorchJobs on a real cluster: torchrun's rendezvous environment, the
HorizontalPodAutoscaler kept in step with elasticPolicy, and the scale subresource that both an
HPA and ``kubectl scale`` use to change the number of workers.

The cluster's kube-controller-manager runs the HPA controller. It finds no metrics API here,
so it never scales on metrics; the tests keep Worker.replicas inside the HPA's bounds so it
has no reason to clamp them either.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jobcontroller.runtime.kube import HPAS, PODS, KubeApi, Resource
from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.operator import RunningController, running
from jobcontroller.testing.pods import set_pod_status
from jobcontroller.testing.waiting import wait_for, wait_for_list
from pytorch_operator.controller import PyTorchJobController

PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
CPU_METRIC = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}
# The apiserver stores this quantity as "500m": not a change the operator should patch back.
GPU_METRIC = {
    "type": "Pods",
    "pods": {
        "metric": {"name": "gpu_busy"},
        "target": {"type": "AverageValue", "averageValue": "0.5"},
    },
}


def pytorchjob(name: str, replicas: dict[str, int], **spec: Any) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "pt:1"}
    specs = {
        rtype: {"replicas": n, "template": {"spec": {"containers": [container]}}}
        for rtype, n in replicas.items()
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs, **spec},
    }


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0].get("env", [])}


def has_condition(job: dict[str, Any] | None, ctype: str) -> bool:
    return job is not None and any(
        c["type"] == ctype and c["status"] == "True"
        for c in ((job.get("status") or {}).get("conditions") or [])
    )


def hpa_patches(op: RunningController) -> float:
    return op.counter(
        "jobcontroller_api_requests_total",
        verb="PATCH",
        resource="horizontalpodautoscalers.autoscaling",
        code="200",
    )


def workers(items: list[dict[str, Any]]) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in items
        if "-worker-" in p["metadata"]["name"] and not p["metadata"].get("deletionTimestamp")
    )


async def test_elastic_job_gets_rendezvous_env_and_an_hpa_that_follows_the_spec(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    elastic = {
        "minReplicas": 1,
        "maxReplicas": 3,
        "rdzvId": "run-1",
        "maxRestarts": 2,
        "metrics": [CPU_METRIC, GPU_METRIC],
    }
    async with running(kubeconfig, PyTorchJobController()) as op:
        job = await kube.create(
            PYTORCHJOBS, pytorchjob("el", {"Worker": 2}, elasticPolicy=elastic), namespace=namespace
        )
        pods = await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 2)
        hpa = await wait_for(kube, HPAS, "el", namespace=namespace, until=lambda o: o is not None)
        assert hpa is not None
        assert hpa["spec"]["scaleTargetRef"] == {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "el",
        }
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3)
        assert hpa["spec"]["metrics"][0] == CPU_METRIC
        assert hpa["spec"]["metrics"][1]["pods"]["target"]["averageValue"] == "500m"
        assert hpa["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        # Every reconcile since the HPA's creation saw it (expectations hold plans back until
        # then), the one that wrote Running included; none found a reason to patch it.
        await wait_for(
            kube,
            PYTORCHJOBS,
            "el",
            namespace=namespace,
            until=lambda j: has_condition(j, "Running"),
        )
        assert hpa_patches(op) == 0

        await kube.merge_patch(
            PYTORCHJOBS, "el", {"spec": {"elasticPolicy": {"maxReplicas": 4}}}, namespace=namespace
        )
        followed = await wait_for(
            kube,
            HPAS,
            "el",
            namespace=namespace,
            until=lambda o: o is not None and o["spec"]["maxReplicas"] == 4,
            timeout=20,
        )
        # Updated in place, not replaced: the autoscaler keeps its state.
        assert followed is not None
        assert followed["metadata"]["uid"] == hpa["metadata"]["uid"]

        await kube.merge_patch(
            PYTORCHJOBS, "el", {"spec": {"runPolicy": {"suspend": True}}}, namespace=namespace
        )
        await wait_for(kube, HPAS, "el", namespace=namespace, until=lambda o: o is None, timeout=20)
        await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: not i, timeout=20)

        await kube.merge_patch(
            PYTORCHJOBS, "el", {"spec": {"runPolicy": {"suspend": False}}}, namespace=namespace
        )
        back = await wait_for(
            kube, HPAS, "el", namespace=namespace, until=lambda o: o is not None, timeout=20
        )
        assert back is not None and back["spec"]["maxReplicas"] == 4

    env = env_of({p["metadata"]["name"]: p for p in pods}["el-worker-1"])
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "PET_RDZV_ENDPOINT": "el-worker-0:23456",
        "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": "1:3",
        "PET_MAX_RESTARTS": "2",
        "PET_RDZV_ID": "run-1",
        "PET_NPROC_PER_NODE": "auto",
    }
    assert "initContainers" not in pods[0]["spec"]


async def test_finished_elastic_job_loses_its_hpa(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    elastic = {"minReplicas": 1, "maxReplicas": 2, "metrics": [CPU_METRIC]}
    async with running(kubeconfig, PyTorchJobController()):
        await kube.create(
            PYTORCHJOBS,
            pytorchjob("fin", {"Worker": 2}, elasticPolicy=elastic),
            namespace=namespace,
        )
        await wait_for(kube, HPAS, "fin", namespace=namespace, until=lambda o: o is not None)
        await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 2)
        # One worker of an elastic job succeeding finishes the job.
        await set_pod_status(
            kube, namespace=namespace, name="fin-worker-0", phase="Succeeded", exit_code=0
        )
        await wait_for(
            kube, HPAS, "fin", namespace=namespace, until=lambda o: o is None, timeout=20
        )
        job = await kube.get(PYTORCHJOBS, "fin", namespace=namespace)
    assert [c["type"] for c in job["status"]["conditions"]][-1] == "Succeeded"


async def kubectl(kubeconfig: str, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(find_binaries()["kubectl"]),
        "--kubeconfig",
        kubeconfig,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


async def test_kubectl_scale_changes_the_workers_and_status_reports_them(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, PyTorchJobController()):
        await kube.create(
            PYTORCHJOBS, pytorchjob("sc", {"Master": 1, "Worker": 1}), namespace=namespace
        )
        await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 2)

        await kubectl(kubeconfig, "-n", namespace, "scale", "pytorchjob/sc", "--replicas=3")
        items = await wait_for_list(
            kube, PODS, namespace=namespace, until=lambda i: len(workers(i)) == 3, timeout=20
        )
        scale = await wait_for(
            kube,
            PYTORCHJOBS,
            "sc",
            namespace=namespace,
            until=lambda j: (
                j is not None
                and j.get("status", {}).get("replicaStatuses", {}).get("Worker", {}).get("active")
                == 3
            ),
            timeout=20,
        )
        assert scale is not None
        selector = scale["status"]["replicaStatuses"]["Worker"]["selector"]
        assert selector == (
            "training.kubeflow.org/job-name=sc,"
            "training.kubeflow.org/operator-name=pytorchjob-controller,"
            "training.kubeflow.org/replica-type=worker"
        )
        out = await kubectl(
            kubeconfig,
            "-n",
            namespace,
            "get",
            "--raw",
            f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/sc/scale",
        )
        assert '"replicas":3' in out.replace(" ", "")
        selected, _ = await kube.list(PODS, namespace=namespace, label_selector=selector)
        assert workers(selected) == ["sc-worker-0", "sc-worker-1", "sc-worker-2"]
        new = {p["metadata"]["name"]: p for p in items}["sc-worker-2"]
        assert (env_of(new)["RANK"], env_of(new)["WORLD_SIZE"]) == ("3", "4")

        await kubectl(kubeconfig, "-n", namespace, "scale", "pytorchjob/sc", "--replicas=1")
        await wait_for_list(
            kube,
            PODS,
            namespace=namespace,
            until=lambda i: workers(i) == ["sc-worker-0"],
            timeout=20,
        )
