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
    JOB_NAME_LABEL,
    OPERATOR_NAME_LABEL,
    REASON_FAILED,
    REASON_RESTARTING,
    REASON_RUNNING,
    REASON_SUCCEEDED,
    REPLICA_TYPE_LABEL,
    Children,
    Event,
    JobController,
    Observed,
    PlanConfig,
    ReplicaPods,
    Resource,
    is_finished,
    new_reason,
    override,
    set_condition,
)
from jobcontroller.api import JobConditionType, JobStatus, RestartPolicy
from pytorch_operator.api import (
    PyTorchJob,
    PyTorchReplicaType,
    default_pytorchjob,
    validate_pytorchjob,
)
from pytorch_operator.env import add_env, pod_env
from pytorch_operator.hpa import HPA, hpa_children
from pytorch_operator.initcontainer import (
    CHECK_TCP,
    DEFAULT_INIT_CONTAINER_IMAGE,
    DEFAULT_INIT_CONTAINER_MAX_TRIES,
    InitContainerTemplate,
    add_init_container,
)

__all__ = ["PyTorchJobController", "replica_selector"]

_MASTER = PyTorchReplicaType.MASTER
_WORKER = PyTorchReplicaType.WORKER


def replica_selector(*, controller_name: str, job_name: str, rtype: str) -> str:
    """The pods of one replica type as a label-selector string (metav1.FormatLabelSelector:
    keys sorted), which the scale subresource hands to an HPA to find the pods it measures."""
    labels = {
        OPERATOR_NAME_LABEL: controller_name,
        JOB_NAME_LABEL: job_name,
        REPLICA_TYPE_LABEL: rtype.lower(),
    }
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


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
        add_env(template, pod_env(job, rtype=rtype, index=index))
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
        specs = job.spec.pytorch_replica_specs
        kind, key = PyTorchJob.KIND, job.key
        has_master = _MASTER in specs
        elastic = job.spec.elastic_policy is not None

        def set_(cond: str, reason: str, message: str) -> None:
            set_condition(
                status, cond_type=cond, reason=new_reason(kind, reason), message=message, now=now
            )

        # v1.9's words, which differ with and without a Master: "<name> is running." and
        # "<name> is successfully completed." with one, "<ns>/<name> ..." without.
        def succeed() -> list[Event]:
            done = (
                f"{kind} {job.name} is successfully completed."
                if has_master
                else f"{kind} {key} successfully completed."
            )
            set_(JobConditionType.SUCCEEDED, REASON_SUCCEEDED, done)
            return []

        for rtype, replica_status in status.replica_statuses.items():
            replica_status.selector = replica_selector(
                controller_name=self.controller_name, job_name=job.name, rtype=rtype
            )
        for rtype in (r for r in (_MASTER, _WORKER) if r in specs):
            counts = status.replica_statuses.get(rtype)
            if counts is None:
                continue
            wanted = specs[rtype].replicas or 0
            remaining = wanted - counts.succeeded
            if has_master and rtype == _MASTER:
                if counts.active > 0:
                    set_(JobConditionType.RUNNING, REASON_RUNNING, f"{kind} {job.name} is running.")
                if remaining == 0:
                    return succeed()
            elif not has_master and rtype == _WORKER:
                if remaining == 0 or (elastic and counts.succeeded > 0):
                    return succeed()
                if counts.active > 0:
                    set_(JobConditionType.RUNNING, REASON_RUNNING, f"{kind} {key} is running.")
            if counts.failed > 0 and wanted > counts.succeeded + counts.active:
                failure = f"{counts.failed} {rtype} replica(s) failed."
                if specs[rtype].restart_policy == RestartPolicy.NEVER:
                    set_(
                        JobConditionType.FAILED,
                        REASON_FAILED,
                        f"{kind} {job.name} is failed because {failure}",
                    )
                    return []
                # The base is recreating the failed pods (or has failed the job, for an ExitCode
                # policy and a permanent exit code). Restarting is set after Running so that a
                # running Master does not hide a worker's restart.
                set_(
                    JobConditionType.RESTARTING,
                    REASON_RESTARTING,
                    f"{kind} {job.name} is restarting because {failure}",
                )
        return []
