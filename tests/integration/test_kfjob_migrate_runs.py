"""``kfjob migrate``'s output runs: the PyTorchJob, JAXJob and XGBoostJob examples, migrated,
applied to a real API server (its CRD validation) with the real JobSet controller and our
TrainJob controller, each TrainJob reaching Complete on kwok's pods. Their pod templates carry
the v1 templates' annotations (the simulation's, here), through a runtime patch or the
generated TrainingRuntime, so a TrainJob completes only if those got through."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from trainer_fixtures import RESOURCES, TRAINJOBS, Obj, is_subset
from trainjob_helpers import TIMEOUT, condition, events_of, is_true, shipped_runtimes

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.jobset import JOBSETS, JobSetController
from jobcontroller.testing.operator import RunningController, running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for
from kfjob.migrate import migrate
from trainer_operator.controller import TrainJobController

__all__ = ["shipped_runtimes"]  # a fixture the tests use

ROOT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    kubeconfig: str, jobset: JobSetController, shipped_runtimes: list[str], namespace: str
) -> AsyncIterator[RunningController]:
    async with running(kubeconfig, TrainJobController(), namespace=namespace) as op:
        yield op


def _finishing(path: str) -> Obj:
    """The example with every replica's pods exiting 0 after 1s on kwok."""
    [doc] = [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]
    doc = copy.deepcopy(doc)
    doc["metadata"].pop("namespace", None)  # the test's namespace
    key = next(k for k in doc["spec"] if k.endswith("ReplicaSpecs"))
    for spec in doc["spec"][key].values():
        simulate(spec.setdefault("template", {}), 0, run_for="1s")
    return doc


@pytest.mark.parametrize(
    ("path", "generated_runtime"),
    [
        ("examples/pytorchjob-mnist.yaml", False),
        ("examples/jaxjob-simple.yaml", True),
        ("examples/xgboostjob-iris.yaml", True),
    ],
)
async def test_a_migrated_example_completes(
    kube: KubeApi, operator: RunningController, namespace: str, path: str, generated_runtime: bool
) -> None:
    doc = _finishing(path)
    m = migrate(doc)
    assert (m.runtime is not None) == generated_runtime
    for obj in m.documents():
        created = await kube.create(RESOURCES[obj["kind"]], obj, namespace=namespace)
        assert is_subset(obj["spec"], created["spec"]), created  # nothing pruned
    name = m.name
    done = await wait_for(
        kube,
        TRAINJOBS,
        name,
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: is_true(t, "Complete") or is_true(t, "Failed"),
        what=f"migrated {m.kind} finished",
    )
    assert is_true(done, "Complete"), condition(done, "Failed")
    assert [e["reason"] for e in await events_of(kube, namespace, name)] == []
    jobset = await kube.get(JOBSETS, name, namespace=namespace)
    [rjob] = jobset["spec"]["replicatedJobs"]
    nodes = m.trainjob["spec"]["trainer"]["numNodes"]
    replicas = sum(s.get("replicas", 1) for s in _specs(doc))
    assert rjob["template"]["spec"]["parallelism"] == nodes == replicas
    [node] = rjob["template"]["spec"]["template"]["spec"]["containers"]
    v1 = _main_container(doc)
    assert node["image"] == v1["image"]
    assert (node.get("command"), node.get("args")) == (v1.get("command"), v1.get("args"))
    env = {e["name"] for e in node["env"]}
    assert {"RANK", "WORLD_SIZE"} <= env or {"PROCESS_ID", "NUM_PROCESSES"} <= env
    assert done["status"]["jobsStatus"][0]["succeeded"] == 1


def _specs(doc: Obj) -> list[Obj]:
    key = next(k for k in doc["spec"] if k.endswith("ReplicaSpecs"))
    return list(doc["spec"][key].values())


def _main_container(doc: Obj) -> Obj:
    first = _specs(doc)[0]
    container: Obj = first["template"]["spec"]["containers"][0]
    return container


async def test_a_migrated_mpijob_is_admitted(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    """The API server's validation (CRD schemas and CEL) takes the MPI runtime and TrainJob as
    written (our controller does not run them yet: it does not serve the mpi ML policy)."""
    for path in ("examples/mpijob-horovod.yaml", "examples/real/mpijob-allreduce.yaml"):
        m = migrate(_finishing(path))
        for obj in m.documents():
            created = await kube.create(RESOURCES[obj["kind"]], obj, namespace=namespace)
            # Stored as written: no field the CRD does not know was pruned away.
            assert is_subset(obj["spec"], created["spec"]), created
