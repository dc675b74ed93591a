"""TFJob: the seed parses, defaulting matches the anchor's defaulter, validation its webhook."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobcontroller.api import CleanPodPolicy, RestartPolicy
from tf_operator.api import SuccessPolicy, TFJob, default_tfjob, validate_tfjob

SEED = Path(__file__).parents[1] / "data" / "seeds" / "distributed-tensorflow-job.yaml"


def _container(name: str = "tensorflow", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "tf:1", **extra}


def _job(specs: dict[str, Any], *, name: str = "mnist", **spec: Any) -> TFJob:
    return TFJob.parse({"metadata": {"name": name}, "spec": {"tfReplicaSpecs": specs, **spec}})


def _replica(replicas: int | None = 1, containers: list[Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"template": {"spec": {"containers": containers or [_container()]}}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def test_seed_parses_defaults_and_validates() -> None:
    raw = yaml.safe_load(SEED.read_text())
    job = TFJob.parse(raw)
    assert job.name == "distributed-tensorflow-job"
    assert {k: v.replicas for k, v in job.replica_specs().items()} == {"PS": 2, "Worker": 4}
    assert validate_tfjob(job) == []
    defaulted = default_tfjob(job)
    assert validate_tfjob(defaulted) == []
    for replica in defaulted.replica_specs().values():
        assert replica.restart_policy is RestartPolicy.NEVER
        container = replica.template["spec"]["containers"][0]
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
        # The template's own fields are untouched.
        assert container["image"] == "gcr.io/kubeflow-ci/tf-dist-mnist-test:1.0"
    # The wire form keeps the user's fields.
    out = defaulted.to_dict()
    ps = out["spec"]["tfReplicaSpecs"]["PS"]
    assert ps["template"]["metadata"] == {"annotations": {"sidecar.istio.io/inject": "false"}}


def test_defaulting_fills_the_anchor_defaults() -> None:
    job = default_tfjob(_job({"worker": _replica(None), "ps": _replica(None)}))
    spec = job.spec
    assert spec.run_policy.clean_pod_policy is CleanPodPolicy.NONE
    assert spec.run_policy.suspend is False
    assert spec.success_policy is SuccessPolicy.DEFAULT
    assert list(spec.tf_replica_specs) == ["Worker", "PS"]
    assert all(r.replicas == 1 for r in spec.tf_replica_specs.values())


def test_defaulting_keeps_values_the_user_set() -> None:
    job = _job(
        {"Chief": {**_replica(1), "restartPolicy": "ExitCode"}},
        runPolicy={"cleanPodPolicy": "All", "suspend": True},
        successPolicy="AllWorkers",
    )
    defaulted = default_tfjob(job)
    assert defaulted.spec.run_policy.clean_pod_policy is CleanPodPolicy.ALL
    assert defaulted.spec.run_policy.suspend is True
    assert defaulted.spec.success_policy is SuccessPolicy.ALL_WORKERS
    assert defaulted.spec.tf_replica_specs["Chief"].restart_policy is RestartPolicy.EXIT_CODE


def test_defaulting_is_pure() -> None:
    job = _job({"worker": _replica(None)})
    before = copy.deepcopy(job.to_dict())
    default_tfjob(job)
    assert job.to_dict() == before


def test_defaulting_puts_the_port_on_container_zero_without_a_tensorflow_container() -> None:
    job = default_tfjob(_job({"Worker": _replica(1, [_container("main"), _container("side")])}))
    containers = job.spec.tf_replica_specs["Worker"].template["spec"]["containers"]
    assert containers[0]["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
    assert "ports" not in containers[1]


VALID = {"Chief": _replica(1), "PS": _replica(2), "Worker": _replica(4), "Evaluator": _replica(1)}


@pytest.mark.parametrize(
    ("specs", "name", "extra", "expected"),
    [
        pytest.param(VALID, "mnist", {}, None, id="valid"),
        pytest.param(
            {"custom": _replica(1), "Worker": _replica(1)},
            "mnist",
            {},
            "must be Chief, Master, PS, Worker or Evaluator",
            id="unknown-type-refused",
        ),
        pytest.param({"ps": _replica(1)}, "mnist", {}, "Worker replica is required", id="ps-only"),
        pytest.param(
            {"evaluator": _replica(1), "WORKER": _replica(2)}, "mnist", {}, None, id="any-case"
        ),
        pytest.param(VALID, "Mnist", {}, "DNS-1035", id="uppercase-name"),
        pytest.param(VALID, "1mnist", {}, "DNS-1035", id="leading-digit"),
        pytest.param({}, "mnist", {}, "must be specified", id="no-replica-specs"),
        pytest.param({"Worker": {"template": {}}}, "mnist", {}, "at least one", id="no-containers"),
        pytest.param(
            {"Worker": _replica(1, [{"name": "tensorflow"}])},
            "mnist",
            {},
            "image: must be set",
            id="no-image",
        ),
        pytest.param(
            {"Worker": _replica(1, [_container("main")])},
            "mnist",
            {},
            "named 'tensorflow'",
            id="no-tensorflow-container",
        ),
        pytest.param(
            {"Chief": _replica(1), "Master": _replica(1)},
            "mnist",
            {},
            "at most one of Chief and Master",
            id="chief-and-master",
        ),
        pytest.param({"Chief": _replica(2)}, "mnist", {}, "at most 1", id="two-chiefs"),
        pytest.param(
            {"Worker": _replica(1), "worker": _replica(1)},
            "mnist",
            {},
            "differ only in case",
            id="case-duplicates",
        ),
        pytest.param(
            VALID,
            "mnist",
            {"runPolicy": {"managedBy": "example.com/other"}},
            "managedBy",
            id="foreign-managed-by",
        ),
        pytest.param(
            VALID,
            "mnist",
            {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}},
            None,
            id="multikueue",
        ),
        pytest.param({"Worker": _replica(10)}, "a" * 54, {}, None, id="longest-name-fits"),
        pytest.param({"Worker": _replica(11)}, "a" * 54, {}, "too long", id="name-too-long"),
    ],
)
def test_validation(
    specs: dict[str, Any], name: str, extra: dict[str, Any], expected: str | None
) -> None:
    errors = validate_tfjob(_job(specs, name=name, **extra))
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


def test_name_length_counts_the_longest_replica_type_and_index() -> None:
    # "<51 chars>-evaluator-0" is exactly 63 characters; with 53 it is 65.
    specs = {"Evaluator": _replica(1), "Worker": _replica(1)}
    assert validate_tfjob(_job(specs, name="e" * 51)) == []
    errors = validate_tfjob(_job(specs, name="e" * 53))
    assert errors == [
        "metadata.name: too long: pod and service name "
        f"'{'e' * 53}-evaluator-0' would exceed 63 characters; "
        "shorten the job name to at most 51 characters"
    ]


def test_managed_by_is_immutable_on_update() -> None:
    old = _job(VALID)
    new = _job(VALID, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})
    assert validate_tfjob(new, old=old) == ["spec.runPolicy.managedBy: managedBy is immutable"]
    assert validate_tfjob(new, old=new) == []
