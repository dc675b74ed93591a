"""A TFJob's pods and services: names, labels, owner references, TF_CONFIG, and success."""

from __future__ import annotations

import json

from tfjobs import TFJOBS, has, replica, tfjob

from jobcontroller.runtime.kube import PODS, SERVICES, KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for, wait_for_list
from tf_operator.controller import TFJobController


async def test_ps_worker_job_creates_pods_services_tf_config_and_succeeds(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, TFJobController()) as op:
        job = await kube.create(
            TFJOBS,
            tfjob(
                "mnist",
                {
                    "PS": replica(1, exit_code=0, run_for="3s"),
                    "Worker": replica(2, exit_code=0, run_for="3s"),
                },
            ),
            namespace=namespace,
        )
        uid = job["metadata"]["uid"]
        pods = await wait_for_list(
            kube, PODS, namespace=namespace, until=lambda items: len(items) == 3
        )
        services = await wait_for_list(
            kube, SERVICES, namespace=namespace, until=lambda items: len(items) == 3
        )
        by_name = {p["metadata"]["name"]: p for p in pods}
        assert sorted(by_name) == ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
        w1 = by_name["mnist-worker-1"]
        assert w1["metadata"]["labels"] == {
            "training.kubeflow.org/operator-name": "tfjob-controller",
            "training.kubeflow.org/job-name": "mnist",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "1",
        }
        assert (
            by_name["mnist-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"]
            == "master"
        )
        ref = w1["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
            "TFJob",
            uid,
            True,
            True,
        )
        env = {e["name"]: e["value"] for e in w1["spec"]["containers"][0]["env"]}
        ns = namespace
        assert json.loads(env["TF_CONFIG"]) == {
            "cluster": {
                "ps": [f"mnist-ps-0.{ns}.svc:2222"],
                "worker": [f"mnist-worker-0.{ns}.svc:2222", f"mnist-worker-1.{ns}.svc:2222"],
            },
            "task": {"type": "worker", "index": 1},
            "environment": "cloud",
        }
        svc = {s["metadata"]["name"]: s for s in services}["mnist-worker-1"]
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["ports"] == [
            {"name": "tfjob-port", "port": 2222, "protocol": "TCP", "targetPort": 2222}
        ]
        assert svc["spec"]["selector"] == w1["metadata"]["labels"]

        done = await wait_for(
            kube, TFJOBS, "mnist", namespace=namespace, until=lambda j: has(j, "Succeeded")
        )
        assert done is not None
        status = done["status"]
        assert status["replicaStatuses"]["Worker"] == {"active": 0, "succeeded": 2, "failed": 0}
        assert status["startTime"] <= status["completionTime"]
        assert [c["type"] for c in status["conditions"]] == ["Created", "Running", "Succeeded"]
        assert (
            op.counter(
                "training_operator_jobs_created_total", job_namespace=ns, framework="tensorflow"
            )
            == 1
        )
        assert (
            await op.settled_counter(
                "training_operator_jobs_successful_total",
                1,
                job_namespace=ns,
                framework="tensorflow",
            )
            == 1
        )
