"""The ceilings on what a job may ask for, on a real API server (issue 30).

Replicas per type above 100,000 (the Indexed Job maximum; up to 2^31-1 before), elastic
min/maxReplicas above it, nprocPerNode and slotsPerWorker above 1,024 processes per pod: each
is refused at admission for every kind that has the field, with a message naming the limit and
(where the API server prints it) the value. The operator agrees: the same object, stored before
the ceiling existed, fails validation at its first reconcile and nothing is built.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from jax_operator.controller import JAXJobController
from jobcontroller import CreateObject, JobController, Observed, plan
from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from mpi_operator.controller import MPIJobController
from paddle_operator.controller import PaddleJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController
from xgboost_operator.controller import XGBoostJobController

Obj = dict[str, Any]
INT32_MAX = 2**31 - 1


def _kind(
    kind: str, version: str, plural: str, field: str, container: str, specs: dict[str, int]
) -> Callable[[], Obj]:
    def make() -> Obj:
        return {
            "apiVersion": f"kubeflow.org/{version}",
            "kind": kind,
            "metadata": {"name": "ask"},
            "spec": {
                field: {
                    rtype: {
                        "replicas": n,
                        "template": {
                            "spec": {"containers": [{"name": container, "image": "img:1"}]}
                        },
                    }
                    for rtype, n in specs.items()
                }
            },
        }

    return make


KINDS: dict[str, tuple[Resource, str, Callable[[], Obj], type[JobController[Any]]]] = {
    "TFJob": (
        Resource("kubeflow.org", "v1", "TFJob", "tfjobs"),
        "tfReplicaSpecs",
        _kind("TFJob", "v1", "tfjobs", "tfReplicaSpecs", "tensorflow", {"Worker": 1}),
        TFJobController,
    ),
    "PyTorchJob": (
        Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
        "pytorchReplicaSpecs",
        _kind("PyTorchJob", "v1", "pytorchjobs", "pytorchReplicaSpecs", "pytorch", {"Worker": 1}),
        PyTorchJobController,
    ),
    "MPIJob": (
        Resource("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
        "mpiReplicaSpecs",
        _kind(
            "MPIJob", "v2beta1", "mpijobs", "mpiReplicaSpecs", "mpi", {"Launcher": 1, "Worker": 1}
        ),
        MPIJobController,
    ),
    "XGBoostJob": (
        Resource("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs"),
        "xgbReplicaSpecs",
        _kind(
            "XGBoostJob",
            "v1",
            "xgboostjobs",
            "xgbReplicaSpecs",
            "xgboost",
            {"Master": 1, "Worker": 1},
        ),
        XGBoostJobController,
    ),
    "PaddleJob": (
        Resource("kubeflow.org", "v1", "PaddleJob", "paddlejobs"),
        "paddleReplicaSpecs",
        _kind("PaddleJob", "v1", "paddlejobs", "paddleReplicaSpecs", "paddle", {"Worker": 1}),
        PaddleJobController,
    ),
    "JAXJob": (
        Resource("kubeflow.org", "v1", "JAXJob", "jaxjobs"),
        "jaxReplicaSpecs",
        _kind("JAXJob", "v1", "jaxjobs", "jaxReplicaSpecs", "jax", {"Worker": 1}),
        JAXJobController,
    ),
}


def _with(kind: str, mutate: Callable[[Obj], None]) -> Obj:
    job = KINDS[kind][2]()
    mutate(job)
    return job


def _worker_replicas(kind: str, value: int) -> Callable[[Obj], None]:
    def mutate(job: Obj) -> None:
        job["spec"][KINDS[kind][1]]["Worker"]["replicas"] = value

    return mutate


def _spec(**fields: Any) -> Callable[[Obj], None]:
    def mutate(job: Obj) -> None:
        job["spec"].update(copy.deepcopy(fields))

    return mutate


CASES: list[Any] = [
    *(
        pytest.param(
            kind,
            _worker_replicas(kind, value),
            ["replicas", f"Invalid value: {value}", "less than or equal to 100000"],
            id=f"{kind}-replicas-{value}",
        )
        for kind in KINDS
        for value in (100_001, INT32_MAX)
    ),
    pytest.param(
        "PyTorchJob",
        _spec(elasticPolicy={"maxReplicas": INT32_MAX}),
        [
            "elasticPolicy.maxReplicas",
            f"Invalid value: {INT32_MAX}",
            "less than or equal to 100000",
        ],
        id="PyTorchJob-elastic-maxReplicas",
    ),
    pytest.param(
        "PyTorchJob",
        _spec(elasticPolicy={"minReplicas": 100_001, "maxReplicas": 100_001}),
        ["elasticPolicy.minReplicas", "less than or equal to 100000"],
        id="PyTorchJob-elastic-minReplicas",
    ),
    pytest.param(
        "PyTorchJob",
        _spec(nprocPerNode="2147483647"),
        ["nprocPerNode", "must be at most 1024 processes per pod, got 2147483647"],
        id="PyTorchJob-nprocPerNode",
    ),
    pytest.param(
        "PyTorchJob",
        _spec(nprocPerNode="1025"),
        ["nprocPerNode", "must be at most 1024 processes per pod, got 1025"],
        id="PyTorchJob-nprocPerNode-just-over",
    ),
    pytest.param(
        "PyTorchJob",
        _spec(elasticPolicy={"nProcPerNode": 5000}),
        ["elasticPolicy.nProcPerNode", "Invalid value: 5000", "less than or equal to 1024"],
        id="PyTorchJob-elastic-nProcPerNode",
    ),
    pytest.param(
        "MPIJob",
        _spec(slotsPerWorker=100_000),
        ["slotsPerWorker", "Invalid value: 100000", "less than or equal to 1024"],
        id="MPIJob-slotsPerWorker",
    ),
    pytest.param(
        "PaddleJob",
        _spec(elasticPolicy={"minReplicas": 1, "maxReplicas": INT32_MAX}),
        ["elasticPolicy.maxReplicas", "less than or equal to 100000"],
        id="PaddleJob-elastic-maxReplicas",
    ),
]


@pytest.mark.parametrize(("kind", "mutate", "expected"), CASES)
async def test_asks_past_a_ceiling_are_refused_with_the_limit_and_the_value(
    kube: KubeApi,
    kubeflow_crds: list[str],
    namespace: str,
    kind: str,
    mutate: Callable[[Obj], None],
    expected: list[str],
) -> None:
    job = _with(kind, mutate)
    with pytest.raises(ApiError) as caught:
        await kube.create(KINDS[kind][0], job, namespace=namespace)
    assert caught.value.status == 422
    for text in expected:
        assert text in caught.value.message, caught.value.message


@pytest.mark.parametrize("kind", sorted(k for k in KINDS if k != "PaddleJob"))
def test_the_operator_fails_such_a_job_stored_before_the_ceiling(kind: str) -> None:
    # Paddle's elastic policy is stored and never read: a stored one past the ceiling is
    # tolerated (a warning), as v1.9 ran it. Everything else fails validation, unbuilt.
    for param in CASES:
        case_kind, mutate, _ = param.values
        if case_kind != kind:
            continue
        raw = _with(kind, mutate) | {}
        raw["metadata"] = {"name": "ask", "namespace": "ns", "uid": "u-ask"}
        controller = KINDS[kind][3]()
        result = plan(
            controller, raw, Observed(), now=dt.datetime.now(dt.UTC), config=controller.config
        )
        assert result.status is not None
        failed = result.status.condition("Failed")
        assert failed is not None, (param.id, result.status)
        assert failed.reason == f"{kind}FailedValidation", param.id
        assert not [a for a in result.actions if isinstance(a, CreateObject)], param.id


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_the_ceiling_itself_is_accepted(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str, kind: str
) -> None:
    job = _with(kind, _worker_replicas(kind, 100_000))
    if kind == "PyTorchJob":
        _spec(nprocPerNode="1024", elasticPolicy={"minReplicas": 1, "maxReplicas": 100_000})(job)
    if kind == "MPIJob":
        _spec(slotsPerWorker=1024)(job)
    job["spec"]["runPolicy"] = {"suspend": True}  # nothing is to run
    created = await kube.create(KINDS[kind][0], job, namespace=namespace)
    assert created["spec"][KINDS[kind][1]]["Worker"]["replicas"] == 100_000
