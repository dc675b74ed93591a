"""JAXJob: the JobController hooks that make ``jax.distributed`` training work.

What is JAX-specific is small (``pkg/controller.v1/jax/jaxjob_controller.go``): the coordinator
environment in every container (env.py), worker 0 as the master role, the label selector behind
the scale subresource, and the success rule: the job succeeds when every worker has.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from jax_operator.api import JAXJob, JAXReplicaType, default_jaxjob, validate_jaxjob
from jax_operator.env import add_env, pod_env
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

__all__ = ["JAXJobController", "replica_selector"]

_WORKER = JAXReplicaType.WORKER


def replica_selector(*, controller_name: str, job_name: str, rtype: str) -> str:
    """v1.9's GenLabelSelector as metav1.FormatLabelSelector prints it (keys sorted): what the
    scale subresource hands an HPA to find the workers."""
    labels = {
        OPERATOR_NAME_LABEL: controller_name,
        JOB_NAME_LABEL: job_name,
        REPLICA_TYPE_LABEL: rtype.lower(),
    }
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


class JAXJobController(JobController[JAXJob]):
    model = JAXJob
    framework_name = "jax"
    controller_name = "jaxjob-controller"

    def set_defaults(self, job: JAXJob) -> JAXJob:
        return default_jaxjob(job)

    def validate(self, job: JAXJob) -> list[str]:
        return validate_jaxjob(job)

    def is_master_role(self, job: JAXJob, rtype: str, index: int) -> bool:
        """v1.9's IsMasterRole: index 0, i.e. worker 0, the coordinator."""
        return index == 0

    def set_cluster_spec(
        self,
        job: JAXJob,
        template: dict[str, Any],
        *,
        rtype: str,
        index: int,
        config: PlanConfig,
    ) -> None:
        add_env(template, pod_env(job, index=index))

    def update_status(
        self,
        job: JAXJob,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        """v1.9's UpdateJobStatus: all workers succeeded -> Succeeded; a worker running ->
        Running; a failed worker not replaced yet -> Restarting, or Failed under Never."""
        specs = job.spec.jax_replica_specs
        kind, key = JAXJob.KIND, job.key

        def set_(cond: str, reason: str, message: str) -> None:
            set_condition(
                status, cond_type=cond, reason=new_reason(kind, reason), message=message, now=now
            )

        for rtype, replica_status in status.replica_statuses.items():
            replica_status.selector = replica_selector(
                controller_name=self.controller_name, job_name=job.name, rtype=rtype
            )
        for rtype, spec in specs.items():
            counts = status.replica_statuses.get(rtype)
            if counts is None:
                continue
            wanted = spec.replicas or 0
            if rtype == _WORKER:
                if wanted - counts.succeeded == 0:
                    set_(
                        JobConditionType.SUCCEEDED,
                        REASON_SUCCEEDED,
                        f"{kind} {key} successfully completed.",
                    )
                    return []
                if counts.active > 0:
                    set_(JobConditionType.RUNNING, REASON_RUNNING, f"{kind} {key} is running.")
            if counts.failed > 0 and wanted > counts.succeeded + counts.active:
                failure = f"{counts.failed} {rtype} replica(s) failed."
                if spec.restart_policy == RestartPolicy.NEVER:
                    set_(
                        JobConditionType.FAILED,
                        REASON_FAILED,
                        f"{kind} {job.name} is failed because {failure}",
                    )
                    return []
                # The base recreates the failed pods (or, for ExitCode and a permanent exit
                # code, fails the job itself).
                set_(
                    JobConditionType.RESTARTING,
                    REASON_RESTARTING,
                    f"{kind} {job.name} is restarting because {failure}",
                )
        return []
