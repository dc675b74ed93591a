"""A batch/v1 Job as a child of a training job: a replica that runs to completion (a
launcher, a data-preparation step), kept by the base (core/children.py).

The Job follows its parent: it is suspended while the job is (Kueue, or a user, parked it),
resumed with it, and stopped (suspended: its pods go, the Job and its status stay) when the job
finishes while it still runs under cleanPodPolicy Running or All. A finished job never creates
it. Its counts are the replica type's status, read back on every reconcile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobcontroller.api.common import CleanPodPolicy, JobModel, JobStatus, ReplicaStatus
from jobcontroller.api.deepcopy import deep_copy
from jobcontroller.core.childspec import Child
from jobcontroller.core.conditions import is_finished
from jobcontroller.core.gang import GANG_GENERATION_ANNOTATION, gang_generation, restart_all
from jobcontroller.core.types import Obj, Observed

__all__ = [
    "JOB",
    "batch_job_child",
    "batch_job_condition",
    "batch_job_done",
    "child_replica_statuses",
    "run_policy_fields",
]

JOB = "Job"


def batch_job_condition(obj: Obj, cond_type: str) -> Obj | None:
    """A batch Job's condition of ``cond_type`` (Complete, Failed...) when it is True."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if (
            isinstance(cond, dict)
            and cond.get("type") == cond_type
            and cond.get("status") == "True"
        ):
            return cond
    return None


def batch_job_done(obj: Obj) -> bool:
    """Whether a batch Job has finished (a Complete or Failed condition that is True)."""
    return any(batch_job_condition(obj, t) is not None for t in ("Complete", "Failed"))


#: What a queueing system (Kueue) may change on a suspended Job's pod template before it
#: starts (KEP-2926), brought up to date when the Job is resumed; Kubernetes accepts these
#: only until the Job has started. Maps under ``_PRUNED`` lose the keys no longer wanted.
_SCHEDULING_DIRECTIVES = (
    "spec.template.metadata.labels",
    "spec.template.metadata.annotations",
    "spec.template.spec.nodeSelector",
    "spec.template.spec.tolerations",
    "spec.template.spec.schedulingGates",
)
_PRUNED = frozenset({"spec.template.spec.nodeSelector"})


def batch_job_child(
    job: JobModel[Any],
    observed: Observed,
    status: JobStatus,
    *,
    name: str,
    spec: Obj | Callable[[], Obj],
    rtype: str | None = None,
    metadata: Obj | None = None,
    create: bool = True,
    hold: bool = False,
    decides: bool = False,
    carries_run_policy: bool = False,
) -> Child:
    """The Job ``name`` with ``spec`` (its template, backoffLimit...; ``suspend`` is the
    base's), running replica ``rtype`` (its counts become that type's status; None when the
    framework reads the Job itself). ``metadata``: labels and annotations of its own.
    ``create``: False while it must not be created yet (its mounts are missing); ``hold``:
    keep a suspended Job suspended even though the job runs (it waits for its workers);
    ``decides``: the job's state follows this Job (core/followjob.py; ``rtype`` required);
    ``carries_run_policy``: the Job enforces the job's runPolicy (:func:`run_policy_fields`;
    the framework's ``delegates_run_policy`` says so too)."""
    current = observed.owned_named(JOB, name)
    finished = is_finished(status)
    done = current is not None and batch_job_done(current)
    stop = (
        finished
        and job.run_policy.clean_pod_policy in (CleanPodPolicy.RUNNING, CleanPodPolicy.ALL)
        and current is not None
        and not done
    )
    now_suspended = bool(((current or {}).get("spec") or {}).get("suspend"))
    suspend = bool(job.run_policy.suspend) or stop or (hold and now_suspended)
    drift: tuple[str, ...] = ("spec.suspend",)
    if done or (finished and not stop):
        drift = ()  # a finished Job, or a finished job's, is left as it is
    elif (
        now_suspended and not suspend and not ((current or {}).get("status") or {}).get("startTime")
    ):
        drift += _SCHEDULING_DIRECTIVES
    if callable(spec):
        # Built only where it can be read: a creation, or a template brought up to date.
        spec = spec() if current is None or len(drift) > 1 else {}
    body: Obj = {
        "apiVersion": "batch/v1",
        "kind": JOB,
        "metadata": deep_copy(metadata or {}),
        "spec": {**deep_copy(spec), "suspend": suspend},
    }
    if carries_run_policy:
        body["spec"] = {**run_policy_fields(job), **body["spec"]}
        if restart_all(job):
            # The generation it belongs to: a whole-gang restart replaces it (core/gang.py).
            annotations = body["metadata"].setdefault("annotations", {})
            annotations[GANG_GENERATION_ANNOTATION] = str(gang_generation(job))
    return Child(
        kind=JOB,
        name=name,
        body=body,
        drift=drift,
        prune=_PRUNED,
        create=create and not finished,
        replica_type=rtype,
        decides=decides,
    )


def run_policy_fields(job: JobModel[Any]) -> Obj:
    """The Job spec fields that make a child Job enforce the job's runPolicy: its
    backoffLimit, activeDeadlineSeconds and ttlSecondsAfterFinished, those it sets. Under a
    whole-gang restart backoffLimit is 0: a failed pod fails the Job at once, and the base
    restarts the gang, counting the restarts against backoffLimit itself."""
    policy = job.run_policy
    fields: Obj = {}
    if policy.ttl_seconds_after_finished is not None:
        fields["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if policy.active_deadline_seconds is not None:
        fields["activeDeadlineSeconds"] = policy.active_deadline_seconds
    if restart_all(job):
        fields["backoffLimit"] = 0
    elif policy.backoff_limit is not None:
        fields["backoffLimit"] = policy.backoff_limit
    return fields


def child_replica_statuses(
    children: Sequence[Child], observed: Observed
) -> Mapping[str, ReplicaStatus]:
    """The replica status of each batch Job child that exists, from its counts (a deciding
    one's are its rule's: core/followjob.py)."""
    statuses: dict[str, ReplicaStatus] = {}
    for child in children:
        if child.replica_type is None or child.kind != JOB or child.decides:
            continue
        current = observed.owned_named(JOB, child.name)
        if current is None:
            continue
        counts = current.get("status") or {}
        statuses[child.replica_type] = ReplicaStatus(
            active=int(counts.get("active") or 0),
            succeeded=int(counts.get("succeeded") or 0),
            failed=int(counts.get("failed") or 0),
        )
    return statuses
