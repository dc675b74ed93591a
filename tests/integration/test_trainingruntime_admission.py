"""The TrainingRuntime and ClusterTrainingRuntime CRDs on a real API server.

They take every runtime Kubeflow Trainer v2.3.0 ships and every example unchanged, give them
v2.3.0's defaults, and refuse what v2.3.0's CRDs and runtime webhooks refused, with the words
they used: a replicated job labelled as a TrainJob step (trainer, dataset-initializer,
model-initializer) runs one Job ("always must be 1") and has its step's container ("must contain
the required container for the ancestor: trainer").
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from trainer_fixtures import (
    ANCESTOR,
    SHIPPED,
    UPSTREAM,
    Mutation,
    Obj,
    Objects,
    documents,
    is_subset,
    made_by_test,
    replicated_jobs,
    upstream_runtime,
)

from jobcontroller.runtime.kube import KubeApi

EXAMPLES = sorted((UPSTREAM / "examples").glob("*.yaml"))
RUNTIME_FILES = sorted((UPSTREAM / "runtimes").glob("*.yaml"))
MPI_DEFAULTS = {
    "numProcPerNode": 1,
    "mpiImplementation": "OpenMPI",
    "sshAuthMountPath": "/root/.ssh",
    "runLauncherAsNode": False,
}


@pytest_asyncio.fixture(loop_scope="session")
async def objects(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> AsyncIterator[Objects]:
    async with made_by_test(kube, namespace) as made:
        yield made


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
async def test_upstream_examples_are_accepted_unchanged(path: Path, objects: Objects) -> None:
    for doc in documents(path):
        created = await objects.create(doc)
        assert is_subset(doc["spec"], created["spec"]), created["spec"]
        if doc["kind"] == "TrainJob":
            spec = created["spec"]
            assert spec["suspend"] is doc["spec"].get("suspend", False)
            assert spec["managedBy"] == "trainer.kubeflow.org/trainjob-controller"


@pytest.mark.parametrize("path", RUNTIME_FILES, ids=lambda p: p.name)
async def test_every_upstream_runtime_is_accepted_with_its_defaults(
    path: Path, objects: Objects
) -> None:
    [doc] = documents(path)
    created = await objects.create(doc)
    assert is_subset(doc["spec"], created["spec"])
    for job in replicated_jobs(created):
        # ReplicatedJob's defaults (JobSet's markers).
        assert job["replicas"] >= 1
        assert job["groupName"] == "default"
    given = doc["spec"].get("mlPolicy", {}).get("mpi")
    if given is not None:  # deepspeed and mlx: the MPI policy's defaults fill in the rest
        mpi = created["spec"]["mlPolicy"]["mpi"]
        assert {k: mpi[k] for k in MPI_DEFAULTS if k not in given} == {
            k: v for k, v in MPI_DEFAULTS.items() if k not in given
        }


@pytest.mark.parametrize("name", ["torch_distributed.yaml", "jax_distributed.yaml"])
async def test_shipped_runtimes_are_accepted(name: str, objects: Objects) -> None:
    [doc] = documents(SHIPPED / name)
    created = await objects.create(doc)
    [node] = replicated_jobs(created)
    assert node["replicas"] == 1


def _first_job(runtime: Obj) -> Obj:
    return replicated_jobs(runtime)[0]


def _containers(job: Obj) -> list[Obj]:
    containers: list[Obj] = job["template"]["spec"]["template"]["spec"]["containers"]
    return containers


def _dataset_step(runtime: Obj, *, container: str = "dataset-initializer") -> None:
    replicated_jobs(runtime).insert(
        0,
        {
            "name": "dataset-initializer",
            "template": {
                "metadata": {"labels": {ANCESTOR: "dataset-initializer"}},
                "spec": {"template": {"spec": {"containers": [{"name": container, "image": "i"}]}}},
            },
        },
    )


def _set(expression: Mutation) -> Mutation:
    def apply(runtime: Obj) -> None:
        expression(runtime)

    return apply


RUNTIMES_PATH = "spec.template.spec.replicatedJobs[0]"
IN_ORDER = "InOrder"
REFUSED = [
    pytest.param(
        _set(lambda r: _first_job(r).update(replicas=2)),
        [f"{RUNTIMES_PATH}.replicas", "always must be 1"],
        id="trainer-replicas",
    ),
    pytest.param(
        _set(lambda r: _containers(_first_job(r))[0].update(name="main")),
        [
            f"{RUNTIMES_PATH}.template.spec.template.spec.containers",
            "must contain the required container for the ancestor: trainer",
        ],
        id="trainer-without-node",
    ),
    pytest.param(
        _set(lambda r: _dataset_step(r, container="fetch")),
        ["must contain the required container for the ancestor: dataset-initializer"],
        id="dataset-initializer-without-its-container",
    ),
    pytest.param(
        _set(lambda r: r["spec"]["mlPolicy"].update(jax={})),
        ["spec.mlPolicy", "Only one of the policy can be configured"],
        id="two-policies",
    ),
    pytest.param(
        _set(lambda r: r["spec"].update(mlPolicy={"flux": {"numProcPerNode": 0}})),
        ["NumProcPerNode in fluxPolicy must be >= 1"],
        id="flux-procs",
    ),
    pytest.param(
        _set(lambda r: r["spec"].update(mlPolicy={"mpi": {"mpiImplementation": "Intel"}})),
        ["spec.mlPolicy.mpi.mpiImplementation", 'Unsupported value: "Intel"'],
        id="mpi-implementation",
    ),
    pytest.param(
        _set(
            lambda r: r["spec"]["mlPolicy"]["torch"].update(
                envInjection={"targets": [{"jobName": "node", "containerNames": ["node"]}]}
            )
        ),
        [
            "containerNames must not include the main node container because PET_* envs are "
            "always injected into it"
        ],
        id="env-injection-node",
    ),
    pytest.param(
        _set(
            lambda r: (
                _dataset_step(r),
                r["spec"]["template"]["spec"].update(
                    startupPolicy={"startupPolicyOrder": "InOrder"}
                ),
                replicated_jobs(r)[1].update(
                    dependsOn=[{"name": "dataset-initializer", "status": "Complete"}]
                ),
            )
        ),
        ["StartupPolicy and DependsOn APIs are mutually exclusive"],
        id="startup-policy-and-depends-on",
    ),
    pytest.param(
        _set(lambda r: r.update(spec={})),
        ["spec", "should have at least 1 properties"],
        id="empty-spec",
    ),
]


@pytest.mark.parametrize("kind", ["ClusterTrainingRuntime", "TrainingRuntime"])
@pytest.mark.parametrize(("mutate", "expected"), REFUSED)
async def test_invalid_runtimes_are_refused_with_upstreams_words(
    kind: str, mutate: Mutation, expected: list[str], objects: Objects
) -> None:
    runtime = upstream_runtime() | {"kind": kind}
    mutate(runtime)
    message = await objects.refused(runtime)
    for text in expected:
        assert text in message, message


async def test_the_step_rules_leave_other_replicated_jobs_alone(objects: Objects) -> None:
    """v2.3.0 judged only jobs labelled as a TrainJob step: a sidecar job may have several
    replicas and containers of any name."""
    runtime = upstream_runtime()
    replicated_jobs(runtime).append(
        {
            "name": "parameter-server",
            "replicas": 3,
            "template": {
                "metadata": {"labels": {"team": "ml"}},
                "spec": {"template": {"spec": {"containers": [{"name": "ps", "image": "ps"}]}}},
            },
        }
    )
    _dataset_step(runtime)
    created = await objects.create(runtime)
    assert [j["replicas"] for j in replicated_jobs(created)] == [1, 1, 3]


@pytest.mark.parametrize("kind", ["ClusterTrainingRuntime", "TrainingRuntime"])
async def test_an_update_breaking_a_step_rule_is_refused(kind: str, objects: Objects) -> None:
    created = await objects.create(upstream_runtime() | {"kind": kind})
    jobs: Any = copy.deepcopy(replicated_jobs(created))
    jobs[0]["replicas"] = 4
    patch = {"spec": {"template": {"spec": {"replicatedJobs": jobs}}}}
    message = await objects.refused(created, patch=patch)
    assert "always must be 1" in message, message
    # JobSet's own rules are there too: its failure policy is immutable.
    await objects.patch(created, {"spec": {"template": {"spec": {"failurePolicy": {}}}}})
    message = await objects.refused(
        created, patch={"spec": {"template": {"spec": {"failurePolicy": {"maxRestarts": 3}}}}}
    )
    assert "Value is immutable" in message, message
