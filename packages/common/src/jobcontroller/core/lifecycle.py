"""Job-level transitions: created, failed, finished (clean-up and TTL), suspended, resumed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from jobcontroller.api.common import CleanPodPolicy, JobCondition, JobConditionType, JobStatus
from jobcontroller.core.conditions import (
    REASON_CREATED,
    REASON_FAILED,
    REASON_RESUMED,
    REASON_SUCCEEDED,
    REASON_SUSPENDED,
    is_failed,
    is_restarting,
    is_running,
    is_succeeded,
    is_suspended,
    new_reason,
    set_condition,
    to_utc_seconds,
)
from jobcontroller.core.context import PlanContext
from jobcontroller.core.names import REPLICA_TYPE_LABEL
from jobcontroller.core.replicas import PHASE_PENDING, PHASE_RUNNING, phase
from jobcontroller.core.types import (
    POD,
    POD_GROUP,
    SERVICE,
    CreateObject,
    DeleteJob,
    Event,
    JobMetric,
    JobT,
    Obj,
    Plan,
)

__all__ = [
    "REASON_FAILED_CREATE",
    "REASON_RESOURCE_EXISTS",
    "created_message",
    "ensure_created",
    "fail",
    "fail_unplanned",
    "finish_transition",
    "plan_finished",
    "plan_suspended",
    "resume_if_suspended",
    "sync_conflict_condition",
]

#: Event and Created-condition reason while a name the job needs is held by a foreign object
#: (mpi-operator's reason for the same situation).
REASON_RESOURCE_EXISTS = "ErrResourceExists"

#: Prefix of the reason (``FailedCreatePod``...) when the API server keeps refusing an object.
REASON_FAILED_CREATE = "FailedCreate"


def created_message(kind: str, name: str) -> str:
    return f"{kind} {name} is created."


def ensure_created(ctx: PlanContext[JobT]) -> None:
    """The anchor sets Created in its create-event predicate; a level-triggered planner adds it
    whenever it is missing, which also covers jobs created while the operator was down."""
    if ctx.status.condition(JobConditionType.CREATED) is not None:
        return
    words = ctx.fw.lifecycle_words(ctx.job)
    reason = new_reason(ctx.kind, REASON_CREATED)
    if set_condition(
        ctx.status,
        cond_type=JobConditionType.CREATED,
        reason=reason,
        message=words.created,
        now=ctx.now,
    ):
        ctx.metrics.append(JobMetric.CREATED)
        if words.created_event:
            ctx.event("Normal", reason, words.created)


#: The endings of the Failed messages of a job stopped by its run policy (v1.9's words).
BACKOFF_LIMIT_REACHED = "has failed because it has reached the specified backoff limit"
DEADLINE_EXCEEDED = "has failed because it was active longer than specified deadline"


def backoff_limit_message(name: str) -> str:
    return f"Job {name} {BACKOFF_LIMIT_REACHED}"


def deadline_message(name: str) -> str:
    return f"Job {name} {DEADLINE_EXCEEDED}"


def stopped_by_run_policy(status: JobStatus) -> bool:
    """Failed by backoffLimit or activeDeadlineSeconds (read back from the condition, so a
    clean-up that must be retried knows it in every later plan too)."""
    cond = status.condition(JobConditionType.FAILED)
    if cond is None or cond.status != "True":
        return False
    message = cond.message or ""
    # ``in``: a whole-gang restart's message goes on to name the pod that failed last.
    return BACKOFF_LIMIT_REACHED in message or DEADLINE_EXCEEDED in message


def fail(
    ctx: PlanContext[JobT],
    *,
    reason: str,
    message: str,
    event_type: Literal["Normal", "Warning"] = "Normal",
) -> None:
    """Set Failed (once), with its completion time, metric and event."""
    if not set_condition(
        ctx.status, cond_type=JobConditionType.FAILED, reason=reason, message=message, now=ctx.now
    ):
        return
    if ctx.status.completion_time is None:
        ctx.status.completion_time = ctx.now
    ctx.metrics.append(JobMetric.FAILED)
    ctx.event(event_type, reason, message)


def _delete_pod_groups(ctx: PlanContext[JobT]) -> None:
    planned = False
    for group in ctx.observed.owned.get(POD_GROUP, ()):
        planned = ctx.delete(POD_GROUP, group, reason="job-terminated") or planned
    if planned:
        ctx.event("Normal", "JobTerminated", "Job has terminated; deleting its PodGroup")


def plan_finished(ctx: PlanContext[JobT]) -> None:
    """Clean up a Succeeded or Failed job per cleanPodPolicy, then apply its TTL.

    Runs on every plan of a finished job, so a deletion that failed is simply planned again.
    """
    status = ctx.status
    if status.completion_time is None:
        # The anchor refuses to clean up such a job (and retries forever); a finished job
        # without a completion time was finished now as far as we can tell.
        status.completion_time = ctx.now
    policy = ctx.job.run_policy.clean_pod_policy or CleanPodPolicy.NONE
    # A job stopped by its backoff limit or deadline stops its running pods whatever the
    # policy, as a batch/v1 Job does (they would otherwise run on, or crash-loop under
    # OnFailure, holding their resources); the policy then decides about finished pods.
    stop_running = stopped_by_run_policy(status)
    if policy != CleanPodPolicy.NONE or stop_running:
        removed: set[str] = set()
        for pod in ctx.observed.pods:
            # Pending counts as running: it would start running once scheduled.
            running = phase(pod) in (PHASE_RUNNING, PHASE_PENDING)
            if policy != CleanPodPolicy.ALL and not running:
                continue
            reason = f"cleanPodPolicy={policy}" if policy != CleanPodPolicy.NONE else "stopped"
            ctx.delete(POD, pod, reason=reason)
            removed.add(_name(pod))
        present = {_name(pod) for pod in ctx.observed.pods}
        for service in _replica_services(ctx):
            name = _name(service)
            # A Service only serves its same-named pod; with the pod gone it is useless.
            if policy == CleanPodPolicy.ALL or name in removed or name not in present:
                ctx.delete(SERVICE, service, reason=f"cleanPodPolicy={policy}")
    _delete_pod_groups(ctx)
    if is_succeeded(status):
        for replica in status.replica_statuses.values():
            if replica.active:
                replica.succeeded += replica.active
                replica.active = 0
    ttl = ctx.job.run_policy.ttl_seconds_after_finished
    if ttl is None or ctx.job.run_policy.suspend or status.completion_time is None:
        return
    if ctx.fw.delegates_run_policy(ctx.job):
        return  # the TTL is an owned object's (MPI's launcher Job); the job itself stays
    remaining = (status.completion_time - ctx.now).total_seconds() + ttl
    if remaining <= 0:
        ctx.actions.append(DeleteJob())
        ctx.metrics.append(JobMetric.DELETED)
    else:
        ctx.timers.append(remaining)


def finish_transition(ctx: PlanContext[JobT]) -> None:
    """Book-keeping when the framework's status rule has just finished the job: completion
    time, metric, event (unless the framework emitted one), and the finished clean-up in the
    same plan instead of one reconcile later. Pods and Services planned for creation in this
    pass are dropped: a finished job must not start new replicas."""
    status = ctx.status
    if status.completion_time is None:
        status.completion_time = ctx.now
    if is_succeeded(status):
        ctx.metrics.append(JobMetric.SUCCESSFUL)
        reason, cond_type = new_reason(ctx.kind, REASON_SUCCEEDED), JobConditionType.SUCCEEDED
    else:
        ctx.metrics.append(JobMetric.FAILED)
        reason, cond_type = new_reason(ctx.kind, REASON_FAILED), JobConditionType.FAILED
    cond = status.condition(cond_type)
    if not ctx.has_event(reason) and not (cond and cond.reason and ctx.has_event(cond.reason)):
        ctx.event("Normal", reason, (cond.message if cond else None) or reason)
    ctx.actions = [
        action
        for action in ctx.actions
        if not (isinstance(action, CreateObject) and action.kind in (POD, SERVICE))
    ]
    plan_finished(ctx)


def plan_suspended(ctx: PlanContext[JobT]) -> None:
    """Suspend: remove every pod, Service and the PodGroup regardless of cleanPodPolicy, so
    a queueing system (Kueue) gets the resources back; keep startTime."""
    for pod in ctx.observed.pods:
        ctx.delete(POD, pod, reason="suspended")
    for service in _replica_services(ctx):
        ctx.delete(SERVICE, service, reason="suspended")
    _delete_pod_groups(ctx)
    for replica in ctx.status.replica_statuses.values():
        if replica.active:
            replica.active = 0
    reason = new_reason(ctx.kind, REASON_SUSPENDED)
    words = ctx.fw.lifecycle_words(ctx.job)
    changed = False
    if is_running(ctx.status) or is_restarting(ctx.status) or words.running_false_when_suspended:
        # Setting Running (False) also retires a Restarting condition.
        changed |= set_condition(
            ctx.status,
            cond_type=JobConditionType.RUNNING,
            reason=reason,
            message=words.running_suspended,
            now=ctx.now,
            value=False,
        )
    if not is_suspended(ctx.status):
        changed |= set_condition(
            ctx.status,
            cond_type=JobConditionType.SUSPENDED,
            reason=reason,
            message=words.suspended,
            now=ctx.now,
        )
    # The anchor records this event on every reconcile of a suspended job; once is enough.
    if changed:
        ctx.event("Normal", reason, words.suspended)


def resume_if_suspended(ctx: PlanContext[JobT]) -> None:
    """Resume: the active deadline counts again from now."""
    if not is_suspended(ctx.status):
        return
    reason = new_reason(ctx.kind, REASON_RESUMED)
    message = ctx.fw.lifecycle_words(ctx.job).resumed
    if set_condition(
        ctx.status,
        cond_type=JobConditionType.SUSPENDED,
        reason=reason,
        message=message,
        now=ctx.now,
        value=False,
    ):
        ctx.status.start_time = ctx.now
        ctx.event("Normal", reason, message)


def sync_conflict_condition(ctx: PlanContext[JobT]) -> None:
    """Show name conflicts, and creations the API server keeps refusing for a reason that may
    pass, on the Created condition (in place, status stays True).

    A new condition type would become the printed State; Created is where a job waiting for
    its first pods sits, and its reason and message say what blocks it. The original reason
    and message come back once the conflict is gone.
    """
    if is_failed(ctx.status):
        return
    conditions = ctx.status.conditions
    index = next((i for i, c in enumerate(conditions) if c.type == JobConditionType.CREATED), None)
    if index is None:
        return
    current = conditions[index]
    if ctx.conflicts:
        kind, name = ctx.conflicts[0]
        message = (
            f'Resource "{name}" of Kind "{kind}" already exists and is not managed by '
            f"{ctx.kind} {ctx.job.key}"
        )
        if len(ctx.conflicts) > 1:
            message += f" (and {len(ctx.conflicts) - 1} more)"
        reason = REASON_RESOURCE_EXISTS
    elif ctx.creation_blocked is not None:
        reason, message = ctx.creation_blocked
    elif current.reason == REASON_RESOURCE_EXISTS or (current.reason or "").startswith(
        REASON_FAILED_CREATE
    ):
        reason = new_reason(ctx.kind, REASON_CREATED)
        message = ctx.fw.lifecycle_words(ctx.job).created
    else:
        return
    if current.reason == reason and current.message == message:
        return
    conditions[index] = JobCondition(
        type=current.type,
        status=current.status,
        reason=reason,
        message=message,
        last_update_time=to_utc_seconds(ctx.now),
        last_transition_time=current.last_transition_time,
    )
    if ctx.conflicts or ctx.creation_blocked is not None:
        ctx.event("Warning", reason, message)


def _replica_services(ctx: PlanContext[JobT]) -> list[Obj]:
    """The per-replica Services the base built (they carry a replica-type label); any other
    Service the job owns is its framework's to manage (MPI's job-wide headless Service)."""
    return [
        service
        for service in ctx.observed.services
        if REPLICA_TYPE_LABEL in ((service.get("metadata") or {}).get("labels") or {})
    ]


def _name(obj: dict[str, object]) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("name") or "") if isinstance(metadata, dict) else ""


def stored_status(raw_job: Mapping[str, Any]) -> JobStatus:
    """The job's status as stored, read without its spec (an empty one if unreadable)."""
    try:
        return JobStatus.model_validate(raw_job.get("status") or {})
    except ValueError:
        return JobStatus()


def fail_unplanned(
    *, kind: str, raw_job: Mapping[str, Any], reason: str, message: str, now: datetime
) -> Plan:
    """Fail a job from its stored object alone, without parsing or planning its spec (it may
    not parse, or may be what kills the planner): Created if missing, then Failed with
    ``reason`` and a Warning event, once."""
    status = stored_status(raw_job)
    name = str((raw_job.get("metadata") or {}).get("name") or "")
    metrics: list[JobMetric] = []
    events: list[Event] = []
    if status.condition(JobConditionType.CREATED) is None and set_condition(
        status,
        cond_type=JobConditionType.CREATED,
        reason=new_reason(kind, REASON_CREATED),
        message=created_message(kind, name),
        now=now,
    ):
        metrics.append(JobMetric.CREATED)
    if set_condition(
        status, cond_type=JobConditionType.FAILED, reason=reason, message=message, now=now
    ):
        status.completion_time = status.completion_time or now
        metrics.append(JobMetric.FAILED)
        events.append(Event(type="Warning", reason=reason, message=message))
    return Plan(status=status, events=tuple(events), metrics=tuple(metrics))
