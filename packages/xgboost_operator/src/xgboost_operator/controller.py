"""XGBoostJob: the JobController hooks that make XGBoost (and LightGBM) distributed training work.

What is XGBoost-specific: the Rabit/LightGBM environment in every container (env.py), the
master role (the Master alone), and the success rule of v1.9's UpdateJobStatus
(pkg/controller.v1/xgboost/xgboostjob_controller.go): the Master decides; a failed replica
restarts the job under ExitCode and fails it under Never.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from jobcontroller import (
    REASON_FAILED,
    REASON_RESTARTING,
    REASON_RUNNING,
    REASON_SUCCEEDED,
    Event,
    JobController,
    PlanConfig,
    ReplicaPods,
    is_failed,
    new_reason,
    override,
    set_condition,
    set_env,
)
from jobcontroller.api import JobConditionType, JobStatus, RestartPolicy
from xgboost_operator.api import (
    XGBoostJob,
    XGBoostReplicaType,
    default_xgboostjob,
    validate_xgboostjob,
)
from xgboost_operator.env import pod_env, worker_addrs_bytes

__all__ = ["XGBoostJobController"]

_MASTER = XGBoostReplicaType.MASTER
_WORKER = XGBoostReplicaType.WORKER


class XGBoostJobController(JobController[XGBoostJob]):
    model = XGBoostJob
    framework_name = "xgboost"
    controller_name = "xgboostjob-controller"

    @override
    def set_defaults(self, job: XGBoostJob) -> XGBoostJob:
        return default_xgboostjob(job)

    @override
    def validate(self, job: XGBoostJob) -> list[str]:
        return validate_xgboostjob(job)

    @override
    def is_master_role(self, job: XGBoostJob, rtype: str, index: int) -> bool:
        return rtype == _MASTER

    @override
    def set_cluster_spec(
        self,
        job: XGBoostJob,
        template: dict[str, Any],
        *,
        rtype: str,
        index: int,
        config: PlanConfig,
    ) -> None:
        set_env(template, pod_env(job, rtype=rtype, index=index), override=True)

    @override
    def cluster_env_bytes(self, job: XGBoostJob, rtype: str, *, config: PlanConfig) -> int:
        """WORKER_ADDRS lists every worker, in every container of every pod."""
        containers = (job.replica_specs()[rtype].template.get("spec") or {}).get("containers")
        return worker_addrs_bytes(job) * max(len(containers or ()), 1)

    @override
    def update_status(
        self,
        job: XGBoostJob,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        specs = job.spec.xgb_replica_specs
        kind, name = XGBoostJob.KIND, job.name
        running = f"{kind} {name} is running."

        def set_(cond: str, reason: str, message: str) -> None:
            set_condition(
                status, cond_type=cond, reason=new_reason(kind, reason), message=message, now=now
            )

        # v1.9 walks a Go map (random order); here the Master goes first, so its success wins
        # over a worker failure seen in the same pass, and a running Master does not hide a
        # restart (nor flip Running and Restarting back and forth while a failed pod goes).
        restarts = any(
            (counts := status.replica_statuses.get(rtype)) is not None
            and counts.failed > 0
            and spec.restart_policy != RestartPolicy.NEVER
            for rtype, spec in specs.items()
        )
        for rtype in (r for r in (_MASTER, _WORKER) if r in specs):
            counts = status.replica_statuses.get(rtype)
            if counts is None:
                continue
            if rtype == _MASTER:
                if counts.active > 0 and not restarts:
                    set_(JobConditionType.RUNNING, REASON_RUNNING, running)
                if (specs[rtype].replicas or 0) - counts.succeeded == 0:
                    set_(JobConditionType.RUNNING, REASON_RUNNING, running)
                    set_(
                        JobConditionType.SUCCEEDED,
                        REASON_SUCCEEDED,
                        f"{kind} {name} is successfully completed.",
                    )
                    return []
            if counts.failed <= 0:
                continue
            failure = f"{counts.failed} {rtype} replica(s) failed."
            if specs[rtype].restart_policy == RestartPolicy.NEVER:
                set_(JobConditionType.RUNNING, REASON_RUNNING, running)
                set_(
                    JobConditionType.FAILED,
                    REASON_FAILED,
                    f"{kind} {name} is failed because {failure}",
                )
            else:
                # ExitCode in v1.9 (OnFailure and Always too here: the base is recreating the
                # pod). A permanent exit code has already failed the job in the base.
                _restarting(status, f"{kind} {name} is restarting because {failure}", now=now)
        return []


def _restarting(status: JobStatus, message: str, *, now: dt.datetime) -> None:
    """Restarting with v1.9's words. The base set it moments ago with its own ("job x is
    restarting because Worker replica(s) failed."); v1.9 set Running in between, so its final
    message is the framework's. Rewording in place keeps the transition time."""
    if is_failed(status):
        return
    reason = new_reason(XGBoostJob.KIND, REASON_RESTARTING)
    current = status.condition(JobConditionType.RESTARTING)
    if current is not None and current.status == "True" and current.reason == reason:
        if current.message != message:
            status.conditions = [
                c.model_copy(update={"message": message, "last_update_time": _seconds(now)})
                if c is current
                else c
                for c in status.conditions
            ]
        return
    set_condition(
        status,
        cond_type=JobConditionType.RESTARTING,
        reason=reason,
        message=message,
        now=now,
    )


def _seconds(now: dt.datetime) -> dt.datetime:
    """UTC, whole seconds: how metav1.Time stores it (and set_condition writes it)."""
    return now.astimezone(dt.UTC).replace(microsecond=0)
