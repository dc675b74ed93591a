"""The mutable scratchpad of one planning pass: what has been decided so far."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Generic, Literal

from msgspec import Struct, field

from jobcontroller.api.common import JobStatus
from jobcontroller.core.names import (
    REPLICA_TYPE_LABEL,
    expectation_key,
    is_controlled_by,
)
from jobcontroller.core.replicas import is_terminating
from jobcontroller.core.types import (
    POD,
    SERVICE,
    Action,
    DeleteObject,
    Event,
    FrameworkOf,
    JobMetric,
    JobT,
    Obj,
    Observed,
    Plan,
    PlanConfig,
)

__all__ = ["PlanContext", "aware"]

_PLURALS = {POD: "pods", SERVICE: "services"}

#: When a pass that ran out of budget looks again at the latest.
_TRUNCATED_REQUEUE_SECONDS = 1.0


def aware(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime (naive values are taken to be UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class PlanContext(Struct, Generic[JobT]):
    """One pass over a job of ``fw``'s kind: ``job`` is that framework's own model."""

    fw: FrameworkOf[JobT]
    job: JobT
    observed: Observed
    now: datetime
    """Exact and aware; status fields truncate it to seconds themselves."""
    config: PlanConfig
    status: JobStatus
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    metrics: list[JobMetric] = field(default_factory=list)
    timers: list[float] = field(default_factory=list)
    valid_spec: tuple[str, int] | None = None
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    """(kind, name) of objects whose name we need but which belong to someone else."""
    creation_blocked: tuple[str, str] | None = None
    """(reason, message) of creation failures that keep repeating but may pass (a quota):
    shown on the Created condition like a name conflict."""
    budget: int = 0
    """Creations and deletions this pass may still plan (``config.max_writes_per_reconcile``
    at the start; not positive there means no limit)."""
    planned_bytes: int = 0
    """Estimated bytes of the object bodies planned so far (``config.max_bytes_per_reconcile``
    bounds it)."""
    truncated: bool = False
    """The budget ran out with work left: the next pass (soon) carries on."""
    forced: set[str] = field(default_factory=set)
    """UIDs of pods on lost nodes: deleted with grace period 0, terminating or not."""
    _deleted: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.budget = self.config.max_writes_per_reconcile

    def spend(self, *, size: int = 0) -> bool:
        """Take one write, and ``size`` bytes of object bodies, from the pass's budgets; False
        (and the pass is marked truncated) when either is spent. Used before building an
        object, so what is not sent is never built.

        The byte budget keeps a pass of big objects (a TFJob's pods each carry a TF_CONFIG
        naming every replica) from holding hundreds of them at once: the pass stops once the
        bodies planned exceed it, though it always gets its first object."""
        counted = self.config.max_writes_per_reconcile > 0
        if counted and self.budget <= 0:
            self.truncated = True
            return False
        byte_limit = self.config.max_bytes_per_reconcile
        over = byte_limit > 0 and self.planned_bytes > 0 and self.planned_bytes + size > byte_limit
        if size > 0 and over:
            self.truncated = True
            return False
        if counted:
            self.budget -= 1
        self.planned_bytes += size
        return True

    @property
    def kind(self) -> str:
        return str(self.fw.model.KIND)

    def event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.events.append(Event(type=type_, reason=reason, message=message))

    def has_event(self, reason: str) -> bool:
        return any(event.reason == reason for event in self.events)

    def expectation(self, kind: str, rtype: str) -> str | None:
        plural = _PLURALS.get(kind)
        return expectation_key(job_key=self.job.key, rtype=rtype, plural=plural) if plural else None

    def delete(self, kind: str, obj: Obj, *, reason: str) -> bool:
        """Plan the deletion of an owned object once; objects already terminating are left to
        finish, except pods in :attr:`forced` (on a lost node nothing will ever finish them),
        which are force-deleted. True when a deletion was planned."""
        metadata = obj.get("metadata") or {}
        uid = str(metadata.get("uid") or "")
        forced = kind == POD and uid in self.forced
        if (is_terminating(obj) and not forced) or (kind, uid) in self._deleted or not self.spend():
            return False
        self._deleted.add((kind, uid))
        rtype = (metadata.get("labels") or {}).get(REPLICA_TYPE_LABEL)
        self.actions.append(
            DeleteObject(
                kind=kind,
                namespace=str(metadata.get("namespace") or self.job.namespace),
                name=str(metadata.get("name") or ""),
                uid=uid,
                expectation=self.expectation(kind, str(rtype)) if rtype else None,
                reason=reason,
                grace_period_seconds=0 if forced else None,
            )
        )
        return True

    def claimable(self, kind: str, name: str) -> bool:
        """Whether an object of this name may be created now.

        Another object with the name is never touched: if it is the job's own (the owned
        caches lag the lookup cache) we wait for it; if it is someone else's we record a
        conflict and leave the slot empty.
        """
        other = self.observed.lookup(kind, name)
        if other is None:
            return True
        if not is_controlled_by(other, uid=self.job.uid):
            self.conflicts.append((kind, name))
        return False

    def to_plan(self) -> Plan:
        if self.truncated:
            # Usually the informer events of this pass's writes queue the job again first;
            # the timer covers a pass whose writes were all skipped or failed.
            self.timers.append(_TRUNCATED_REQUEUE_SECONDS)
        return Plan(
            actions=tuple(self.actions),
            status=self.status,
            events=tuple(self.events),
            requeue_after=min(self.timers) if self.timers else None,
            metrics=tuple(self.metrics),
            valid_spec=self.valid_spec,
        )
