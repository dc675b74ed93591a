"""PyTorchJob: the JobController hooks that make torch.distributed training work.

What is PyTorch-specific: the rendezvous environment in every container (env.py), the Worker
init container that waits for the Master (initcontainer.py), the HPA of an elastic job with
metrics (hpa.py), the label selector behind the scale subresource, and the success rule: the
Master decides; without one, all workers must succeed, or any one of an elastic job's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, ClassVar

from jobcontroller import (
    HPAS,
    Children,
    Event,
    JobController,
    Observed,
    PlanConfig,
    ReplicaPods,
    Resource,
    is_finished,
    master_decides,
    override,
    set_env,
    set_replica_selectors,
)
from jobcontroller.api import JobStatus
from pytorch_operator.api import (
    PyTorchJob,
    PyTorchReplicaType,
    default_pytorchjob,
    validate_pytorchjob,
)
from pytorch_operator.env import pod_env
from pytorch_operator.hpa import HPA, hpa_children
from pytorch_operator.initcontainer import (
    CHECK_TCP,
    DEFAULT_INIT_CONTAINER_IMAGE,
    DEFAULT_INIT_CONTAINER_MAX_TRIES,
    InitContainerTemplate,
    add_init_container,
)

__all__ = ["PyTorchJobController"]

_MASTER = PyTorchReplicaType.MASTER
_WORKER = PyTorchReplicaType.WORKER


class PyTorchJobController(JobController[PyTorchJob]):
    model = PyTorchJob
    framework_name = "pytorch"
    controller_name = "pytorchjob-controller"
    owned_resources: ClassVar[Mapping[str, Resource]] = {HPA: HPAS}

    def __init__(
        self,
        *,
        config: PlanConfig | None = None,
        init_container_image: str = DEFAULT_INIT_CONTAINER_IMAGE,
        init_container_max_tries: int = DEFAULT_INIT_CONTAINER_MAX_TRIES,
        init_container_check: str = CHECK_TCP,
        init_container_template: InitContainerTemplate | None = None,
    ) -> None:
        super().__init__(config=config)
        self.init_container_image = init_container_image
        """Image of the Worker init container; it needs sh, grep and ``nc -z`` (or nslookup)."""
        self.init_container_max_tries = init_container_max_tries
        """Attempts, two seconds apart, before the init container gives up; 0: no limit."""
        self.init_container_check = init_container_check
        """``tcp``: until the master's port accepts connections; ``dns``: until its name
        resolves (v1.9's check)."""
        self.init_container_template = init_container_template
        """From ``--pytorch-init-container-template-file``: replaces the built-in container."""

    @override
    def set_defaults(self, job: PyTorchJob) -> PyTorchJob:
        return default_pytorchjob(job)

    @override
    def validate(self, job: PyTorchJob) -> list[str]:
        return validate_pytorchjob(job)

    @override
    def is_master_role(self, job: PyTorchJob, rtype: str, index: int) -> bool:
        """The Master, or worker 0 of a job without one (v1.9: the Kubeflow SDK's
        ``get_job_logs`` finds a job's main pod by ``job-role=master``)."""
        if _MASTER in job.replica_specs():
            return rtype == _MASTER
        return rtype == _WORKER and index == 0

    @override
    def set_cluster_spec(
        self,
        job: PyTorchJob,
        template: dict[str, Any],
        *,
        rtype: str,
        index: int,
        config: PlanConfig,
    ) -> None:
        set_env(template, pod_env(job, rtype=rtype, index=index), override=True)
        add_init_container(
            job,
            template,
            rtype=rtype,
            image=self.init_container_image,
            max_tries=self.init_container_max_tries,
            check=self.init_container_check,
            file_template=self.init_container_template,
        )

    @override
    def children(
        self, job: PyTorchJob, observed: Observed, status: JobStatus, *, now: dt.datetime
    ) -> Children:
        return hpa_children(job, wanted=not (job.run_policy.suspend or is_finished(status)))

    @override
    def update_status(
        self,
        job: PyTorchJob,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        """The Master decides; without one, all workers must succeed, or any one of an
        elastic job's. Every replica status names its pods' selector (scale subresource)."""
        set_replica_selectors(status, controller_name=self.controller_name, job_name=job.name)
        elastic = job.spec.elastic_policy is not None
        return master_decides(job, status, now=now, any_worker=elastic)
