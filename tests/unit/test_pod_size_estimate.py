"""The size of a job's pods is known before any is built (core/sizing.py), for every kind.

The estimate (one pod built for a one-or-two-replica copy of the job, plus what the framework
says grows: TF_CONFIG's host lists, XGBoost's WORKER_ADDRS) must never be below the real body
of any pod of the job, and must stay close to the largest one, so the ceiling it enforces
refuses only jobs that could really never run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from jax_operator.controller import JAXJobController
from jobcontroller import JobController, PlanConfig
from jobcontroller.core.objects import build_pod
from jobcontroller.core.sizing import decimal_digits, pod_bytes_estimate
from mpi_operator.controller import MPIJobController
from paddle_operator.controller import PaddleJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController
from xgboost_operator.controller import XGBoostJobController

Obj = dict[str, Any]
CONFIG = PlanConfig(cluster_domain="cluster.local")


def _template(container: str, *, extra_container: bool = False) -> Obj:
    containers: list[Obj] = [
        {"name": container, "image": "img:1", "env": [{"name": "USER_VAR", "value": "v"}]}
    ]
    if extra_container:
        containers.append({"name": "sidecar", "image": "side:1"})
    return {"metadata": {"labels": {"team": "ml"}}, "spec": {"containers": containers}}


def _raw(kind: str, version: str, field: str, specs: dict[str, Obj], **spec: Any) -> Obj:
    return {
        "apiVersion": f"kubeflow.org/{version}",
        "kind": kind,
        "metadata": {"name": "size-check", "namespace": "team-a", "uid": "u-1"},
        "spec": {field: specs, **spec},
    }


def _specs(container: str, counts: dict[str, int], **kw: Any) -> dict[str, Obj]:
    return {
        rtype: {"replicas": n, "template": _template(container, **kw)}
        for rtype, n in counts.items()
    }


Case = tuple[Callable[[], JobController[Any]], Callable[[int, bool], Obj]]

CASES: dict[str, Case] = {
    "TFJob": (
        TFJobController,
        lambda n, extra: _raw(
            "TFJob",
            "v1",
            "tfReplicaSpecs",
            _specs("tensorflow", {"Chief": 1, "PS": 2, "Worker": n}, extra_container=extra),
        ),
    ),
    "TFJob-dynamic": (
        TFJobController,
        lambda n, extra: _raw(
            "TFJob",
            "v1",
            "tfReplicaSpecs",
            _specs("tensorflow", {"PS": n, "Worker": n + 1}, extra_container=extra),
            enableDynamicWorker=True,
        ),
    ),
    "TFJob-workers-only": (
        TFJobController,
        lambda n, extra: _raw(
            "TFJob",
            "v1",
            "tfReplicaSpecs",
            _specs("tensorflow", {"Worker": n}, extra_container=extra),
        ),
    ),
    "PyTorchJob": (
        PyTorchJobController,
        lambda n, extra: _raw(
            "PyTorchJob",
            "v1",
            "pytorchReplicaSpecs",
            _specs("pytorch", {"Master": 1, "Worker": n}, extra_container=extra),
            nprocPerNode="8",
        ),
    ),
    "PyTorchJob-elastic": (
        PyTorchJobController,
        lambda n, extra: _raw(
            "PyTorchJob",
            "v1",
            "pytorchReplicaSpecs",
            _specs("pytorch", {"Worker": n}, extra_container=extra),
            elasticPolicy={"minReplicas": 1, "maxReplicas": 100_000, "maxRestarts": 3},
        ),
    ),
    "MPIJob": (
        MPIJobController,
        lambda n, extra: _raw(
            "MPIJob",
            "v2beta1",
            "mpiReplicaSpecs",
            _specs("mpi", {"Launcher": 1, "Worker": n}, extra_container=extra),
            slotsPerWorker=4,
        ),
    ),
    "XGBoostJob": (
        XGBoostJobController,
        lambda n, extra: _raw(
            "XGBoostJob",
            "v1",
            "xgbReplicaSpecs",
            _specs("xgboost", {"Master": 1, "Worker": n}, extra_container=extra),
        ),
    ),
    "PaddleJob": (
        PaddleJobController,
        lambda n, extra: _raw(
            "PaddleJob",
            "v1",
            "paddleReplicaSpecs",
            _specs("paddle", {"Master": 1, "Worker": n}, extra_container=extra),
        ),
    ),
    "JAXJob": (
        JAXJobController,
        lambda n, extra: _raw(
            "JAXJob",
            "v1",
            "jaxReplicaSpecs",
            _specs("jax", {"Worker": n}, extra_container=extra),
        ),
    ),
}


def _compact(obj: Obj) -> int:
    return len(json.dumps(obj, separators=(",", ":")))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("replicas", [1, 2, 3, 9, 10, 11, 101])
@pytest.mark.parametrize("extra_container", [False, True])
def test_the_estimate_bounds_every_pod_and_stays_close_to_the_largest(
    case: str, replicas: int, extra_container: bool
) -> None:
    make_fw, make_job = CASES[case]
    fw = make_fw()
    fw.config = CONFIG
    job = fw.set_defaults(fw.model.parse(make_job(replicas, extra_container)))
    assert not fw.validate(job), fw.validate(job)
    for rtype in fw.pod_replica_types(job):
        spec = job.replica_specs()[rtype]
        largest = max(
            _compact(build_pod(fw, job, rtype=rtype, index=i, spec=spec, config=CONFIG).body)
            for i in range(spec.replicas or 0)
        )
        estimate = pod_bytes_estimate(fw, job, rtype=rtype, config=CONFIG)
        assert largest <= estimate, (rtype, largest, estimate)
        # Close: within the allowance for wider numbers (a few hundred bytes), whatever the
        # size of the growing env.
        assert estimate - largest <= 256, (rtype, largest, estimate)


def test_the_estimate_of_a_huge_job_costs_what_a_small_one_does() -> None:
    fw = TFJobController(config=CONFIG)
    raw = CASES["TFJob"][1](100_000, False)
    job = fw.set_defaults(fw.model.parse(raw))
    estimate = pod_bytes_estimate(fw, job, rtype="Worker", config=CONFIG)
    # 100,000 hosts of about 50 bytes: about 5 MB, more than three times etcd's limit.
    assert 4_500_000 < estimate < 6_000_000


@pytest.mark.parametrize("count", [0, 1, 9, 10, 11, 99, 100, 101, 12_345, 100_000])
def test_decimal_digits_matches_spelling_the_numbers_out(count: int) -> None:
    assert decimal_digits(count) == sum(len(str(i)) for i in range(count))
