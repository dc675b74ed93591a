"""TrainJobs on a real API server with the real JobSet controller (v0.12.0, the ``jobset``
fixture) and kwok's simulated pods: our TrainJob controller in-process builds each TrainJob's
JobSet from its runtime, JobSet's controller runs it, and the TrainJob's status follows, as a
user of Kubeflow Trainer v2.3.0 sees it.

The TrainJobs are upstream's examples (examples/yaml) on the runtimes the default install ships
(manifests/runtimes); kwok's pods finish when their templates say so, which the tests say
with a runtime patch (a manager's annotations on the trainer's pod template).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from trainer_fixtures import RUNTIMES, TRAINJOBS, Obj, documents
from trainjob_helpers import (
    RUNTIMES_DIR,
    TIMEOUT,
    condition,
    events_of,
    example,
    finishing,
    is_true,
    shipped_runtimes,
)

from jobcontroller.runtime.kube import CONFIGMAPS, EVENTS, ApiError, KubeApi
from jobcontroller.testing.jobset import JOBSETS, JobSetController
from jobcontroller.testing.operator import RunningController, running
from jobcontroller.testing.waiting import wait_for, wait_for_list
from trainer_operator.controller import TrainJobController

__all__ = ["shipped_runtimes"]  # a fixture this module's tests use


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    kubeconfig: str, jobset: JobSetController, shipped_runtimes: list[str], namespace: str
) -> AsyncIterator[RunningController]:
    async with running(kubeconfig, TrainJobController(), namespace=namespace) as op:
        yield op


async def test_upstream_torch_example_completes(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    """examples/yaml/01-multi-node.yaml on torch-distributed: 3 nodes, torchrun's env, the
    runtime snapshot; Complete with the JobSet's words and the jobs' counts."""
    body = finishing(example("01-multi-node.yaml"))
    name = body["metadata"]["name"]
    created = await kube.create(TRAINJOBS, body, namespace=namespace)
    done = await wait_for(
        kube,
        TRAINJOBS,
        name,
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: is_true(t, "Complete") or is_true(t, "Failed"),
        what="TrainJob finished",
    )
    complete = condition(done, "Complete")
    assert complete is not None and complete["status"] == "True", done
    assert (complete["reason"], complete["message"]) == (
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    assert done is not None
    assert done["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    jobset = await kube.get(JOBSETS, name, namespace=namespace)
    [owner] = jobset["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "TrainJob",
        created["metadata"]["uid"],
        True,
    )
    [rjob] = jobset["spec"]["replicatedJobs"]
    assert (rjob["replicas"], rjob["template"]["spec"]["parallelism"]) == (1, 3)
    [node] = rjob["template"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in node["env"]}
    assert env["PET_NNODES"]["value"] == "3"
    assert env["PET_MASTER_ADDR"]["value"] == f"{name}-node-0-0.{name}"
    assert env["PET_MASTER_PORT"]["value"] == "29500"
    assert node["command"] == body["spec"]["trainer"]["command"]
    snapshot = await kube.get(CONFIGMAPS, f"{name}-runtime-snapshot", namespace=namespace)
    assert "name: torch-distributed" in snapshot["data"]["runtime"]
    # Nothing went wrong on the way.
    assert [e["reason"] for e in await events_of(kube, namespace, name)] == []


async def test_suspend_and_resume(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    body = finishing(example("01-multi-node.yaml"))
    body["metadata"]["name"] = "suspended"
    body["spec"]["suspend"] = True
    await kube.create(TRAINJOBS, body, namespace=namespace)
    suspended = await wait_for(
        kube,
        TRAINJOBS,
        "suspended",
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: is_true(t, "Suspended"),
    )
    cond = condition(suspended, "Suspended")
    assert cond is not None
    assert (cond["reason"], cond["message"]) == ("Suspended", "TrainJob is suspended")
    jobset = await wait_for(
        kube, JOBSETS, "suspended", namespace=namespace, until=lambda j: j is not None
    )
    assert jobset is not None and jobset["spec"]["suspend"] is True

    await kube.merge_patch(
        TRAINJOBS, "suspended", {"spec": {"suspend": False}}, namespace=namespace
    )
    done = await wait_for(
        kube,
        TRAINJOBS,
        "suspended",
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: is_true(t, "Complete"),
        what="resumed TrainJob complete",
    )
    resumed = condition(done, "Suspended")
    assert resumed is not None
    assert (resumed["status"], resumed["reason"], resumed["message"]) == (
        "False",
        "Resumed",
        "TrainJob is resumed",
    )


async def test_active_deadline_fails_the_trainjob_and_deletes_its_jobset(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    body = finishing(example("01-multi-node.yaml"), exit_code=None)
    body["metadata"]["name"] = "deadline"
    body["spec"]["activeDeadlineSeconds"] = 3
    await kube.create(TRAINJOBS, body, namespace=namespace)
    await wait_for(kube, JOBSETS, "deadline", namespace=namespace, until=lambda j: j is not None)
    failed = await wait_for(
        kube,
        TRAINJOBS,
        "deadline",
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: is_true(t, "Failed"),
    )
    cond = condition(failed, "Failed")
    assert cond is not None
    assert (cond["reason"], cond["message"]) == (
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    gone = await wait_for(
        kube, JOBSETS, "deadline", namespace=namespace, timeout=TIMEOUT, until=lambda j: j is None
    )
    assert gone is None


async def test_a_missing_runtime_is_reported_once_and_waited_for(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    """Upstream's event, no condition and no retry loop; the TrainJob proceeds once the
    runtime appears (its informer wakes the TrainJob)."""
    body = finishing(example("01-multi-node.yaml"))
    body["metadata"]["name"] = "waiting"
    body["spec"]["runtimeRef"] = {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": "not-yet",
    }
    await kube.create(TRAINJOBS, body, namespace=namespace)
    events = await wait_for_list(
        kube,
        EVENTS,
        namespace=namespace,
        until=lambda items: any(e["involvedObject"]["name"] == "waiting" for e in items),
        what="an event on the TrainJob",
    )
    seen = [e for e in events if e["involvedObject"]["name"] == "waiting"]
    [event] = seen
    assert (event["type"], event["reason"]) == ("Warning", "TrainJobResourcesCreationFailed")
    assert event["message"] == (
        "TrainJob resources reconciliation failed: TrainingRuntime specified in TrainJob is not "
        'found: trainingruntimes.trainer.kubeflow.org "not-yet" not found'
    )
    before = operator.counter(
        "controller_runtime_reconcile_total", controller="trainjob-controller", result="success"
    )
    await asyncio.sleep(3)
    after = operator.counter(
        "controller_runtime_reconcile_total", controller="trainjob-controller", result="success"
    )
    assert after - before <= 1, "a TrainJob waiting for its runtime is not planned in a loop"
    current = await kube.get(TRAINJOBS, "waiting", namespace=namespace)
    assert condition(current, "Failed") is None

    [torch] = documents(RUNTIMES_DIR / "torch_distributed.yaml")
    runtime = {**torch, "kind": "TrainingRuntime", "metadata": {"name": "not-yet"}}
    await kube.create(RUNTIMES, runtime, namespace=namespace)
    done = await wait_for(
        kube,
        TRAINJOBS,
        "waiting",
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: is_true(t, "Complete"),
        what="TrainJob complete once its runtime exists",
    )
    assert done is not None


async def test_a_trainjob_managed_by_multikueue_is_left_alone(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    body = finishing(example("01-multi-node.yaml"))
    body["metadata"]["name"] = "elsewhere"
    body["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    await kube.create(TRAINJOBS, body, namespace=namespace)
    await asyncio.sleep(3)
    with pytest.raises(ApiError) as missing:
        await kube.get(JOBSETS, "elsewhere", namespace=namespace)
    assert missing.value.is_not_found
    current = await kube.get(TRAINJOBS, "elsewhere", namespace=namespace)
    assert (current.get("status") or {}).get("conditions") in (None, [])


@pytest.mark.parametrize(
    ("runtime", "env"),
    [
        ("jax-distributed", {"JAX_NUM_PROCESSES": "2", "JAX_COORDINATOR_ADDRESS": None}),
        ("xgboost-distributed", {"DMLC_NUM_WORKER": "2", "DMLC_TRACKER_PORT": "29500"}),
    ],
)
async def test_jax_and_xgboost_runtimes_complete(
    kube: KubeApi, operator: RunningController, namespace: str, runtime: str, env: Obj
) -> None:
    """The shipped jax and xgboost runtimes (upstream's examples for them are notebooks, whose
    TrainJobs name the runtime and a node count)."""
    name = runtime.split("-")[0]
    body = finishing(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": 2}},
        }
    )
    await kube.create(TRAINJOBS, body, namespace=namespace)
    done = await wait_for(
        kube,
        TRAINJOBS,
        name,
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: is_true(t, "Complete") or is_true(t, "Failed"),
    )
    assert is_true(done, "Complete"), done
    jobset = await kube.get(JOBSETS, name, namespace=namespace)
    [rjob] = jobset["spec"]["replicatedJobs"]
    [node] = rjob["template"]["spec"]["template"]["spec"]["containers"]
    got = {e["name"]: e.get("value") for e in node["env"]}
    want = {k: v if v is not None else f"{name}-node-0-0.{name}:29500" for k, v in env.items()}
    assert {k: got.get(k) for k in want} == want


async def test_deleting_a_trainjob_deletes_its_jobset_and_snapshot(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    """Garbage collection through the controller references, as upstream relies on."""
    body = finishing(example("01-multi-node.yaml"), exit_code=None)
    body["metadata"]["name"] = "deleted"
    await kube.create(TRAINJOBS, body, namespace=namespace)
    await wait_for(kube, JOBSETS, "deleted", namespace=namespace, until=lambda j: j is not None)
    await kube.delete(TRAINJOBS, "deleted", namespace=namespace)
    for resource, name in ((JOBSETS, "deleted"), (CONFIGMAPS, "deleted-runtime-snapshot")):
        gone = await wait_for(
            kube, resource, name, namespace=namespace, timeout=TIMEOUT, until=lambda o: o is None
        )
        assert gone is None
