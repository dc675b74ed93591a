"""Invalid TFJobs: rejected at admission with a message that says what to fix, and, for what
admission cannot see, failed by the operator once, visibly, without a retry loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tfjobs import TFJOBS, condition, events, pods, replica, tfjob, wait_job

from jobcontroller.core import PlanConfig
from jobcontroller.runtime.kube import ApiError, KubeApi
from jobcontroller.testing.operator import running
from tf_operator.controller import TFJobController


def _no_tensorflow_container() -> dict[str, Any]:
    job = tfjob("plain", {"Worker": replica(1)})
    containers = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    containers[0]["name"] = "main"
    return job


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        # kubeflow #1101: 55 + len("-worker-9") = 64 > 63, so no pod or Service could be named.
        pytest.param(
            tfjob("n" * 55, {"Worker": replica(10)}),
            ["metadata.name", "too long", "63"],
            id="name-too-long-for-its-pods",
        ),
        pytest.param(
            _no_tensorflow_container(),
            ["spec.tfReplicaSpecs[Worker].template.spec.containers", "'tensorflow'"],
            id="no-tensorflow-container",
        ),
    ],
)
async def test_invalid_jobs_are_rejected_at_admission(
    kube: KubeApi,
    kubeflow_crds: list[str],
    namespace: str,
    job: dict[str, Any],
    expected: list[str],
) -> None:
    with pytest.raises(ApiError) as caught:
        await kube.create(TFJOBS, job, namespace=namespace)
    assert caught.value.status == 422
    for text in expected:
        assert text in caught.value.message, caught.value.message
    items, _ = await kube.list(TFJOBS, namespace=namespace)
    assert items == []


async def test_a_job_that_passes_admission_but_is_invalid_fails_once(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """The operator's own limit (``--max-pods-per-job``) is beyond what admission knows: a
    job over it is failed with a condition and one Warning that say so, and nothing is built."""
    ns = namespace
    controller = TFJobController(config=PlanConfig(max_pods_per_job=4))
    # Watching this namespace only, so the reconcile counts are this job's.
    async with running(kubeconfig, controller, namespace=ns) as op:

        def reconciles(*results: str) -> float:
            return sum(
                op.counter(
                    "controller_runtime_reconcile_total", controller="tfjob-controller", result=r
                )
                for r in results
            )

        specs = {"PS": replica(1), "Worker": replica(4)}
        await kube.create(TFJOBS, tfjob("big", specs), namespace=ns)
        done = await wait_job(kube, ns, "big", "Failed")
        failed = condition(done, "Failed")
        assert failed is not None
        assert failed["reason"] == "TFJobFailedValidation"
        assert failed["message"] == (
            "TFJob big failed validation because it asks for 5 pods, more than the 4 this "
            "operator allows per job (--max-pods-per-job)"
        )
        warnings = await events(kube, ns, reason="TFJobFailedValidation")
        assert [e["type"] for e in warnings] == ["Warning"]
        assert await pods(kube, ns) == {}

        # Failed for good: no error retries, and a few quiet seconds with at most the
        # reconcile that the watch event of our own status write brings.
        every = ("success", "error", "requeue", "requeue_after")
        settled = reconciles(*every)
        await asyncio.sleep(3)
        assert reconciles("error", "requeue") == 0
        assert reconciles(*every) - settled <= 1
        assert [e["count"] for e in await events(kube, ns, reason="TFJobFailedValidation")] == [1]
