"""The JAXJob CRD on a real API server: it takes the docs' examples unchanged and refuses
what v1.9's webhook refused (and a job with no Worker), with a message that says why. Each
refused job is also given to `validate_jaxjob`, so the CEL rules and the validator the
controller runs cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jax_operator.api import JAXJob, validate_jaxjob
from jobcontroller.runtime.kube import ApiError, KubeApi, Resource

JAXJOBS = Resource("kubeflow.org", "v1", "JAXJob", "jaxjobs")
EXAMPLES = Path(__file__).parents[2] / "examples"


def _example(name: str = "jaxjob-simple.yaml") -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    del job["metadata"]["namespace"]  # "kubeflow" in the docs; each test has its own
    return job


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    worker: dict[str, Any] = job["spec"]["jaxReplicaSpecs"]["Worker"]
    return worker


@pytest.mark.parametrize("example", ["jaxjob-simple.yaml", "jaxjob-mnist.yaml"])
async def test_docs_examples_are_accepted_unchanged(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str, example: str
) -> None:
    job = _example(example)
    created = await kube.create(JAXJOBS, job, namespace=namespace)
    assert created["spec"]["jaxReplicaSpecs"] == job["spec"]["jaxReplicaSpecs"]
    # The CRD's own defaults (as v1.9's): an empty runPolicy with suspend false.
    assert created["spec"]["runPolicy"] == {"suspend": False}


def _rename(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def mutate(job: dict[str, Any]) -> None:
        specs = job["spec"]["jaxReplicaSpecs"]
        specs[new] = specs.pop(old)

    return mutate


def _set(mutate: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], None]:
    """A mutation from an expression (whose value is ignored)."""

    def apply(job: dict[str, Any]) -> None:
        mutate(job)

    return apply


REJECTED = [
    pytest.param(
        _rename("Worker", "PS"), ['Unsupported value: supported values: "Worker"'], id="type"
    ),
    # v1.9's webhook ran before any defaulting: the key is case-sensitive at admission.
    pytest.param(
        _rename("Worker", "worker"),
        ['Unsupported value: supported values: "Worker"'],
        id="lowercase-worker",
    ),
    pytest.param(
        _set(lambda j: j["spec"].update(jaxReplicaSpecs={})),
        ["spec.jaxReplicaSpecs", "a Worker replica spec is required"],
        id="no-worker",
    ),
    pytest.param(
        _set(lambda j: j["spec"].pop("jaxReplicaSpecs")),
        ["spec.jaxReplicaSpecs", "Required value"],
        id="no-replica-specs",
    ),
    pytest.param(
        _set(lambda j: _worker(j)["template"]["spec"]["containers"][0].update(name="main")),
        ["the pod template must have a container named 'jax'"],
        id="no-jax-container",
    ),
    pytest.param(
        _set(lambda j: _worker(j)["template"]["spec"]["containers"][0].pop("image")),
        ["containers[0].image", "Required value"],
        id="no-image",
    ),
    pytest.param(
        _set(lambda j: j["metadata"].update(name="Jax_Job")),
        ["metadata.name", "DNS-1035"],
        id="name",
    ),
    pytest.param(
        _set(lambda j: j["metadata"].update(name="j" * 55)),
        ["metadata.name", "too long"],
        id="name-too-long-for-pods",
    ),
    pytest.param(
        _set(lambda j: j["spec"].update(runPolicy={"managedBy": "example.com/mine"})),
        [
            "spec.runPolicy.managedBy",
            "must be one of kubeflow.org/training-operator, kueue.x-k8s.io/multikueue",
        ],
        id="managed-by",
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
    job = _example()
    mutate(job)
    with pytest.raises(ApiError) as caught:
        await kube.create(JAXJOBS, job, namespace=namespace)
    assert caught.value.status == 422
    for text in expected:
        assert text in caught.value.message, caught.value.message
    if "jaxReplicaSpecs" in job["spec"]:
        assert validate_jaxjob(JAXJob.parse(job)) != []


async def test_managed_by_is_immutable_and_the_scale_subresource_drives_the_workers(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    await kube.create(JAXJOBS, _example(), namespace=namespace)
    with pytest.raises(ApiError) as caught:
        await kube.merge_patch(
            JAXJOBS,
            "jaxjob-simple",
            {"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}},
            namespace=namespace,
        )
    assert caught.value.status == 422
    assert "managedBy is immutable" in caught.value.message

    # kubectl scale jaxjob/jaxjob-simple --replicas=4
    scale = await kube.get(JAXJOBS, "jaxjob-simple", namespace=namespace, subresource="scale")
    assert scale["spec"]["replicas"] == 2
    await kube.merge_patch(
        JAXJOBS,
        "jaxjob-simple",
        {"spec": {"replicas": 4}},
        namespace=namespace,
        subresource="scale",
    )
    job = await kube.get(JAXJOBS, "jaxjob-simple", namespace=namespace)
    assert _worker(job)["replicas"] == 4
