"""Kueue end to end for TrainJobs, as ``test_kueue.py`` for the v1 kinds: Kueue v0.17's TrainJob
integration (``trainer.kubeflow.org/trainjob``) queues, admits and preempts TrainJobs on the
shipped torch-distributed runtime, and our TrainJob controller (in-process) and the real JobSet
controller (v0.12.0, on kwok's pods) do what it decides.

Kueue speaks to a TrainJob through ``spec.suspend`` and its own ``runtimePatches`` entry
(manager ``kueue.x-k8s.io/manager``): at admission it writes the ResourceFlavor's node labels
and tolerations (and its pod labels) for each replicated job there, while the TrainJob is still
suspended, then unsuspends it; at preemption it suspends it, waits until no Job is active, and
takes them out again. Our controller carries both into the suspended JobSet.

Each test gets a ClusterQueue over a flavor of kwok's nodes whose quota (1 CPU per node) fits
exactly one TrainJob of two nodes (of three, for the MPI runtime's), and a LocalQueue.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kueue_kit import TIMEOUT, WORKLOADS, condition, is_true, wait_workload, workload_of

from jobcontroller.runtime.kube import PODS, ApiError, KubeApi, Resource
from jobcontroller.testing.jobset import JOBSET_NAME_LABEL, JOBSETS, JobSetController
from jobcontroller.testing.kueue import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    RUNTIME_PATCH_MANAGER,
    Kueue,
)
from jobcontroller.testing.operator import RunningController, running
from jobcontroller.testing.pods import sim_annotations
from jobcontroller.testing.waiting import wait_for, wait_for_list
from trainer_operator.controller import TrainJobController

Obj = dict[str, Any]
TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
CLUSTER_RUNTIMES = Resource(
    "trainer.kubeflow.org",
    "v1alpha1",
    "ClusterTrainingRuntime",
    "clustertrainingruntimes",
    namespaced=False,
)
RUNTIMES_DIR = Path(__file__).resolve().parents[2] / "manifests" / "runtimes"
NODES = 2
FLAVOR = "kwok-nodes"
NODE_LABELS = {"type": "kwok"}  # every kwok node of the test kit has it
TOLERATION = {"key": "jobcontroller.testing/flavor", "operator": "Exists", "effect": "NoSchedule"}


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def runtimes(kube: KubeApi, kubeflow_crds: list[str]) -> list[str]:
    """The shipped torch-distributed and deepspeed-distributed ClusterTrainingRuntimes, as the
    default install has them (kept: cluster-wide, the same for every test)."""
    names = []
    for file in ("torch_distributed.yaml", "deepspeed_distributed.yaml"):
        runtime = yaml.safe_load((RUNTIMES_DIR / file).read_text())
        try:
            await kube.create(CLUSTER_RUNTIMES, runtime)
        except ApiError as exc:
            if not exc.is_already_exists:
                raise
        names.append(str(runtime["metadata"]["name"]))
    return names


@pytest.fixture
def kq(kubeflow_crds: list[str], jobset: JobSetController, kueue: Kueue) -> Kueue:
    """The session's Kueue, started after the trainer.kubeflow.org CRDs and JobSet are in."""
    return kueue


def _flavor(kq: Kueue) -> str:
    """The flavor of kwok's nodes (one definition: a flavor that exists is kept as it is)."""
    return kq.flavor(FLAVOR, node_labels=NODE_LABELS, tolerations=[TOLERATION])


@pytest.fixture
def queue(kq: Kueue, namespace: str) -> Iterator[str]:
    """A LocalQueue whose ClusterQueue, over a flavor of kwok's nodes, fits one TrainJob."""
    name = kq.queue(namespace, cpu=NODES, flavor=_flavor(kq))
    yield name
    kq.delete_queue(namespace)


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    kubeconfig: str, namespace: str, runtimes: list[str]
) -> AsyncIterator[RunningController]:
    async with running(kubeconfig, TrainJobController(), namespace=namespace) as op:
        yield op


def _trainjob(
    name: str,
    queue: str,
    *,
    run_for: str,
    priority: str | None = None,
    managed_by: str | None = None,
) -> Obj:
    """Two nodes of 1 CPU on torch-distributed, each pod succeeding ``run_for`` after it
    starts on kwok (the test's own runtime patch says so)."""
    labels = {QUEUE_LABEL: queue, **({PRIORITY_LABEL: priority} if priority else {})}
    sim = {"metadata": {"annotations": sim_annotations(0, run_for=run_for)}}
    spec: Obj = {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {
            "numNodes": NODES,
            "resourcesPerNode": {"requests": {"cpu": "1", "memory": "64Mi"}},
        },
        "runtimePatches": [
            {
                "manager": "sim.jobcontroller/kwok",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {"name": "node", "template": {"spec": {"template": sim}}}
                            ]
                        }
                    }
                },
            }
        ],
    }
    if managed_by:
        spec["managedBy"] = managed_by
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def _suspended(obj: Obj | None) -> bool:
    return bool(((obj or {}).get("spec") or {}).get("suspend"))


def _kueue_patch(trainjob: Obj) -> Obj:
    """Kueue's runtimePatches entry (its webhook adds it to every TrainJob it manages)."""
    for patch in trainjob["spec"].get("runtimePatches") or ():
        if patch.get("manager") == RUNTIME_PATCH_MANAGER:
            return dict(patch)
    raise AssertionError(f"no {RUNTIME_PATCH_MANAGER} runtime patch: {trainjob['spec']}")


def _admitted_pod_spec(trainjob: Obj) -> Obj | None:
    """What Kueue's patch sets on the node pods' spec (None: no replicated job patched)."""
    jobs = _kueue_patch(trainjob)["trainingRuntimeSpec"]["template"]["spec"].get("replicatedJobs")
    if not jobs:
        return None
    [node] = jobs
    assert node["name"] == "node", jobs
    return dict(node["template"]["spec"]["template"].get("spec") or {})


def _resumed(trainjob: Obj) -> bool:
    """Our controller's Suspended condition says the TrainJob runs again."""
    cond = condition(trainjob, "Suspended")
    return cond is not None and (cond["status"], cond["reason"]) == ("False", "Resumed")


def _placed(pod_spec: Obj) -> bool:
    """The flavor's node labels and toleration are on a pod spec (a template's or a pod's)."""
    selector = pod_spec.get("nodeSelector") or {}
    return all(selector.get(k) == v for k, v in NODE_LABELS.items()) and TOLERATION in (
        pod_spec.get("tolerations") or []
    )


async def _wait_trainjob(
    kube: KubeApi, ns: str, name: str, until: Callable[[Obj], bool], what: str
) -> Obj:
    got = await wait_for(
        kube,
        TRAINJOBS,
        name,
        namespace=ns,
        until=lambda t: t is not None and until(t),
        timeout=TIMEOUT,
        what=f"TrainJob {name} {what}",
    )
    assert got is not None
    return got


async def _pods(kube: KubeApi, ns: str, name: str) -> list[Obj]:
    items, _ = await kube.list(PODS, namespace=ns, label_selector=f"{JOBSET_NAME_LABEL}={name}")
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


async def _wait_pods_running(kube: KubeApi, ns: str, name: str) -> list[Obj]:
    def ok(items: list[Obj]) -> bool:
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return len(live) == NODES and all(
            (p.get("status") or {}).get("phase") == "Running" for p in live
        )

    return await wait_for_list(
        kube,
        PODS,
        namespace=ns,
        label_selector=f"{JOBSET_NAME_LABEL}={name}",
        until=ok,
        timeout=TIMEOUT,
        what=f"{NODES} running pods of {name}",
    )


async def _wait_no_pods(kube: KubeApi, ns: str, name: str) -> None:
    await wait_for_list(
        kube,
        PODS,
        namespace=ns,
        label_selector=f"{JOBSET_NAME_LABEL}={name}",
        until=lambda items: not items,
        timeout=TIMEOUT,
        what=f"no pods of {name}",
    )


async def _admitted_and_placed(kube: KubeApi, ns: str, job: Obj, *, resumed: bool) -> Obj:
    """Waits for ``job``'s admission to reach its pods: Kueue's patch on the TrainJob, the
    JobSet's pod template and the running pods all carry the flavor's placement, and the
    TrainJob is not Suspended (``resumed``: Suspended False, reason Resumed; a first admission
    can come before our controller ever wrote Suspended True, which is then never written)."""
    name = job["metadata"]["name"]
    await wait_workload(kube, ns, job, "Admitted")
    admitted = await _wait_trainjob(
        kube,
        ns,
        name,
        lambda t: (
            not _suspended(t)
            and _placed(_admitted_pod_spec(t) or {})
            and (_resumed(t) if resumed else not is_true(t, "Suspended"))
        ),
        "unsuspended with Kueue's placement in its runtime patch, not Suspended",
    )
    pods = await _wait_pods_running(kube, ns, name)
    assert all(_placed(p["spec"]) for p in pods), [p["spec"] for p in pods]
    jobset = await kube.get(JOBSETS, name, namespace=ns)
    assert not _suspended(jobset)
    [node] = jobset["spec"]["replicatedJobs"]
    assert _placed(node["template"]["spec"]["template"]["spec"]), node
    return admitted


async def test_a_queued_trainjob_is_admitted_runs_and_frees_its_quota_for_the_next(
    kube: KubeApi, namespace: str, queue: str, operator: RunningController
) -> None:
    ns = namespace
    # Kueue's webhook suspends the TrainJob at creation and adds its (empty) runtime patch,
    # which puts the queue's label on the JobSet.
    first = await kube.create(TRAINJOBS, _trainjob("first", queue, run_for="5s"), namespace=ns)
    assert _suspended(first), first["spec"]
    patch = _kueue_patch(first)["trainingRuntimeSpec"]["template"]
    assert patch["metadata"]["labels"] == {QUEUE_LABEL: queue}, patch
    assert _admitted_pod_spec(first) is None
    await _admitted_and_placed(kube, ns, first, resumed=False)
    jobset = await kube.get(JOBSETS, "first", namespace=ns)
    assert jobset["metadata"]["labels"][QUEUE_LABEL] == queue, jobset["metadata"]

    # A second one does not fit while the first holds the quota: it waits suspended, its
    # JobSet suspended, no pods, no placement.
    second = await kube.create(TRAINJOBS, _trainjob("second", queue, run_for="3s"), namespace=ns)
    assert _suspended(second)
    wl = await workload_of(kube, ns, second)
    waiting_js = await wait_for(
        kube, JOBSETS, "second", namespace=ns, until=lambda j: j is not None, timeout=TIMEOUT
    )
    await asyncio.sleep(1.0)
    wl = await kube.get(WORKLOADS, wl["metadata"]["name"], namespace=ns)
    assert not is_true(wl, "QuotaReserved") and not is_true(wl, "Admitted"), wl.get("status")
    waiting = await _wait_trainjob(
        kube, ns, "second", lambda t: _suspended(t) and is_true(t, "Suspended"), "Suspended"
    )
    assert _admitted_pod_spec(waiting) is None
    assert _suspended(await kube.get(JOBSETS, "second", namespace=ns)), waiting_js
    assert await _pods(kube, ns, "second") == []
    # Queued once: the JobSets carry the queue's label too, but Kueue's JobSet integration
    # leaves them to their TrainJobs' Workloads.
    workloads, _ = await kube.list(WORKLOADS, namespace=ns)
    owners = sorted(
        (o["kind"], o["name"]) for w in workloads for o in w["metadata"]["ownerReferences"]
    )
    assert owners == [("TrainJob", "first"), ("TrainJob", "second")], owners

    # The first completes; its Workload is Finished and the quota goes to the second.
    await _wait_trainjob(kube, ns, "first", lambda t: is_true(t, "Complete"), "Complete")
    await wait_workload(kube, ns, first, "Finished")
    await _admitted_and_placed(kube, ns, second, resumed=True)
    await _wait_trainjob(kube, ns, "second", lambda t: is_true(t, "Complete"), "Complete")
    await wait_workload(kube, ns, second, "Finished")


async def test_a_higher_priority_trainjob_preempts_a_running_one_which_resumes_later(
    kube: KubeApi, kq: Kueue, namespace: str, queue: str, operator: RunningController
) -> None:
    ns = namespace
    low_class = kq.priority_class("e2e-low", 100)
    high_class = kq.priority_class("e2e-high", 1000)

    low = await kube.create(
        TRAINJOBS, _trainjob("low", queue, run_for="10s", priority=low_class), namespace=ns
    )
    await _admitted_and_placed(kube, ns, low, resumed=False)

    high = await kube.create(
        TRAINJOBS, _trainjob("high", queue, run_for="3s", priority=high_class), namespace=ns
    )
    # Kueue evicts the low one and suspends it; its JobSet is suspended, its pods go, and
    # Kueue takes its placement out of the runtime patch again.
    evicted = condition(await wait_workload(kube, ns, low, "Evicted"), "Evicted")
    assert evicted is not None and evicted["reason"] == "Preempted", evicted
    await _wait_trainjob(
        kube, ns, "low", lambda t: _suspended(t) and is_true(t, "Suspended"), "Suspended"
    )
    await wait_for(
        kube, JOBSETS, "low", namespace=ns, until=_suspended, timeout=TIMEOUT, what="suspended"
    )
    await _wait_no_pods(kube, ns, "low")
    await _wait_trainjob(
        kube, ns, "low", lambda t: _admitted_pod_spec(t) is None, "placement taken out"
    )
    await _admitted_and_placed(kube, ns, high, resumed=False)
    await _wait_trainjob(kube, ns, "high", lambda t: is_true(t, "Complete"), "Complete")
    await wait_workload(kube, ns, high, "Finished")

    # Then the low one is admitted again, resumes (Suspended False, Resumed) and completes.
    await _admitted_and_placed(kube, ns, low, resumed=True)
    done = await _wait_trainjob(kube, ns, "low", lambda t: is_true(t, "Complete"), "Complete")
    assert not is_true(done, "Failed"), done["status"]
    await wait_workload(kube, ns, low, "Finished")


async def test_a_trainjob_managed_by_multikueue_is_left_to_it(
    kube: KubeApi, namespace: str, queue: str, operator: RunningController
) -> None:
    """MultiKueue runs such a TrainJob on a worker cluster. Here, with no MultiKueue admission
    check on the ClusterQueue, Kueue admits it locally and unsuspends it; our controller still
    builds no JobSet and writes no status: the TrainJob is not ours to run."""
    ns = namespace
    body = _trainjob("elsewhere", queue, run_for="1s", managed_by="kueue.x-k8s.io/multikueue")
    created = await kube.create(TRAINJOBS, body, namespace=ns)
    assert _suspended(created)
    await wait_workload(kube, ns, created, "Admitted")
    await _wait_trainjob(kube, ns, "elsewhere", lambda t: not _suspended(t), "unsuspended")
    await asyncio.sleep(3.0)
    with pytest.raises(ApiError) as missing:
        await kube.get(JOBSETS, "elsewhere", namespace=ns)
    assert missing.value.is_not_found
    current = await kube.get(TRAINJOBS, "elsewhere", namespace=ns)
    assert not (current.get("status") or {}).get("conditions"), current.get("status")
    assert not (current.get("status") or {}).get("jobsStatus"), current.get("status")


async def test_kueue_counts_the_pods_our_jobset_runs_for_an_mpi_runtime(
    kube: KubeApi, kq: Kueue, namespace: str, operator: RunningController
) -> None:
    """Kueue sizes a TrainJob's Workload with Trainer v2.2.0's own runtime code, we build the
    JobSet as v2.3.0 does: for deepspeed-distributed (the MPI policy, the launcher counted as
    a node) both must count the same pods, or the quota Kueue reserves is not what runs."""
    ns = namespace
    queue = kq.queue(ns, cpu=3, flavor=_flavor(kq))
    try:
        body = _trainjob("mpi", queue, run_for="1s")
        body["spec"]["runtimeRef"]["name"] = "deepspeed-distributed"
        body["spec"]["trainer"]["numNodes"] = 3
        created = await kube.create(TRAINJOBS, body, namespace=ns)
        wl = await wait_workload(kube, ns, created, "Admitted")
        counted = {p["name"]: p["count"] for p in wl["spec"]["podSets"]}
        assert counted == {"node": 2, "launcher": 1}, wl["spec"]["podSets"]
        jobset = await wait_for(
            kube,
            JOBSETS,
            "mpi",
            namespace=ns,
            # Kueue may admit before the JobSet exists: wait for one, built and unsuspended.
            until=lambda j: j is not None and not _suspended(j),
            timeout=TIMEOUT,
        )
        assert jobset is not None
        runs = {
            r["name"]: int(r.get("replicas", 1)) * int(r["template"]["spec"]["parallelism"])
            for r in jobset["spec"]["replicatedJobs"]
        }
        assert runs == counted, jobset["spec"]["replicatedJobs"]
        await wait_for_list(
            kube,
            PODS,
            namespace=ns,
            label_selector=f"{JOBSET_NAME_LABEL}=mpi",
            until=lambda items: len(items) == 3,
            timeout=TIMEOUT,
            what="the MPI TrainJob's 3 pods",
        )
    finally:
        kq.delete_queue(ns)
