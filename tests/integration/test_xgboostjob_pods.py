"""The docs' XGBoostJob on a real cluster: its pods and headless Services with v1.9's names,
labels, ports and Rabit/LightGBM environment, and the job running to Succeeded."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.runtime.kube import PODS, SERVICES, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list
from xgboost_operator.controller import XGBoostJobController

XGBOOSTJOBS = Resource("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs")
EXAMPLE = Path(__file__).parents[2] / "examples" / "xgboostjob-iris.yaml"
NAME = "xgboost-dist-iris-test-train"


def example() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return raw


def env_of(pod: dict[str, Any], container: str = "xgboost") -> list[tuple[str, str]]:
    for c in pod["spec"]["containers"]:
        if c["name"] == container:
            return [(e["name"], e["value"]) for e in c.get("env", [])]
    raise AssertionError(f"no container {container}")


def has_condition(job: dict[str, Any] | None, ctype: str) -> bool:
    return job is not None and any(
        c["type"] == ctype and c["status"] == "True"
        for c in ((job.get("status") or {}).get("conditions") or [])
    )


async def test_docs_example_pods_services_labels_and_env(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    job = example()
    # A sidecar, to show that every container gets the environment.
    job["spec"]["xgbReplicaSpecs"]["Worker"]["template"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "log:1"}
    )
    async with running(kubeconfig, XGBoostJobController()):
        created = await kube.create(XGBOOSTJOBS, job, namespace=namespace)
        pods = await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 3)
        services = await wait_for_list(
            kube, SERVICES, namespace=namespace, until=lambda i: len(i) == 3
        )
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert sorted(by_name) == [f"{NAME}-master-0", f"{NAME}-worker-0", f"{NAME}-worker-1"]
    master, worker1 = by_name[f"{NAME}-master-0"], by_name[f"{NAME}-worker-1"]

    def labels(rtype: str, index: int) -> dict[str, str]:
        return {
            "training.kubeflow.org/operator-name": "xgboostjob-controller",
            "training.kubeflow.org/job-name": NAME,
            "training.kubeflow.org/replica-type": rtype,
            "training.kubeflow.org/replica-index": str(index),
        }

    assert master["metadata"]["labels"] == {
        **labels("master", 0),
        "training.kubeflow.org/job-role": "master",
    }
    assert worker1["metadata"]["labels"] == labels("worker", 1)
    ref = worker1["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "XGBoostJob",
        NAME,
        created["metadata"]["uid"],
        True,
    )
    # The replicas' restart policies: Never as given; ExitCode is the operator's to enforce.
    assert master["spec"]["restartPolicy"] == worker1["spec"]["restartPolicy"] == "Never"

    def env(rank: int) -> list[tuple[str, str]]:
        return [
            ("MASTER_PORT", "9991"),
            ("MASTER_ADDR", f"{NAME}-master-0"),
            ("WORLD_SIZE", "3"),
            ("RANK", str(rank)),
            ("PYTHONUNBUFFERED", "1"),
            ("WORKER_PORT", "9991"),
            ("WORKER_ADDRS", f"{NAME}-worker-0,{NAME}-worker-1"),
        ]

    assert env_of(master) == env(0)
    assert env_of(by_name[f"{NAME}-worker-0"]) == env(1)
    assert env_of(worker1) == env(2)
    assert env_of(worker1, "sidecar") == env(2)

    svcs = {s["metadata"]["name"]: s for s in services}
    assert sorted(svcs) == sorted(by_name)
    for pod_name, svc in svcs.items():
        pod_labels = {
            k: v
            for k, v in by_name[pod_name]["metadata"]["labels"].items()
            if k != "training.kubeflow.org/job-role"
        }
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["selector"] == pod_labels
        assert svc["metadata"]["labels"] == pod_labels
        assert svc["spec"]["ports"] == [
            {"name": "xgboostjob-port", "port": 9991, "protocol": "TCP", "targetPort": 9991}
        ]


async def test_default_port_is_9999_and_a_lone_master_gets_no_worker_env(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    job = example()
    del job["spec"]["xgbReplicaSpecs"]["Worker"]
    del job["spec"]["xgbReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["ports"]
    async with running(kubeconfig, XGBoostJobController()):
        await kube.create(XGBOOSTJOBS, job, namespace=namespace)
        [pod] = await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 1)
        [svc] = await wait_for_list(
            kube, SERVICES, namespace=namespace, until=lambda i: len(i) == 1
        )
    assert env_of(pod) == [
        ("MASTER_PORT", "9999"),
        ("MASTER_ADDR", f"{NAME}-master-0"),
        ("WORLD_SIZE", "1"),
        ("RANK", "0"),
        ("PYTHONUNBUFFERED", "1"),
    ]
    assert pod["spec"]["containers"][0]["ports"] == [
        {"name": "xgboostjob-port", "containerPort": 9999, "protocol": "TCP"}
    ]
    assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("xgboostjob-port", 9999)]


async def test_docs_example_runs_to_succeeded(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    job = example()
    specs = job["spec"]["xgbReplicaSpecs"]
    simulate(specs["Master"]["template"], 0, run_for="3s")
    simulate(specs["Worker"]["template"], 0, run_for="2s")
    async with running(kubeconfig, XGBoostJobController()) as op:
        await kube.create(XGBOOSTJOBS, copy.deepcopy(job), namespace=namespace)
        done = await wait_for(
            kube,
            XGBOOSTJOBS,
            NAME,
            namespace=namespace,
            until=lambda j: has_condition(j, "Succeeded"),
            timeout=30,
        )
        assert (
            await op.settled_counter(
                "training_operator_jobs_successful_total",
                1,
                job_namespace=namespace,
                framework="xgboost",
            )
            == 1
        )
        assert (
            op.counter(
                "training_operator_jobs_created_total", job_namespace=namespace, framework="xgboost"
            )
            == 1
        )
    assert done is not None
    status = done["status"]
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("Created", "True", "XGBoostJobCreated", f"XGBoostJob {NAME} is created."),
        ("Running", "False", "XGBoostJobRunning", f"XGBoostJob {NAME} is running."),
        (
            "Succeeded",
            "True",
            "XGBoostJobSucceeded",
            f"XGBoostJob {NAME} is successfully completed.",
        ),
    ]
    assert status["replicaStatuses"]["Master"] == {"active": 0, "succeeded": 1, "failed": 0}
    assert status["startTime"] <= status["completionTime"]
