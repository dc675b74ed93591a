"""A TrainJob's status, as Trainer v2.3.0's controller and jobset plugin keep it: the Suspended
condition from ``spec.suspend``, Complete and Failed from the JobSet's Completed and Failed
conditions (copied, reason, message and time included), ``jobsStatus`` from the JobSet's
``replicatedJobsStatus``, and the deadline (``activeDeadlineSeconds``) counted from the
TrainJob's creation or its last resumption.

Conditions follow ``meta.SetStatusCondition``: an existing condition keeps its transition time
unless its status changes; a new one is appended.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from msgspec import Struct, field

__all__ = [
    "COMPLETE",
    "DEADLINE_EXCEEDED",
    "FAILED",
    "SUSPENDED",
    "TrainJobStatus",
    "condition",
    "deadline",
    "rfc3339",
    "set_condition",
    "sync_from_jobset",
]

Obj = dict[str, Any]

SUSPENDED, COMPLETE, FAILED = "Suspended", "Complete", "Failed"
DEADLINE_EXCEEDED = "DeadlineExceeded"
SUSPENDED_MESSAGE = "TrainJob is suspended"
RESUMED_MESSAGE = "TrainJob is resumed"
DEADLINE_MESSAGE = "TrainJob exceeded its active deadline"


def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class TrainJobStatus(Struct):
    """A TrainJob's status as JSON, for the reconciler's status writer (a ``StatusDoc``):
    fields this operator does not set (``trainerStatus``) are kept as they were."""

    data: Obj = field(default_factory=dict)

    @classmethod
    def of(cls, trainjob: Obj) -> TrainJobStatus:
        return cls(copy.deepcopy(trainjob.get("status") or {}))

    @property
    def conditions(self) -> list[Obj]:
        conditions = self.data.get("conditions")
        if not isinstance(conditions, list):
            conditions = self.data["conditions"] = []
        return conditions

    def to_dict(self) -> Obj:
        out = dict(self.data)
        if not out.get("conditions"):
            out.pop("conditions", None)
        return out

    def is_condition_true(self, type_: str) -> bool:
        found = condition(self.data, type_)
        return found is not None and found.get("status") == "True"


def condition(status: Obj, type_: str) -> Obj | None:
    for cond in status.get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def set_condition(status: TrainJobStatus, new: Obj, *, now: dt.datetime) -> None:
    """``meta.SetStatusCondition``."""
    have = condition(status.data, str(new["type"]))
    if have is None:
        added = dict(new)
        if not added.get("lastTransitionTime"):
            added["lastTransitionTime"] = rfc3339(now)
        status.conditions.append(added)
        return
    if have.get("status") != new.get("status"):
        have["status"] = new["status"]
        have["lastTransitionTime"] = new.get("lastTransitionTime") or rfc3339(now)
    have["reason"] = new.get("reason", "")
    have["message"] = new.get("message", "")
    if new.get("observedGeneration"):
        have["observedGeneration"] = new["observedGeneration"]
    else:
        have.pop("observedGeneration", None)


def failed(reason: str, message: str) -> Obj:
    return {"type": FAILED, "status": "True", "reason": reason, "message": message}


def set_suspended(status: TrainJobStatus, *, suspend: bool, now: dt.datetime) -> None:
    """Suspended=True while ``spec.suspend``; Suspended=False (Resumed) once it is lifted."""
    if suspend:
        new = {"type": SUSPENDED, "status": "True", "reason": "Suspended"}
        set_condition(status, {**new, "message": SUSPENDED_MESSAGE}, now=now)
    elif status.is_condition_true(SUSPENDED):
        new = {"type": SUSPENDED, "status": "False", "reason": "Resumed"}
        set_condition(status, {**new, "message": RESUMED_MESSAGE}, now=now)


def sync_from_jobset(status: TrainJobStatus, jobset: Obj, *, now: dt.datetime) -> None:
    """Complete and Failed from the JobSet's Completed and Failed conditions, and the jobs'
    counts; a Failed condition for the deadline stays as it was."""
    deadline_failed = condition(status.data, FAILED)
    if deadline_failed is not None and deadline_failed.get("reason") != DEADLINE_EXCEEDED:
        deadline_failed = None
    deadline_failed = copy.deepcopy(deadline_failed)
    js_status = jobset.get("status") or {}
    for source, target in (("Completed", COMPLETE), ("Failed", FAILED)):
        found = condition(js_status, source)
        if found is not None and found.get("status") == "True":
            set_condition(status, {**found, "type": target}, now=now)
    counts = [
        {
            "name": item.get("name", ""),
            **{k: int(item.get(k) or 0) for k in ("ready", "succeeded", "failed", "active")},
            "suspended": int(item.get("suspended") or 0),
        }
        for item in js_status.get("replicatedJobsStatus") or ()
        if isinstance(item, dict)
    ]
    if counts:
        status.data["jobsStatus"] = counts
    else:
        status.data.pop("jobsStatus", None)
    if deadline_failed is not None:
        set_condition(status, deadline_failed, now=now)


def deadline(trainjob: Obj, status: TrainJobStatus) -> dt.datetime | None:
    """When the TrainJob's active deadline passes; None when it has none or it does not run
    (finished or suspended)."""
    spec = trainjob.get("spec") or {}
    seconds = int(spec.get("activeDeadlineSeconds") or 0)
    if seconds <= 0 or spec.get("suspend"):
        return None
    if status.is_condition_true(COMPLETE) or status.is_condition_true(FAILED):
        return None
    start = parse_time((trainjob.get("metadata") or {}).get("creationTimestamp"))
    suspended = condition(status.data, SUSPENDED)
    if suspended is not None and suspended.get("status") == "False":
        start = parse_time(suspended.get("lastTransitionTime")) or start
    if start is None:
        return None
    return start + dt.timedelta(seconds=seconds)
