"""JAXJob: the docs example parses; defaulting and validation match v1.9's; the CRD's rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jax_operator.api import JAXJob, default_jaxjob, jaxjob_crd, validate_jaxjob
from jobcontroller.api import CleanPodPolicy, RestartPolicy

EXAMPLES = Path(__file__).parents[2] / "examples"
CONTAINERS = "spec.jaxReplicaSpecs[Worker].template.spec.containers"


def _replica(replicas: int | None = 1, *, container: str = "jax") -> dict[str, Any]:
    out: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": container, "image": "jax:1"}]}}
    }
    if replicas is not None:
        out["replicas"] = replicas
    return out


def _job(specs: dict[str, Any], *, name: str = "dist", **spec: Any) -> JAXJob:
    return JAXJob.parse({"metadata": {"name": name}, "spec": {"jaxReplicaSpecs": specs, **spec}})


@pytest.mark.parametrize("example", ["jaxjob-simple.yaml", "jaxjob-mnist.yaml"])
def test_docs_examples_parse_default_and_validate(example: str) -> None:
    job = JAXJob.parse(yaml.safe_load((EXAMPLES / example).read_text()))
    assert validate_jaxjob(job) == []
    defaulted = default_jaxjob(job)
    assert validate_jaxjob(defaulted) == []
    assert defaulted.spec.run_policy.clean_pod_policy is CleanPodPolicy.NONE
    assert defaulted.spec.run_policy.suspend is False
    [(rtype, worker)] = defaulted.spec.jax_replica_specs.items()
    assert (rtype, worker.replicas) == ("Worker", 2)
    # The example says OnFailure; defaulting keeps what the user wrote.
    assert worker.restart_policy is RestartPolicy.ON_FAILURE
    [container] = worker.template["spec"]["containers"]
    assert container["ports"] == [{"name": "jaxjob-port", "containerPort": 6666}]
    assert container["imagePullPolicy"] == "Always"


def test_defaulting_sets_replicas_never_and_canonical_case() -> None:
    job = default_jaxjob(_job({"worker": _replica(None)}))
    [(rtype, worker)] = job.spec.jax_replica_specs.items()
    assert rtype == "Worker"
    assert worker.replicas == 1
    assert worker.restart_policy is RestartPolicy.NEVER


def test_defaulting_keeps_a_user_port_and_adds_the_default_to_the_jax_container_only() -> None:
    specs = {
        "Worker": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "sidecar", "image": "s:1"},
                        {
                            "name": "jax",
                            "image": "jax:1",
                            "ports": [{"name": "jaxjob-port", "containerPort": 1234}],
                        },
                    ]
                }
            }
        }
    }
    template = default_jaxjob(_job(specs)).spec.jax_replica_specs["Worker"].template
    sidecar, jax = template["spec"]["containers"]
    assert "ports" not in sidecar
    assert jax["ports"] == [{"name": "jaxjob-port", "containerPort": 1234}]
    fresh = default_jaxjob(_job({"Worker": _replica(2)})).spec.jax_replica_specs["Worker"]
    assert fresh.template["spec"]["containers"][0]["ports"] == [
        {"name": "jaxjob-port", "containerPort": 6666}
    ]


def test_defaulting_does_not_change_its_input() -> None:
    job = _job({"worker": _replica(None)})
    default_jaxjob(job)
    assert list(job.spec.jax_replica_specs) == ["worker"]
    assert job.spec.jax_replica_specs["worker"].replicas is None


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (
            _job({"PS": _replica()}),
            [
                'spec.jaxReplicaSpecs[PS]: Unsupported value: "PS": supported values: "Worker"',
                "spec.jaxReplicaSpecs: a Worker replica spec is required",
            ],
        ),
        (_job({}), ["spec.jaxReplicaSpecs: a Worker replica spec is required"]),
        (
            _job({"Worker": _replica(container="main")}),
            [f"{CONTAINERS}: must have a container named 'jax'"],
        ),
        (
            _job({"Worker": {"template": {"spec": {"containers": [{"name": "jax"}]}}}}),
            [f"{CONTAINERS}[0].image: must be set"],
        ),
        (
            _job({"Worker": {"template": {"spec": {"containers": []}}}}),
            [f"{CONTAINERS}: must have at least one container"],
        ),
    ],
    ids=["unknown-type", "no-worker", "no-jax-container", "no-image", "no-containers"],
)
def test_validation_messages(job: JAXJob, expected: list[str]) -> None:
    assert validate_jaxjob(job) == expected


def test_lowercase_worker_is_refused_before_defaulting_and_accepted_after() -> None:
    """v1.9's webhook (no mutating webhook before it) refuses `worker`; a job stored so anyway
    is defaulted to `Worker` by the controller and runs."""
    job = _job({"worker": _replica()})
    assert any('Unsupported value: "worker"' in e for e in validate_jaxjob(job))
    assert validate_jaxjob(default_jaxjob(job)) == []


def test_names_must_be_dns1035_and_short_enough_for_the_pod_names() -> None:
    assert validate_jaxjob(_job({"Worker": _replica()}, name="My_Job")) != []
    longest_ok = "j" * (63 - len("-worker-9"))
    assert validate_jaxjob(_job({"Worker": _replica(10)}, name=longest_ok)) == []
    [error] = validate_jaxjob(_job({"Worker": _replica(11)}, name=longest_ok))
    assert error.startswith("metadata.name: too long")


def test_managed_by_values_and_immutability() -> None:
    kueue = _job({"Worker": _replica()}, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})
    assert validate_jaxjob(kueue) == []
    other = _job({"Worker": _replica()}, runPolicy={"managedBy": "example.com/mine"})
    assert validate_jaxjob(other) == [
        "spec.runPolicy.managedBy: 'example.com/mine' is not supported; must be one of "
        "'kubeflow.org/training-operator', 'kueue.x-k8s.io/multikueue'"
    ]
    plain = _job({"Worker": _replica()})
    assert validate_jaxjob(kueue, old=plain) == ["spec.runPolicy.managedBy: managedBy is immutable"]


def test_crd_names_scale_subresource_and_replica_rules() -> None:
    crd = jaxjob_crd()
    assert crd["metadata"]["name"] == "jaxjobs.kubeflow.org"
    assert crd["spec"]["names"]["kind"] == "JAXJob"
    assert crd["spec"]["names"]["singular"] == "jaxjob"
    [version] = crd["spec"]["versions"]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.jaxReplicaSpecs.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["jaxReplicaSpecs"]
    specs = spec["properties"]["jaxReplicaSpecs"]
    assert specs["maxProperties"] == 16
    rules = [r["rule"] for r in specs["x-kubernetes-validations"]]
    assert "self.all(k, k == 'Worker')" in rules
    # A Worker is required of new jobs; a job stored under v1.9 without one stays writable.
    assert "oldSelf.hasValue() || ('Worker' in self)" in rules
