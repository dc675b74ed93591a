"""Job conditions with the anchor's rules, so every framework's status reads the same way.

The rules (kubeflow/common ``pkg/util/status.go``): once Failed is True nothing changes any more;
Running and Restarting replace each other; Succeeded or Failed turns Running to False; a
condition whose status and reason are unchanged is left alone, times included. The last rule is
what makes re-planning an unchanged job produce an identical status, so nothing is written.

Conditions are appended at the end when they change because the printed State column is the
type of the last condition.
"""

from __future__ import annotations

from datetime import UTC, datetime

from jobcontroller.api.common import (
    ConditionStatus,
    JobCondition,
    JobConditionType,
    JobStatus,
)

__all__ = [
    "REASON_CREATED",
    "REASON_FAILED",
    "REASON_FAILED_VALIDATION",
    "REASON_RESTARTING",
    "REASON_RESUMED",
    "REASON_RUNNING",
    "REASON_SUCCEEDED",
    "REASON_SUSPENDED",
    "REASON_TOLERATED_VALIDATION",
    "is_failed",
    "is_finished",
    "is_restarting",
    "is_running",
    "is_succeeded",
    "is_suspended",
    "new_reason",
    "parse_time",
    "set_condition",
    "to_utc_seconds",
]

# Suffixes; the full reason is ``<Kind><suffix>`` (util.NewReason), e.g. ``TFJobRunning``.
REASON_CREATED = "Created"
REASON_RUNNING = "Running"
REASON_RESTARTING = "Restarting"
REASON_SUCCEEDED = "Succeeded"
REASON_FAILED = "Failed"
REASON_SUSPENDED = "Suspended"
REASON_RESUMED = "Resumed"
REASON_FAILED_VALIDATION = "FailedValidation"
REASON_TOLERATED_VALIDATION = "ToleratedValidation"


def new_reason(kind: str, reason: str) -> str:
    """``TFJob`` + ``Running`` -> ``TFJobRunning``."""
    return f"{kind}{reason}"


def to_utc_seconds(value: datetime) -> datetime:
    """An aware UTC datetime with whole seconds, as metav1.Time stores it."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(microsecond=0)


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp as the apiserver writes it (``...Z``), aware UTC; None when it is
    missing or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def set_condition(
    status: JobStatus,
    *,
    cond_type: str,
    reason: str,
    message: str,
    now: datetime,
    value: bool = True,
) -> bool:
    """Set a condition (in place) following the anchor's rules; True when ``status`` changed."""
    if is_failed(status):
        return False
    wanted = ConditionStatus.TRUE if value else ConditionStatus.FALSE
    now = to_utc_seconds(now)
    current = status.condition(cond_type)
    if current is not None and current.status == wanted and current.reason == reason:
        return False
    transition = (
        current.last_transition_time
        if current is not None and current.status == wanted and current.last_transition_time
        else now
    )
    updated = JobCondition(
        type=cond_type,
        status=wanted,
        reason=reason,
        message=message,
        last_update_time=now,
        last_transition_time=transition,
    )
    kept: list[JobCondition] = []
    for cond in status.conditions:
        if cond.type == cond_type or _replaces(cond_type, cond.type):
            continue
        if (
            cond_type in (JobConditionType.SUCCEEDED, JobConditionType.FAILED)
            and cond.type == JobConditionType.RUNNING
            and cond.status == ConditionStatus.TRUE
        ):
            # The anchor flips the status but keeps the old times; a transition that does not
            # move lastTransitionTime misleads anyone measuring run time, so we move it.
            cond = cond.model_copy(
                update={
                    "status": ConditionStatus.FALSE,
                    "last_update_time": now,
                    "last_transition_time": now,
                }
            )
        kept.append(cond)
    kept.append(updated)
    status.conditions = kept
    return True


def _replaces(new_type: str, old_type: str) -> bool:
    pair = {JobConditionType.RUNNING, JobConditionType.RESTARTING}
    return new_type != old_type and new_type in pair and old_type in pair


def is_running(status: JobStatus) -> bool:
    return status.is_condition_true(JobConditionType.RUNNING)


def is_restarting(status: JobStatus) -> bool:
    return status.is_condition_true(JobConditionType.RESTARTING)


def is_succeeded(status: JobStatus) -> bool:
    return status.is_condition_true(JobConditionType.SUCCEEDED)


def is_failed(status: JobStatus) -> bool:
    return status.is_condition_true(JobConditionType.FAILED)


def is_suspended(status: JobStatus) -> bool:
    return status.is_condition_true(JobConditionType.SUSPENDED)


def is_finished(status: JobStatus) -> bool:
    return is_succeeded(status) or is_failed(status)
