"""Whole-gang restart (``runPolicy.restartScope: All``): one retryable failure restarts every pod.

Distributed training rarely survives one lost rank: the others hang in a collective until a
timeout. Under ``restartScope: All`` a pod failure that its replica's restartPolicy would retry
(core/restart.py: OnFailure and Always on any failure, ExitCode on exit codes >= 128) deletes
and recreates the whole gang: every pod of the job, plus what the framework names with
:meth:`~jobcontroller.core.types.FrameworkOf.gang_objects` (MPI's launcher Job). Each pod is
created with ``restartPolicy: Never`` so that the kubelet never restarts one rank in place.

The plan stays pure and idempotent because the restart lives in observed state, never in
memory:

``training.kubeflow.org/gang-restart`` (on the job)
    JSON ``{"generation": n, "pod": ..., "uid": ..., "replicaType": ..., "exitCode": ...,
    "reason": ...}``: n gang restarts were ordered, the last because of that pod.
``training.kubeflow.org/gang-generation`` (on every pod, and on the framework's gang objects)
    the generation the object was created in (absent: 0).

A gang restart is two passes. The first, seeing a retryable failure among pods of the current
generation, only patches the job: generation n+1, the failing pod, and the backoff ledger's
``restart-count`` + 1 (so backoffLimit counts gang restarts, not pods). Nothing is deleted
before that patch is stored. Every later pass that sees an object of an older generation knows
a gang restart is under way: it deletes those objects and creates nothing (no pod, no framework
object, no status rule) until all of them are gone; then the slots are empty and the usual
plan creates the new gang in generation n+1. Replacement pods carry n+1 and are never taken for
old ones; a crash or a re-plan at any point repeats at most an idempotent step (the same patch,
the same deletions with UID preconditions). The PodGroup, Services, ConfigMaps and Secrets stay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from msgspec import Struct

from jobcontroller.api.common import JobConditionType, JobModel, RestartScope
from jobcontroller.core.conditions import (
    REASON_FAILED,
    REASON_RESTARTING,
    new_reason,
    set_condition,
)
from jobcontroller.core.context import PlanContext
from jobcontroller.core.lifecycle import BACKOFF_LIMIT_REACHED, fail
from jobcontroller.core.names import RESTART_COUNT_ANNOTATION
from jobcontroller.core.replicas import (
    NOT_TERMINATED_EXIT_CODE,
    PHASE_FAILED,
    exit_code_of,
    finished_at,
    is_terminating,
    phase,
    pod_reason,
    terminated_state,
)
from jobcontroller.core.restart import FailedPodVerdict, RestartLedger, failed_pod_verdict
from jobcontroller.core.types import POD, JobMetric, JobT, Obj, PatchObject, ReplicaPods

__all__ = [
    "GANG_GENERATION_ANNOTATION",
    "GANG_RESTART_ANNOTATION",
    "GangRestart",
    "gang_generation",
    "object_generation",
    "plan_gang",
    "restart_all",
]

GANG_RESTART_ANNOTATION = "training.kubeflow.org/gang-restart"
GANG_GENERATION_ANNOTATION = "training.kubeflow.org/gang-generation"


def restart_all(job: JobModel[Any]) -> bool:
    """Whether the job asks for whole-gang restarts."""
    return job.run_policy.restart_scope == RestartScope.ALL


class GangRestart(Struct, frozen=True):
    """The last gang restart ordered for a job (its ``gang-restart`` annotation)."""

    generation: int = 0
    pod: str = ""
    uid: str = ""
    replica_type: str = ""
    exit_code: int | None = None
    reason: str = ""

    @classmethod
    def of(cls, job: JobModel[Any]) -> GangRestart:
        """Tolerant: a missing or mangled annotation reads as generation 0."""
        try:
            raw = json.loads(job.annotations.get(GANG_RESTART_ANNOTATION, "{}"))
        except ValueError:
            raw = {}
        if not isinstance(raw, dict):
            raw = {}
        try:
            generation = max(int(raw.get("generation", 0)), 0)
        except (TypeError, ValueError):
            generation = 0
        code = raw.get("exitCode")
        return cls(
            generation=generation,
            pod=str(raw.get("pod") or ""),
            uid=str(raw.get("uid") or ""),
            replica_type=str(raw.get("replicaType") or ""),
            exit_code=code if isinstance(code, int) else None,
            reason=str(raw.get("reason") or ""),
        )

    def annotation(self) -> str:
        body: dict[str, Any] = {
            "generation": self.generation,
            "pod": self.pod,
            "uid": self.uid,
            "replicaType": self.replica_type,
            "reason": self.reason,
        }
        if self.exit_code is not None:
            body["exitCode"] = self.exit_code
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    def failure(self) -> str:
        """``pod x (Worker) failed with exit code 137 (Error)``."""
        what = f"pod {self.pod}" + (f" ({self.replica_type})" if self.replica_type else "")
        how = f"exit code {self.exit_code}" if self.exit_code is not None else "no exit code"
        return f"{what} failed with {how}" + (f" ({self.reason})" if self.reason else "")


def gang_generation(job: JobModel[Any]) -> int:
    """The generation new pods (and gang objects) of ``job`` are created in."""
    return GangRestart.of(job).generation


def object_generation(obj: Obj) -> int:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    try:
        return max(int(annotations.get(GANG_GENERATION_ANNOTATION, "0")), 0)
    except (TypeError, ValueError):
        return 0


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _pod_reason(pod: Obj, container: str | None) -> str:
    """Why the pod failed: the container's terminated reason (Error, OOMKilled), else the
    pod's (Evicted, DeadlineExceeded)."""
    terminated = terminated_state(pod, container=container) or {}
    return str(terminated.get("reason") or pod_reason(pod))


class _Failure(Struct, frozen=True):
    rtype: str
    pod: Obj
    verdict: FailedPodVerdict
    container: str | None


def plan_gang(ctx: PlanContext[JobT], replicas: Mapping[str, ReplicaPods]) -> bool:
    """The failure handling of a ``restartScope: All`` job, in place of the per-pod restarts.

    Returns False when the pass must stop here: the job failed (permanent exit code, backoff
    limit), a gang restart was just ordered, or one is under way (old members still exist).
    True lets the usual plan go on (create missing pods, framework objects, status rule).
    """
    job = ctx.job
    record = GangRestart.of(job)
    current = record.generation
    objects = ctx.fw.gang_objects(ctx.job, ctx.observed)
    extra_pods = ctx.fw.gang_pods(ctx.job, ctx.observed)
    stale_pods = [pod for pod in ctx.observed.pods if object_generation(pod) < current]
    stale_objects = [(kind, obj) for kind, obj in objects if object_generation(obj) < current]
    stale_extra = [pod for _, pod in extra_pods if object_generation(pod) < current]
    if stale_pods or stale_objects or stale_extra:
        for pod in stale_pods:
            ctx.delete(POD, pod, reason="gang-restart")
        for kind, obj in stale_objects:
            ctx.delete(kind, obj, reason="gang-restart")
        # The framework's pods (the launcher's) go with their owner (background deletion).
        _restarting(ctx, record)
        return False

    failures = _failures(ctx, replicas, extra_pods)
    permanent = [f for f in failures if f.verdict == FailedPodVerdict.FAIL_JOB]
    if permanent:
        message = f'job "{job.name}" is failing because "{permanent[0].rtype}" replica(s) failed.'
        fail(ctx, reason=new_reason(ctx.kind, REASON_FAILED), message=message, event_type="Warning")
        return False
    retry = [f for f in failures if f.verdict == FailedPodVerdict.RESTART]
    if not retry:
        return True
    first = min(retry, key=lambda f: (finished_at(f.pod, container=f.container), _name(f.pod)))
    code = exit_code_of(first.pod, container=first.container)
    # Past every generation seen, should the job's record have been edited or lost: the old
    # gang must read as older than the new one.
    seen = [object_generation(pod) for pod in ctx.observed.pods]
    seen += [object_generation(obj) for _, obj in [*objects, *extra_pods]]
    trigger = GangRestart(
        generation=max([current, *seen]) + 1,
        pod=_name(first.pod),
        uid=_uid(first.pod),
        replica_type=first.rtype,
        exit_code=None if code == NOT_TERMINATED_EXIT_CODE else code,
        reason=_pod_reason(first.pod, first.container),
    )
    ledger = RestartLedger.from_annotations(job.annotations)
    limit = job.run_policy.backoff_limit
    if limit is not None and ledger.count >= limit:
        message = (
            f"Job {job.name} {BACKOFF_LIMIT_REACHED}: {trigger.failure()} after "
            f"{ledger.count} whole-gang restart(s), and runPolicy.backoffLimit allows {limit}"
        )
        fail(ctx, reason=new_reason(ctx.kind, REASON_FAILED), message=message)
        return False
    # Only the ledger patch in this pass: the old gang is deleted once the job shows the new
    # generation, so a restart is counted exactly once whatever fails or crashes in between.
    ctx.actions.append(
        PatchObject(
            kind=job.kind,
            namespace=job.namespace,
            name=job.name,
            patch={
                "metadata": {
                    "annotations": {
                        GANG_RESTART_ANNOTATION: trigger.annotation(),
                        RESTART_COUNT_ANNOTATION: str(ledger.count + 1),
                    }
                }
            },
        )
    )
    message = _restarting(ctx, trigger)
    ctx.event("Warning", new_reason(ctx.kind, REASON_RESTARTING), message)
    ctx.metrics.append(JobMetric.RESTARTED)
    return False


def _restarting(ctx: PlanContext[JobT], record: GangRestart) -> str:
    message = (
        f"{ctx.kind} {ctx.job.name} is restarting its whole gang (restart {record.generation}) "
        f"because {record.failure()}."
    )
    set_condition(
        ctx.status,
        cond_type=JobConditionType.RESTARTING,
        reason=new_reason(ctx.kind, REASON_RESTARTING),
        message=message,
        now=ctx.now,
    )
    return message


def _failures(
    ctx: PlanContext[JobT],
    replicas: Mapping[str, ReplicaPods],
    extra_pods: Sequence[tuple[str, Obj]],
) -> list[_Failure]:
    """Failed pods of the current gang with what their replica's restart policy says.
    Whether the framework recreates single pods (``recreate_failed_pods``) does not matter:
    the whole gang is recreated."""
    specs = ctx.job.replica_specs()
    container = ctx.fw.model.DEFAULT_CONTAINER_NAME
    candidates: list[tuple[str, Obj, str | None]] = []
    for rtype, slots in replicas.items():
        for index, pods in slots.by_index.items():
            if index < slots.replicas:
                candidates += [(rtype, pod, container) for pod in pods]
    candidates += [(rtype, pod, None) for rtype, pod in extra_pods]
    out: list[_Failure] = []
    for rtype, pod, name in candidates:
        if phase(pod) != PHASE_FAILED or is_terminating(pod) or rtype not in specs:
            continue
        verdict = failed_pod_verdict(
            policy=specs[rtype].restart_policy,
            exit_code=exit_code_of(pod, container=name),
            may_recreate=True,
        )
        if verdict != FailedPodVerdict.KEEP:
            out.append(_Failure(rtype=rtype, pod=pod, verdict=verdict, container=name))
    return out
