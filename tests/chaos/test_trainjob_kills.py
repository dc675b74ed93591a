"""TrainJobs under chaos: the trainer operator SIGKILLed while it creates the JobSets of 36
TrainJobs submitted at once (and as half of the finished ones lose their JobSets to JobSet's
TTL), the API server restarted while they run, and the operator SIGKILLed again while the
finished TrainJobs are deleted with their JobSets.

The real JobSet controller (v0.12.0) runs the JobSets on kwok's pods. The audit log says who
created each JobSet and when; the TrainJobs are watched throughout. Whatever instant a kill
lands on, no TrainJob may get a second JobSet, no finished TrainJob may get a JobSet (run
again) or leave its final state, every TrainJob must end as its spec says (Complete; Failed by
its JobSet; Failed by its deadline, its JobSet deleted), no write may come from a replica
without the Lease, and the deletions must leave no JobSet behind.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime as dt
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import AuditedPlane, audit_entries, non_leader_writes, supervised

from jobcontroller.runtime.kube import KubeApi, Resource
from jobcontroller.testing.jobset import JOBSETS, JobSetController
from jobcontroller.testing.pods import sim_annotations
from jobcontroller.testing.processes import OperatorProcess

Obj = dict[str, Any]

SEED = 20261126
JOBS = 36
KILLS_WHILE_CREATING = 4
KILLS_WHILE_DELETING = 3
TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes")
TORCH = Path(__file__).resolve().parents[2] / "manifests" / "runtimes" / "torch_distributed.yaml"
NODES = 4
TTL = 30


@pytest.fixture(scope="module")
def jobset(audited: AuditedPlane) -> Iterator[JobSetController]:
    controller = JobSetController(audited.plane)
    controller.start()
    try:
        yield controller
    finally:
        controller.stop()


def runtime(node: int) -> Obj:
    """The shipped torch-distributed, namespaced, its pods bound to one kwok node (no scheduler:
    after an API server restart kube-scheduler's cache can leave pods Pending, which is not what
    this test is about) and its Job retrying no pod (a failed node fails the TrainJob at once,
    not after the Job's six back-offs). On odd nodes the JobSet has a TTL: JobSet's controller
    deletes it :data:`TTL` s after it finishes, and its TrainJob, finished, must not run again.

    The TTL outlasts the operator's longest absence here (a kill, the 6 s Lease, a restart: 12 s
    or so on a loaded machine; kills spaced so that each leader makes a pass in between):
    a JobSet gone before any operator saw it finish leaves nothing saying the TrainJob ran,
    and it is run again, as Kubeflow Trainer v2.3.0 would (with a 2 s TTL, one run of this
    test saw 3 such TrainJobs; docs/trainjob.md)."""
    [torch] = [d for d in yaml.safe_load_all(TORCH.read_text()) if d]
    out = copy.deepcopy(torch)
    out["kind"] = "TrainingRuntime"
    out["metadata"]["name"] = f"chaos-torch-{node}"
    [rjob] = out["spec"]["template"]["spec"]["replicatedJobs"]
    rjob["template"]["spec"]["backoffLimit"] = 0
    rjob["template"]["spec"]["template"]["spec"]["nodeName"] = f"kwok-node-{node}"
    if node % 2:
        out["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] = TTL
    return dict(out)


@dataclasses.dataclass(frozen=True)
class Case:
    body: Obj
    expected: str
    """``Complete``, ``Failed`` (a node exits 1) or ``DeadlineExceeded``."""

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


def workload(n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        outcome = rng.choice(("Complete", "Complete", "Complete", "Failed", "DeadlineExceeded"))
        exit_code = {"Complete": 0, "Failed": 1, "DeadlineExceeded": None}[outcome]
        pod = {
            "metadata": {"annotations": sim_annotations(exit_code, run_for=f"{rng.randint(2, 6)}s")}
        }
        node = {"name": "node", "template": {"spec": {"template": pod}}}
        spec: Obj = {
            "runtimeRef": {"kind": "TrainingRuntime", "name": f"chaos-torch-{i % NODES}"},
            "trainer": {"numNodes": rng.randint(1, 2)},
            "runtimePatches": [
                {
                    "manager": "sim.jobcontroller/kwok",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}},
                }
            ],
        }
        if outcome == "DeadlineExceeded":
            spec["activeDeadlineSeconds"] = rng.randint(6, 12)
        body = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": f"train-{i}"},
            "spec": spec,
        }
        cases.append(Case(body, outcome))
    return cases


def final_state(trainjob: Obj | None) -> str | None:
    """``Complete``, ``Failed``, ``DeadlineExceeded`` or None (not finished)."""
    for c in ((trainjob or {}).get("status") or {}).get("conditions") or ():
        if c.get("status") != "True":
            continue
        if c["type"] == "Complete":
            return "Complete"
        if c["type"] == "Failed":
            return "DeadlineExceeded" if c.get("reason") == "DeadlineExceeded" else "Failed"
    return None


class Watched:
    """Every state each TrainJob showed, from a poll every half second: a finished TrainJob
    seen unfinished, or finished otherwise, afterwards, ran again."""

    def __init__(self) -> None:
        self.finished: dict[str, tuple[str, dt.datetime]] = {}
        self.changed: list[str] = []

    def see(self, items: list[Obj]) -> None:
        now = dt.datetime.now(dt.UTC)
        for item in items:
            name, state = item["metadata"]["name"], final_state(item)
            seen = self.finished.get(name)
            if seen is None and state is not None:
                self.finished[name] = (state, now)
            elif seen is not None and state != seen[0]:
                self.changed.append(f"{name}: {seen[0]} then {state}")


async def poll_until(
    kube: KubeApi, ns: str, watched: Watched, done: Any, *, timeout: float
) -> list[Obj]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            items, _ = await kube.list(TRAINJOBS, namespace=ns)
        except Exception:  # the API server is away for a moment
            items = None
        if items is not None:
            watched.see(items)
            if done(items) or loop.time() > deadline:
                return items
        await asyncio.sleep(0.5)


def jobset_creates(audit_log: Path) -> dict[str, list[dt.datetime]]:
    """When each JobSet name was created by an operator replica: a create answered 2xx, or
    one answered 504 that stored the JobSet all the same. A replica killed while the API
    server writes its create gets no answer; the API server logs 504 ("context canceled")
    for a JobSet it has stored, and the restarted replica finds it and creates none. Such a
    create counts once a later request about that JobSet is answered 2xx (the JobSet
    controller's updates, a delete) with no create answered 2xx in between."""
    out: dict[str, list[dt.datetime]] = {}
    unconfirmed: dict[str, dt.datetime] = {}
    for e in audit_entries(audit_log):
        ref = e.get("objectRef") or {}
        if e.get("stage") != "ResponseComplete" or ref.get("resource") != "jobsets":
            continue
        name = str(ref.get("name"))
        code = int((e.get("responseStatus") or {}).get("code") or 0)
        when = dt.datetime.fromisoformat(e["stageTimestamp"])
        if e.get("verb") == "create":
            if not str((e.get("user") or {}).get("username") or "").startswith("chaos:"):
                continue
            if 200 <= code < 300:
                out.setdefault(name, []).append(when)
                unconfirmed.pop(name, None)
            elif code == 504:
                unconfirmed[name] = when
        elif name in unconfirmed and 200 <= code < 300 and e.get("verb") != "list":
            out.setdefault(name, []).append(unconfirmed.pop(name))
    return out


async def jobset_names(kube: KubeApi, ns: str) -> set[str]:
    items, _ = await kube.list(JOBSETS, namespace=ns)
    return {str(j["metadata"]["name"]) for j in items}


async def leading(op: OperatorProcess, *, timeout: float = 60.0) -> None:
    """Until ``op`` (started again by ``supervised`` after a kill) leads."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        ready = op.readiness() if op.alive else None
        if ready is not None and ready.get("leader"):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{op.script} never led within {timeout:g}s:\n{op.tail()}")


async def kill_repeatedly(
    op: OperatorProcess,
    rng: random.Random,
    kills: int,
    first: tuple[float, float],
    then: tuple[float, float] = (2.0, 4.0),
) -> int:
    """SIGKILL ``op`` ``kills`` times: the first ``first`` seconds from now (in the burst of
    work the test just caused), each next one ``then`` seconds after the restarted process
    took the Lease (in its first passes over what happened while no one led). Each leader
    thus gets a pass over every TrainJob: kills a fraction of a second apart would add their
    outages up past any JobSet TTL (see :func:`runtime`). ``supervised`` starts the process
    again a second after each kill, as a Deployment would."""
    gap = first
    for _ in range(kills):
        await leading(op)
        await asyncio.sleep(rng.uniform(*gap))
        op.kill()
        gap = then
    return kills


async def test_trainjobs_survive_operator_kills_and_an_api_server_restart(
    audited: AuditedPlane, jobset: JobSetController, chaos_kube: KubeApi, chaos_namespace: str
) -> None:
    kube, ns, plane = chaos_kube, chaos_namespace, audited.plane
    rng = random.Random(SEED)
    for node in range(NODES):
        await kube.create(RUNTIMES, runtime(node), namespace=ns)
    cases = workload(JOBS, SEED)
    watched = Watched()
    op = audited.operator("TrainJob", "trainer-a")
    async with supervised([op]):
        await op.wait_leading()
        # 1. Submitted at once; the operator killed while it creates their JobSets.
        killing = asyncio.create_task(kill_repeatedly(op, rng, KILLS_WHILE_CREATING, (0.3, 1.5)))
        await asyncio.gather(*(kube.create(TRAINJOBS, c.body, namespace=ns) for c in cases))
        kills = await killing
        # 2. The API server restarted while they run.
        await asyncio.sleep(rng.uniform(1.0, 3.0))
        await asyncio.to_thread(plane.stop_apiserver)
        await asyncio.sleep(rng.uniform(0.5, 2.0))
        await asyncio.to_thread(plane.start_apiserver)
        items = await poll_until(
            kube,
            ns,
            watched,
            lambda items: len(items) == JOBS and all(final_state(t) for t in items),
            timeout=240,
        )
        states = {t["metadata"]["name"]: final_state(t) for t in items}
        # A deadline's JobSet is deleted by the operator, right after the Failed condition.
        out_of_time = {c.name for c in cases if c.expected == "DeadlineExceeded"}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:
            left = await jobset_names(kube, ns)
            if not left & out_of_time or loop.time() > deadline:
                break
            await asyncio.sleep(0.5)
        # 3. The finished TrainJobs deleted (their JobSets go with them), the operator killed
        # while it sees them go.
        cleanup_started = dt.datetime.now(dt.UTC)
        killing = asyncio.create_task(kill_repeatedly(op, rng, KILLS_WHILE_DELETING, (0.2, 1.5)))
        await asyncio.gather(*(kube.delete(TRAINJOBS, c.name, namespace=ns) for c in cases))
        kills += await killing
        await poll_until(kube, ns, watched, lambda items: not items, timeout=120)
        deadline = loop.time() + 120
        remaining = await jobset_names(kube, ns)
        while remaining and loop.time() < deadline:
            await asyncio.sleep(0.5)
            remaining = await jobset_names(kube, ns)
        await leading(op)
        await asyncio.sleep(3)  # a restarted operator that would recreate something, does

    creates = jobset_creates(audited.audit_log)
    duplicates = {name: len(times) for name, times in creates.items() if len(times) > 1}
    reruns = [
        f"{name} created {when.isoformat()} after {watched.finished[name][0]} at "
        f"{watched.finished[name][1].isoformat()}"
        for name, times in creates.items()
        for when in times
        if name in watched.finished and when > watched.finished[name][1]
    ]
    after_cleanup = [n for n, times in creates.items() if any(t > cleanup_started for t in times)]
    wrong = {
        c.name: (states.get(c.name), c.expected) for c in cases if states.get(c.name) != c.expected
    }
    expected = Counter(c.expected for c in cases)
    print(
        f"\nchaos/trainjob: {kills} SIGKILLs, 1 API server restart; {dict(expected)}; "
        f"JobSets created {sum(len(t) for t in creates.values())} for {JOBS} TrainJobs, "
        f"duplicates {len(duplicates)}, finished TrainJobs run again "
        f"{len(reruns) + len(watched.changed)}, wrong final states {len(wrong)}, JobSets left "
        f"after deletion {len(remaining)}"
    )
    assert duplicates == {}
    assert reruns == [] and watched.changed == []
    assert wrong == {}
    # Every TrainJob that was not failed by its deadline got its one JobSet; a deadline's
    # JobSet is deleted by the operator (at most one was created).
    assert {c.name for c in cases if c.expected != "DeadlineExceeded"} <= set(creates)
    assert not left & out_of_time
    assert after_cleanup == [] and remaining == set()
    assert non_leader_writes(audited.audit_log) == []
