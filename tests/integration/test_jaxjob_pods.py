"""The docs' JAXJob (v1.9's examples/jax/cpu-demo/demo.yaml) on a real cluster: its pods,
their labels, owner and coordinator environment, the headless Services, and the run to
Succeeded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from jax_operator.controller import JAXJobController
from jobcontroller.runtime.kube import PODS, SERVICES, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list

JAXJOBS = Resource("kubeflow.org", "v1", "JAXJob", "jaxjobs")
EXAMPLE = Path(__file__).parents[2] / "examples" / "jaxjob-simple.yaml"
NAME = "jaxjob-simple"


def example(*, exit_code: int | None = None) -> dict[str, Any]:
    """The docs example in the test's namespace; ``exit_code`` None: pods run until deleted."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    del job["metadata"]["namespace"]  # "kubeflow" in the docs; each test has its own
    if exit_code is not None:
        simulate(job["spec"]["jaxReplicaSpecs"]["Worker"]["template"], exit_code, run_for="2s")
    return job


def condition(job: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for c in ((job or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return dict(c)
    return None


def has(job: dict[str, Any] | None, ctype: str) -> bool:
    return (condition(job, ctype) or {}).get("status") == "True"


async def test_docs_example_gets_coordinator_env_labels_and_headless_services(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, JAXJobController()):
        created = await kube.create(JAXJOBS, example(), namespace=namespace)
        pods = await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 2)
        services = await wait_for_list(
            kube, SERVICES, namespace=namespace, until=lambda i: len(i) == 2
        )
        running_job = await wait_for(
            kube, JAXJOBS, NAME, namespace=namespace, until=lambda j: has(j, "Running")
        )
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert sorted(by_name) == [f"{NAME}-worker-0", f"{NAME}-worker-1"]
    for index in (0, 1):
        pod = by_name[f"{NAME}-worker-{index}"]
        labels = {
            "training.kubeflow.org/operator-name": "jaxjob-controller",
            "training.kubeflow.org/job-name": NAME,
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": str(index),
        }
        # Worker 0, the coordinator, is v1.9's master role (IsMasterRole: index == 0).
        role = {"training.kubeflow.org/job-role": "master"} if index == 0 else {}
        assert pod["metadata"]["labels"] == {**labels, **role}
        [ref] = pod["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            "JAXJob",
            NAME,
            created["metadata"]["uid"],
            True,
        )
        assert pod["spec"]["restartPolicy"] == "OnFailure"
        [container] = pod["spec"]["containers"]
        assert container["image"] == "ghcr.io/kubeflow/training-v1/jaxjob-simple:latest"
        assert container["command"] == ["python3", "train.py"]
        assert container["ports"] == [
            {"name": "jaxjob-port", "containerPort": 6666, "protocol": "TCP"}
        ]
        assert container["env"] == [
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "COORDINATOR_PORT", "value": "6666"},
            {"name": "COORDINATOR_ADDRESS", "value": f"{NAME}-worker-0"},
            {"name": "NUM_PROCESSES", "value": "2"},
            {"name": "PROCESS_ID", "value": str(index)},
        ]
        # COORDINATOR_ADDRESS is worker 0's Service; every pod has one, serving the port.
        svc = {s["metadata"]["name"]: s for s in services}[f"{NAME}-worker-{index}"]
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["ports"] == [
            {"name": "jaxjob-port", "port": 6666, "protocol": "TCP", "targetPort": 6666}
        ]
        assert svc["spec"]["selector"] == labels
        assert svc["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert running_job is not None
    # The scale subresource's selector: v1.9's GenLabelSelector, keys sorted.
    assert running_job["status"]["replicaStatuses"]["Worker"]["selector"] == (
        f"training.kubeflow.org/job-name={NAME},"
        "training.kubeflow.org/operator-name=jaxjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )
    cond = condition(running_job, "Running")
    assert cond is not None
    assert (cond["reason"], cond["message"]) == (
        "JAXJobRunning",
        f"JAXJob {namespace}/{NAME} is running.",
    )
    created_cond = condition(running_job, "Created")
    assert created_cond is not None
    assert (created_cond["reason"], created_cond["message"]) == (
        "JAXJobCreated",
        f"JAXJob {NAME} is created.",
    )


async def test_docs_example_runs_to_succeeded(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, JAXJobController()) as op:
        await kube.create(JAXJOBS, example(exit_code=0), namespace=namespace)
        done = await wait_for(
            kube,
            JAXJOBS,
            NAME,
            namespace=namespace,
            until=lambda j: has(j, "Succeeded"),
            timeout=30,
        )
        labels = {"job_namespace": namespace, "framework": "jax"}
        assert op.counter("training_operator_jobs_created_total", **labels) == 1
        successful = await op.settled_counter(
            "training_operator_jobs_successful_total", 1, job_namespace=namespace, framework="jax"
        )
        assert successful == 1
    assert done is not None
    status = done["status"]
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running", "Succeeded"]
    succeeded = condition(done, "Succeeded")
    assert succeeded is not None
    assert (succeeded["reason"], succeeded["message"]) == (
        "JAXJobSucceeded",
        f"JAXJob {namespace}/{NAME} successfully completed.",
    )
    worker = status["replicaStatuses"]["Worker"]
    assert (worker["active"], worker["succeeded"], worker["failed"]) == (0, 2, 0)
    assert status["startTime"] <= status["completionTime"]
    # cleanPodPolicy defaults to None: the finished pods stay, with their logs.
    pods, _ = await kube.list(PODS, namespace=namespace)
    assert {p["metadata"]["name"]: p["status"]["phase"] for p in pods} == {
        f"{NAME}-worker-0": "Succeeded",
        f"{NAME}-worker-1": "Succeeded",
    }
