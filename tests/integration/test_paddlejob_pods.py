"""A PaddleJob's pods and Services on a real cluster, as v1.9 creates them: the PADDLE_*
environment in every container, labels, one headless Service per pod of every replica type, in
collective mode (the docs example) and parameter-server mode; and the docs example running to
Succeeded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from jobcontroller.runtime.kube import PODS, SERVICES, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list
from paddle_operator.controller import PaddleJobController

PADDLEJOBS = Resource("kubeflow.org", "v1", "PaddleJob", "paddlejobs")
EXAMPLE = Path(__file__).parents[2] / "examples" / "paddlejob-simple-cpu.yaml"
PREFIX = "training.kubeflow.org/"
# As stored: the API server defaults the fieldRef's apiVersion, as it did for v1.9's pods.
POD_IP = {
    "name": "POD_IP_DUMMY",
    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
}


def example(namespace: str) -> dict[str, Any]:
    """The docs example, in the test's namespace instead of ``kubeflow``."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    job["metadata"]["namespace"] = namespace
    return job


def var(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def env_of(pod: dict[str, Any], container: str = "paddle") -> list[dict[str, Any]]:
    for c in pod["spec"]["containers"]:
        if c["name"] == container:
            return list(c.get("env", []))
    raise AssertionError(f"no container {container}")


def labels(job: str, rtype: str, index: int, *, master: bool = False) -> dict[str, str]:
    out = {
        PREFIX + "operator-name": "paddlejob-controller",
        PREFIX + "job-name": job,
        PREFIX + "replica-type": rtype,
        PREFIX + "replica-index": str(index),
    }
    if master:
        out[PREFIX + "job-role"] = "master"
    return out


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["metadata"]["name"]: i for i in items}


def has_condition(job: dict[str, Any] | None, ctype: str) -> bool:
    return job is not None and any(
        c["type"] == ctype and c["status"] == "True"
        for c in ((job.get("status") or {}).get("conditions") or [])
    )


async def test_docs_example_pods_services_labels_and_env(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, PaddleJobController()):
        await kube.create(PADDLEJOBS, example(namespace), namespace=namespace)
        pods = by_name(
            await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 2)
        )
        services = by_name(
            await wait_for_list(kube, SERVICES, namespace=namespace, until=lambda i: len(i) == 2)
        )
    name = "paddle-simple-cpu"
    assert sorted(pods) == sorted(services) == [f"{name}-worker-0", f"{name}-worker-1"]
    common = [
        var("PYTHONUNBUFFERED", "1"),
        var("PADDLE_JOB_ID", name),
        var("PADDLE_NNODES", "2"),
    ]
    worker0, worker1 = pods[f"{name}-worker-0"], pods[f"{name}-worker-1"]
    assert env_of(worker0) == [*common, POD_IP, var("PADDLE_MASTER", "$(POD_IP_DUMMY):37777")]
    assert env_of(worker1) == [*common, var("PADDLE_MASTER", f"{name}-worker-0:37777")]
    for index, pod in enumerate((worker0, worker1)):
        # Collective mode has no master role (v1.9's IsMasterRole: the Master type only).
        assert pod["metadata"]["labels"] == labels(name, "worker", index)
        assert pod["spec"]["restartPolicy"] == "OnFailure"
        [container] = pod["spec"]["containers"]
        assert container["ports"] == [{"containerPort": 37777, "name": "master", "protocol": "TCP"}]
        [owner] = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("PaddleJob", name, True)
        # PADDLE_MASTER of the other workers names this Service: headless, the pod's port.
        svc = services[pod["metadata"]["name"]]
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["selector"] == labels(name, "worker", index)
        assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("master", 37777)]
        assert svc["metadata"]["labels"] == labels(name, "worker", index)


async def test_parameter_server_mode_masters_and_workers(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    def replica(n: int) -> dict[str, Any]:
        containers = [{"name": "paddle", "image": "pd:1"}, {"name": "sidecar", "image": "log:1"}]
        return {"replicas": n, "template": {"spec": {"containers": containers}}}

    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": "ps"},
        "spec": {"paddleReplicaSpecs": {"Master": replica(2), "Worker": replica(2)}},
    }
    async with running(kubeconfig, PaddleJobController()):
        await kube.create(PADDLEJOBS, job, namespace=namespace)
        pods = by_name(
            await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 4)
        )
        services = by_name(
            await wait_for_list(kube, SERVICES, namespace=namespace, until=lambda i: len(i) == 4)
        )
        stored = await wait_for(
            kube,
            PADDLEJOBS,
            "ps",
            namespace=namespace,
            until=lambda j: "Worker" in ((j or {}).get("status") or {}).get("replicaStatuses", {}),
        )
    common = [var("PYTHONUNBUFFERED", "1"), var("PADDLE_JOB_ID", "ps"), var("PADDLE_NNODES", "4")]
    assert env_of(pods["ps-master-0"]) == [
        *common,
        POD_IP,
        var("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
        var("PADDLE_SERVER_NUM", "1"),
    ]
    assert env_of(pods["ps-master-1"]) == [
        *common,
        var("PADDLE_MASTER", "ps-master-0:36543"),
        var("PADDLE_SERVER_NUM", "1"),
    ]
    worker_env = [
        *common,
        var("PADDLE_MASTER", "ps-master-0:36543"),
        var("PADDLE_TRAINER_NUM", "1"),
    ]
    assert env_of(pods["ps-worker-0"]) == env_of(pods["ps-worker-1"]) == worker_env
    # Every container gets it, not only the paddle one.
    assert env_of(pods["ps-worker-1"], "sidecar") == worker_env
    for index in (0, 1):
        assert pods[f"ps-master-{index}"]["metadata"]["labels"] == labels(
            "ps", "master", index, master=True
        )
        assert pods[f"ps-worker-{index}"]["metadata"]["labels"] == labels("ps", "worker", index)
    # Every pod of both types has its Service, with the defaulted port 36543.
    assert sorted(services) == sorted(pods)
    assert {
        tuple((p["name"], p["port"]) for p in s["spec"]["ports"]) for s in services.values()
    } == {(("master", 36543),)}
    assert stored is not None
    # The scale subresource's selector, as v1.9 formats it.
    assert stored["status"]["replicaStatuses"]["Worker"]["selector"] == (
        "training.kubeflow.org/job-name=ps,"
        "training.kubeflow.org/operator-name=paddlejob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )


async def test_docs_example_runs_to_succeeded(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    job = example(namespace)
    simulate(job["spec"]["paddleReplicaSpecs"]["Worker"]["template"], 0, run_for="2s")
    async with running(kubeconfig, PaddleJobController()) as op:
        await kube.create(PADDLEJOBS, job, namespace=namespace)
        done = await wait_for(
            kube,
            PADDLEJOBS,
            "paddle-simple-cpu",
            namespace=namespace,
            until=lambda j: has_condition(j, "Succeeded"),
            timeout=30,
        )
        assert (
            await op.settled_counter(
                "training_operator_jobs_successful_total",
                1,
                job_namespace=namespace,
                framework="paddle",
            )
            == 1
        )
    assert done is not None
    status = done["status"]
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running", "Succeeded"]
    created, running_, succeeded = status["conditions"]
    assert created["message"] == "PaddleJob paddle-simple-cpu is created."
    assert (running_["status"], running_["reason"]) == ("False", "PaddleJobRunning")
    assert running_["message"] == f"PaddleJob {namespace}/paddle-simple-cpu is running."
    assert succeeded["reason"] == "PaddleJobSucceeded"
    assert (
        succeeded["message"] == f"PaddleJob {namespace}/paddle-simple-cpu successfully completed."
    )
    assert status["replicaStatuses"]["Worker"]["succeeded"] == 2
    assert status["completionTime"]
