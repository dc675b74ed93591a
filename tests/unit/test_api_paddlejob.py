"""PaddleJob model: v1.9's defaults (SetDefaults_PaddleJob) and webhook messages, and the CRD."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from paddle_operator.api import PaddleJob, default_paddlejob, paddlejob_crd, validate_paddlejob

EXAMPLE = Path(__file__).parents[2] / "examples" / "paddlejob-simple-cpu.yaml"
SPECS = "spec.paddleReplicaSpecs"


def _replica(replicas: int | None = 1, *, container: str = "paddle", **extra: Any) -> Any:
    spec: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": container, "image": "paddle:1"}]}},
        **extra,
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


def _job(specs: dict[str, Any], *, name: str = "pd", **spec: Any) -> PaddleJob:
    raw = {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"paddleReplicaSpecs": specs, **spec},
    }
    return PaddleJob.parse(raw)


def test_docs_example_parses_validates_and_keeps_its_port() -> None:
    job = PaddleJob.parse(yaml.safe_load(EXAMPLE.read_text()))
    assert validate_paddlejob(job) == []
    worker = default_paddlejob(job).spec.paddle_replica_specs["Worker"]
    assert (worker.replicas, worker.restart_policy) == (2, "OnFailure")
    # Its own "master" port (37777) is kept; no second one is added.
    assert worker.template["spec"]["containers"][0]["ports"] == [
        {"containerPort": 37777, "name": "master"}
    ]


def test_defaults_replicas_restart_policy_clean_pod_policy_and_port() -> None:
    job = default_paddlejob(_job({"master": _replica(None), "worker": _replica(3)}))
    specs = job.spec.paddle_replica_specs
    assert list(specs) == ["Master", "Worker"]
    assert specs["Master"].replicas == 1
    assert {s.restart_policy for s in specs.values()} == {"OnFailure"}
    assert job.spec.run_policy.clean_pod_policy == "None"
    assert job.spec.run_policy.suspend is False
    assert specs["Worker"].template["spec"]["containers"][0]["ports"] == [
        {"name": "master", "containerPort": 36543}
    ]


def test_explicit_restart_policy_is_kept() -> None:
    job = default_paddlejob(_job({"Worker": _replica(2, restartPolicy="Never")}))
    assert job.spec.paddle_replica_specs["Worker"].restart_policy == "Never"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, (4, 4)),  # both from Worker replicas
        ({"maxReplicas": 6}, (6, 6)),
        ({"minReplicas": 2}, (2, 2)),
        ({"minReplicas": 1, "maxReplicas": 5}, (1, 5)),
    ],
)
def test_elastic_policy_defaults(given: dict[str, Any], expected: tuple[int, int]) -> None:
    job = default_paddlejob(_job({"Worker": _replica(4)}, elasticPolicy=given))
    elastic = job.spec.elastic_policy
    assert elastic is not None
    assert (elastic.min_replicas, elastic.max_replicas) == expected


def test_elastic_policy_without_worker_is_left_alone_where_v19_panicked() -> None:
    job = default_paddlejob(_job({"Master": _replica(1)}, elasticPolicy={"maxRestarts": 3}))
    elastic = job.spec.elastic_policy
    assert elastic is not None
    assert (elastic.min_replicas, elastic.max_replicas, elastic.max_restarts) == (None, None, 3)


def test_defaulting_does_not_touch_the_input() -> None:
    job = _job({"Worker": _replica(None)})
    before = copy.deepcopy(job.to_dict())
    default_paddlejob(job)
    assert job.to_dict() == before


NO_CONTAINERS = {"replicas": 1, "template": {"spec": {"containers": []}}}
NO_IMAGE = {"template": {"spec": {"containers": [{"name": "paddle"}]}}}


@pytest.mark.parametrize(
    ("specs", "name", "expected"),
    [
        ({"Worker": _replica(2)}, "pd", None),
        ({"Master": _replica(2), "Worker": _replica(2)}, "pd", None),
        ({"Master": _replica(1)}, "pd", None),
        (
            {"worker": _replica(2)},
            "pd",
            f'{SPECS}[worker]: Unsupported value: "worker": supported values: "Master", "Worker"',
        ),
        (
            {"Worker": NO_CONTAINERS},
            "pd",
            f"{SPECS}[Worker].template.spec.containers: Required value: must be specified",
        ),
        (
            {"Worker": NO_IMAGE},
            "pd",
            f"{SPECS}[Worker].template.spec.containers[0].image: Required value: must be required",
        ),
        (
            {"Worker": _replica(1, container="main")},
            "pd",
            f"{SPECS}[Worker].template.spec.containers: Required value: must have at least one "
            'container with name "paddle"',
        ),
        ({}, "pd", f"{SPECS}: at least one of Master and Worker is required"),
        ({"Worker": _replica(1)}, "Pd", "metadata.name: 'Pd' must be a DNS-1035 label"),
        ({"Worker": _replica(100)}, "p" * 54, "metadata.name: too long"),
    ],
)
def test_validation_messages(specs: dict[str, Any], name: str, expected: str | None) -> None:
    errors = validate_paddlejob(_job(specs, name=name))
    if expected is None:
        assert errors == []
    else:
        assert any(e.startswith(expected) for e in errors), errors


def test_managed_by_must_be_known_and_is_immutable() -> None:
    mine = _job({"Worker": _replica(1)}, runPolicy={"managedBy": "example.com/mine"})
    assert any("spec.runPolicy.managedBy" in e for e in validate_paddlejob(mine))
    kueue = _job({"Worker": _replica(1)}, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})
    assert validate_paddlejob(kueue) == []
    old = _job({"Worker": _replica(1)})
    assert validate_paddlejob(kueue, old=old) == [
        "spec.runPolicy.managedBy: managedBy is immutable"
    ]


def test_crd_names_scale_subresource_and_columns() -> None:
    crd = paddlejob_crd()
    assert crd["metadata"]["name"] == "paddlejobs.kubeflow.org"
    assert crd["spec"]["names"]["kind"] == "PaddleJob"
    assert crd["spec"]["names"]["singular"] == "paddlejob"
    [version] = crd["spec"]["versions"]
    assert version["name"] == "v1"
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.paddleReplicaSpecs.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["State", "Age"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec["elasticPolicy"]["properties"]) == {
        "minReplicas",
        "maxReplicas",
        "maxRestarts",
        "metrics",
    }
