"""The TrainJob CRD on a real API server: v2.3.0's defaults, and its refusals in its words.

What v2.3.0 checked without reading another object is checked here at admission: its CRD's
rules (the name, immutable fields, managedBy, storageUri) and the part of its TrainJob webhook
that needs no runtime (a runtime kind it serves, the runtimePatches' managers and env, and
runtimePatches changed only around a suspension). What needs the runtime is the controller's to
report (docs/trainjob.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from trainer_fixtures import TRAINJOBS, Mutation, Obj, Objects, made_by_test, trainjob

from jobcontroller.runtime.kube import ApiError, KubeApi
from trainer_operator import TrainJob


@pytest_asyncio.fixture(loop_scope="session")
async def objects(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> AsyncIterator[Objects]:
    async with made_by_test(kube, namespace) as made:
        yield made


def _patch(manager: str = "example.io/team", *, env_on: str | None = None) -> Obj:
    container: Obj = {"name": env_on or "sidecar"}
    if env_on:
        container["env"] = [{"name": "A", "value": "1"}]
    pod = {"spec": {"containers": [container]}}
    jobs = [{"name": "node", "template": {"spec": {"template": pod}}}]
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}},
    }


async def test_a_minimal_trainjob_gets_v2_3_0s_defaults(objects: Objects) -> None:
    created = await objects.create(trainjob())
    assert created["spec"] == {
        "runtimeRef": {
            "name": "torch-distributed",
            "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime",
        },
        "suspend": False,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }
    assert TrainJob.parse(created).to_dict()["spec"] == created["spec"]


def _set(expression: Mutation) -> Mutation:
    def apply(job: Obj) -> None:
        expression(job)

    return apply


def _spec(**fields: Any) -> Mutation:
    return _set(lambda job: job["spec"].update(fields))


REFUSED = [
    pytest.param(
        _spec(runtimeRef={"name": "r", "kind": "Runtime"}),
        ["unsupported runtime: Runtime.trainer.kubeflow.org"],
        id="runtime-kind",
    ),
    pytest.param(
        _spec(runtimeRef={"name": "r", "apiGroup": "example.com"}),
        ["unsupported runtime: ClusterTrainingRuntime.example.com"],
        id="runtime-group",
    ),
    pytest.param(
        _spec(runtimeRef={"kind": "TrainingRuntime"}),
        ["spec.runtimeRef.name", "Required value"],
        id="runtime-name",
    ),
    pytest.param(
        _set(lambda job: job.pop("spec")),
        ["spec", "Required value"],
        id="no-spec",
    ),
    pytest.param(
        _spec(managedBy="example.com/mine"),
        [
            "spec.managedBy",
            "ManagedBy must be trainer.kubeflow.org/trainjob-controller or "
            "kueue.x-k8s.io/multikueue if set",
        ],
        id="managed-by",
    ),
    pytest.param(
        _set(lambda job: job["metadata"].update(name="train.job")),
        ["metadata.name", "metadata.name must match RFC 1035 DNS label format"],
        id="name-rfc1035",
    ),
    pytest.param(
        _set(lambda job: job["metadata"].update(name="t" * 64)),
        ["metadata.name must be no more than 63 characters"],
        id="name-length",
    ),
    pytest.param(
        _spec(initializer={"dataset": {"storageUri": "bucket/data"}}),
        [
            "spec.initializer.dataset.storageUri",
            "storageUri may be empty, or it must be a valid URI (scheme://...)",
        ],
        id="storage-uri",
    ),
    pytest.param(
        _spec(activeDeadlineSeconds=0),
        ["spec.activeDeadlineSeconds", "should be greater than or equal to 1"],
        id="active-deadline",
    ),
    pytest.param(
        _spec(runtimePatches=[_patch("platform-team")]),
        [
            "spec.runtimePatches[0].manager",
            'must be a domain-prefixed path (such as "acme.io/foo")',
        ],
        id="manager-no-domain",
    ),
    pytest.param(
        _spec(runtimePatches=[_patch("Example.io/team")]),
        ["spec.runtimePatches[0].manager", "a lowercase RFC 1123 subdomain must consist of"],
        id="manager-domain",
    ),
    pytest.param(
        _spec(runtimePatches=[_patch("example.io/a team")]),
        ["spec.runtimePatches[0].manager", "Invalid path: regex used for validation is"],
        id="manager-path",
    ),
    pytest.param(
        _spec(runtimePatches=[_patch(env_on="node")]),
        [
            "containers[0].env",
            "must not have envs for the dataset-initializer, model-initializer, node containers",
        ],
        id="patch-env-on-node",
    ),
    pytest.param(
        _spec(runtimePatches=[_patch(env_on="model-initializer")]),
        ["must not have envs for the dataset-initializer, model-initializer, node containers"],
        id="patch-env-on-model-initializer",
    ),
    pytest.param(
        _spec(runtimePatches=[_patch(), _patch()]),
        ["spec.runtimePatches[1]", "Duplicate value"],
        id="one-entry-per-manager",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), REFUSED)
async def test_invalid_trainjobs_are_refused_with_upstreams_words(
    mutate: Mutation, expected: list[str], objects: Objects
) -> None:
    job = trainjob()
    mutate(job)
    message = await objects.refused(job)
    for text in expected:
        assert text in message, message


async def test_patches_to_containers_without_owned_env_are_accepted(objects: Objects) -> None:
    """The env rule is about node and the initializers only: a sidecar's env, and env-less
    changes to node, are a manager's to set."""
    node = _patch()
    node["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"
    ]["spec"]["containers"] = [
        {"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        {"name": "sidecar", "env": [{"name": "A", "value": "1"}]},
    ]
    created = await objects.create(trainjob(runtimePatches=[node]))
    assert created["spec"]["runtimePatches"][0]["manager"] == "example.io/team"


IMMUTABLE = [
    pytest.param({"runtimeRef": {"name": "other"}}, id="runtime-ref"),
    pytest.param({"trainer": {"numNodes": 3}}, id="trainer"),
    pytest.param({"initializer": {"model": {"storageUri": "hf://b"}}}, id="initializer"),
    pytest.param({"managedBy": "kueue.x-k8s.io/multikueue"}, id="managed-by"),
    pytest.param({"activeDeadlineSeconds": 20}, id="active-deadline"),
]


@pytest.mark.parametrize("change", IMMUTABLE)
async def test_immutable_fields_stay_as_created(change: Obj, objects: Objects) -> None:
    created = await objects.create(
        trainjob(
            trainer={"numNodes": 2},
            initializer={"model": {"storageUri": "hf://a"}},
            activeDeadlineSeconds=10,
        )
    )
    message = await objects.refused(created, patch={"spec": change})
    assert "field is immutable" in message, message


async def test_runtime_patches_change_only_around_a_suspension(objects: Objects) -> None:
    """As v2.3.0's webhook: while the TrainJob runs (suspended neither before nor after the
    update) its patches are fixed; Kueue changes them as it suspends or resumes the job."""
    running = await objects.create(trainjob(runtimePatches=[_patch()]))
    other = _patch("kueue.x-k8s.io/manager")
    message = await objects.refused(running, patch={"spec": {"runtimePatches": [other]}})
    assert "spec.runtimePatches" in message
    assert (
        "RuntimePatches can only be modified when the TrainJob is suspended before or after "
        "the update"
    ) in message, message
    message = await objects.refused(running, patch={"spec": {"runtimePatches": None}})
    assert "RuntimePatches can only be modified" in message, message

    # Suspending in the same update, changing them while suspended, resuming with a change.
    suspended = await objects.patch(
        running, {"spec": {"suspend": True, "runtimePatches": [_patch(), other]}}
    )
    assert len(suspended["spec"]["runtimePatches"]) == 2
    await objects.patch(running, {"spec": {"runtimePatches": [other]}})
    resumed = await objects.patch(running, {"spec": {"suspend": False, "runtimePatches": None}})
    assert "runtimePatches" not in resumed["spec"]
    # Unchanged patches never stand in the way of other updates.
    await objects.patch(running, {"metadata": {"labels": {"a": "b"}}})


async def test_the_controller_can_write_status(kube: KubeApi, objects: Objects) -> None:
    await objects.create(trainjob(runtimePatches=[_patch()]))
    status = {
        "conditions": [
            {
                "type": "Suspended",
                "status": "False",
                "reason": "Resumed",
                "message": "TrainJob is resumed",
                "lastTransitionTime": "2026-08-05T10:00:00Z",
            }
        ],
        "jobsStatus": [
            {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
        ],
    }
    written = await kube.merge_patch(
        TRAINJOBS, "job", {"status": status}, namespace=objects.namespace, subresource="status"
    )
    assert written["status"] == status
    progress = {"trainerStatus": {"progressPercentage": 50}}
    with pytest.raises(ApiError) as caught:
        await kube.merge_patch(
            TRAINJOBS,
            "job",
            {"status": progress},
            namespace=objects.namespace,
            subresource="status",
        )
    assert "lastUpdatedTime is required when trainerStatus is present" in caught.value.message
