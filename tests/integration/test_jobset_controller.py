"""The real JobSet controller (v0.12.0, built from its Go module by hack/build-jobset.sh, run by
the ``jobset`` fixture) on the local cluster: its Jobs run on kwok's simulated pods through the
plane's batch Job controller, its webhooks default and reject JobSets, its failure policy
restarts and then fails, and its metrics count what finished.

This is the contract a TrainJob's JobSet relies on; nothing of ours runs here.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from jobcontroller.runtime.kube import JOBS, PODS, SERVICES, ApiError, KubeApi
from jobcontroller.testing.jobset import JOBSET_NAME_LABEL, JOBSETS, JobSetController
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for

Obj = dict[str, Any]
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
TIMEOUT = 90.0


def _replicated_job(
    name: str,
    *,
    replicas: int = 1,
    pods: int = 1,
    exit_code: int = 0,
    run_for: str = "1s",
) -> Obj:
    template: Obj = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
        }
    }
    simulate(template, exit_code, run_for=run_for)
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 0,
                "template": template,
            }
        },
    }


def _jobset(name: str, *jobs: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": JOBSETS.api_version,
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": list(jobs), **spec},
    }


def _condition(obj: Obj | None, kind: str) -> Obj | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def _metric(text: str, name: str, jobset: str, namespace: str) -> float | None:
    pattern = re.compile(
        rf'^{name}\{{(?=[^}}]*jobset_name="{re.escape(jobset)}")'
        rf'(?=[^}}]*namespace="{re.escape(namespace)}")[^}}]*\}} (\S+)$',
        re.MULTILINE,
    )
    found = pattern.search(text)
    return float(found.group(1)) if found else None


async def test_two_replicated_jobs_complete_on_simulated_pods(
    jobset: JobSetController, kube: KubeApi, namespace: str
) -> None:
    body = _jobset(
        "train",
        _replicated_job("launcher"),
        _replicated_job("worker", replicas=2, pods=2),
    )
    await kube.create(JOBSETS, body, namespace=namespace)

    done = await wait_for(
        kube,
        JOBSETS,
        "train",
        namespace=namespace,
        until=lambda o: _condition(o, "Completed") is not None,
        timeout=TIMEOUT,
    )
    assert done is not None
    completed = _condition(done, "Completed")
    assert completed is not None and completed["reason"] == "AllJobsCompleted"
    assert done["status"]["terminalState"] == "Completed"
    assert _condition(done, "Failed") is None
    succeeded = {s["name"]: s["succeeded"] for s in done["status"]["replicatedJobsStatus"]}
    assert succeeded == {"launcher": 1, "worker": 2}

    # One Job per replica, named <jobset>-<replicatedJob>-<index>, labelled with the JobSet.
    jobs, _ = await kube.list(JOBS, namespace=namespace)
    assert sorted(j["metadata"]["name"] for j in jobs) == [
        "train-launcher-0",
        "train-worker-0",
        "train-worker-1",
    ]
    assert {j["metadata"]["labels"][JOBSET_NAME_LABEL] for j in jobs} == {"train"}
    # Every pod ran to success and has a stable DNS name under the JobSet's headless Service:
    # <job>-<completion index>.<jobset>, which is what a launcher dials.
    pods, _ = await kube.list(PODS, namespace=namespace)
    assert len(pods) == 5
    assert {p["status"]["phase"] for p in pods} == {"Succeeded"}
    assert sorted(p["spec"]["hostname"] for p in pods) == [
        "train-launcher-0-0",
        "train-worker-0-0",
        "train-worker-0-1",
        "train-worker-1-0",
        "train-worker-1-1",
    ]
    assert {p["spec"]["subdomain"] for p in pods} == {"train"}
    service = await kube.get(SERVICES, "train", namespace=namespace)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {JOBSET_NAME_LABEL: "train"}

    # What Prometheus scrapes from the controller counts it. (At least once: v0.12.0 counts a
    # completion each time a reconcile finds the success policy met on a JobSet its cache does
    # not yet show Completed, and two reconciles in a row did so here, counting 2.)
    metrics = jobset.metrics()
    completions = _metric(metrics, "jobset_completed_total", "train", namespace)
    assert completions is not None and completions >= 1.0
    assert _metric(metrics, "jobset_failed_total", "train", namespace) is None


async def test_failing_jobs_restart_the_jobset_up_to_max_restarts_then_it_fails(
    jobset: JobSetController, kube: KubeApi, namespace: str
) -> None:
    body = _jobset(
        "flaky",
        _replicated_job("launcher", run_for="30s"),
        _replicated_job("worker", pods=2, exit_code=1),
        failurePolicy={"maxRestarts": 2},
    )
    await kube.create(JOBSETS, body, namespace=namespace)

    failed = await wait_for(
        kube,
        JOBSETS,
        "flaky",
        namespace=namespace,
        until=lambda o: _condition(o, "Failed") is not None,
        timeout=TIMEOUT,
    )
    assert failed is not None
    condition = _condition(failed, "Failed")
    assert condition is not None
    assert condition["reason"] == "ReachedMaxRestarts", condition
    assert failed["status"]["restarts"] == 2
    assert failed["status"]["terminalState"] == "Failed"
    assert _condition(failed, "Completed") is None
    # The third attempt's worker Job is the one that failed last; the earlier attempts' Jobs
    # were replaced, not kept.
    jobs, _ = await kube.list(JOBS, namespace=namespace)
    attempts = {
        j["metadata"]["name"]: j["metadata"]["labels"][RESTART_ATTEMPT_LABEL]
        for j in jobs
        if j["metadata"].get("deletionTimestamp") is None
    }
    assert attempts.get("flaky-worker-0") == "2", attempts
    failures = _metric(jobset.metrics(), "jobset_failed_total", "flaky", namespace)
    assert failures is not None and failures >= 1.0


async def test_the_webhook_fills_in_the_defaults(
    jobset: JobSetController, kube: KubeApi, namespace: str
) -> None:
    job = _replicated_job("worker")
    del job["template"]["spec"]["template"]["spec"]["restartPolicy"]
    body = _jobset(
        "defaults",
        job,
        suspend=True,
        failurePolicy={"maxRestarts": 1, "rules": [{"action": "FailJobSet"}]},
    )
    created = await kube.create(JOBSETS, body, namespace=namespace)

    spec = created["spec"]
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert spec["failurePolicy"]["rules"][0]["name"] == "failurePolicyRule0"
    job_spec = spec["replicatedJobs"][0]["template"]["spec"]
    assert job_spec["completionMode"] == "Indexed"
    assert job_spec["template"]["spec"]["restartPolicy"] == "OnFailure"
    # Suspended: its Job exists, suspended, and no pod is created.
    suspended = await wait_for(
        kube,
        JOBS,
        "defaults-worker-0",
        namespace=namespace,
        until=lambda o: o is not None,
        timeout=TIMEOUT,
    )
    assert suspended is not None and suspended["spec"]["suspend"] is True
    pods, _ = await kube.list(PODS, namespace=namespace)
    assert pods == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            {"successPolicy": {"operator": "All", "targetReplicatedJobs": ["driver"]}},
            "invalid replicatedJob name 'driver' does not appear in .spec.ReplicatedJobs",
            id="success-policy-names-an-unknown-job",
        ),
        pytest.param(
            {"dependsOnFirst": True},
            "DependsOn can't be set for the first ReplicatedJob",
            id="first-job-depends-on-another",
        ),
        pytest.param(
            {"name": "a" * 56},
            "JobSet name is too long, job names generated for this JobSet will exceed 63 "
            "characters",
            id="job-names-too-long",
        ),
        pytest.param(
            {"failurePolicy": {"rules": [{"action": "FailJobSet", "targetReplicatedJobs": ["x"]}]}},
            "invalid replicatedJob name 'x' in failure policy does not appear in "
            ".spec.ReplicatedJobs",
            id="failure-policy-names-an-unknown-job",
        ),
    ],
)
async def test_the_webhook_rejects_an_invalid_jobset(
    jobset: JobSetController,
    kube: KubeApi,
    namespace: str,
    change: Obj,
    message: str,
) -> None:
    change = copy.deepcopy(change)
    name = change.pop("name", "invalid")
    body = _jobset(name, _replicated_job("launcher"), _replicated_job("worker"))
    if change.pop("dependsOnFirst", False):
        body["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "worker", "status": "Ready"}]
    body["spec"].update(change)

    with pytest.raises(ApiError) as caught:
        await kube.create(JOBSETS, body, namespace=namespace)

    assert "admission webhook" in caught.value.message
    assert message in caught.value.message
    jobsets, _ = await kube.list(JOBSETS, namespace=namespace)
    assert jobsets == []


async def test_the_webhook_rejects_changing_the_replicated_jobs_of_a_running_jobset(
    jobset: JobSetController, kube: KubeApi, namespace: str
) -> None:
    body = _jobset("fixed", _replicated_job("worker", run_for="60s"))
    await kube.create(JOBSETS, body, namespace=namespace)

    async def change_replicas() -> ApiError:
        # JobSet's controller writes the object as it starts it: a replace from a stale copy
        # answers 409, so read the latest and try again until the webhook answers.
        for _ in range(20):
            latest = await kube.get(JOBSETS, "fixed", namespace=namespace)
            changed = copy.deepcopy(latest)
            changed["spec"]["replicatedJobs"][0]["replicas"] = 3
            try:
                await kube.replace(JOBSETS, changed, namespace=namespace)
            except ApiError as exc:
                if not exc.is_conflict:
                    return exc
                continue
            pytest.fail("the change of replicatedJobs was accepted")
        pytest.fail("20 conflicts in a row")

    caught = await change_replicas()

    assert "admission webhook" in caught.message
    assert "field is immutable" in caught.message
    current = await kube.get(JOBSETS, "fixed", namespace=namespace)
    assert current["spec"]["replicatedJobs"][0]["replicas"] == 1
