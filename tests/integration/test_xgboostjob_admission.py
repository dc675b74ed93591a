"""The generated XGBoostJob CRD on a real API server: it takes the docs' example unchanged and
refuses what v1.9's webhook refuses, with a message naming the field and the rule.

Each refused object is also fed to `validate_xgboostjob`, so the CEL rules and the validator
the controller runs cannot drift apart silently.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from xgboost_operator.api import XGBoostJob, validate_xgboostjob

XGBOOSTJOBS = Resource("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs")
EXAMPLE = Path(__file__).parents[2] / "examples" / "xgboostjob-iris.yaml"
SPECS = "spec.xgbReplicaSpecs"


def example() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return raw


async def test_docs_example_is_stored_unchanged(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    raw = example()
    created = await kube.create(XGBOOSTJOBS, copy.deepcopy(raw), namespace=namespace)
    # Stored as sent, plus the CRD's only defaults: runPolicy {} with suspend false, and the
    # ports' protocol (a list-map key, defaulted as for a Pod and as v1.9's CRD does).
    for replica in raw["spec"]["xgbReplicaSpecs"].values():
        for port in replica["template"]["spec"]["containers"][0]["ports"]:
            port["protocol"] = "TCP"
    assert created["spec"] == {**raw["spec"], "runPolicy": {"suspend": False}}


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


def _rename(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        specs = obj["spec"]["xgbReplicaSpecs"]
        specs[new] = specs.pop(old)

    return mutate


MASTER = f"{SPECS}.Master"
WORKER_CONTAINERS = f"{SPECS}.Worker.template.spec.containers"
PS = {"replicas": 1, "template": {"spec": {"containers": [{"name": "xgboost", "image": "x"}]}}}

REJECTED: list[Any] = [
    pytest.param(_set(MASTER, None), [SPECS, "Master: must be present"], id="no-master"),
    pytest.param(
        _set(f"{MASTER}.replicas", None), [SPECS, "Master.replicas: must be 1"], id="master-omitted"
    ),
    pytest.param(
        _set(f"{MASTER}.replicas", 2), [SPECS, "Master.replicas: must be 1"], id="two-masters"
    ),
    pytest.param(
        _set(f"{SPECS}.PS", PS), [SPECS, 'supported values: "Master", "Worker"'], id="ps-type"
    ),
    pytest.param(
        _rename("Worker", "worker"),
        [SPECS, 'supported values: "Master", "Worker"'],
        id="lowercase-type",
    ),
    pytest.param(
        _set(WORKER_CONTAINERS, [{"name": "main", "image": "x"}]),
        [f"{SPECS}[Worker].template.spec.containers", "named 'xgboost'"],
        id="no-xgboost-container",
    ),
    pytest.param(
        _set(WORKER_CONTAINERS, [{"name": "xgboost"}]),
        ["containers[0].image", "Required value"],
        id="no-image",
    ),
    pytest.param(
        _set("metadata.name", "Iris-Train"), ["metadata.name", "DNS-1035"], id="name-not-dns1035"
    ),
    pytest.param(
        _set("metadata.name", "x" * 55),
        ["metadata.name", "too long", "<name>-<replica type>-<index>"],
        id="name-too-long-for-pods",
    ),
    pytest.param(
        _set("spec.runPolicy", {"managedBy": "example.com/mine"}),
        ["spec.runPolicy.managedBy", "kubeflow.org/training-operator"],
        id="foreign-managed-by",
    ),
    pytest.param(
        _set(f"{SPECS}.Worker.restartPolicy", "Sometimes"),
        ["restartPolicy", "Unsupported value", "ExitCode"],
        id="restart-policy",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), REJECTED)
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
        await kube.create(XGBOOSTJOBS, obj, namespace=namespace)
    assert caught.value.status == 422
    for text in expected:
        assert text in caught.value.message, caught.value.message
    # The controller's validator agrees. Schema-level errors (an unknown enum value) already
    # fail when the object is parsed into a model, the controller's first step.
    try:
        job = XGBoostJob.parse(obj)
    except ValueError:
        return
    assert validate_xgboostjob(job) != []


async def test_managed_by_is_immutable(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    await kube.create(XGBOOSTJOBS, example(), namespace=namespace)
    name = example()["metadata"]["name"]
    with pytest.raises(ApiError) as caught:
        await kube.merge_patch(
            XGBOOSTJOBS,
            name,
            {"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}},
            namespace=namespace,
        )
    assert caught.value.status == 422
    assert "spec.runPolicy.managedBy" in caught.value.message
    assert "immutable" in caught.value.message
