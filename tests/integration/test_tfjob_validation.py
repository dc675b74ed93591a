"""Invalid TFJobs: rejected at admission with a message that says what to fix, and, for what
admission cannot see, failed by the operator once, visibly, without a retry loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tfjobs import (
    TFJOBS,
    condition,
    env_of,
    events,
    pods,
    replica,
    tfjob,
    wait_event,
    wait_job,
)

from jobcontroller.core import PlanConfig
from jobcontroller.runtime.kube import CRDS, ApiError, KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for
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


async def test_a_running_job_edited_past_a_check_fails_for_its_new_spec(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """A spec found valid is not checked again by every pass, only when it changes: a job
    scaled past the operator's pod limit fails for its new generation, with what to fix."""
    ns = namespace
    controller = TFJobController(config=PlanConfig(max_pods_per_job=4))
    async with running(kubeconfig, controller, namespace=ns):
        await kube.create(TFJOBS, tfjob("grows", {"Worker": replica(3)}), namespace=ns)
        await wait_for(kube, TFJOBS, "grows", namespace=ns, until=lambda j: condition(j, "Created"))
        assert len(await pods(kube, ns)) == 3
        patch = {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 5}}}}
        edited = await kube.merge_patch(TFJOBS, "grows", patch, namespace=ns)
        assert edited["metadata"]["generation"] == 2
        done = await wait_job(kube, ns, "grows", "Failed")
        failed = condition(done, "Failed")
        assert failed is not None and failed["reason"] == "TFJobFailedValidation"
        assert "it asks for 5 pods, more than the 4" in failed["message"]
        assert not [p for p in await pods(kube, ns) if p.endswith(("-3", "-4"))]


def _without_rules(schema: Any) -> Any:
    """A CRD schema without its CEL rules: the Go operator's CRD, which had none."""
    if isinstance(schema, dict):
        return {k: _without_rules(v) for k, v in schema.items() if k != "x-kubernetes-validations"}
    if isinstance(schema, list):
        return [_without_rules(v) for v in schema]
    return schema


@contextlib.asynccontextmanager
async def _go_operator_crd(kube: KubeApi, namespace: str) -> AsyncIterator[None]:
    """TFJobs may be stored as the Go operator's CRD let them be, until the block ends and
    ours is back (and refusing again)."""
    ours = await kube.get(CRDS, "tfjobs.kubeflow.org")
    probe = tfjob("probe", {"Worker": replica(1), "Trainer": replica(1)})

    async def admits() -> bool:
        try:
            await kube.create(TFJOBS, probe, namespace=namespace)
        except ApiError as exc:
            assert exc.status == 422, exc
            return False
        await kube.delete(TFJOBS, "probe", namespace=namespace)
        await wait_for(kube, TFJOBS, "probe", namespace=namespace, until=lambda j: j is None)
        return True

    relaxed = {**ours, "spec": _without_rules(ours["spec"])}
    await kube.replace(CRDS, relaxed)
    try:
        for _ in range(100):  # the API server picks the CRD change up in a moment
            if await admits():
                break
            await asyncio.sleep(0.2)
        yield
    finally:
        current = await kube.get(CRDS, "tfjobs.kubeflow.org")
        await kube.replace(CRDS, {**current, "spec": ours["spec"]})
        for _ in range(100):
            if not await admits():
                break
            await asyncio.sleep(0.2)


async def test_a_job_stored_before_the_swap_that_breaks_new_rules_runs_with_a_warning(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """Issue 13, item 8. A TFJob with a replica type v1.9 never checked (``Trainer``) was
    stored under the Go operator: it runs as v1.9 ran it (a pod per type, TF_CONFIG with every
    type) with one Warning that names the rule. A stored job that no operator could run (names
    too long for its Services) still fails, with the reason."""
    ns = namespace
    async with _go_operator_crd(kube, ns):
        specs = {"Worker": replica(1, exit_code=0, run_for="2s"), "Trainer": replica(1)}
        await kube.create(TFJOBS, tfjob("legacy", specs), namespace=ns)
        await kube.create(TFJOBS, tfjob("n" * 55, {"Worker": replica(10)}), namespace=ns)

    async with running(kubeconfig, TFJobController()):
        done = await wait_job(kube, ns, "legacy", "Succeeded")
        assert condition(done, "Failed") is None
        warning = await wait_event(kube, ns, "TFJobToleratedValidation")
        assert warning["type"] == "Warning"
        assert "spec.tfReplicaSpecs[Trainer]: replica types must be" in warning["message"]
        trainer = (await pods(kube, ns))["legacy-trainer-0"]
        config = json.loads(env_of(trainer)["TF_CONFIG"])
        assert config["task"] == {"type": "trainer", "index": 0}
        assert config["cluster"] == {
            "trainer": [f"legacy-trainer-0.{ns}.svc:2222"],
            "worker": [f"legacy-worker-0.{ns}.svc:2222"],
        }

        failed = await wait_job(kube, ns, "n" * 55, "Failed")
        reason = condition(failed, "Failed")
        assert reason is not None and reason["reason"] == "TFJobFailedValidation"
        assert "too long" in reason["message"]
        # Warned once, however many reconciles the job had.
        assert [e["count"] for e in await events(kube, ns, reason="TFJobToleratedValidation")] == [
            1
        ]


async def test_a_job_cannot_be_scaled_into_names_too_long(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    """The name rules are ratcheted, not dropped on updates: 54 + len("-worker-9") is 63, but
    an eleventh worker would be named with 64 characters, and the update is refused."""
    name = "n" * 54
    await kube.create(TFJOBS, tfjob(name, {"Worker": replica(10)}), namespace=namespace)
    with pytest.raises(ApiError) as refused:
        await kube.merge_patch(
            TFJOBS,
            name,
            {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 11}}}},
            namespace=namespace,
        )
    assert refused.value.status == 422
    assert "too long" in refused.value.message
