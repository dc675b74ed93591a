"""A PyTorchJob's pods on a real cluster: the rendezvous environment in every container, the
Worker init container, the master role label, and the seed job running to Succeeded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from jobcontroller.runtime.kube import PODS, SERVICES, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list
from pytorch_operator.controller import PyTorchJobController

PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
SEED = Path(__file__).parents[1] / "data" / "seeds" / "distributed-pytorch-job.yaml"


def pytorchjob(name: str, replicas: dict[str, int], **spec: Any) -> dict[str, Any]:
    """Pods without simulation annotations: they run until deleted."""
    containers = [{"name": "pytorch", "image": "pt:1"}, {"name": "sidecar", "image": "log:1"}]
    specs = {
        rtype: {"replicas": n, "template": {"spec": {"containers": containers}}}
        for rtype, n in replicas.items()
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs, **spec},
    }


def env_of(pod: dict[str, Any], container: str = "pytorch") -> dict[str, str]:
    for c in pod["spec"]["containers"]:
        if c["name"] == container:
            return {e["name"]: e["value"] for e in c.get("env", [])}
    raise AssertionError(f"no container {container}")


def has_condition(job: dict[str, Any] | None, ctype: str) -> bool:
    return job is not None and any(
        c["type"] == ctype and c["status"] == "True"
        for c in ((job.get("status") or {}).get("conditions") or [])
    )


async def test_master_and_workers_get_rendezvous_env_and_workers_wait_for_the_master(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    controller = PyTorchJobController(
        init_container_image="busybox:test", init_container_max_tries=5
    )
    async with running(kubeconfig, controller):
        await kube.create(
            PYTORCHJOBS,
            pytorchjob("dist", {"Master": 1, "Worker": 2}, nprocPerNode="2"),
            namespace=namespace,
        )
        pods = await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 3)
        services = await wait_for_list(
            kube, SERVICES, namespace=namespace, until=lambda i: len(i) == 3
        )
    by_name = {p["metadata"]["name"]: p for p in pods}
    master, worker1 = by_name["dist-master-0"], by_name["dist-worker-1"]
    common = {
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": "dist-master-0",
        "PET_MASTER_ADDR": "dist-master-0",
        "MASTER_PORT": "23456",
        "PET_MASTER_PORT": "23456",
        "WORLD_SIZE": "6",
        "PET_NNODES": "3",
        "PET_NPROC_PER_NODE": "2",
    }
    assert env_of(master) == {**common, "RANK": "0", "PET_NODE_RANK": "0"}
    assert env_of(worker1) == {**common, "RANK": "2", "PET_NODE_RANK": "2"}
    assert env_of(worker1, "sidecar") == env_of(worker1)

    assert master["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in worker1["metadata"]["labels"]
    assert master["spec"]["restartPolicy"] == "OnFailure"
    assert "initContainers" not in master["spec"]
    [init] = worker1["spec"]["initContainers"]
    assert (init["name"], init["image"]) == ("init-pytorch", "busybox:test")
    assert {e["name"]: e["value"] for e in init["env"]} == {
        "MASTER_ADDR": "dist-master-0",
        "MASTER_PORT": "23456",
        "MAX_TRIES": "5",
    }
    assert "nc -z" in init["command"][-1]
    # MASTER_ADDR is the master's headless Service, which serves the port the workers dial.
    master_svc = {s["metadata"]["name"]: s for s in services}["dist-master-0"]
    assert master_svc["spec"]["clusterIP"] == "None"
    assert [(p["name"], p["port"]) for p in master_svc["spec"]["ports"]] == [
        ("pytorchjob-port", 23456)
    ]


async def test_workers_without_master_rendezvous_at_worker_zero_and_do_not_wait(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, PyTorchJobController()):
        await kube.create(PYTORCHJOBS, pytorchjob("solo", {"Worker": 2}), namespace=namespace)
        pods = await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 2)
    worker1 = {p["metadata"]["name"]: p for p in pods}["solo-worker-1"]
    assert env_of(worker1) == {
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": "solo-worker-0",
        "PET_MASTER_ADDR": "solo-worker-0",
        "MASTER_PORT": "23456",
        "PET_MASTER_PORT": "23456",
        "WORLD_SIZE": "2",
        "RANK": "1",
        "PET_NODE_RANK": "1",
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "auto",
    }
    assert "initContainers" not in worker1["spec"]


async def test_seed_job_runs_to_succeeded(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    job = yaml.safe_load(SEED.read_text())
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        simulate(replica["template"], 0, run_for="2s")
    async with running(kubeconfig, PyTorchJobController()) as op:
        await kube.create(PYTORCHJOBS, job, namespace=namespace)
        done = await wait_for(
            kube,
            PYTORCHJOBS,
            "distributed-pytorch-job",
            namespace=namespace,
            until=lambda j: has_condition(j, "Succeeded"),
            timeout=30,
        )
        assert (
            await op.settled_counter(
                "training_operator_jobs_successful_total",
                1,
                job_namespace=namespace,
                framework="pytorch",
            )
            == 1
        )
    assert done is not None
    status = done["status"]
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running", "Succeeded"]
    assert status["conditions"][-1]["reason"] == "PyTorchJobSucceeded"
    assert status["replicaStatuses"]["Master"]["succeeded"] == 1
    assert status["replicaStatuses"]["Worker"]["active"] == 0
    pods, _ = await kube.list(PODS, namespace=namespace)
    assert sorted(p["metadata"]["name"] for p in pods) == [
        "distributed-pytorch-job-master-0",
        "distributed-pytorch-job-worker-0",
        "distributed-pytorch-job-worker-1",
    ]
