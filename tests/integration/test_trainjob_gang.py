"""Gang scheduling of TrainJobs on a real API server: a runtime's ``podGroupPolicy``
(coscheduling, volcano) gives each TrainJob a PodGroup it owns and puts its JobSet's pods in it,
as Trainer v2.3.0 does; a Volcano TrainJob naming an empty queue or a PriorityClass that does not
exist gets no JobSet, until the class appears.

Minimal copies of the two PodGroup CRDs stand in for Volcano and scheduler-plugins (their
schedulers are not here); the JobSet controller (the ``jobset`` fixture) serves JobSet's CRD.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from trainer_fixtures import RUNTIMES, TRAINJOBS, Obj
from trainjob_helpers import TIMEOUT

from jobcontroller import add_job_flags, all_installed, lookup_crds, parse_settings
from jobcontroller.runtime.kube import CRDS, EVENTS, ApiError, KubeApi, Resource
from jobcontroller.testing.jobset import JOBSETS, JobSetController
from jobcontroller.testing.operator import RunningController, running
from jobcontroller.testing.volcano import POD_GROUPS as VOLCANO_POD_GROUPS
from jobcontroller.testing.volcano import install_volcano_crd
from jobcontroller.testing.waiting import wait_for, wait_for_list
from trainer_operator.controller import TrainJobController, installed_pod_groups
from trainer_operator.podgroups import COSCHEDULING_KIND, VOLCANO_KIND

PLUGINS_POD_GROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False
)
PG_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"

PLUGINS_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {
        "group": "scheduling.x-k8s.io",
        "names": {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def _established(crd: Obj | None) -> bool:
    return crd is not None and any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or ()
    )


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pod_group_crds(kube: KubeApi) -> AsyncIterator[None]:
    """Both PodGroup CRDs for this module. Volcano's stays, as the v1 gang tests leave it;
    scheduler-plugins' is removed afterwards (test_gang_scheduling.py expects it absent)."""
    await install_volcano_crd(kube)
    created = False
    try:
        await kube.create(CRDS, PLUGINS_CRD)
        created = True
    except ApiError as exc:
        if not exc.is_already_exists:
            raise
    assert await wait_for(kube, CRDS, "podgroups.scheduling.x-k8s.io", until=_established)
    yield
    if created:
        await kube.delete(CRDS, "podgroups.scheduling.x-k8s.io")
        await wait_for(kube, CRDS, "podgroups.scheduling.x-k8s.io", until=lambda o: o is None)


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    kubeconfig: str,
    jobset: JobSetController,
    kubeflow_crds: list[str],
    pod_group_crds: None,
    namespace: str,
) -> AsyncIterator[RunningController]:
    settings = parse_settings(
        name="trainer-operator", argv=[f"--kubeconfig={kubeconfig}"], add_flags=add_job_flags
    )
    # The look-up the operators make before starting (outside any event loop), against this
    # API server.
    pod_groups = await asyncio.to_thread(installed_pod_groups, settings)
    assert pod_groups == {COSCHEDULING_KIND, VOLCANO_KIND}
    controller = TrainJobController(pod_groups=pod_groups)
    async with running(kubeconfig, controller, namespace=namespace) as op:
        yield op


@pytest_asyncio.fixture(loop_scope="session")
async def priority_class(kube: KubeApi) -> AsyncIterator[str]:
    """A name no PriorityClass has yet; the class is deleted after the test if made."""
    name = f"gang-{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(ApiError):
        await kube.delete(PRIORITY_CLASSES, name)


def _runtime(
    name: str, policy: Obj, *, annotations: Obj | None = None, pod: Obj | None = None
) -> Obj:
    """A torch TrainingRuntime whose trainer asks for 250m CPU and 64Mi per node."""
    container = {
        "name": "node",
        "image": "busybox",
        "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
    }
    template: Obj = {
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "template": {
                        "metadata": {"labels": {ANCESTOR: "trainer"}},
                        "spec": {"template": {"spec": {"containers": [container], **(pod or {})}}},
                    },
                }
            ]
        }
    }
    if annotations is not None:
        template["metadata"] = {"annotations": annotations}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "podGroupPolicy": policy,
            "template": template,
        },
    }


def _trainjob(name: str, runtime: str, nodes: int) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": nodes, "command": ["true"]},
        },
    }


def _pod_template(jobset: Obj) -> Obj:
    [rjob] = jobset["spec"]["replicatedJobs"]
    template: Obj = rjob["template"]["spec"]["template"]
    return template


def _owned_by(obj: Obj, trainjob: Obj) -> bool:
    [ref] = obj["metadata"]["ownerReferences"]
    return bool(
        ref["kind"] == "TrainJob"
        and ref["uid"] == trainjob["metadata"]["uid"]
        and ref.get("controller") is True
        and ref.get("blockOwnerDeletion") is True
    )


async def _created(kube: KubeApi, resource: Resource, name: str, namespace: str) -> Obj:
    found = await wait_for(
        kube, resource, name, namespace=namespace, until=lambda o: o is not None, timeout=TIMEOUT
    )
    assert found is not None
    return found


async def test_the_crds_are_looked_up_in_one_go(
    kube: KubeApi, kubeconfig: str, pod_group_crds: None
) -> None:
    """The look-up before the operator starts: each CRD answered on its own, installed or
    not, by its metadata alone; and all or none installed read from the answers."""
    settings = parse_settings(
        name="trainer-operator", argv=[f"--kubeconfig={kubeconfig}"], add_flags=add_job_flags
    )
    names = [
        "podgroups.scheduling.x-k8s.io",
        "podgroups.scheduling.volcano.sh",
        "notinstalled.example.com",
    ]
    answers = await asyncio.to_thread(lookup_crds, settings, names)
    assert answers == dict(zip(names, [True, True, False], strict=True))
    assert all_installed(answers, names[:2]) is True
    assert all_installed(answers, names) is False
    assert all_installed(answers | {names[2]: None}, names) is None
    # What is asked for: the metadata, not the CRD's schema.
    for version in ("0", None):
        meta = await kube.get_metadata(CRDS, names[1], resource_version=version)
        assert meta["kind"] == "PartialObjectMetadata"
        assert meta["metadata"]["name"] == names[1] and "spec" not in meta


async def test_a_coscheduling_trainjob_gets_its_pod_group(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    await kube.create(
        RUNTIMES,
        _runtime("cosched", {"coscheduling": {"scheduleTimeoutSeconds": 45}}),
        namespace=namespace,
    )
    job = await kube.create(TRAINJOBS, _trainjob("gang-c", "cosched", 3), namespace=namespace)
    group = await _created(kube, PLUGINS_POD_GROUPS, "gang-c", namespace)
    assert _owned_by(group, job)
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "750m", "memory": "192Mi"},
        "scheduleTimeoutSeconds": 45,
    }
    jobset = await _created(kube, JOBSETS, "gang-c", namespace)
    assert _pod_template(jobset)["metadata"]["labels"][PG_LABEL] == "gang-c"
    assert VOLCANO_GROUP not in (_pod_template(jobset)["metadata"].get("annotations") or {})
    with pytest.raises(ApiError) as none:
        await kube.get(VOLCANO_POD_GROUPS, "gang-c", namespace=namespace)
    assert none.value.is_not_found


async def test_a_volcano_trainjob_gets_its_pod_group(
    kube: KubeApi, operator: RunningController, namespace: str, priority_class: str
) -> None:
    await kube.create(
        PRIORITY_CLASSES,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": priority_class},
            "value": 1000,
        },
    )
    policy = {"volcano": {"networkTopology": {"mode": "soft", "highestTierAllowed": 2}}}
    await kube.create(
        RUNTIMES,
        _runtime(
            "volcano",
            policy,
            annotations={QUEUE: "team-a"},
            pod={"priorityClassName": priority_class},
        ),
        namespace=namespace,
    )
    job = await kube.create(TRAINJOBS, _trainjob("gang-v", "volcano", 2), namespace=namespace)
    group = await _created(kube, VOLCANO_POD_GROUPS, "gang-v", namespace)
    assert _owned_by(group, job)
    assert group["spec"] == {
        "minMember": 2,
        "minResources": {"cpu": "500m", "memory": "128Mi"},
        "queue": "team-a",
        "priorityClassName": priority_class,
        "networkTopology": {"mode": "soft", "highestTierAllowed": 2},
    }
    jobset = await _created(kube, JOBSETS, "gang-v", namespace)
    assert _pod_template(jobset)["metadata"]["annotations"][VOLCANO_GROUP] == "gang-v"
    assert PG_LABEL not in (_pod_template(jobset)["metadata"].get("labels") or {})
    assert jobset["metadata"]["annotations"][QUEUE] == "team-a"


async def _refusal(kube: KubeApi, namespace: str, name: str) -> str:
    """The Warning event the TrainJob ``name`` gets (its only one)."""

    def mine(items: list[Obj]) -> list[Obj]:
        return [
            e
            for e in items
            if e["involvedObject"].get("kind") == "TrainJob"
            and e["involvedObject"].get("name") == name
        ]

    items = await wait_for_list(
        kube, EVENTS, namespace=namespace, until=lambda items: bool(mine(items)), timeout=TIMEOUT
    )
    [event] = mine(items)
    assert (event["type"], event["reason"]) == ("Warning", "TrainJobResourcesCreationFailed")
    message: str = event["message"]
    return message


async def test_volcano_checks_refuse_and_a_priority_class_that_appears_wakes_the_trainjob(
    kube: KubeApi, operator: RunningController, namespace: str, priority_class: str
) -> None:
    await kube.create(
        RUNTIMES,
        _runtime("empty-queue", {"volcano": {}}, annotations={QUEUE: ""}),
        namespace=namespace,
    )
    await kube.create(TRAINJOBS, _trainjob("no-queue", "empty-queue", 1), namespace=namespace)
    assert await _refusal(kube, namespace, "no-queue") == (
        "TrainJob resources reconciliation failed: spec.annotations[scheduling.volcano.sh/"
        "queue-name]: Invalid value: Volcano queue name must not be empty"
    )

    await kube.create(
        RUNTIMES,
        _runtime("missing-class", {"volcano": {}}, pod={"priorityClassName": priority_class}),
        namespace=namespace,
    )
    job = await kube.create(
        TRAINJOBS, _trainjob("no-class", "missing-class", 1), namespace=namespace
    )
    assert await _refusal(kube, namespace, "no-class") == (
        "TrainJob resources reconciliation failed: spec.templateSpec.priorityClassName: Invalid "
        f'value: PriorityClass "{priority_class}" doesn\'t exist: '
        f'priorityclasses.scheduling.k8s.io "{priority_class}" not found'
    )
    for name in ("no-queue", "no-class"):
        for resource in (JOBSETS, VOLCANO_POD_GROUPS):
            with pytest.raises(ApiError) as none:
                await kube.get(resource, name, namespace=namespace)
            assert none.value.is_not_found

    # The class appears: the PriorityClass informer wakes the waiting TrainJob.
    await kube.create(
        PRIORITY_CLASSES,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": priority_class},
            "value": 10,
        },
    )
    group = await _created(kube, VOLCANO_POD_GROUPS, "no-class", namespace)
    assert _owned_by(group, job)
    assert group["spec"]["priorityClassName"] == priority_class
    await _created(kube, JOBSETS, "no-class", namespace)
