"""Planning never writes into the job it is given: that dict is the informer cache's. The
models keep the templates' dicts as they are (pydantic passes ``Any`` values through), so a
defaulter that set the framework's port in place would change the cached job."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from plan_fixtures import NOW, FakeCluster, kubeflow_job

from jax_operator.controller import JAXJobController
from jobcontroller.controller.base import JobController
from jobcontroller.core.planner import plan
from jobcontroller.core.types import PlanConfig
from mpi_operator.controller import MPIJobController
from paddle_operator.controller import PaddleJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController
from xgboost_operator.controller import XGBoostJobController


def _replica(container: str, replicas: int = 1) -> dict[str, Any]:
    # No ports and no restartPolicy: the defaulters add both.
    return {
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": container, "image": "i"}]}},
    }


CASES: list[tuple[type[JobController[Any]], str, str, dict[str, Any]]] = [
    (TFJobController, "v1", "TFJob", {"tfReplicaSpecs": {"Worker": _replica("tensorflow", 2)}}),
    (
        PyTorchJobController,
        "v1",
        "PyTorchJob",
        {"pytorchReplicaSpecs": {"Master": _replica("pytorch"), "Worker": _replica("pytorch", 2)}},
    ),
    (
        XGBoostJobController,
        "v1",
        "XGBoostJob",
        {"xgbReplicaSpecs": {"Master": _replica("xgboost"), "Worker": _replica("xgboost")}},
    ),
    (
        PaddleJobController,
        "v1",
        "PaddleJob",
        {"paddleReplicaSpecs": {"Master": _replica("paddle"), "Worker": _replica("paddle")}},
    ),
    (JAXJobController, "v1", "JAXJob", {"jaxReplicaSpecs": {"Worker": _replica("jax", 2)}}),
    (
        MPIJobController,
        "v2beta1",
        "MPIJob",
        {"mpiReplicaSpecs": {"Launcher": _replica("launcher"), "Worker": _replica("worker", 2)}},
    ),
]


@pytest.mark.parametrize(
    ("controller", "version", "kind", "spec"), CASES, ids=[c[2] for c in CASES]
)
def test_planning_a_job_leaves_the_job_as_it_was_given(
    controller: type[JobController[Any]], version: str, kind: str, spec: dict[str, Any]
) -> None:
    fw = controller()
    cached = kubeflow_job(kind, version, spec)
    before = copy.deepcopy(cached)
    cluster = FakeCluster(cached)
    for _ in range(3):  # the first pass, then the passes that find what it created
        result = plan(fw, cached, cluster.observed(), now=NOW, config=PlanConfig())
        assert cached == before
        assert result.actions or cluster.objects  # it planned something real
        cluster.apply(result)
        cached = {**cached, "status": cluster.job.get("status") or {}}
        before = copy.deepcopy(cached)
