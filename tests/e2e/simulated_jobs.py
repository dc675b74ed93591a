"""One small job of every kind, with pods kwok runs to success in two seconds, by operator.

Shared by the e2e tests that run the operators as processes (each as deployed, and all in one).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from jobcontroller.runtime.kube import Resource
from jobcontroller.testing.pods import simulate

Obj = dict[str, Any]


class SimulatedJob(NamedTuple):
    resource: Resource
    body: Obj
    controller: str
    """The ``controller`` label of the kind's reconcile metrics."""


def _template(container: str) -> Obj:
    return simulate(
        {"spec": {"containers": [{"name": container, "image": "busybox"}]}}, 0, run_for="2s"
    )


def _job(kind: str, name: str, field: str, specs: Obj, version: str) -> Obj:
    return {
        "apiVersion": f"kubeflow.org/{version}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            field: {
                rtype: {"replicas": replicas, "template": _template(container)}
                for rtype, (replicas, container) in specs.items()
            }
        },
    }


def simulated_jobs(prefix: str = "") -> dict[str, SimulatedJob]:
    """Operator name -> its job (names start with ``prefix``)."""

    def job(
        kind: str, plural: str, field: str, specs: Obj, controller: str, version: str = "v1"
    ) -> SimulatedJob:
        name = f"{prefix}{kind.lower().removesuffix('job')}"
        return SimulatedJob(
            Resource("kubeflow.org", version, kind, plural),
            _job(kind, name, field, specs, version),
            controller,
        )

    return {
        "tf-operator": job(
            "TFJob",
            "tfjobs",
            "tfReplicaSpecs",
            {"PS": (1, "tensorflow"), "Worker": (2, "tensorflow")},
            "tfjob-controller",
        ),
        "pytorch-operator": job(
            "PyTorchJob",
            "pytorchjobs",
            "pytorchReplicaSpecs",
            {"Master": (1, "pytorch"), "Worker": (1, "pytorch")},
            "pytorchjob-controller",
        ),
        "mpi-operator": job(
            "MPIJob",
            "mpijobs",
            "mpiReplicaSpecs",
            {"Launcher": (1, "launcher"), "Worker": (2, "worker")},
            "mpi-operator",
            version="v2beta1",
        ),
        "xgboost-operator": job(
            "XGBoostJob",
            "xgboostjobs",
            "xgbReplicaSpecs",
            {"Master": (1, "xgboost"), "Worker": (1, "xgboost")},
            "xgboostjob-controller",
        ),
        "paddle-operator": job(
            "PaddleJob",
            "paddlejobs",
            "paddleReplicaSpecs",
            {"Worker": (2, "paddle")},
            "paddlejob-controller",
        ),
        "jax-operator": job(
            "JAXJob", "jaxjobs", "jaxReplicaSpecs", {"Worker": (2, "jax")}, "jaxjob-controller"
        ),
    }
