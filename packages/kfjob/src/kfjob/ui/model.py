"""What the pages show about a job, derived from the objects as the API serves them (plain
dicts): no I/O, no clock reads (``now`` is an argument), so every rule here is unit-tested.

The v1 kinds (``kfjob.kinds``) and Trainer's TrainJob differ in where they keep things: the
replica counts (``status.replicaStatuses`` per replica type, or ``status.jobsStatus`` per
replicated job of the TrainJob's JobSet), the suspend flag (``spec.runPolicy.suspend`` or
``spec.suspend``) and the label on their pods. :class:`ServedKind` carries those differences, so
the rest of the UI handles every kind alike.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kfjob.client import LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE, parse_time
from kfjob.kinds import KINDS, JobKind
from kfjob.tables import human  # the CLI's durations, so the page reads as `kfjob get`

__all__ = [
    "CANDIDATES",
    "TRAINJOB",
    "V1_KINDS",
    "Condition",
    "JobRow",
    "Permission",
    "PodRow",
    "ReplicaRow",
    "ServedKind",
    "age",
    "conditions",
    "event_rows",
    "exit_info",
    "human",
    "job_row",
    "job_state",
    "pod_row",
    "progress",
    "replica_rows",
    "restarts",
]

Obj = dict[str, Any]

LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"


@dataclass(frozen=True, slots=True)
class ServedKind:
    """A job kind the UI can show: where the API serves it and where its parts are."""

    kind: str
    group: str
    version: str
    plural: str
    pod_label: str
    """The label whose value is the job's name on each of its pods."""
    suspend_path: tuple[str, ...]
    """Where in the spec the suspend flag lives."""
    job_kind: JobKind | None = None
    """The v1 kind's operator (offline render, default container); None for TrainJob."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def suspend_patch(self, value: bool) -> Obj:
        """The merge patch that sets the suspend flag."""
        patch: Obj = {}
        node = patch
        for key in self.suspend_path[:-1]:
            node = node.setdefault(key, {})
        node[self.suspend_path[-1]] = value
        return patch

    def suspended(self, job: Mapping[str, Any]) -> bool:
        node: Any = job
        for key in self.suspend_path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node is True


def _v1(kind: JobKind) -> ServedKind:
    return ServedKind(
        kind=kind.kind,
        group=kind.group,
        version=kind.version,
        plural=kind.plural,
        pod_label=LABEL_JOB_NAME,
        suspend_path=("spec", "runPolicy", "suspend"),
        job_kind=kind,
    )


V1_KINDS: tuple[ServedKind, ...] = tuple(_v1(k) for k in KINDS)
#: Kubeflow Trainer's TrainJob: its JobSet carries the TrainJob's name, and so do its pods.
TRAINJOB = ServedKind(
    kind="TrainJob",
    group="trainer.kubeflow.org",
    version="v1alpha1",
    plural="trainjobs",
    pod_label=LABEL_JOBSET_NAME,
    suspend_path=("spec", "suspend"),
)
CANDIDATES: tuple[ServedKind, ...] = (*V1_KINDS, TRAINJOB)


@dataclass(frozen=True, slots=True)
class Permission:
    """Whether the user may do something, as the API server answered (``allowed`` None: it
    could not be asked, so the page offers the action and the API server decides)."""

    allowed: bool | None
    why: str = ""
    """Said when not allowed, or not known."""


def _status(job: Mapping[str, Any]) -> Obj:
    status = job.get("status")
    return status if isinstance(status, dict) else {}


def _meta(obj: Mapping[str, Any]) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


#: A TrainJob's conditions, strongest first: its state is the first of them that is True.
TRAINJOB_STATES = ("Failed", "Complete", "Suspended")


def job_state(kind: ServedKind, job: Mapping[str, Any]) -> str:
    """The job's state as ``kfjob get`` shows it: the type of its last True condition
    (``Created``, ``Running``, ``Restarting``, ``Succeeded``, ``Failed``, ``Suspended``),
    ``Pending`` before any. A TrainJob has only Complete, Failed and Suspended, kept in place
    (a resumed TrainJob's Suspended turns False where it was): the first True of Failed,
    Complete, Suspended; else ``Running`` while its JobSet has active jobs, else ``Pending``."""
    conds = [c for c in _status(job).get("conditions") or [] if isinstance(c, dict)]
    if kind.job_kind is not None:
        for cond in reversed(conds):
            if cond.get("status") == "True" and cond.get("type"):
                return str(cond["type"])
        return "Pending"
    true = {c.get("type") for c in conds if c.get("status") == "True"}
    for state in TRAINJOB_STATES:
        if state in true:
            return state
    if any(
        _int(s.get("active")) for s in _status(job).get("jobsStatus") or [] if isinstance(s, dict)
    ):
        return "Running"
    return "Pending"


def _counts(kind: ServedKind, job: Mapping[str, Any]) -> tuple[int, int, int]:
    status = _status(job)
    if kind.job_kind is None:
        parts: Iterable[Any] = status.get("jobsStatus") or []
    else:
        parts = (status.get("replicaStatuses") or {}).values()
    items = [p for p in parts if isinstance(p, dict)]
    return (
        sum(_int(p.get("active")) for p in items),
        sum(_int(p.get("succeeded")) for p in items),
        sum(_int(p.get("failed")) for p in items),
    )


def progress(kind: ServedKind, job: Mapping[str, Any]) -> str:
    """What the job reports of its progress: its ``trainerStatus`` (percentage and time left;
    a TrainJob's, or a v1 job's where the operator serves progress); empty when none."""
    trainer = _status(job).get("trainerStatus")
    if not isinstance(trainer, dict):
        return ""
    parts = []
    pct = trainer.get("progressPercentage")
    if isinstance(pct, int):
        parts.append(f"{pct}%")
    left = trainer.get("estimatedRemainingSeconds")
    if isinstance(left, int):
        parts.append(f"{human(left)} left")
    return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class JobRow:
    """One row of the jobs page."""

    kind: str
    plural: str
    namespace: str
    name: str
    state: str
    created: str
    """creationTimestamp as the API wrote it (the page turns it into an age)."""
    active: int
    succeeded: int
    failed: int
    restarts: int
    progress: str

    @property
    def key(self) -> str:
        return f"{self.plural}/{self.namespace}/{self.name}"


def job_row(kind: ServedKind, job: Mapping[str, Any], *, restarts: int = 0) -> JobRow:
    meta = _meta(job)
    active, succeeded, failed = _counts(kind, job)
    return JobRow(
        kind=kind.kind,
        plural=kind.plural,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        state=job_state(kind, job),
        created=str(meta.get("creationTimestamp") or ""),
        active=active,
        succeeded=succeeded,
        failed=failed,
        restarts=restarts,
        progress=progress(kind, job),
    )


def restarts(pod: Mapping[str, Any]) -> int:
    """Container restarts of a pod, init containers included (kubectl's RESTARTS)."""
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    total = 0
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in (status or {}).get(key) or ():
            if isinstance(cs, dict):
                total += _int(cs.get("restartCount"))
    return total


def exit_info(pod: Mapping[str, Any]) -> tuple[str, str]:
    """The last exit code and reason of the pod's containers (a non-zero one first)."""
    code, reason = "", ""
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    for cs in (status or {}).get("containerStatuses") or ():
        state = cs.get("state") or {}
        term = state.get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if term and (not code or term.get("exitCode")):
            code, reason = str(term.get("exitCode")), str(term.get("reason") or "")
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") and not reason:
            reason = str(waiting["reason"])
    return code, reason


@dataclass(frozen=True, slots=True)
class PodRow:
    name: str
    replica: str
    phase: str
    node: str
    restarts: int
    exit_code: str
    reason: str
    created: str
    containers: tuple[str, ...]


def pod_row(pod: Mapping[str, Any]) -> PodRow:
    meta = _meta(pod)
    labels = meta.get("labels") or {}
    rtype = labels.get(LABEL_REPLICA_TYPE) or labels.get(LABEL_JOBSET_REPLICATED_JOB) or ""
    index = labels.get(LABEL_REPLICA_INDEX) or labels.get(LABEL_JOBSET_JOB_INDEX) or ""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    code, reason = exit_info(pod)
    phase = str((status or {}).get("phase") or "Pending")
    if meta.get("deletionTimestamp"):
        phase = "Terminating"
    return PodRow(
        name=str(meta.get("name") or ""),
        replica=f"{rtype} {index}".strip(),
        phase=phase,
        node=str((spec or {}).get("nodeName") or ""),
        restarts=restarts(pod),
        exit_code=code,
        reason=reason or str((status or {}).get("reason") or ""),
        created=str(meta.get("creationTimestamp") or ""),
        containers=tuple(
            str(c.get("name"))
            for group in ("containers", "initContainers")
            for c in (spec or {}).get(group) or ()
            if isinstance(c, dict) and c.get("name")
        ),
    )


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    name: str
    wanted: str
    active: int
    succeeded: int
    failed: int


def replica_rows(kind: ServedKind, job: Mapping[str, Any]) -> list[ReplicaRow]:
    """Per replica type (v1) or replicated job (TrainJob): wanted and the status counts."""
    status = _status(job)
    if kind.job_kind is None:
        return [
            ReplicaRow(
                name=str(s.get("name") or ""),
                wanted="",
                active=_int(s.get("active")),
                succeeded=_int(s.get("succeeded")),
                failed=_int(s.get("failed")),
            )
            for s in status.get("jobsStatus") or []
            if isinstance(s, dict)
        ]
    spec = job.get("spec") if isinstance(job.get("spec"), dict) else {}
    specs: Obj = next(
        (v for k, v in (spec or {}).items() if k.endswith("ReplicaSpecs") and isinstance(v, dict)),
        {},
    )
    counts = status.get("replicaStatuses") or {}
    rows = []
    for rtype in [*specs, *(k for k in counts if k not in specs)]:
        rspec = specs.get(rtype) if isinstance(specs.get(rtype), dict) else {}
        wanted = (rspec or {}).get("replicas")
        st = counts.get(rtype) if isinstance(counts.get(rtype), dict) else {}
        rows.append(
            ReplicaRow(
                name=str(rtype),
                wanted=str(wanted if isinstance(wanted, int) else (1 if rspec else "")),
                active=_int((st or {}).get("active")),
                succeeded=_int((st or {}).get("succeeded")),
                failed=_int((st or {}).get("failed")),
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    when: str


def conditions(job: Mapping[str, Any]) -> list[Condition]:
    """The job's conditions, oldest transition first (a timeline)."""
    out = [
        Condition(
            type=str(c.get("type") or ""),
            status=str(c.get("status") or ""),
            reason=str(c.get("reason") or ""),
            message=str(c.get("message") or ""),
            when=str(c.get("lastTransitionTime") or c.get("lastUpdateTime") or ""),
        )
        for c in _status(job).get("conditions") or []
        if isinstance(c, dict)
    ]
    return sorted(out, key=lambda c: c.when)  # stable: the operator's order among equals


def age(created: str, *, now: dt.datetime) -> str:
    when = parse_time(created)
    return human((now - when).total_seconds()) if when else "-"


def event_rows(events: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str, str, str, int]]:
    """(time, type, reason, object, message, count) of each event, oldest first."""
    rows = []
    for ev in events:
        obj = ev.get("involvedObject") or {}
        when = str(
            ev.get("lastTimestamp") or ev.get("eventTime") or _meta(ev).get("creationTimestamp")
        )
        rows.append(
            (
                when,
                str(ev.get("type") or ""),
                str(ev.get("reason") or ""),
                f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}",
                str(ev.get("message") or ""),
                _int(ev.get("count")) or 1,
            )
        )
    return sorted(rows, key=lambda r: r[0])
