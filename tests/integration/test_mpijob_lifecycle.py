"""An MPIJob's fate follows its launcher Job (success, backoff limit, deadline) and its workers
(eviction), and clean-up follows cleanPodPolicy."""

from __future__ import annotations

from pathlib import Path

import yaml
from mpijob_fixtures import (
    MPIJOBS,
    condition,
    launcher_job,
    mpijob,
    wait_condition,
    wait_for_event,
    worker_pods,
)

from jobcontroller.runtime.kube import EVENTS, JOBS, PODS, KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status
from jobcontroller.testing.waiting import wait_for, wait_for_list
from mpi_operator.controller import MPIJobController

SEED = Path(__file__).resolve().parents[1] / "data" / "seeds" / "mpijob-horovod.yaml"


async def test_horovod_seed_succeeds_and_cleans_up_workers(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns, name = namespace, "distributed-training"
    async with running(kubeconfig, MPIJobController()) as op:
        await kube.create(MPIJOBS, yaml.safe_load(SEED.read_text()), namespace=ns)
        await wait_condition(kube, name, "Running", namespace=ns)
        done = await wait_condition(kube, name, "Succeeded", namespace=ns)
        status = done["status"]
        assert [(c["type"], c["status"]) for c in status["conditions"]] == [
            ("Created", "True"),
            ("Running", "False"),
            ("Succeeded", "True"),
        ]
        succeeded = condition(done, "Succeeded")
        assert succeeded is not None and succeeded["reason"] == "MPIJobSucceeded"
        assert status["replicaStatuses"]["Launcher"] == {"active": 0, "succeeded": 1, "failed": 0}
        # As mpi-operator v0.8: once the launcher is done the workers count nowhere (they
        # never exited, so not succeeded; they are being deleted, so not active).
        assert status["replicaStatuses"]["Worker"] == {"active": 0, "succeeded": 0, "failed": 0}
        launcher = await kube.get(JOBS, f"{name}-launcher", namespace=ns)
        assert status["completionTime"] == launcher["status"]["completionTime"]
        # cleanPodPolicy Running: the sshd workers go; the launcher Job and its pod stay.
        await wait_for_list(
            kube,
            PODS,
            namespace=ns,
            label_selector="training.kubeflow.org/job-role=worker",
            until=lambda items: not items,
        )
        settled = await kube.get(MPIJOBS, name, namespace=ns)
        assert settled["status"]["replicaStatuses"]["Worker"] == {
            "active": 0,
            "succeeded": 0,
            "failed": 0,
        }
        labels = {"job_namespace": ns, "framework": "mpi"}
        assert op.counter("training_operator_jobs_created_total", **labels) == 1
        assert await op.settled_counter("training_operator_jobs_successful_total", 1, **labels) == 1
        await wait_for_event(kube, ns, "MPIJobSucceeded")
        events, _ = await kube.list(EVENTS, namespace=ns)
        # mpi-operator v0.8's recorder name, as `kubectl describe` shows it under From.
        assert {e["source"]["component"] for e in events if e["reason"] == "MPIJobSucceeded"} == {
            "mpi-job-controller"
        }
        # As mpi-operator: no Event per created or deleted object (the log counts them).
        ours = [
            e for e in events if (e.get("source") or {}).get("component") == "mpi-job-controller"
        ]
        reasons = {e["reason"] for e in ours}
        assert "MPIJobCreated" in reasons
        assert not [r for r in reasons if r.startswith(("SuccessfulCreate", "SuccessfulDelete"))]


async def test_launcher_failures_up_to_backoff_limit_fail_the_job(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, MPIJobController()) as op:
        body = mpijob(
            "pi",
            launcher_exit=1,
            run_for="1s",
            launcher_restart="Never",
            runPolicy={"backoffLimit": 1},
        )
        await kube.create(MPIJOBS, body, namespace=ns)
        done = await wait_condition(kube, "pi", "Failed", namespace=ns, timeout=45)
        failed = condition(done, "Failed")
        assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
        assert "backoff limit" in failed["message"]
        status = done["status"]
        # Two launcher pods ran (the first and its one retry); no worker was recreated.
        assert status["replicaStatuses"]["Launcher"] == {"active": 0, "succeeded": 0, "failed": 2}
        assert status["completionTime"]
        assert set(await worker_pods(kube, ns, count=2)) == {"pi-worker-0", "pi-worker-1"}
        labels = {"job_namespace": ns, "framework": "mpi"}
        assert await op.settled_counter("training_operator_jobs_failed_total", 1, **labels) == 1
        await wait_for_event(kube, ns, "BackoffLimitExceeded")


async def test_active_deadline_is_the_launcher_jobs(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        body = mpijob("pi", launcher_exit=None, runPolicy={"activeDeadlineSeconds": 2})
        await kube.create(MPIJOBS, body, namespace=ns)
        launcher = await launcher_job(kube, "pi", namespace=ns)
        assert launcher["spec"]["activeDeadlineSeconds"] == 2
        done = await wait_condition(kube, "pi", "Failed", namespace=ns)
        failed = condition(done, "Failed")
        assert failed is not None and failed["reason"] == "DeadlineExceeded"
        # The MPIJob itself is not deleted by a TTL or failed by the base's own deadline.
        job = await kube.get(MPIJOBS, "pi", namespace=ns)
        assert condition(job, "Failed") == failed


async def test_evicted_worker_fails_the_job_and_the_rest_is_cleaned_up(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """mpi-operator #647: the eviction path must honour cleanPodPolicy too."""
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        body = mpijob("pi", launcher_exit=None, runPolicy={"cleanPodPolicy": "Running"})
        await kube.create(MPIJOBS, body, namespace=ns)
        await wait_condition(kube, "pi", "Running", namespace=ns)
        await set_pod_status(
            kube, namespace=ns, name="pi-worker-1", phase="Failed", reason="Evicted"
        )
        done = await wait_condition(kube, "pi", "Failed", namespace=ns)
        failed = condition(done, "Failed")
        assert failed is not None
        assert (failed["reason"], failed["message"]) == ("MPIJobEvicted", "1/2 workers are evicted")
        assert done["status"]["completionTime"]
        # The running worker goes, the evicted one stays for inspection, and the launcher Job
        # is suspended so its pod goes as well.
        workers = await worker_pods(kube, ns, count=1)
        assert list(workers) == ["pi-worker-1"]
        launcher = await wait_for(
            kube,
            JOBS,
            "pi-launcher",
            namespace=ns,
            until=lambda j: j is not None and j["spec"].get("suspend") is True,
        )
        assert launcher is not None
        await wait_for_list(
            kube,
            PODS,
            namespace=ns,
            label_selector="training.kubeflow.org/job-role=launcher",
            until=lambda items: not items,
        )
        await wait_for_event(kube, ns, "MPIJobEvicted")
