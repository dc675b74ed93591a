"""RelayJob, example.com/v1: a toy launcher/worker kind written as a new framework would be,
importing only what ``jobcontroller`` exports. Its Workers are pods (the base's); its Launcher
is a batch Job and its hostfile a ConfigMap, both children the base keeps (created, patched
back when they drift, suspended and resumed with the job); the Launcher decides, so the job's
state follows its Job by the base's rule (core/followjob.py).
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field

from jobcontroller import (
    CONFIGMAPS,
    JOBS,
    REASON_RUNNING,
    Child,
    Children,
    Event,
    JobController,
    Observed,
    ReplicaPods,
    Resource,
    add_init_containers,
    batch_job_child,
    is_finished,
    new_reason,
    override,
    set_condition,
    wait_for_replica,
)
from jobcontroller.api import (
    JobConditionType,
    JobModel,
    JobSpec,
    JobStatus,
    ReplicaRules,
    ReplicaSpec,
    RestartPolicy,
    default_job,
    job_errors,
)

LAUNCHER, WORKER = "Launcher", "Worker"
PORT = 2222


class RelayJobSpec(JobSpec):
    relay_replica_specs: dict[str, ReplicaSpec] = Field(
        description="One Launcher (a batch Job) and any number of Workers (pods)."
    )


class RelayJob(JobModel[RelayJobSpec]):
    """The Launcher's success is the job's."""

    GROUP = "example.com"
    VERSION = "v1"
    KIND = "RelayJob"
    PLURAL = "relayjobs"
    SINGULAR = "relayjob"
    REPLICA_TYPES = (LAUNCHER, WORKER)
    DEFAULT_CONTAINER_NAME = "relay"
    REPLICA_RULES = ReplicaRules(required=(LAUNCHER,), single=(LAUNCHER,))


class RelayJobController(JobController[RelayJob]):
    model = RelayJob
    framework_name = "relay"
    controller_name = "relayjob-controller"
    owned_resources: ClassVar[Mapping[str, Resource]] = {"ConfigMap": CONFIGMAPS, "Job": JOBS}

    @override
    def set_defaults(self, job: RelayJob) -> RelayJob:
        return default_job(job, restart_policy=RestartPolicy.NEVER)

    @override
    def validate(self, job: RelayJob) -> list[str]:
        return job_errors(job)

    @override
    def pod_replica_types(self, job: RelayJob) -> list[str]:
        return [WORKER]

    @override
    def children(
        self, job: RelayJob, observed: Observed, status: JobStatus, *, now: dt.datetime
    ) -> Children:
        workers = job.spec.relay_replica_specs.get(WORKER)
        hosts = [f"{job.name}-worker-{i}" for i in range(workers.replicas or 0 if workers else 0)]
        hostfile = Child(
            kind="ConfigMap",
            name=f"{job.name}-hosts",
            body={"apiVersion": "v1", "kind": "ConfigMap", "data": {"hostfile": "\n".join(hosts)}},
            drift=("data",),
            prune=True,
        )
        template = copy.deepcopy(job.spec.relay_replica_specs[LAUNCHER].template)
        template.setdefault("spec", {})["restartPolicy"] = "Never"
        # The launcher starts once worker 0 listens (the base's wait-for-replica container).
        wait = wait_for_replica(
            job, rtype=WORKER, index=0, port=PORT, name="wait-worker", image="busybox:1.36"
        )
        add_init_containers(template, [wait])
        spec = {"backoffLimit": 0, "template": template}
        launcher = batch_job_child(
            job,
            observed,
            status,
            name=f"{job.name}-launcher",
            rtype=LAUNCHER,
            spec=spec,
            decides=True,
        )
        return Children(kinds=frozenset({"ConfigMap", "Job"}), wanted=[hostfile, launcher])

    @override
    def update_status(
        self,
        job: RelayJob,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        """Running while the Launcher runs; its end is the job's (the base's rule)."""
        launcher = status.replica_statuses.get(LAUNCHER)
        if launcher is not None and launcher.active > 0 and not is_finished(status):
            reason = new_reason(RelayJob.KIND, REASON_RUNNING)
            message = f"{RelayJob.KIND} {job.name} is running."
            set_condition(
                status, cond_type=JobConditionType.RUNNING, reason=reason, message=message, now=now
            )
        return []
