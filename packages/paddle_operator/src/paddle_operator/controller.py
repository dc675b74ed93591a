"""PaddleJob: the JobController hooks that make ``paddle.distributed.launch`` work.

What is Paddle-specific (v1.9's paddlepaddle_controller.go): the PADDLE_* environment in every
container (env.py), the master role (Master pods only: a collective job has none), the label
selector behind the scale subresource, and the success rule: the Master decides; without one,
all workers must succeed. Every replica type gets its headless Services (the base's default),
as in v1.9: workers reach ``<job>-worker-0`` or ``<job>-master-0`` through them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from jobcontroller import (
    JOB_NAME_LABEL,
    OPERATOR_NAME_LABEL,
    REASON_FAILED,
    REASON_RESTARTING,
    REASON_RUNNING,
    REASON_SUCCEEDED,
    REPLICA_TYPE_LABEL,
    Event,
    JobController,
    PlanConfig,
    ReplicaPods,
    new_reason,
    set_condition,
)
from jobcontroller.api import JobConditionType, JobStatus, RestartPolicy
from paddle_operator.api import (
    PaddleJob,
    PaddleReplicaType,
    default_paddlejob,
    stricter_than_anchor_errors,
    validate_paddlejob,
)
from paddle_operator.env import add_env, pod_env

__all__ = ["PaddleJobController"]

_MASTER = PaddleReplicaType.MASTER
_WORKER = PaddleReplicaType.WORKER


class PaddleJobController(JobController[PaddleJob]):
    model = PaddleJob
    framework_name = "paddle"  # PaddleJobFrameworkName
    controller_name = "paddlejob-controller"

    def set_defaults(self, job: PaddleJob) -> PaddleJob:
        return default_paddlejob(job)

    def validate(self, job: PaddleJob) -> list[str]:
        return validate_paddlejob(job)

    def tolerated(self, job: PaddleJob) -> list[str]:
        return stricter_than_anchor_errors(job)

    def is_master_role(self, job: PaddleJob, rtype: str, index: int) -> bool:
        return rtype == _MASTER

    def set_cluster_spec(
        self,
        job: PaddleJob,
        template: dict[str, Any],
        *,
        rtype: str,
        index: int,
        config: PlanConfig,
    ) -> None:
        add_env(template, pod_env(job, rtype=rtype, index=index))

    def update_status(
        self,
        job: PaddleJob,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        """v1.9's UpdateJobStatus, in the order Master, Worker (v1.9 walked a Go map)."""
        specs = job.spec.paddle_replica_specs
        kind = PaddleJob.KIND
        has_master = _MASTER in specs

        def set_(cond: str, reason: str, message: str) -> None:
            set_condition(
                status, cond_type=cond, reason=new_reason(kind, reason), message=message, now=now
            )

        for rtype, replica_status in status.replica_statuses.items():
            # The scale subresource's selector (metav1.FormatLabelSelector: keys sorted).
            labels = {
                OPERATOR_NAME_LABEL: self.controller_name,
                JOB_NAME_LABEL: job.name,
                REPLICA_TYPE_LABEL: rtype.lower(),
            }
            replica_status.selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        for rtype in (r for r in (_MASTER, _WORKER) if r in specs):
            counts = status.replica_statuses.get(rtype)
            if counts is None:
                continue
            wanted = specs[rtype].replicas or 0
            remaining = wanted - counts.succeeded
            # v1.9's words differ with and without a Master: "<name>" or "<ns>/<name>".
            if has_master and rtype == _MASTER:
                if counts.active > 0:
                    set_(JobConditionType.RUNNING, REASON_RUNNING, f"{kind} {job.name} is running.")
                if remaining == 0:
                    done = f"{kind} {job.name} is successfully completed."
                    set_(JobConditionType.SUCCEEDED, REASON_SUCCEEDED, done)
                    return []
            elif not has_master and rtype == _WORKER:
                if remaining == 0:
                    done = f"{kind} {job.key} successfully completed."
                    set_(JobConditionType.SUCCEEDED, REASON_SUCCEEDED, done)
                    return []
                if counts.active > 0:
                    set_(JobConditionType.RUNNING, REASON_RUNNING, f"{kind} {job.key} is running.")
            if counts.failed > 0 and wanted > counts.succeeded + counts.active:
                failure = f"{counts.failed} {rtype} replica(s) failed."
                if specs[rtype].restart_policy == RestartPolicy.NEVER:
                    set_(
                        JobConditionType.FAILED,
                        REASON_FAILED,
                        f"{kind} {job.name} is failed because {failure}",
                    )
                    return []
                # The base recreates the failed pods (or fails the job, under ExitCode with a
                # permanent exit code).
                set_(
                    JobConditionType.RESTARTING,
                    REASON_RESTARTING,
                    f"{kind} {job.name} is restarting because {failure}",
                )
        return []
