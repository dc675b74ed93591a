"""The PaddleJob CRD on a real API server: the docs example is stored as sent, and what v1.9's
webhook refused (plus a job with no replicas) is refused at admission with a readable message.
Each refused job is also fed to ``validate_paddlejob`` so the CEL rules and the validator the
controller runs cannot drift apart."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from paddle_operator.api import PaddleJob, validate_paddlejob

PADDLEJOBS = Resource("kubeflow.org", "v1", "PaddleJob", "paddlejobs")
EXAMPLE = Path(__file__).parents[2] / "examples" / "paddlejob-simple-cpu.yaml"
WORKER = {"replicas": 1, "template": {"spec": {"containers": [{"name": "paddle", "image": "x"}]}}}


def example() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    del job["metadata"]["namespace"]
    return job


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting a dotted path ("spec.x.y"); None deletes the key."""

    def mutate(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = obj
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)

    return mutate


SPECS = "spec.paddleReplicaSpecs"
CONTAINERS = f"{SPECS}.Worker.template.spec.containers"


async def test_docs_example_is_stored_as_sent(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    raw = example()
    raw["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 2, "maxRestarts": 3}
    created = await kube.create(PADDLEJOBS, copy.deepcopy(raw), namespace=namespace)
    # Plus the CRD's defaults, as v1.9's CRD has them: runPolicy.suspend and a port's protocol.
    raw["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"][0][
        "protocol"
    ] = "TCP"
    assert created["spec"] == {**raw["spec"], "runPolicy": {"suspend": False}}


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(
            _set(f"{SPECS}.worker", WORKER),
            [SPECS, 'supported values: "Master", "Worker"'],
            id="lower-case-type",
        ),
        pytest.param(
            _set(f"{SPECS}.PS", WORKER),
            [SPECS, 'supported values: "Master", "Worker"'],
            id="unknown-type",
        ),
        pytest.param(_set(SPECS, {}), [SPECS, "at least one of Master and Worker"], id="empty"),
        pytest.param(
            _set(CONTAINERS, [{"name": "main", "image": "x"}]),
            ["spec.paddleReplicaSpecs[Worker].template.spec.containers", "named 'paddle'"],
            id="no-paddle-container",
        ),
        pytest.param(
            _set(CONTAINERS, [{"name": "paddle"}]),
            ["containers[0].image", "Required value"],
            id="no-image",
        ),
        pytest.param(_set(CONTAINERS, []), [CONTAINERS, "at least 1 items"], id="no-containers"),
        pytest.param(_set("metadata.name", "Paddle"), ["metadata.name", "DNS-1035"], id="name"),
        pytest.param(
            _set("metadata.name", "p" * 55),
            ["metadata.name", "<name>-<replica type>-<index>"],
            id="name-too-long-for-pods",
        ),
        pytest.param(
            _set("spec.runPolicy", {"managedBy": "example.com/mine"}),
            ["spec.runPolicy.managedBy", "kubeflow.org/training-operator"],
            id="managed-by",
        ),
        pytest.param(
            _set(f"{SPECS}.Worker.restartPolicy", "Sometimes"),
            ["restartPolicy", "Unsupported value", "ExitCode"],
            id="restart-policy",
        ),
        pytest.param(
            _set("spec.elasticPolicy", {"maxReplicas": 2**31}),
            ["elasticPolicy.maxReplicas", "less than or equal to 100000"],
            id="elastic-past-int32",
        ),
    ],
)
async def test_invalid_jobs_are_refused_with_a_readable_message(
    kube: KubeApi,
    kubeflow_crds: list[str],
    namespace: str,
    mutate: Callable[[dict[str, Any]], None],
    expected: list[str],
) -> None:
    obj = example()
    mutate(obj)
    with pytest.raises(ApiError) as caught:
        await kube.create(PADDLEJOBS, copy.deepcopy(obj), namespace=namespace)
    assert caught.value.status == 422
    for text in expected:
        assert text in caught.value.message, caught.value.message
    # Schema-level errors already fail parsing, the controller's first step.
    try:
        errors = validate_paddlejob(PaddleJob.parse(obj))
    except ValidationError:
        return
    assert errors != []


async def test_managed_by_is_immutable(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    await kube.create(PADDLEJOBS, example(), namespace=namespace)
    with pytest.raises(ApiError) as caught:
        await kube.merge_patch(
            PADDLEJOBS,
            "paddle-simple-cpu",
            {"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}},
            namespace=namespace,
        )
    assert caught.value.status == 422
    assert "spec.runPolicy.managedBy" in caught.value.message
    assert "immutable" in caught.value.message
