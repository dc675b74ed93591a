"""A job whose objects could never be stored fails before anything is built (issue 30).

A pod whose env lists every replica (TF_CONFIG, WORKER_ADDRS) grows with the job; past the API
server's object limit (etcd's 1.5 MiB) no pod of it can ever be created. Such a job fails
validation at its first reconcile, with a message naming the limit, the estimated size and the
excess, and a Warning event; no pod or Service is planned. Kinds whose pods do not grow run at
the replica ceiling, in bounded passes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from jax_operator.controller import JAXJobController
from jobcontroller import CreateObject, JobController, Observed, Plan, PlanConfig, plan
from mpi_operator.controller import MPIJobController
from paddle_operator.controller import PaddleJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController
from xgboost_operator.controller import XGBoostJobController

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
Obj = dict[str, Any]


def _job(kind: str, version: str, field: str, container: str, specs: dict[str, int]) -> Obj:
    return {
        "apiVersion": f"kubeflow.org/{version}",
        "kind": kind,
        "metadata": {"name": "huge", "namespace": "ns", "uid": "u-huge"},
        "spec": {
            field: {
                rtype: {
                    "replicas": n,
                    "template": {"spec": {"containers": [{"name": container, "image": "i:1"}]}},
                }
                for rtype, n in specs.items()
            }
        },
    }


KINDS: dict[str, tuple[type[JobController[Any]], Obj]] = {
    "TFJob": (
        TFJobController,
        _job("TFJob", "v1", "tfReplicaSpecs", "tensorflow", {"Worker": 100_000}),
    ),
    "XGBoostJob": (
        XGBoostJobController,
        _job("XGBoostJob", "v1", "xgbReplicaSpecs", "xgboost", {"Master": 1, "Worker": 99_999}),
    ),
    "MPIJob": (
        MPIJobController,
        _job("MPIJob", "v2beta1", "mpiReplicaSpecs", "mpi", {"Launcher": 1, "Worker": 100_000}),
    ),
}


def _plan(controller: JobController[Any], raw: Obj) -> Plan:
    return plan(controller, raw, Observed(), now=NOW, config=controller.config)


def _failed(result: Plan) -> Any:
    assert result.status is not None
    return result.status.condition("Failed")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_job_whose_objects_are_too_large_fails_before_anything_is_built(kind: str) -> None:
    cls, raw = KINDS[kind]
    result = _plan(cls(), raw)
    failed = _failed(result)
    assert failed is not None and failed.status == "True"
    assert failed.reason == f"{kind}FailedValidation"
    assert "bytes" in failed.message and "over the" in failed.message
    assert not [a for a in result.actions if isinstance(a, CreateObject)]
    warnings = [e for e in result.events if e.type == "Warning"]
    assert [e.reason for e in warnings] == [f"{kind}FailedValidation"]
    print(f"\n{kind}: {failed.message}")


def test_the_tfjob_message_names_the_limit_the_size_and_the_excess() -> None:
    result = _plan(TFJobController(), KINDS["TFJob"][1])
    message = _failed(result).message
    assert "its Worker pods would be about " in message
    assert "over the 1,572,864-byte limit" in message
    assert "--max-object-bytes" in message


def test_the_object_limit_is_a_setting() -> None:
    # With the check off, the same job is planned (in a bounded first pass).
    controller = TFJobController(config=PlanConfig(max_object_bytes=0))
    result = _plan(controller, KINDS["TFJob"][1])
    assert _failed(result) is None
    pods = [a for a in result.actions if isinstance(a, CreateObject) and a.kind == "Pod"]
    assert 0 < len(pods) <= 100


@pytest.mark.parametrize(
    ("cls", "raw"),
    [
        (
            PyTorchJobController,
            _job("PyTorchJob", "v1", "pytorchReplicaSpecs", "pytorch", {"Worker": 100_000}),
        ),
        (JAXJobController, _job("JAXJob", "v1", "jaxReplicaSpecs", "jax", {"Worker": 100_000})),
        (
            PaddleJobController,
            _job("PaddleJob", "v1", "paddleReplicaSpecs", "paddle", {"Worker": 100_000}),
        ),
    ],
)
def test_kinds_whose_pods_do_not_grow_run_at_the_ceiling_in_bounded_passes(
    cls: type[JobController[Any]], raw: Obj
) -> None:
    result = _plan(cls(), raw)
    assert _failed(result) is None
    creates = [a for a in result.actions if isinstance(a, CreateObject)]
    assert 0 < len(creates) <= 100
