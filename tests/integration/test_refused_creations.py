"""Jobs whose pods the API server refuses end rightly, with the server's own words.

A worker template the API server finds invalid (the CRD keeps the pod template open, as the
anchors' CRDs did, so the job itself is admitted) used to let a PyTorchJob or an MPIJob report
Succeeded with no worker at all once its master or launcher exited, and a TFJob sat in Created
for ever, retrying. Now such a job fails after a few identical refusals, with a condition and a
Warning that carry the API server's message, and is never Succeeded while a replica type it asks
for has no pod. A refusal that may pass (a quota) is shown on the Created condition instead, and
the job recovers by itself once the cause goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mpijob_fixtures import MPIJOBS, mpijob
from tfjobs import TFJOBS, condition, has, replica, tfjob, wait_event

from jobcontroller.controller import JobController
from jobcontroller.runtime.kube import KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for
from mpi_operator.controller import MPIJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController

PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
RESOURCE_QUOTAS = Resource("", "v1", "ResourceQuota", "resourcequotas")

BAD_PORT = {"ports": [{"containerPort": 70000}]}
SERVER_SAYS = "Invalid value: 70000: must be between 1 and 65535, inclusive"


def _container(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "img:1", **extra}


def _pytorch() -> tuple[Resource, dict[str, Any]]:
    master = {"spec": {"containers": [_container("pytorch")]}}
    simulate(master, 0, run_for="1s")
    worker = {"spec": {"containers": [_container("pytorch", **BAD_PORT)]}}
    specs = {
        "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": master},
        "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": worker},
    }
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bad"},
        "spec": {"pytorchReplicaSpecs": specs},
    }
    return PYTORCHJOBS, body


def _mpi() -> tuple[Resource, dict[str, Any]]:
    body = mpijob("bad", run_for="1s", worker_spec={"containers": [_container("w", **BAD_PORT)]})
    return MPIJOBS, body


def _tf() -> tuple[Resource, dict[str, Any]]:
    worker = replica(2, exit_code=0)
    worker["template"]["spec"]["containers"][0].update(BAD_PORT)
    return TFJOBS, tfjob("bad", {"Chief": replica(1, exit_code=0), "Worker": worker})


CASES = [
    pytest.param(_pytorch, PyTorchJobController, id="pytorch-master-exits-0"),
    pytest.param(_mpi, MPIJobController, id="mpi-launcher-exits-0"),
    pytest.param(_tf, TFJobController, id="tf-chief-exits-0"),
]


@pytest.mark.parametrize(("make", "controller"), CASES)
async def test_a_job_whose_workers_are_refused_fails_with_the_servers_message(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    make: Callable[[], tuple[Resource, dict[str, Any]]],
    controller: Callable[[], JobController],
) -> None:
    resource, body = make()
    seen: list[dict[str, Any]] = []

    def finished(job: dict[str, Any] | None) -> bool:
        if job is not None:
            seen.append(job)
        return has(job, "Failed") or has(job, "Succeeded")

    async with running(kubeconfig, controller()):
        await kube.create(resource, body, namespace=namespace)
        done = await wait_for(
            kube, resource, "bad", namespace=namespace, until=finished, timeout=60
        )
        warning = await wait_event(kube, namespace, "FailedCreatePod")
    assert not any(has(job, "Succeeded") for job in seen)
    failed = condition(done, "Failed")
    assert failed is not None and failed["status"] == "True"
    assert failed["reason"] == "FailedCreatePod"
    assert failed["message"].startswith("Error creating pod bad-worker-")
    assert SERVER_SAYS in failed["message"]
    assert warning["type"] == "Warning"
    assert SERVER_SAYS in warning["message"]


async def test_a_quota_refusal_shows_on_created_and_clears_once_the_quota_allows(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    quota = {"metadata": {"name": "small"}, "spec": {"hard": {"pods": "2"}}}
    await kube.create(RESOURCE_QUOTAS, quota, namespace=ns)
    await wait_for(
        kube,
        RESOURCE_QUOTAS,
        "small",
        namespace=ns,
        until=lambda q: bool(((q or {}).get("status") or {}).get("hard")),
        timeout=30,
        what="the quota controller to fill in the quota's status",
    )
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, tfjob("q", {"Worker": replica(3)}), namespace=ns)
        blocked = await wait_for(
            kube,
            TFJOBS,
            "q",
            namespace=ns,
            until=lambda j: (condition(j, "Created") or {}).get("reason") == "FailedCreatePod",
            timeout=60,
        )
        created = condition(blocked, "Created")
        assert created is not None and created["status"] == "True"
        assert "exceeded quota: small" in created["message"]
        assert not has(blocked, "Failed")
        await wait_event(kube, ns, "FailedCreatePod")

        quota["spec"] = {"hard": {"pods": "10"}}
        current = await kube.get(RESOURCE_QUOTAS, "small", namespace=ns)
        await kube.replace(RESOURCE_QUOTAS, {**current, "spec": quota["spec"]}, namespace=ns)
        # The pass that clears the reason counts the third pod before it runs: its count
        # comes with a later write.
        await wait_for(
            kube,
            TFJOBS,
            "q",
            namespace=ns,
            until=lambda j: (
                (condition(j, "Created") or {}).get("reason") == "TFJobCreated"
                and has(j, "Running")
                and ((j.get("status") or {}).get("replicaStatuses") or {})
                .get("Worker", {})
                .get("active")
                == 3
            ),
            timeout=90,
            what="the job to get its third pod and run",
        )
