"""TFJob: the JobController hooks that make TensorFlow distributed training work.

What is TensorFlow-specific is small: TF_CONFIG in the ``tensorflow`` container of every pod of
a distributed job, the master role (Chief/Master, else worker 0), and the success rule (the
chief decides; without one, all workers or, by default, worker 0).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from jobcontroller import (
    REASON_FAILED,
    REASON_RUNNING,
    REASON_SUCCEEDED,
    Event,
    JobController,
    PlanConfig,
    ReplicaPods,
    exit_code_of,
    is_restarting,
    new_reason,
    override,
    phase,
    set_condition,
)
from jobcontroller.api import JobConditionType, JobStatus, ReplicaSpec, RestartPolicy
from tf_operator.api import (
    TF_CONTAINER_NAME,
    SuccessPolicy,
    TFJob,
    TFReplicaType,
    default_tfjob,
    stricter_than_anchor_errors,
    validate_tfjob,
)
from tf_operator.tfconfig import is_distributed, tf_config, tf_config_bytes

_CHIEFS = (TFReplicaType.CHIEF, TFReplicaType.MASTER)
#: The anchor's UpdateJobStatus order.
_STATUS_ORDER = ("Chief", "Evaluator", "Master", "PS", "Worker")


class TFJobController(JobController[TFJob]):
    model = TFJob
    framework_name = "tensorflow"
    controller_name = "tfjob-controller"

    @override
    def set_defaults(self, job: TFJob) -> TFJob:
        return default_tfjob(job)

    @override
    def validate(self, job: TFJob) -> list[str]:
        return validate_tfjob(job)

    @override
    def tolerated(self, job: TFJob) -> list[str]:
        return stricter_than_anchor_errors(job)

    @override
    def is_master_role(self, job: TFJob, rtype: str, index: int) -> bool:
        specs = job.replica_specs()
        if any(c in specs for c in _CHIEFS):
            return rtype in _CHIEFS
        return rtype == TFReplicaType.WORKER and index == 0

    @override
    def set_cluster_spec(
        self,
        job: TFJob,
        template: dict[str, Any],
        *,
        rtype: str,
        index: int,
        config: PlanConfig,
    ) -> None:
        if not is_distributed(job):
            return
        value = tf_config(job, rtype=rtype, index=index, cluster_domain=config.cluster_domain)
        for container in template.get("spec", {}).get("containers", []):
            if container.get("name") == TF_CONTAINER_NAME:
                container.setdefault("env", []).append({"name": "TF_CONFIG", "value": value})

    @override
    def cluster_env_bytes(self, job: TFJob, rtype: str, *, config: PlanConfig) -> int:
        return tf_config_bytes(job, rtype=rtype, cluster_domain=config.cluster_domain)

    @override
    def update_status(
        self,
        job: TFJob,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        specs = job.spec.tf_replica_specs
        kind, key = TFJob.KIND, job.key
        has_chief = any(c in specs for c in _CHIEFS)
        restarting = is_restarting(status)

        def set_(cond: str, reason: str, message: str) -> None:
            if cond == JobConditionType.RUNNING and restarting and _replacing(status, specs):
                # Running would retire Restarting while the replacement pod is not even
                # running yet; in the anchor it did so in the very pass that restarted the pod
                # whenever another replica ran, so nobody ever saw the job restarting.
                return
            set_condition(
                status, cond_type=cond, reason=new_reason(kind, reason), message=message, now=now
            )

        for rtype in (r for r in _STATUS_ORDER if r in specs):
            counts = status.replica_statuses.get(rtype)
            if counts is None:
                continue
            expected = (specs[rtype].replicas or 0) - counts.succeeded
            if has_chief:
                if rtype in _CHIEFS:
                    if counts.active > 0:
                        set_(JobConditionType.RUNNING, REASON_RUNNING, f"{kind} {key} is running.")
                    if expected == 0:
                        set_(
                            JobConditionType.SUCCEEDED,
                            REASON_SUCCEEDED,
                            f"{kind} {key} successfully completed.",
                        )
            elif rtype == TFReplicaType.WORKER:
                worker0_done = job.spec.success_policy != SuccessPolicy.ALL_WORKERS and (
                    _worker0_completed(replicas.get(rtype))
                )
                if expected == 0 or worker0_done:
                    set_(
                        JobConditionType.SUCCEEDED,
                        REASON_SUCCEEDED,
                        f"{kind} {key} successfully completed.",
                    )
                elif counts.active > 0:
                    set_(JobConditionType.RUNNING, REASON_RUNNING, f"{kind} {key} is running.")
            if counts.failed > 0 and not restarting:
                if job.spec.enable_dynamic_worker and rtype == TFReplicaType.WORKER:
                    continue  # workers come and go under dynamic membership
                set_(
                    JobConditionType.FAILED,
                    REASON_FAILED,
                    f"{kind} {key} has failed because {counts.failed} {rtype} replica(s) failed.",
                )
        return []


def _replacing(status: JobStatus, specs: Mapping[str, ReplicaSpec]) -> bool:
    """Some replica slot has no running or succeeded pod: a restarted pod's replacement is
    still to come (or still Pending). Slots under Never get no replacement: waiting on them
    would keep the job Restarting for ever, hiding their failure."""
    for rtype, spec in specs.items():
        if spec.restart_policy == RestartPolicy.NEVER:
            continue
        counts = status.replica_statuses.get(rtype)
        done = (counts.active + counts.succeeded) if counts is not None else 0
        if done < (spec.replicas or 0):
            return True
    return False


def _worker0_completed(workers: ReplicaPods | None) -> bool:
    """Worker 0's pod Succeeded with exit code 0 in the tensorflow container."""
    if workers is None:
        return False
    return any(
        phase(pod) == "Succeeded" and exit_code_of(pod, container=TF_CONTAINER_NAME) == 0
        for pod in workers.by_index.get(0, ())
    )
