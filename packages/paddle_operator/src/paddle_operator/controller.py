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
    Event,
    JobController,
    PlanConfig,
    ReplicaPods,
    master_decides,
    override,
    set_env,
    set_replica_selectors,
)
from jobcontroller.api import JobStatus
from paddle_operator.api import (
    PaddleJob,
    PaddleReplicaType,
    default_paddlejob,
    stricter_than_anchor_errors,
    validate_paddlejob,
)
from paddle_operator.env import pod_env

__all__ = ["PaddleJobController"]


class PaddleJobController(JobController[PaddleJob]):
    model = PaddleJob
    framework_name = "paddle"  # PaddleJobFrameworkName
    controller_name = "paddlejob-controller"

    @override
    def set_defaults(self, job: PaddleJob) -> PaddleJob:
        return default_paddlejob(job)

    @override
    def validate(self, job: PaddleJob) -> list[str]:
        return validate_paddlejob(job)

    @override
    def tolerated(self, job: PaddleJob) -> list[str]:
        return stricter_than_anchor_errors(job)

    @override
    def is_master_role(self, job: PaddleJob, rtype: str, index: int) -> bool:
        return rtype == PaddleReplicaType.MASTER

    @override
    def set_cluster_spec(
        self,
        job: PaddleJob,
        template: dict[str, Any],
        *,
        rtype: str,
        index: int,
        config: PlanConfig,
    ) -> None:
        set_env(template, pod_env(job, rtype=rtype, index=index), override=True)

    @override
    def update_status(
        self,
        job: PaddleJob,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        """v1.9's UpdateJobStatus (in the order Master, Worker: v1.9 walked a Go map): the
        Master decides, or without one all workers; the replica statuses carry the scale
        subresource's selector."""
        set_replica_selectors(status, controller_name=self.controller_name, job_name=job.name)
        return master_decides(job, status, now=now)
