"""PyTorchJob: the seed parses; defaulting and validation match the anchor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jobcontroller.api import CleanPodPolicy, RestartPolicy
from pytorch_operator.api import (
    PyTorchJob,
    default_pytorchjob,
    deprecation_warnings,
    pytorchjob_crd,
    validate_pytorchjob,
)

SEED = Path(__file__).parents[1] / "data" / "seeds" / "distributed-pytorch-job.yaml"


def _replica(replicas: int | None = 1, *, container: str = "pytorch") -> dict[str, Any]:
    out: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": container, "image": "pt:1"}]}}
    }
    if replicas is not None:
        out["replicas"] = replicas
    return out


def _job(specs: dict[str, Any], *, name: str = "dist", **spec: Any) -> PyTorchJob:
    return PyTorchJob.parse(
        {"metadata": {"name": name}, "spec": {"pytorchReplicaSpecs": specs, **spec}}
    )


def test_seed_parses_defaults_and_validates() -> None:
    job = PyTorchJob.parse(yaml.safe_load(SEED.read_text()))
    assert job.name == "distributed-pytorch-job"
    assert validate_pytorchjob(job) == []
    defaulted = default_pytorchjob(job)
    assert validate_pytorchjob(defaulted) == []
    assert defaulted.spec.nproc_per_node == "auto"
    assert defaulted.spec.run_policy.clean_pod_policy is CleanPodPolicy.NONE
    for replica in defaulted.replica_specs().values():
        assert replica.restart_policy is RestartPolicy.ON_FAILURE
        container = replica.template["spec"]["containers"][0]
        assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
        assert container["args"] == ["--backend", "gloo"]


def test_defaulting_canonicalises_types_and_sets_replicas_and_restart_policy() -> None:
    job = default_pytorchjob(_job({"master": _replica(None), "WORKER": _replica(None)}))
    specs = job.spec.pytorch_replica_specs
    assert list(specs) == ["Master", "Worker"]
    assert all(
        r.replicas == 1 and r.restart_policy is RestartPolicy.ON_FAILURE for r in specs.values()
    )


@pytest.mark.parametrize(
    ("elastic", "worker_replicas", "expected"),
    [
        ({"minReplicas": 1, "maxReplicas": 4}, 2, (1, 4)),
        ({"maxReplicas": 4}, 2, (4, 4)),
        ({"minReplicas": 3}, 2, (3, 3)),
        ({}, 2, (2, 2)),
        ({}, None, (1, 1)),
    ],
)
def test_elastic_policy_defaults(
    elastic: dict[str, Any], worker_replicas: int | None, expected: tuple[int, int]
) -> None:
    job = default_pytorchjob(_job({"Worker": _replica(worker_replicas)}, elasticPolicy=elastic))
    policy = job.spec.elastic_policy
    assert policy is not None
    assert (policy.min_replicas, policy.max_replicas) == expected


def test_nproc_per_node_is_not_defaulted_when_the_deprecated_field_is_set() -> None:
    job = default_pytorchjob(_job({"Worker": _replica(2)}, elasticPolicy={"nProcPerNode": 4}))
    assert job.spec.nproc_per_node is None
    kept = default_pytorchjob(_job({"Worker": _replica(2)}, nprocPerNode="gpu"))
    assert kept.spec.nproc_per_node == "gpu"


def test_elastic_metrics_are_kept_as_raw_metric_specs() -> None:
    metric = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
    job = _job({"Worker": _replica(2)}, elasticPolicy={"metrics": [metric], "rdzvBackend": "c10d"})
    assert job.to_dict()["spec"]["elasticPolicy"]["metrics"] == [metric]


@pytest.mark.parametrize(
    ("specs", "extra", "expected"),
    [
        pytest.param({"Master": _replica(1), "Worker": _replica(3)}, {}, None, id="valid"),
        pytest.param({"Worker": _replica(3)}, {}, None, id="workers-only"),
        pytest.param({"Master": _replica(None)}, {}, "Master replicas", id="master-omitted"),
        pytest.param({"Master": _replica(2)}, {}, "Master replicas", id="two-masters"),
        pytest.param({"Worker": _replica(0)}, {}, "at least 1", id="zero-workers"),
        pytest.param({"Launcher": _replica(1)}, {}, "Master or Worker", id="unknown-type"),
        pytest.param({"worker": _replica(1)}, {}, "Master or Worker", id="lowercase-type"),
        pytest.param(
            {"Worker": _replica(1, container="main")}, {}, "named 'pytorch'", id="no-pytorch"
        ),
        pytest.param(
            {"Master": _replica(1)},
            {"elasticPolicy": {"maxReplicas": 3}},
            "requires a Worker",
            id="elastic-without-worker",
        ),
        pytest.param(
            {"Worker": _replica(2)},
            {"elasticPolicy": {"nProcPerNode": 2}, "nprocPerNode": "2"},
            "must not both be set",
            id="both-nproc-fields",
        ),
        pytest.param(
            {"Worker": _replica(2)},
            {"elasticPolicy": {"minReplicas": 4, "maxReplicas": 2}},
            "must not exceed",
            id="min-above-max",
        ),
        pytest.param(
            {"Worker": _replica(2)},
            {"runPolicy": {"managedBy": "kubeflow.org/mpi-operator"}},
            "managedBy",
            id="foreign-managed-by",
        ),
    ],
)
def test_validation(specs: dict[str, Any], extra: dict[str, Any], expected: str | None) -> None:
    errors = validate_pytorchjob(_job(specs, **extra))
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


def test_managed_by_is_immutable_on_update_unlike_the_anchor() -> None:
    old = _job({"Worker": _replica(1)})
    new = _job({"Worker": _replica(1)}, runPolicy={"managedBy": "kubeflow.org/training-operator"})
    assert validate_pytorchjob(new, old=old) == ["spec.runPolicy.managedBy: managedBy is immutable"]


def test_deprecated_nproc_per_node_warns() -> None:
    assert deprecation_warnings(_job({"Worker": _replica(1)})) == []
    warned = _job({"Worker": _replica(1)}, elasticPolicy={"nProcPerNode": 2})
    assert deprecation_warnings(warned) == [
        "spec.elasticPolicy.nProcPerNode is deprecated; use spec.nprocPerNode"
    ]


def test_crd_has_the_worker_scale_subresource() -> None:
    version = pytorchjob_crd()["spec"]["versions"][0]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.pytorchReplicaSpecs.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }
