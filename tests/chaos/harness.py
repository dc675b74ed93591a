"""What every chaos test shares: an audited cluster, a mixed workload, a pod history, and the
invariants the operators must keep whatever is done to them.

* ``AuditedPlane``: the local cluster (kwok nodes, scheduler, controller-manager) with the API
  server's audit log on, so every write is attributed to the client that sent it. Each operator
  replica authenticates with a client certificate of its own (``chaos:<name>``).
* ``workload(n, seed)``: TFJobs, PyTorchJobs and MPIJobs that succeed, fail under Never, or
  fail by their backoff limit after recreating pods, half of them cleaning up with
  ``cleanPodPolicy: All``; each knows the terminal state it must reach.
* ``PodHistory``: every pod the jobs ever had, from a watch started before the first job: when
  it was live, its phases, and which pod took its slot next.
* ``check``: 0 duplicate pods (two live pods in one job/type/index slot at once), 0 pods
  recreated without a failed predecessor, 0 orphans, every job in its expected terminal state,
  and (with an audit log) 0 writes by a replica that did not hold its Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import random
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.runtime.informer import Informer
from jobcontroller.runtime.kube import PODS, SERVICES, KubeApi, Resource
from jobcontroller.testing import yamlfast
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.processes import OperatorProcess

Obj = dict[str, Any]

TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")
PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
MPIJOBS = Resource("kubeflow.org", "v2beta1", "MPIJob", "mpijobs")
KINDS = {"TFJob": TFJOBS, "PyTorchJob": PYTORCHJOBS, "MPIJob": MPIJOBS}
SCRIPTS = {
    "TFJob": "tf-operator",
    "PyTorchJob": "pytorch-operator",
    "MPIJob": "mpi-operator",
    "TrainJob": "trainer-operator",  # test_trainjob_kills.py
}
JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
LEASE_NAMESPACE = "default"

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Request",
            "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}],
            "verbs": ["create", "update", "patch"],
        },
        {"level": "Metadata", "verbs": ["create", "update", "patch", "delete"]},
        {"level": "None"},
    ],
}


# -- the cluster ----------------------------------------------------------------------------


class AuditedPlane:
    """A full local cluster whose API server writes an audit log of every write."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        policy = workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        self.audit_log = workdir / "audit.log"
        self.plane = ControlPlane(
            controller_manager=True,
            scheduler=True,
            kwok=True,
            nodes=4,
            workdir=workdir / "cluster",
            extra_apiserver_args=[
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                "--audit-log-maxsize=0",
            ],
        )
        self.workdir = workdir

    def operator(
        self, kind: str, replica: str, *args: str, fast_lease: bool = True
    ) -> OperatorProcess:
        """A replica of ``kind``'s operator with leader election and an identity of its own.
        ``fast_lease`` shortens the Lease (6 s) so failovers fit a test; without it the
        Deployment's defaults apply (15 s, renewed within 10 s)."""
        user = f"chaos:{replica}"
        kubeconfig = self.plane.user_kubeconfig(user=user, groups=["system:masters"])
        timing = (
            [
                "--leader-election-lease-duration=6",
                "--leader-election-renew-deadline=4",
                "--leader-election-retry-period=1",
            ]
            if fast_lease
            else []
        )
        return OperatorProcess(
            SCRIPTS[kind],
            kubeconfig=kubeconfig,
            log=self.workdir / f"{replica}.log",
            args=[
                "--leader-elect",
                f"--leader-election-namespace={LEASE_NAMESPACE}",
                *timing,
                *args,
            ],
        )


# -- the workload ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class JobCase:
    kind: str
    body: Obj
    expected: str
    """``Succeeded`` or ``Failed``."""

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def resource(self) -> Resource:
        return KINDS[self.kind]


def _template(container: str, exit_code: int | None, run_for: str) -> Obj:
    template: Obj = {"spec": {"containers": [{"name": container, "image": "chaos:1"}]}}
    if exit_code is not None:
        simulate(template, exit_code, run_for=run_for)
    return template


def _tf(name: str, rng: random.Random, outcome: str, clean: str) -> JobCase:
    run_for = f"{rng.randint(2, 8)}s"
    run_policy: Obj = {"cleanPodPolicy": clean}
    if outcome == "ok":
        specs = {
            "PS": {"replicas": 1, "template": _template("tensorflow", None, run_for)},
            "Worker": {"replicas": 2, "template": _template("tensorflow", 0, run_for)},
        }
        expected = "Succeeded"
    elif outcome == "fail":
        specs = {
            "Chief": {"replicas": 1, "template": _template("tensorflow", None, run_for)},
            "Worker": {
                "replicas": 2,
                "restartPolicy": "Never",
                "template": _template("tensorflow", 1, run_for),
            },
        }
        expected = "Failed"
    else:  # retried, then failed by the backoff limit: pods are recreated on the way
        specs = {
            "Worker": {
                "replicas": 1,
                "restartPolicy": "ExitCode",
                "template": _template("tensorflow", 137, "1s"),
            }
        }
        run_policy["backoffLimit"] = 2
        expected = "Failed"
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"runPolicy": run_policy, "tfReplicaSpecs": specs},
    }
    return JobCase("TFJob", body, expected)


def _pytorch(name: str, rng: random.Random, outcome: str, clean: str) -> JobCase:
    run_for = f"{rng.randint(2, 8)}s"
    code = 0 if outcome == "ok" else 1
    specs = {
        "Master": {
            "replicas": 1,
            "restartPolicy": "Never",
            "template": _template("pytorch", code, run_for),
        },
        "Worker": {"replicas": 2, "template": _template("pytorch", None, run_for)},
    }
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"runPolicy": {"cleanPodPolicy": clean}, "pytorchReplicaSpecs": specs},
    }
    return JobCase("PyTorchJob", body, "Succeeded" if code == 0 else "Failed")


def _mpi(name: str, rng: random.Random, outcome: str, clean: str) -> JobCase:
    run_for = f"{rng.randint(2, 8)}s"
    code = 0 if outcome == "ok" else 1
    specs = {
        "Launcher": {"replicas": 1, "template": _template("launcher", code, run_for)},
        "Worker": {"replicas": 2, "template": _template("worker", None, run_for)},
    }
    body = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": clean, "backoffLimit": 0},
            "mpiReplicaSpecs": specs,
        },
    }
    return JobCase("MPIJob", body, "Succeeded" if code == 0 else "Failed")


def workload(
    n: int, *, seed: int, kinds: tuple[str, ...] = tuple(KINDS), bound: bool = False
) -> list[JobCase]:
    """``n`` jobs spread over ``kinds``, outcomes and clean-pod policies, reproducibly.

    ``bound`` puts every pod on a kwok node by name, so no scheduler is involved: after API
    server restarts and an etcd compaction the real kube-scheduler's cache can go wrong ("Pod
    updated on a different node than previously added to") and leave pods Pending, which is
    not what such a test is about.
    """
    rng = random.Random(seed)
    builders = {"TFJob": _tf, "PyTorchJob": _pytorch, "MPIJob": _mpi}
    cases = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        outcomes = ("ok", "fail", "retry") if kind == "TFJob" else ("ok", "ok", "fail")
        outcome = rng.choice(outcomes)
        clean = rng.choice(("All", "Running", "None"))
        case = builders[kind](f"{kind.lower()}-{i}", rng, outcome, clean)
        if bound:
            for spec in next(
                v for k, v in case.body["spec"].items() if k.endswith("Specs")
            ).values():
                spec["template"]["spec"]["nodeName"] = f"kwok-node-{i % 4}"
        cases.append(case)
    return cases


# -- what happened to the pods --------------------------------------------------------------


@dataclasses.dataclass
class PodLife:
    uid: str
    name: str
    slot: tuple[str, str, str]
    """(job name, replica type, replica index)."""
    phases: list[str] = dataclasses.field(default_factory=list)
    terminating: bool = False
    gone: bool = False
    lists_when_seen: int = 0
    """The informer's LIST count at the last sighting."""
    end_unobserved: bool = False
    """It vanished in a relist (the API server was away): its last phase was never seen."""

    @property
    def live(self) -> bool:
        return not (self.terminating or self.gone)

    @property
    def last_phase(self) -> str:
        return self.phases[-1] if self.phases else ""


class PodHistory:
    """Every pod of the jobs, in the order the API server reported them (an informer of the
    test's own, started before the first job)."""

    def __init__(self, kube: KubeApi, namespace: str) -> None:
        self.lives: dict[str, PodLife] = {}
        self.by_slot: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        self.duplicates: list[str] = []
        self._informer = Informer(kube, PODS, namespace=namespace, label_selector=JOB_NAME)
        self._informer.add_handlers(
            on_add=self._seen, on_update=lambda _, new: self._seen(new), on_delete=self._gone
        )
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._informer.run())
        await self._informer.wait_synced()

    async def stop(self) -> None:
        self._informer.stop()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _seen(self, pod: Obj) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        life = self.lives.get(uid)
        if life is None:
            labels = meta.get("labels") or {}
            slot = (
                str(labels.get(JOB_NAME, "")),
                str(labels.get(REPLICA_TYPE, "")),
                str(labels.get(REPLICA_INDEX, "")),
            )
            life = PodLife(uid=uid, name=meta["name"], slot=slot)
            others = [self.lives[u] for u in self.by_slot[slot]]
            if any(other.live for other in others) and not meta.get("deletionTimestamp"):
                self.duplicates.append(f"{meta['name']} ({uid}) beside a live pod in {slot}")
            self.lives[uid] = life
            self.by_slot[slot].append(uid)
        phase = str((pod.get("status") or {}).get("phase") or "")
        if phase and (not life.phases or life.phases[-1] != phase):
            life.phases.append(phase)
        life.terminating = bool(meta.get("deletionTimestamp"))
        life.lists_when_seen = self._informer.statistics().lists

    def _gone(self, pod: Obj) -> None:
        life = self.lives.get(pod["metadata"]["uid"])
        if life is not None:
            life.gone = True
            # Gone through a relist after a gap in the watch: what happened to it in between
            # (a failure, say) was never seen by this history.
            life.end_unobserved = self._informer.statistics().lists > life.lists_when_seen

    @property
    def unobserved_ends(self) -> int:
        return sum(1 for life in self.lives.values() if life.end_unobserved)

    def recreated_without_failure(
        self, ended_by_others: frozenset[tuple[str, int]] = frozenset()
    ) -> list[str]:
        """Pods that took a slot whose previous pod had not failed. ``ended_by_others``: the
        (pod name, life number) of pods someone other than the operators deleted (see
        :func:`lives_ended_by_others`); replacing those is the operator's job."""
        out = []
        lives_of_name: dict[str, list[str]] = defaultdict(list)
        for uid, life in self.lives.items():  # in order of first sighting
            lives_of_name[life.name].append(uid)
        for slot, uids in self.by_slot.items():
            for before, after in itertools.pairwise(uids):
                previous = self.lives[before]
                if previous.end_unobserved:
                    continue  # counted apart (``unobserved_ends``): no verdict without a sighting
                if (previous.name, lives_of_name[previous.name].index(before)) in ended_by_others:
                    continue
                if previous.last_phase != "Failed":
                    out.append(
                        f"{self.lives[after].name} replaced a pod last seen "
                        f"{previous.last_phase or 'without a phase'} in {slot}"
                    )
        return out


# -- the verdict ----------------------------------------------------------------------------


@dataclasses.dataclass
class Verdict:
    jobs: int = 0
    right_state: int = 0
    wrong_states: list[str] = dataclasses.field(default_factory=list)
    duplicates: list[str] = dataclasses.field(default_factory=list)
    recreated: list[str] = dataclasses.field(default_factory=list)
    orphans: list[str] = dataclasses.field(default_factory=list)
    non_leader_writes: list[str] = dataclasses.field(default_factory=list)
    pods_seen: int = 0
    ends_unobserved: int = 0
    ended_by_others: int = 0
    """Pods deleted by someone other than the operators (kwok finishing an earlier pod's
    deletion by name), which the operators rightly replaced."""

    def figures(self) -> str:
        return (
            f"jobs {self.jobs}, right terminal state {self.right_state}/{self.jobs}, "
            f"pods {self.pods_seen}, duplicates {len(self.duplicates)}, recreated without a "
            f"failed predecessor {len(self.recreated)}, orphans {len(self.orphans)}, "
            f"writes by a non-leader {len(self.non_leader_writes)}"
            + (
                f", {self.ended_by_others} pod(s) deleted by others (kwok) and replaced"
                if self.ended_by_others
                else ""
            )
            + (
                f" ({self.ends_unobserved} pod(s) vanished while the API server was away, their "
                "last phase unseen)"
                if self.ends_unobserved
                else ""
            )
        )

    def assert_clean(self) -> None:
        problems = {
            "wrong terminal states": self.wrong_states,
            "duplicate pods": self.duplicates,
            "pods recreated without a failed predecessor": self.recreated,
            "orphans": self.orphans,
            "writes by a non-leader": self.non_leader_writes,
        }
        found = {k: v[:10] for k, v in problems.items() if v}
        assert not found, json.dumps(found, indent=1)


def terminal(job: Obj | None) -> str:
    for cond in ((job or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Succeeded", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return ""


async def wait_terminal(
    kube: KubeApi, namespace: str, cases: list[JobCase], *, timeout: float
) -> dict[str, Obj]:
    """Every job once each has a terminal condition (or the timeout), by name."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        jobs: dict[str, Obj] = {}
        for resource in {case.resource for case in cases}:
            items, _ = await kube.list(resource, namespace=namespace)
            jobs.update({item["metadata"]["name"]: item for item in items})
        if all(terminal(jobs.get(c.name)) for c in cases) or loop.time() > deadline:
            return jobs
        await asyncio.sleep(1.0)


async def check(
    kube: KubeApi,
    namespace: str,
    cases: list[JobCase],
    history: PodHistory,
    jobs: dict[str, Obj],
    *,
    audit_log: Path | None = None,
) -> Verdict:
    verdict = Verdict(
        jobs=len(cases), pods_seen=len(history.lives), ends_unobserved=history.unobserved_ends
    )
    for case in cases:
        got = terminal(jobs.get(case.name))
        if got == case.expected:
            verdict.right_state += 1
        else:
            verdict.wrong_states.append(f"{case.kind} {case.name}: {got or 'none'}")
    verdict.duplicates = list(history.duplicates)
    others = lives_ended_by_others(audit_log) if audit_log is not None else frozenset()
    verdict.recreated = history.recreated_without_failure(others)
    verdict.ended_by_others = len(others)
    uids = {job["metadata"]["uid"] for job in jobs.values()}
    for resource in (PODS, SERVICES):
        items, _ = await kube.list(resource, namespace=namespace, label_selector=JOB_NAME)
        for item in items:
            refs = [r for r in item["metadata"].get("ownerReferences") or () if r.get("controller")]
            owner_ok = bool(refs) and (refs[0]["uid"] in uids or refs[0]["kind"] == "Job")
            if not owner_ok:
                verdict.orphans.append(f"{resource.kind} {item['metadata']['name']}")
    if audit_log is not None:
        verdict.non_leader_writes = non_leader_writes(audit_log)
    return verdict


# -- the audit log --------------------------------------------------------------------------


def audit_entries(path: Path) -> Iterator[Obj]:
    with path.open() as lines:
        for line in lines:
            with contextlib.suppress(ValueError):
                yield json.loads(line)


def _when(entry: Obj) -> dt.datetime:
    return dt.datetime.fromisoformat(entry["requestReceivedTimestamp"])


def _every_replica_writes(ref: Obj) -> bool:
    """Writes every replica makes, leading or not, by design: the TrainJob progress endpoint
    runs on each replica (as v2.3.0's status server does), and the first one up creates the
    serving certificate's Secret all of them share (an AlreadyExists guards the race)."""
    return ref.get("resource") == "secrets" and str(ref.get("name") or "").endswith(
        "-trainjob-status-tls"
    )


def non_leader_writes(path: Path) -> list[str]:
    """Writes by an operator replica (user ``chaos:*``) received while another replica held
    its Lease, or while it held none. Lease ownership is read from the Lease writes themselves:
    a replica holds a Lease from its successful write naming a holder until the next write."""
    entries = sorted(
        (e for e in audit_entries(path) if e.get("stage") == "ResponseComplete"),
        key=_when,
    )
    holder: dict[str, str | None] = {}  # lease name -> user holding it
    lease_of: dict[str, str] = {}  # user -> its lease name
    out = []
    for entry in entries:
        user = str((entry.get("user") or {}).get("username") or "")
        if not user.startswith("chaos:"):
            continue
        ref = entry.get("objectRef") or {}
        code = int((entry.get("responseStatus") or {}).get("code") or 0)
        if ref.get("resource") == "leases":
            if not 200 <= code < 300:
                continue
            spec = (entry.get("requestObject") or {}).get("spec") or {}
            lease = str(ref.get("name") or "")
            holder[lease] = user if spec.get("holderIdentity") else None
            lease_of[user] = lease
            continue
        if _every_replica_writes(ref):
            continue
        lease = lease_of.get(user)
        if lease is None or holder.get(lease) != user:
            out.append(
                f"{user} {entry.get('verb')} {ref.get('resource')}/{ref.get('subresource', '')}"
                f" {ref.get('name')} at {entry['requestReceivedTimestamp']} while the lease "
                f"was held by {holder.get(lease or '') or 'nobody'}"
            )
    return out


def lives_ended_by_others(path: Path, prefix: str = "chaos:") -> frozenset[tuple[str, int]]:
    """(pod name, life number) of the pods whose first successful deletion came from someone
    other than the operators (users ``chaos:*``).

    A pod's name is reused by its replacement, and kwok deletes by name: under load it can
    finish an old pod's deletion after the operator has already created the new pod, deleting
    that one instead. The audit log (Metadata level, no uids) tells lives apart by the
    successful creates of the name: life ``n`` runs from the ``n``-th create to the next one,
    and the successful deletes in it say who ended it (an operator's graceful delete
    comes first, kwok's final one after). A life counts only if no operator deleted it at
    all: one the operator deleted too stays the operator's to answer for."""
    by_name: dict[str, list[Obj]] = defaultdict(list)
    for entry in audit_entries(path):
        ref = entry.get("objectRef") or {}
        code = int((entry.get("responseStatus") or {}).get("code") or 0)
        if (
            entry.get("stage") == "ResponseComplete"
            and ref.get("resource") == "pods"
            and not ref.get("subresource")
            and entry.get("verb") in ("create", "delete")
            and 200 <= code < 300
        ):
            by_name[str(ref.get("name") or "")].append(entry)
    out: set[tuple[str, int]] = set()
    for name, entries in by_name.items():
        deleters: list[set[str]] = []  # per life, who deleted it successfully
        for entry in sorted(entries, key=lambda e: str(e.get("stageTimestamp") or "")):
            if entry["verb"] == "create":
                deleters.append(set())
            elif deleters:
                deleters[-1].add(str((entry.get("user") or {}).get("username") or ""))
        out.update(
            (name, life)
            for life, users in enumerate(deleters)
            if users and not any(user.startswith(prefix) for user in users)
        )
    return frozenset(out)


def writes_by(path: Path, prefix: str = "chaos:") -> int:
    return sum(
        1
        for e in audit_entries(path)
        if e.get("stage") == "ResponseComplete"
        and str((e.get("user") or {}).get("username") or "").startswith(prefix)
        and (e.get("objectRef") or {}).get("resource") != "leases"
    )


def first_write_after(path: Path, moment: dt.datetime, prefix: str = "chaos:") -> float | None:
    """Seconds from ``moment`` to the first write (not a Lease renewal) an operator sent after
    it, as the API server received it; None if there is none yet."""
    times = [
        _when(e)
        for e in audit_entries(path)
        if e.get("stage") == "ResponseComplete"
        and str((e.get("user") or {}).get("username") or "").startswith(prefix)
        and (e.get("objectRef") or {}).get("resource") not in ("leases", "events")
        and _when(e) > moment
    ]
    return (min(times) - moment).total_seconds() if times else None


@contextlib.asynccontextmanager
async def supervised(ops: list[OperatorProcess]) -> AsyncIterator[list[OperatorProcess]]:
    """Restart any of ``ops`` that exits, a second later, as a Deployment's kubelet would (an
    operator that lost its Lease exits on purpose, to rejoin the election clean)."""

    async def watch() -> None:
        while True:
            await asyncio.sleep(0.5)
            for op in ops:
                if op.popen is not None and not op.alive and not op.stopped:
                    await asyncio.sleep(1.0)
                    op.start()

    for op in ops:
        op.start()
    task = asyncio.create_task(watch())
    try:
        yield ops
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        for op in ops:
            op.close()


def install_crds_sync(ext: Any) -> None:
    """The committed CRDs, with the synchronous client (``ApiextensionsV1Api``), Established."""
    from kubernetes.client.rest import ApiException

    crd_dir = Path(__file__).resolve().parents[2] / "manifests" / "base" / "crds"
    names = []
    for path in sorted(crd_dir.glob("*.yaml")):
        crd = yamlfast.load(path.read_text())
        names.append(crd["metadata"]["name"])
        try:
            ext.create_custom_resource_definition(crd)
        except ApiException as exc:
            if exc.status != 409:
                raise
    deadline = time.monotonic() + 30
    for name in names:
        while True:
            conditions = ext.read_custom_resource_definition(name).status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                break
            assert time.monotonic() < deadline, f"CRD {name} not Established"
            time.sleep(0.2)
