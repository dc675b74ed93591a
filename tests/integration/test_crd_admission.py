"""The generated CRDs on a real apiserver: they install, accept the seeds and docs unchanged,
and reject what the anchors' webhooks reject, with messages a user can act on.

Each rejection case is also fed to the framework's Python validator, so the CEL rules and the
validators the controllers run cannot drift apart silently.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from pydantic import ValidationError

from jobcontroller.runtime.kube import CRDS, ApiError, KubeApi, Resource
from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.waiting import wait_for
from mpi_operator.api import MPIJob, validate_mpijob
from pytorch_operator.api import PyTorchJob, validate_pytorchjob
from tf_operator.api import TFJob, validate_tfjob

ROOT = Path(__file__).parents[2]
SEEDS = ROOT / "tests" / "data" / "seeds"
TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")
PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
MPIJOBS = Resource("kubeflow.org", "v2beta1", "MPIJob", "mpijobs")

Validator = Callable[[dict[str, Any]], list[str]]
KINDS: dict[str, tuple[Resource, Validator]] = {
    "TFJob": (TFJOBS, lambda raw: validate_tfjob(TFJob.parse(raw))),
    "PyTorchJob": (PYTORCHJOBS, lambda raw: validate_pytorchjob(PyTorchJob.parse(raw))),
    "MPIJob": (MPIJOBS, lambda raw: validate_mpijob(MPIJob.parse(raw))),
}


def _established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def kubeflow_crds(kube: KubeApi) -> AsyncIterator[list[dict[str, Any]]]:
    """Install (or update in place) the committed CRD manifests and wait for Established."""
    installed = []
    for path in sorted((ROOT / "manifests" / "base" / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        name = crd["metadata"]["name"]
        try:
            await kube.create(CRDS, crd)
        except ApiError as exc:
            if not exc.is_already_exists:
                raise
            current = await kube.get(CRDS, name)
            crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await kube.replace(CRDS, crd)
        established = await wait_for(kube, CRDS, name, until=_established, timeout=30)
        assert established is not None
        installed.append(established)
    yield installed


def _seed(name: str) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load((SEEDS / name).read_text())
    return raw


def _tfjob(**spec: Any) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "tf:1"}
    replica = {"replicas": 2, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tf"},
        "spec": {"tfReplicaSpecs": {"Worker": replica}, **spec},
    }


def _pytorchjob() -> dict[str, Any]:
    return _seed("distributed-pytorch-job.yaml") | {"metadata": {"name": "pt"}}


def _mpijob() -> dict[str, Any]:
    def replica(n: int, name: str) -> dict[str, Any]:
        return {
            "replicas": n,
            "template": {"spec": {"containers": [{"name": name, "image": "mpi-pi"}]}},
        }

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": replica(1, "mpi-launcher"),
                "Worker": replica(2, "mpi-worker"),
            },
        },
    }


async def test_crds_are_established_with_their_names(
    kubeflow_crds: list[dict[str, Any]],
) -> None:
    accepted = {c["metadata"]["name"]: c["status"]["acceptedNames"] for c in kubeflow_crds}
    assert set(accepted) == {
        "tfjobs.kubeflow.org",
        "pytorchjobs.kubeflow.org",
        "mpijobs.kubeflow.org",
        "xgboostjobs.kubeflow.org",
        "paddlejobs.kubeflow.org",
        "jaxjobs.kubeflow.org",
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    }
    assert accepted["mpijobs.kubeflow.org"]["shortNames"] == ["mpij"]
    # Not in "all": `kubectl delete all --all` must not delete training jobs (issue 12).
    v1 = {n: names for n, names in accepted.items() if n.partition(".")[2] == "kubeflow.org"}
    assert all(names["categories"] == ["kubeflow"] for names in v1.values()), accepted
    # The trainer kinds have no category, as in Kubeflow Trainer v2.3.0 (so none is "all").
    assert not any(names.get("categories") for name, names in accepted.items() if name not in v1)


@pytest.mark.parametrize(
    ("seed", "resource"),
    [
        ("distributed-tensorflow-job.yaml", TFJOBS),
        ("distributed-pytorch-job.yaml", PYTORCHJOBS),
    ],
)
async def test_seed_yaml_is_accepted_unchanged(
    kube: KubeApi,
    kubeflow_crds: list[dict[str, Any]],
    namespace: str,
    seed: str,
    resource: Resource,
) -> None:
    raw = _seed(seed)
    created = await kube.create(resource, copy.deepcopy(raw), namespace=namespace)
    # Stored as sent, plus the CRD's only defaults: runPolicy {} with suspend false.
    assert created["spec"] == {**raw["spec"], "runPolicy": {"suspend": False}}


async def test_mpijob_docs_example_is_accepted(
    kube: KubeApi, kubeflow_crds: list[dict[str, Any]], namespace: str
) -> None:
    raw = _mpijob()
    raw["spec"]["runPolicy"] = {"cleanPodPolicy": "Running", "ttlSecondsAfterFinished": 60}
    raw["spec"]["sshAuthMountPath"] = "/home/mpiuser/.ssh"
    created = await kube.create(MPIJOBS, copy.deepcopy(raw), namespace=namespace)
    assert created["spec"]["mpiReplicaSpecs"] == raw["spec"]["mpiReplicaSpecs"]


async def test_mpijob_crd_stores_the_mpi_operators_defaults(
    kube: KubeApi, kubeflow_crds: list[dict[str, Any]], namespace: str
) -> None:
    # As mpi-operator v0.8's CRD: what a user leaves out is stored with its default, so
    # `kubectl get -o yaml` shows the same object under either operator.
    raw = _mpijob()
    del raw["spec"]["slotsPerWorker"]
    created = await kube.create(MPIJOBS, copy.deepcopy(raw), namespace=namespace)
    assert {k: v for k, v in created["spec"].items() if k != "mpiReplicaSpecs"} == {
        "slotsPerWorker": 1,
        "runLauncherAsWorker": False,
        "sshAuthMountPath": "/root/.ssh",
        "launcherCreationPolicy": "AtStartup",
        "mpiImplementation": "OpenMPI",
        "runPolicy": {"suspend": False},
    }


@pytest.mark.parametrize("length", [53, 54])
async def test_mpijob_names_as_long_as_mpi_operator_takes_are_accepted(
    kube: KubeApi, kubeflow_crds: list[dict[str, Any]], namespace: str, length: int
) -> None:
    # The launcher is the Job <name>-launcher (at most 63) and workers <name>-worker-<i>;
    # the generic <name>-<type>-<index> rule must not count the Launcher as a pod name.
    raw = _mpijob()
    raw["metadata"]["name"] = "m" * length
    await kube.create(MPIJOBS, raw, namespace=namespace)
    too_long = _mpijob()
    too_long["metadata"]["name"] = "m" * 55
    with pytest.raises(ApiError) as refused:
        await kube.create(MPIJOBS, too_long, namespace=namespace)
    assert "<name>-launcher" in str(refused.value)


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


def _chain(*mutations: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        for m in mutations:
            m(obj)

    return mutate


TF_WORKER = "spec.tfReplicaSpecs.Worker"
PT = "spec.pytorchReplicaSpecs"
MPI = "spec.mpiReplicaSpecs"
NO_TF_CONTAINER = {"containers": [{"name": "main", "image": "x"}]}
TF_CHIEFS = {
    "replicas": 2,
    "template": {"spec": {"containers": [{"name": "tensorflow", "image": "x"}]}},
}
PT_LAUNCHER = {"template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}

REJECTED: list[Any] = [
    pytest.param(
        _tfjob, _set("metadata.name", "Tf-Job"), ["metadata.name", "DNS-1035"], id="tf-name"
    ),
    pytest.param(
        _tfjob,
        _set("metadata.name", "t" * 60),
        ["metadata.name", "too long", "<name>-<replica type>-<index>"],
        id="tf-name-too-long-for-pods",
    ),
    pytest.param(
        _tfjob,
        _set(f"{TF_WORKER}.template.spec", NO_TF_CONTAINER),
        ["spec.tfReplicaSpecs[Worker].template.spec.containers", "named 'tensorflow'"],
        id="tf-no-tensorflow-container",
    ),
    pytest.param(
        _tfjob,
        _set(f"{TF_WORKER}.template.spec.containers", []),
        ["spec.tfReplicaSpecs.Worker.template.spec.containers", "at least 1 items"],
        id="tf-no-containers",
    ),
    pytest.param(
        _tfjob,
        _set(f"{TF_WORKER}.template.spec.containers", [{"name": "tensorflow"}]),
        ["containers[0].image", "Required value"],
        id="tf-no-image",
    ),
    pytest.param(
        _tfjob,
        _set("spec.tfReplicaSpecs.Chief", TF_CHIEFS),
        ["spec.tfReplicaSpecs", "Chief/Master replicas must be at most 1"],
        id="tf-two-chiefs",
    ),
    pytest.param(
        _tfjob,
        _set("spec.runPolicy", {"managedBy": "example.com/mine"}),
        ["spec.runPolicy.managedBy", "kubeflow.org/training-operator"],
        id="tf-managed-by",
    ),
    pytest.param(
        _tfjob,
        _set(f"{TF_WORKER}.restartPolicy", "Sometimes"),
        ["restartPolicy", "Unsupported value", "ExitCode"],
        id="tf-restart-policy",
    ),
    pytest.param(
        _pytorchjob,
        _set(f"{PT}.Master.replicas", None),
        ["spec.pytorchReplicaSpecs", "Master replicas must be set to 1"],
        id="pt-master-replicas-omitted",
    ),
    pytest.param(
        _pytorchjob,
        _set(f"{PT}.Launcher", PT_LAUNCHER),
        ["replica types must be Master or Worker"],
        id="pt-unknown-type",
    ),
    pytest.param(
        _pytorchjob,
        _chain(_set("spec.elasticPolicy", {"nProcPerNode": 2}), _set("spec.nprocPerNode", "4")),
        ["must not both be set"],
        id="pt-both-nproc",
    ),
    pytest.param(
        _mpijob,
        _set(f"{MPI}.Launcher", None),
        ["spec.mpiReplicaSpecs", "a Launcher replica spec is required"],
        id="mpi-no-launcher",
    ),
    pytest.param(
        _mpijob,
        _set(f"{MPI}.Worker.restartPolicy", "ExitCode"),
        ["spec.mpiReplicaSpecs[Worker].restartPolicy", "must be Never or OnFailure"],
        id="mpi-exit-code",
    ),
    pytest.param(
        _mpijob,
        _set("metadata.name", "m" * 56),
        ["metadata.name", "<name>-launcher"],
        id="mpi-launcher-name-too-long",
    ),
    # What Kubernetes can hold (int32), and what each field means.
    pytest.param(
        _tfjob,
        _set(f"{TF_WORKER}.replicas", 2**31),
        ["replicas", "should be less than or equal to 100000"],
        id="tf-replicas-past-int32",
    ),
    pytest.param(
        _mpijob,
        _set(f"{MPI}.Worker.replicas", 2**63 - 1),
        ["replicas", "should be less than or equal to 100000"],
        id="mpi-replicas-int64",
    ),
    pytest.param(
        _tfjob,
        _set("spec.tfReplicaSpecs.Trainer", TF_CHIEFS | {"replicas": 1}),
        ["replica types must be Chief, Master, PS, Worker or Evaluator"],
        id="tf-unknown-type",
    ),
    pytest.param(
        _tfjob,
        _chain(_set("spec.tfReplicaSpecs.PS", TF_CHIEFS), _set(TF_WORKER, None)),
        ["a Chief, Master or Worker replica is required"],
        id="tf-ps-only",
    ),
    pytest.param(
        _mpijob,
        _set("spec.slotsPerWorker", 0),
        ["slotsPerWorker", "should be greater than or equal to 1"],
        id="mpi-zero-slots",
    ),
    pytest.param(
        _mpijob,
        _set("spec.slotsPerWorker", 2**31),
        ["slotsPerWorker", "should be less than or equal to 1024"],
        id="mpi-slots-past-int32",
    ),
    *(
        pytest.param(
            _pytorchjob,
            _set("spec.nprocPerNode", value),
            ["nprocPerNode", "should match"],
            id=f"pt-nproc-{value or 'empty'}",
        )
        for value in ("abc", "0", "-1", "")
    ),
    pytest.param(
        _pytorchjob,
        _set("spec.elasticPolicy", {"rdzvBackend": "zookeeper"}),
        ["rdzvBackend", "Unsupported value", "c10d"],
        id="pt-rdzv-backend",
    ),
]


@pytest.mark.parametrize(("make", "mutate", "expected"), REJECTED)
async def test_invalid_jobs_are_rejected_with_a_readable_message(
    kube: KubeApi,
    kubeflow_crds: list[dict[str, Any]],
    namespace: str,
    make: Callable[[], dict[str, Any]],
    mutate: Callable[[dict[str, Any]], None],
    expected: list[str],
) -> None:
    obj = make()
    mutate(obj)
    resource, validate = KINDS[obj["kind"]]
    with pytest.raises(ApiError) as caught:
        await kube.create(resource, obj, namespace=namespace)
    assert caught.value.status == 422
    for text in expected:
        assert text in caught.value.message, caught.value.message
    # The controllers' validator agrees. Schema-level errors (an unknown enum value) already
    # fail when the object is parsed into a model, which is the controllers' first step.
    try:
        errors = validate(obj)
    except ValidationError:
        return
    assert errors != []


async def test_managed_by_and_queue_are_immutable(
    kube: KubeApi, kubeflow_crds: list[dict[str, Any]], namespace: str
) -> None:
    job = _tfjob(runPolicy={"schedulingPolicy": {"queue": "q1"}})
    await kube.create(TFJOBS, job, namespace=namespace)
    for patch, field in [
        ({"managedBy": "kueue.x-k8s.io/multikueue"}, "spec.runPolicy.managedBy"),
        ({"schedulingPolicy": {"queue": "q2"}}, "spec.runPolicy.schedulingPolicy.queue"),
    ]:
        with pytest.raises(ApiError) as caught:
            await kube.merge_patch(
                TFJOBS, "tf", {"spec": {"runPolicy": patch}}, namespace=namespace
            )
        assert caught.value.status == 422
        assert field in caught.value.message and "immutable" in caught.value.message
    # Other runPolicy fields stay mutable.
    patched = await kube.merge_patch(
        TFJOBS, "tf", {"spec": {"runPolicy": {"suspend": True}}}, namespace=namespace
    )
    assert patched["spec"]["runPolicy"]["suspend"] is True


async def test_unknown_fields_are_an_error_under_strict_field_validation(
    kube: KubeApi, kubeflow_crds: list[dict[str, Any]], namespace: str
) -> None:
    job = _tfjob(tfReplicaSpec={"typo": True})
    path = TFJOBS.path(namespace=namespace)
    with pytest.raises(ApiError) as caught:
        await kube.request("POST", path, query={"fieldValidation": "Strict"}, body=job)
    assert 'unknown field "spec.tfReplicaSpec"' in caught.value.message
    # Without Strict the field is pruned, in the pod template too (whose schema is the core
    # one); the template's real fields are kept.
    pod = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    pod["nodeSelector"] = {"gpu": "1"}
    pod["nodeSelectorr"] = {"gpu": "1"}
    created = await kube.create(TFJOBS, job, namespace=namespace)
    assert "tfReplicaSpec" not in created["spec"]
    template = created["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    assert template["spec"]["nodeSelector"] == {"gpu": "1"}
    assert "nodeSelectorr" not in template["spec"]


def _container(job: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"
    ][0]
    return container


POD_TEMPLATE_REJECTED: list[Any] = [
    pytest.param(
        {"resources": {"limits": {"cpu": "abc"}}},
        ["spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.limits.cpu", "abc"],
        id="cpu-not-a-quantity",
    ),
    pytest.param(
        {"ports": [{"name": "tfjob-port", "containerPort": "2222"}]},
        ["containers[0].ports[0].containerPort", "must be of type integer"],
        id="port-as-string",
    ),
    pytest.param(
        {"env": "A=1"},
        ["containers[0].env", "must be of type array"],
        id="env-not-a-list",
    ),
]


@pytest.mark.parametrize(("container", "expected"), POD_TEMPLATE_REJECTED)
async def test_pod_templates_are_checked_against_the_core_pod_schema(
    kube: KubeApi,
    kubeflow_crds: list[dict[str, Any]],
    namespace: str,
    container: dict[str, Any],
    expected: list[str],
) -> None:
    """What would fail every pod creation later is refused at admission, in the API server's
    words (kubeflow's CRDs carry the PodTemplateSpec schema; before, such a job sat in Created
    while pod creation failed)."""
    job = _tfjob()
    _container(job).update(container)
    with pytest.raises(ApiError) as caught:
        await kube.create(TFJOBS, job, namespace=namespace)
    assert caught.value.status == 422
    for text in expected:
        assert text in caught.value.message, caught.value.message


async def test_two_containers_of_one_name_are_refused(
    kube: KubeApi, kubeflow_crds: list[dict[str, Any]], namespace: str
) -> None:
    job = _tfjob()
    pod = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    pod["containers"].append({"name": "tensorflow", "image": "sidecar:1"})
    with pytest.raises(ApiError) as caught:
        await kube.create(TFJOBS, job, namespace=namespace)
    assert "Duplicate value" in caught.value.message, caught.value.message


async def test_a_quantity_is_stored_as_written(
    kube: KubeApi, kubeflow_crds: list[dict[str, Any]], namespace: str
) -> None:
    job = _tfjob()
    _container(job)["resources"] = {"limits": {"cpu": "500m", "memory": 1073741824}}
    _container(job)["ports"] = [{"name": "tfjob-port", "containerPort": 2222}]
    created = await kube.create(TFJOBS, job, namespace=namespace)
    container = _container(created)
    assert container["resources"] == {"limits": {"cpu": "500m", "memory": 1073741824}}
    # The one default the core schema insists on (a list-map key), as a Pod would get it.
    assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"}]


async def test_kubectl_explain_walks_the_pod_template(
    kubeconfig: str, kubeflow_crds: list[dict[str, Any]]
) -> None:
    kubectl = find_binaries()["kubectl"]
    explained = subprocess.run(
        [
            kubectl,
            f"--kubeconfig={kubeconfig}",
            "explain",
            "tfjob.spec.tfReplicaSpecs.template.spec.containers.resources",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "FIELD: resources <Object>" in explained, explained
    assert "Compute Resources required by this container" in explained, explained
    for field in ("claims", "limits", "requests"):
        assert f"  {field}\t" in explained, explained


async def test_pytorchjob_scale_subresource_drives_worker_replicas(
    kube: KubeApi, kubeflow_crds: list[dict[str, Any]], namespace: str
) -> None:
    await kube.create(PYTORCHJOBS, _pytorchjob(), namespace=namespace)
    scale = await kube.get(PYTORCHJOBS, "pt", namespace=namespace, subresource="scale")
    assert scale["spec"]["replicas"] == 2
    await kube.merge_patch(
        PYTORCHJOBS, "pt", {"spec": {"replicas": 5}}, namespace=namespace, subresource="scale"
    )
    job = await kube.get(PYTORCHJOBS, "pt", namespace=namespace)
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 5
    # The status the controller writes is accepted by the status schema.
    status = {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "PyTorchJobCreated",
                "lastUpdateTime": "2024-01-01T00:00:00Z",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
        "replicaStatuses": {
            "Worker": {"active": 3, "selector": "training.kubeflow.org/job-name=pt"}
        },
        "startTime": "2024-01-01T00:00:00Z",
    }
    await kube.merge_patch(
        PYTORCHJOBS, "pt", {"status": status}, namespace=namespace, subresource="status"
    )
    scale = await kube.get(PYTORCHJOBS, "pt", namespace=namespace, subresource="scale")
    assert scale["status"] == {"replicas": 3, "selector": "training.kubeflow.org/job-name=pt"}
