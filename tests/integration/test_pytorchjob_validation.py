"""Invalid PyTorchJobs on a real cluster: the CRD turns most away at admission; a job that got
past admission anyway is failed with PyTorchJobFailedValidation and gets no pods.

Getting past admission happens when the CRD installed is not ours: the training-operator's own
CRD has none of these rules (its webhook enforced them), so clusters upgraded from it store
such jobs. The second test reproduces that with a copy of our CRD, stripped of its CEL rules,
served under a group of its own so the session's real CRD is left alone.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from jobcontroller.runtime.kube import CRDS, PODS, ApiError, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for
from pytorch_operator.api import PyTorchJob, pytorchjob_crd
from pytorch_operator.controller import PyTorchJobController

PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
LAX_GROUP = "lax.kubeflow.org"
LAX_PYTORCHJOBS = Resource(LAX_GROUP, "v1", "PyTorchJob", "pytorchjobs")


def replica(n: int | None, *, container: str = "pytorch") -> dict[str, Any]:
    out: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": container, "image": "pt:1"}]}}
    }
    if n is not None:
        out["replicas"] = n
    return out


def pytorchjob(name: str, specs: dict[str, Any], *, api_version: str, **spec: Any) -> Any:
    return {
        "apiVersion": api_version,
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs, **spec},
    }


@pytest.mark.parametrize(
    ("specs", "spec", "message"),
    [
        ({"Master": replica(1)}, {"elasticPolicy": {}}, "elasticPolicy requires a Worker"),
        (
            {"Worker": replica(2)},
            {"elasticPolicy": {"minReplicas": 3, "maxReplicas": 2}},
            "minReplicas must not exceed",
        ),
        ({"Master": replica(1), "Worker": replica(0)}, {}, "Worker replicas must be at least 1"),
    ],
    ids=["elastic-without-worker", "elastic-min-above-max", "zero-workers"],
)
async def test_admission_rejects_invalid_elastic_and_worker_specs(
    kube: KubeApi,
    kubeflow_crds: list[str],
    namespace: str,
    specs: dict[str, Any],
    spec: dict[str, Any],
    message: str,
) -> None:
    body = pytorchjob("bad", specs, api_version="kubeflow.org/v1", **spec)
    with pytest.raises(ApiError) as caught:
        await kube.create(PYTORCHJOBS, body, namespace=namespace)
    assert caught.value.status == 422
    assert message in caught.value.message


def _strip_rules(schema: Any) -> None:
    if isinstance(schema, dict):
        schema.pop("x-kubernetes-validations", None)
        for value in schema.values():
            _strip_rules(value)
    elif isinstance(schema, list):
        for item in schema:
            _strip_rules(item)


@pytest_asyncio.fixture(loop_scope="session")
async def lax_crd(kube: KubeApi) -> AsyncIterator[None]:
    crd = copy.deepcopy(pytorchjob_crd())
    crd["metadata"]["name"] = f"pytorchjobs.{LAX_GROUP}"
    crd["spec"]["group"] = LAX_GROUP
    _strip_rules(crd["spec"]["versions"])
    await kube.create(CRDS, crd)

    def established(obj: dict[str, Any] | None) -> bool:
        conditions = ((obj or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    await wait_for(kube, CRDS, crd["metadata"]["name"], until=established, timeout=30)
    try:
        yield
    finally:
        await kube.delete(CRDS, crd["metadata"]["name"])


class LaxPyTorchJob(PyTorchJob):
    GROUP: ClassVar[str] = LAX_GROUP


class LaxPyTorchJobController(PyTorchJobController):
    model = LaxPyTorchJob


async def test_job_that_escaped_admission_fails_validation_without_pods(
    kube: KubeApi, kubeconfig: str, lax_crd: None, namespace: str
) -> None:
    specs = {"Master": replica(2), "Worker": replica(1, container="main")}
    api_version = f"{LAX_GROUP}/v1"
    async with running(kubeconfig, LaxPyTorchJobController()) as op:
        await kube.create(
            LAX_PYTORCHJOBS, pytorchjob("bad", specs, api_version=api_version), namespace=namespace
        )
        job = await wait_for(
            kube,
            LAX_PYTORCHJOBS,
            "bad",
            namespace=namespace,
            until=lambda j: any(
                c["type"] == "Failed" and c["status"] == "True"
                for c in (((j or {}).get("status") or {}).get("conditions") or [])
            ),
            timeout=20,
        )
        # A valid job in the same lax world does get its pods: the operator works there.
        await kube.create(
            LAX_PYTORCHJOBS,
            pytorchjob("good", {"Master": replica(1)}, api_version=api_version),
            namespace=namespace,
        )
        await wait_for(
            kube, PODS, "good-master-0", namespace=namespace, until=lambda p: p is not None
        )
        failed_total = await op.settled_counter(
            "training_operator_jobs_failed_total", 1, job_namespace=namespace, framework="pytorch"
        )
    assert job is not None
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PyTorchJobFailedValidation"
    assert "Master replicas must be set to 1" in failed["message"]
    assert "must have a container named 'pytorch'" in failed["message"]
    assert failed_total == 1
    pods, _ = await kube.list(PODS, namespace=namespace)
    assert [p["metadata"]["name"] for p in pods] == ["good-master-0"]
