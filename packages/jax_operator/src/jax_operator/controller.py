"""JAXJob: the JobController hooks that make ``jax.distributed`` training work.

What is JAX-specific is small (``pkg/controller.v1/jax/jaxjob_controller.go``): the coordinator
environment in every container (env.py), worker 0 as the master role, the label selector behind
the scale subresource, and the success rule: the job succeeds when every worker has.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from jax_operator.api import JAXJob, default_jaxjob, validate_jaxjob
from jax_operator.env import pod_env
from jobcontroller import (
    Event,
    JobController,
    PlanConfig,
    ReplicaPods,
    all_workers,
    override,
    set_env,
    set_replica_selectors,
)
from jobcontroller.api import JobStatus

__all__ = ["JAXJobController"]


class JAXJobController(JobController[JAXJob]):
    model = JAXJob
    framework_name = "jax"
    controller_name = "jaxjob-controller"

    @override
    def set_defaults(self, job: JAXJob) -> JAXJob:
        return default_jaxjob(job)

    @override
    def validate(self, job: JAXJob) -> list[str]:
        return validate_jaxjob(job)

    @override
    def is_master_role(self, job: JAXJob, rtype: str, index: int) -> bool:
        """v1.9's IsMasterRole: index 0, i.e. worker 0, the coordinator."""
        return index == 0

    @override
    def set_cluster_spec(
        self,
        job: JAXJob,
        template: dict[str, Any],
        *,
        rtype: str,
        index: int,
        config: PlanConfig,
    ) -> None:
        set_env(template, pod_env(job, index=index), override=True)

    @override
    def update_status(
        self,
        job: JAXJob,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        """v1.9's UpdateJobStatus: all workers succeeded -> Succeeded; a worker running ->
        Running; a failed worker not replaced yet -> Restarting, or Failed under Never. The
        replica statuses carry the scale subresource's selector."""
        set_replica_selectors(status, controller_name=self.controller_name, job_name=job.name)
        return all_workers(job, status, now=now)
