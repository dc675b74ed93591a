"""One job of 10,000 replicas must not take its operator down nor starve the other jobs.

The tf-operator runs as its Deployment runs it, held to the Deployment's memory limit by a
cgroup (where the host has one to give; its peak RSS is checked against the limit either way).
Beside a TFJob of 10,000 workers, whose every pod carries a TF_CONFIG naming all 10,000 (about
450 KB each), three small TFJobs must run to Succeeded; the operator must stay under its limit
and never restart; deleting the big job must stop its pod creation within one pass; and a
SIGTERM must end the process within the Deployment's 30 s grace period, whatever is in flight.
Before creation came in bounded passes, the first reconcile built all 10,000 pod bodies at
once and the operator was OOM-killed within seconds, for as long as the job existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml

from jobcontroller.runtime.kube import PODS, ApiError, KubeApi, WatchInactive
from jobcontroller.testing.processes import OperatorProcess, parse_quantity_bytes
from jobcontroller.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIG = 10_000
JOB_NAME_LABEL = "training.kubeflow.org/job-name"

import sys  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "integration"))
from tfjobs import TFJOBS, has, replica, tfjob  # noqa: E402


def _memory_limit(deployment: str) -> int:
    path = ROOT / "manifests" / "overlays" / "per-framework" / "deployments.yaml"
    docs = yaml.safe_load_all(path.read_text())
    for doc in docs:
        if doc and doc["kind"] == "Deployment" and doc["metadata"]["name"] == deployment:
            container = doc["spec"]["template"]["spec"]["containers"][0]
            return parse_quantity_bytes(container["resources"]["limits"]["memory"])
    raise AssertionError(f"no Deployment {deployment}")


def _big_job() -> dict[str, Any]:
    worker = replica(BIG)  # runs until deleted
    # No scheduler picks these up: they stay Pending and cost the test cluster nothing but
    # their objects.
    worker["template"]["spec"]["schedulerName"] = "nobody"
    return tfjob("big", {"Worker": worker})


class CreationLog:
    """Creation times of the pods of one job, from a watch (they are garbage-collected soon
    after the job goes, so a later LIST would miss them)."""

    def __init__(self) -> None:
        self.created: dict[str, dt.datetime] = {}

    async def follow(self, kube: KubeApi, namespace: str, job: str, rv: str) -> None:
        while True:
            with contextlib.suppress(WatchInactive, ApiError):
                async for event in kube.watch(
                    PODS,
                    namespace=namespace,
                    label_selector=f"{JOB_NAME_LABEL}={job}",
                    resource_version=rv,
                    timeout_seconds=300,
                    inactivity_timeout=30,
                ):
                    meta = event["object"]["metadata"]
                    rv = meta.get("resourceVersion") or rv
                    if event["type"] == "ADDED":
                        stamp = dt.datetime.fromisoformat(meta["creationTimestamp"])
                        self.created.setdefault(meta["name"], stamp)

    def since(self, moment: dt.datetime) -> int:
        return sum(1 for stamp in self.created.values() if stamp >= moment)


@pytest_asyncio.fixture(loop_scope="session")
async def tf_operator(kubeconfig: str, tmp_path: Path) -> AsyncIterator[OperatorProcess]:
    op = OperatorProcess(
        "tf-operator",
        kubeconfig=Path(kubeconfig),
        log=tmp_path / "tf-operator.log",
        memory_limit=_memory_limit("tf-operator"),
    )
    op.start()
    try:
        yield op
    finally:
        op.close()


async def test_a_huge_job_beside_small_ones(
    kube: KubeApi,
    kubeflow_crds: list[str],
    namespace: str,
    tf_operator: OperatorProcess,
) -> None:
    ns, op = namespace, tf_operator
    limit = op.memory_limit
    assert limit is not None
    await op.wait_leading()
    _, rv = await kube.list(PODS, namespace=ns, limit=1)
    log = CreationLog()
    follower = asyncio.create_task(log.follow(kube, ns, "big", rv))
    try:
        await kube.create(TFJOBS, _big_job(), namespace=ns)
        small = [f"small-{i}" for i in range(3)]
        for name in small:
            specs = {"PS": replica(1), "Worker": replica(2, exit_code=0, run_for="1s")}
            await kube.create(TFJOBS, tfjob(name, specs), namespace=ns)
        for name in small:
            job = await wait_for(
                kube,
                TFJOBS,
                name,
                namespace=ns,
                until=lambda j: has(j, "Succeeded"),
                timeout=180,
                what=lambda name=name: f"{name} Succeeded beside the big job\n{op.tail()}",
            )
            assert job is not None
        big_so_far = len(log.created)
        assert big_so_far > 0, "the big job made no progress"
        assert op.alive and op.starts == 1, op.tail()
        peak = op.sample()
        assert peak < limit, f"peak RSS {peak} >= limit {limit}"
        if op.cgroup is not None:
            assert op.cgroup.oom_kills == 0

        # Deleting the job stops its creation within the pass in flight.
        await kube.delete(TFJOBS, "big", namespace=ns)
        deleted = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=1)
        await asyncio.sleep(6)
        after = log.since(deleted)
        # At most the writes already in flight (16 at a time) when the deletion was seen.
        assert after <= 16, f"{after} pods created after the job was deleted"

        # A SIGTERM mid-work ends within the kubelet's grace period, with a clean exit.
        await kube.create(TFJOBS, _big_job() | {"metadata": {"name": "big2"}}, namespace=ns)
        await asyncio.sleep(3)
        op.sample()
        status = await op.terminate(grace=30)
        assert status == 0, f"exit status {status} (None: still running after 30 s)\n{op.tail()}"
        print(
            f"\nbig job: {big_so_far} of {BIG} pods created while 3 small jobs ran to Succeeded;"
            f" {after} after deletion; peak RSS {op.peak_rss / 2**20:.0f} MiB of"
            f" {limit / 2**20:.0f} MiB (limit {'enforced' if op.enforced else 'measured only'})"
        )
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
