"""The job's state follows a child batch Job: a launcher whose end is the job's end.

An MPIJob works so (mpi-operator v0.8): its launcher Job runs ``mpirun`` and the MPIJob
succeeds or fails when that Job does, with the Job's reason; retries, the deadline and the TTL
are the Job's. A framework whose job ends the same way declares its child Job as deciding
(``batch_job_child(..., rtype=..., decides=True)``), and on every reconcile in which that Job
exists the planner applies this rule before ``update_status`` runs:

- the Job's replica type is counted from the Job: active, its pods that are Running (none once
  it has finished); succeeded, 1 once it is Complete; failed, the Job's own count;
- once the Job has finished, the job's pod replica types count zero: their pods never exit
  (workers serve the launcher until it is done) and are being deleted;
- unless the job is suspended, the Job's Complete condition is the job's Succeeded (completion
  time the Job's) and its Failed the job's Failed, with the Job's reason and message. For
  BackoffLimitExceeded the last failed pod's reason and message are appended, since the Job's
  message only says the limit was reached.

A job already finished keeps the counts last written for the Job's replica type.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from jobcontroller.api.common import JobConditionType, JobModel, JobStatus, ReplicaStatus
from jobcontroller.core.batchjob import JOB, batch_job_condition, batch_job_done
from jobcontroller.core.childspec import Child
from jobcontroller.core.conditions import (
    REASON_FAILED,
    REASON_SUCCEEDED,
    is_finished,
    new_reason,
    parse_time,
    set_condition,
)
from jobcontroller.core.replicas import PHASE_FAILED, PHASE_RUNNING, phase, pod_reason
from jobcontroller.core.types import POD, Event, Obj, Observed

__all__ = ["follow_batch_jobs"]

_BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
_MESSAGE_LIMIT = 1024  # an Event's note limit


def follow_batch_jobs(
    job: JobModel[Any],
    status: JobStatus,
    children: Sequence[Child],
    observed: Observed,
    *,
    pod_rtypes: Sequence[str],
    now: datetime,
) -> list[Event]:
    """Apply the rule for each deciding child Job that exists (to ``status``, in place);
    returns the events to record."""
    events: list[Event] = []
    for child in children:
        if not child.decides or child.kind != JOB or child.replica_type is None:
            continue
        current = observed.owned_named(JOB, child.name)
        if current is None:
            continue
        if batch_job_done(current):
            for rtype in pod_rtypes:
                status.replica_statuses[rtype] = ReplicaStatus()
        if is_finished(status):
            continue
        uid = str((current.get("metadata") or {}).get("uid") or "")
        pods = observed.controlled_by(POD, uid)
        counts = _counts(current, pods)
        if status.replica_statuses.get(child.replica_type) != counts:
            status.replica_statuses[child.replica_type] = counts
        if not job.run_policy.suspend:
            events += _verdict(job, status, current, pods, now=now)
    return events


def _counts(current: Obj, pods: Sequence[Obj]) -> ReplicaStatus:
    done = batch_job_done(current)
    return ReplicaStatus(
        active=0 if done else sum(1 for pod in pods if phase(pod) == PHASE_RUNNING),
        succeeded=1 if batch_job_condition(current, "Complete") is not None else 0,
        failed=int((current.get("status") or {}).get("failed") or 0),
    )


def _verdict(
    job: JobModel[Any], status: JobStatus, current: Obj, pods: Sequence[Obj], *, now: datetime
) -> list[Event]:
    event_type: Literal["Normal", "Warning"]
    if batch_job_condition(current, "Complete") is not None:
        reason = new_reason(job.KIND, REASON_SUCCEEDED)
        message = f"{job.KIND} {job.key} successfully completed."
        if status.completion_time is None:
            completed = (current.get("status") or {}).get("completionTime")
            status.completion_time = parse_time(completed) or now
        cond_type, event_type = JobConditionType.SUCCEEDED, "Normal"
    else:
        failed = batch_job_condition(current, "Failed")
        if failed is None:
            return []
        reason, message = _failure(job, failed, pods)
        if status.completion_time is None:
            status.completion_time = now
        cond_type, event_type = JobConditionType.FAILED, "Warning"
    if set_condition(status, cond_type=cond_type, reason=reason, message=message, now=now):
        return [Event(event_type, reason, message)]
    return []


def _failure(job: JobModel[Any], condition: Obj, pods: Sequence[Obj]) -> tuple[str, str]:
    """Reason and message of a failed Job (BackoffLimitExceeded, DeadlineExceeded...). The
    last failed pod's reason is appended only when it has one (mpi-operator leaves a dangling
    ``/``)."""
    reason = str(condition.get("reason") or new_reason(job.KIND, REASON_FAILED))
    message = str(condition.get("message") or f"{job.KIND} {job.key} has failed")
    failed = [pod for pod in pods if phase(pod) == PHASE_FAILED]
    if reason == _BACKOFF_LIMIT_EXCEEDED and failed:
        last = max(failed, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp")))
        if pod_reason(last):
            reason += "/" + pod_reason(last)
        pod_message = str((last.get("status") or {}).get("message") or "")
        if pod_message:
            message += ": " + pod_message
    if len(message) > _MESSAGE_LIMIT:
        message = message[: _MESSAGE_LIMIT - 3] + "..."
    return reason, message
