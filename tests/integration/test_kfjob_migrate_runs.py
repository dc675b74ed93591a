"""``kfjob migrate``'s output runs: the PyTorchJob, JAXJob, XGBoostJob and MPIJob examples,
migrated, applied to a real API server (its CRD validation) with the real JobSet controller and our
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

from jobcontroller.runtime.kube import CONFIGMAPS, SECRETS, KubeApi
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
    """The example with every replica's pods exiting 0 after 1s on kwok; an MPIJob's workers
    run until deleted instead (sshd, which the launcher's end ends)."""
    [doc] = [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]
    doc = copy.deepcopy(doc)
    doc["metadata"].pop("namespace", None)  # the test's namespace
    key = next(k for k in doc["spec"] if k.endswith("ReplicaSpecs"))
    for rtype, spec in doc["spec"][key].items():
        if doc["kind"] == "MPIJob" and rtype == "Worker":
            simulate(spec.setdefault("template", {}), None)
        else:
            simulate(spec.setdefault("template", {}), 0, run_for="1s")
    return doc


@pytest.mark.parametrize(
    ("path", "generated_runtime"),
    [
        ("examples/pytorchjob-mnist.yaml", False),
        ("tests/data/seeds/distributed-pytorch-job.yaml", False),
        ("examples/jaxjob-simple.yaml", True),
        ("examples/jaxjob-mnist.yaml", True),
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


@pytest.mark.parametrize(
    "path", ["examples/mpijob-horovod.yaml", "tests/data/seeds/mpijob-horovod.yaml"]
)
async def test_a_migrated_mpijob_completes(
    kube: KubeApi, operator: RunningController, namespace: str, path: str
) -> None:
    """The generated MPI runtime and TrainJob are taken as written (nothing pruned) and run:
    the workers' template is the node job, the launcher's the trainer's, with the TrainJob's
    SSH keys and hostfile listing one host per v1 worker."""
    doc = _finishing(path)
    m = migrate(doc)
    for obj in m.documents():
        created = await kube.create(RESOURCES[obj["kind"]], obj, namespace=namespace)
        assert is_subset(obj["spec"], created["spec"]), created
    name = m.name
    done = await wait_for(
        kube,
        TRAINJOBS,
        name,
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: is_true(t, "Complete") or is_true(t, "Failed"),
        what="migrated MPIJob finished",
    )
    assert is_true(done, "Complete"), condition(done, "Failed")
    assert [e["reason"] for e in await events_of(kube, namespace, name)] == []
    specs = doc["spec"]["mpiReplicaSpecs"]
    workers = specs["Worker"]["replicas"]
    jobset = await kube.get(JOBSETS, name, namespace=namespace)
    jobs = {r["name"]: r for r in jobset["spec"]["replicatedJobs"]}
    assert jobs["node"]["template"]["spec"]["parallelism"] == workers
    assert jobs["launcher"]["template"]["spec"]["parallelism"] == 1
    [launcher] = jobs["launcher"]["template"]["spec"]["template"]["spec"]["containers"]
    v1_launcher = specs["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["image"] == v1_launcher["image"]
    assert launcher.get("command") == v1_launcher.get("command")
    hostfile = await kube.get(CONFIGMAPS, f"{name}-mpi-hostfile", namespace=namespace)
    hosts = [line.split()[0] for line in hostfile["data"]["hostfile"].splitlines()]
    assert hosts == [f"{name}-node-0-{i}.{name}" for i in range(workers)]
    secret = await kube.get(SECRETS, f"{name}-mpi-ssh-auth", namespace=namespace)
    assert set(secret["data"]) == {"ssh-privatekey", "ssh-publickey"}


async def test_a_migrated_real_node_mpijob_is_admitted(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    """examples/real's MPIJob (its pods select the real node, which this cluster lacks): the
    API server takes its runtime and TrainJob as written."""
    m = migrate(_finishing("examples/real/mpijob-allreduce.yaml"))
    assert m.runtime is not None
    jobs = m.runtime["spec"]["template"]["spec"]["replicatedJobs"]
    [launcher] = [r for r in jobs if r["name"] == "launcher"]
    assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]  # WaitForWorkersReady
    for obj in m.documents():
        created = await kube.create(RESOURCES[obj["kind"]], obj, namespace=namespace)
        assert is_subset(obj["spec"], created["spec"]), created
