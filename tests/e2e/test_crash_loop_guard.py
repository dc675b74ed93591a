"""A job the operator keeps dying on is failed, not planned again for ever (issue 30, item 3).

The tf-operator runs as a process, restarted whenever it dies, as a Deployment's container
is. A test hook (``JOBCONTROLLER_CRASH_ON_JOB``) makes it SIGKILL itself whenever it starts
working on one job while that job is unfinished, as an OOM kill would. The guard notes the job
before planning it; after the first death the job is a suspect (planned alone), after the
second it is failed with reason OperatorCrashed and a Warning event, and the operator dies no
more. A job beside it runs to Succeeded all along.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from jobcontroller.crashguard import CRASH_ON_JOB_ENV
from jobcontroller.runtime.kube import EVENTS, KubeApi
from jobcontroller.testing.processes import OperatorProcess
from jobcontroller.testing.waiting import wait_for, wait_for_list

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from tfjobs import TFJOBS, has, replica, tfjob  # noqa: E402


class Restarted:
    """An operator process restarted each time it dies (a Deployment's restartPolicy)."""

    def __init__(self, op: OperatorProcess) -> None:
        self.op = op
        self.deaths = 0
        self._task: asyncio.Task[None] | None = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            if not self.op.alive and not self.op.stopped:
                self.deaths += 1
                self.op.start()

    def start(self) -> None:
        self.op.start()
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.op.close()


@pytest_asyncio.fixture(loop_scope="session")
async def operator(kubeconfig: str, tmp_path: Path, namespace: str) -> AsyncIterator[Restarted]:
    op = OperatorProcess(
        "tf-operator",
        kubeconfig=Path(kubeconfig),
        log=tmp_path / "tf-operator.log",
        env={CRASH_ON_JOB_ENV: f"{namespace}/doomed"},
    )
    restarted = Restarted(op)
    restarted.start()
    try:
        yield restarted
    finally:
        await restarted.stop()


async def test_a_job_the_operator_dies_on_twice_is_failed_and_the_others_run(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str, operator: Restarted
) -> None:
    ns, op = namespace, operator.op
    await kube.create(
        TFJOBS,
        tfjob("fine", {"Worker": replica(2, exit_code=0, run_for="10s")}),
        namespace=ns,
    )
    await wait_for(
        kube,
        TFJOBS,
        "fine",
        namespace=ns,
        # Running, or already Succeeded: "fine" is under way either way. On a loaded machine
        # its 10 s can pass before the operator gets to write Running, and a job that has
        # finished by then is written Created to Succeeded, as the Go operators write a job
        # they reach late (status.py, RUNNING_BACKLOG_HOLD_SECONDS).
        until=lambda j: has(j, "Running") or has(j, "Succeeded"),
        timeout=60,
        what=lambda: f"fine Running\n{op.tail()}",
    )
    created = time.monotonic()
    await kube.create(TFJOBS, tfjob("doomed", {"Worker": replica(2)}), namespace=ns)
    doomed = await wait_for(
        kube,
        TFJOBS,
        "doomed",
        namespace=ns,
        until=lambda j: has(j, "Failed"),
        timeout=120,
        what=lambda: f"doomed Failed\n{op.tail()}",
    )
    quarantined = time.monotonic() - created
    failed = next(c for c in doomed["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "OperatorCrashed"
    assert "crashed 2 times" in failed["message"]
    assert operator.deaths == 2, op.tail()
    # Nothing was ever built for it: the operator died before planning, every time.
    assert not doomed["status"].get("replicaStatuses", {}).get("Worker", {}).get("active")

    fine = await wait_for(
        kube,
        TFJOBS,
        "fine",
        namespace=ns,
        until=lambda j: has(j, "Succeeded"),
        timeout=120,
        what=lambda: f"fine Succeeded beside the doomed job\n{op.tail()}",
    )
    assert fine is not None
    # Events are sent after the write they tell of, by the operator's own sender: wait for it.
    await wait_for_list(
        kube,
        EVENTS,
        namespace=ns,
        until=lambda events: any(
            e.get("reason") == "OperatorCrashed"
            and e.get("type") == "Warning"
            and (e.get("involvedObject") or {}).get("name") == "doomed"
            for e in events
        ),
        timeout=60,
        what=lambda: f"the OperatorCrashed Warning event on doomed\n{op.tail()}",
    )
    # The quarantined job stays failed and the operator stays up.
    await asyncio.sleep(3)
    assert operator.deaths == 2 and op.alive, op.tail()
    print(
        f"\ncrash-loop guard: doomed Failed (OperatorCrashed) {quarantined:.1f} s after its "
        f"creation, after {operator.deaths} operator deaths; fine Succeeded beside it"
    )
