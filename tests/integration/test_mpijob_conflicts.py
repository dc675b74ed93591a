"""Objects with an MPIJob's names that it does not own are never touched; invalid jobs fail."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mpijob_fixtures import MPIJOBS, condition, mpijob, wait_condition, wait_for_event

from jobcontroller.runtime.kube import (
    CONFIGMAPS,
    JOBS,
    SECRETS,
    SERVICES,
    ApiError,
    KubeApi,
)
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for
from mpi_operator.controller import MPIJobController

FOREIGN_LABELS = {"training.kubeflow.org/job-name": "pi", "owner": "someone-else"}


def foreign(kind: str, name: str, **rest: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(FOREIGN_LABELS)}, **rest}


FOREIGN = {
    "ConfigMap": (CONFIGMAPS, foreign("ConfigMap", "pi-config", data={"hostfile": "mine\n"})),
    "Secret": (SECRETS, foreign("Secret", "pi-ssh", stringData={"token": "x"})),
    "Service": (
        SERVICES,
        foreign("Service", "pi", spec={"clusterIP": "None", "selector": {"app": "other"}}),
    ),
    "Job": (
        JOBS,
        foreign(
            "Job",
            "pi-launcher",
            spec={
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}],
                    }
                },
            },
        ),
    ),
}


def content(obj: dict[str, Any]) -> dict[str, Any]:
    """What we could have changed (the Job controller keeps writing a Job's status)."""
    meta = obj["metadata"]
    return {
        "labels": meta.get("labels"),
        "annotations": meta.get("annotations"),
        "ownerReferences": meta.get("ownerReferences"),
        **{k: obj.get(k) for k in ("data", "spec", "type")},
    }


def created_reason(job: dict[str, Any] | None) -> str:
    cond = condition(job, "Created")
    return str(cond["reason"]) if cond else ""


@pytest.mark.parametrize("kind", list(FOREIGN))
async def test_foreign_object_is_reported_and_left_alone(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, kind: str
) -> None:
    ns = namespace
    resource, body = FOREIGN[kind]
    before = await kube.create(resource, body, namespace=ns)
    async with running(kubeconfig, MPIJobController()):
        await kube.create(MPIJOBS, mpijob("pi", launcher_exit=None), namespace=ns)
        job = await wait_for(
            kube,
            MPIJOBS,
            "pi",
            namespace=ns,
            until=lambda j: created_reason(j) == "ErrResourceExists",
        )
        cond = condition(job, "Created")
        assert cond is not None and cond["status"] == "True"
        assert f'"{before["metadata"]["name"]}" of Kind "{kind}"' in cond["message"]
        await wait_for_event(kube, ns, "ErrResourceExists")
        await asyncio.sleep(1)  # more reconciles: still untouched
        after = await kube.get(resource, before["metadata"]["name"], namespace=ns)
        assert content(after) == content(before)

        # Once the name is free the job takes it and the condition is restored.
        await kube.delete(resource, before["metadata"]["name"], namespace=ns)
        await wait_for(
            kube,
            MPIJOBS,
            "pi",
            namespace=ns,
            until=lambda j: created_reason(j) == "MPIJobCreated",
        )
        await wait_condition(kube, "pi", "Running", namespace=ns)


async def test_apiserver_rejects_what_mpi_operator_rejects(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    body = mpijob("pi")
    body["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    body["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "Always"
    with pytest.raises(ApiError) as err:
        await kube.create(MPIJOBS, body, namespace=namespace)
    assert err.value.status == 422
    assert "Launcher replicas must be 1" in err.value.message
    assert "must be Never or OnFailure" in err.value.message


async def test_worker_host_names_must_be_dns_labels(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    """``<name>-launcher`` fits in 63 characters but ``<name>-worker-10`` does not."""
    with pytest.raises(ApiError) as err:
        await kube.create(MPIJOBS, mpijob("n" * 54, workers=11), namespace=namespace)
    assert err.value.status == 422 and "at most 63 characters" in err.value.message
