"""Stock success and failure rules, for a framework's ``update_status`` hook.

training-operator v1.9's frameworks decide a job's end in one of a few ways; each is one call
here, in v1.9's words (``<Kind> <name> is running.``, ``... is successfully completed.``,
``... is restarting because 1 Worker replica(s) failed.``, ``... is failed because ...``):

- :func:`master_decides`: a Master replica type decides (the job succeeds when its pod does);
  without one, every worker must succeed (PaddleJob, PyTorchJob, JAXJob);
- :func:`all_workers`: every replica of the worker type must succeed (JAXJob);
- :func:`worker0_decides`: worker 0's pod succeeding ends the job (TFJob's default without a
  chief).

Each applies v1.9's failure clause too: when a replica type has failed pods and fewer pods
active or succeeded than it wants, the job is Failed under ``restartPolicy: Never`` and
Restarting otherwise (the base is already recreating the failed pods, or has failed the job
for a permanent ExitCode failure). They change ``status`` in place and return no events: the
base records one when the job finishes; Running and Restarting have none (as in v1.9).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from jobcontroller.api.common import JobConditionType, JobModel, JobStatus, RestartPolicy
from jobcontroller.core.conditions import (
    REASON_FAILED,
    REASON_RESTARTING,
    REASON_RUNNING,
    REASON_SUCCEEDED,
    new_reason,
    set_condition,
)
from jobcontroller.core.replicas import PHASE_SUCCEEDED, exit_code_of, phase
from jobcontroller.core.types import Event, ReplicaPods

__all__ = ["all_workers", "master_decides", "worker0_decides"]


class _Rule:
    """One pass of a stock rule over a job's replica statuses."""

    def __init__(self, job: JobModel[Any], status: JobStatus, now: dt.datetime) -> None:
        self.job, self.status, self.now = job, status, now
        self.kind = job.KIND

    def set(self, cond: str, reason: str, message: str) -> None:
        set_condition(
            self.status,
            cond_type=cond,
            reason=new_reason(self.kind, reason),
            message=message,
            now=self.now,
        )

    def running(self, message: str) -> None:
        self.set(JobConditionType.RUNNING, REASON_RUNNING, message)

    def succeeded(self, message: str) -> None:
        self.set(JobConditionType.SUCCEEDED, REASON_SUCCEEDED, message)

    def failures(self, rtype: str) -> bool:
        """v1.9's failure clause for one replica type; True when the job Failed."""
        spec = self.job.replica_specs()[rtype]
        counts = self.status.replica_statuses.get(rtype)
        if counts is None or counts.failed <= 0:
            return False
        if (spec.replicas or 0) <= counts.succeeded + counts.active:
            return False
        failure = f"{counts.failed} {rtype} replica(s) failed."
        name = self.job.name
        if spec.restart_policy == RestartPolicy.NEVER:
            self.set(
                JobConditionType.FAILED,
                REASON_FAILED,
                f"{self.kind} {name} is failed because {failure}",
            )
            return True
        self.set(
            JobConditionType.RESTARTING,
            REASON_RESTARTING,
            f"{self.kind} {name} is restarting because {failure}",
        )
        return False

    def remaining(self, rtype: str) -> tuple[int, int]:
        """(replicas still to succeed, active pods) of one type."""
        counts = self.status.replica_statuses.get(rtype)
        wanted = self.job.replica_specs()[rtype].replicas or 0
        if counts is None:
            return wanted, 0
        return wanted - counts.succeeded, counts.active


def master_decides(
    job: JobModel[Any],
    status: JobStatus,
    *,
    now: dt.datetime,
    master: str = "Master",
    worker: str = "Worker",
    any_worker: bool = False,
) -> list[Event]:
    """The job succeeds when its ``master`` replicas have; without a ``master`` replica type,
    when all ``worker`` replicas have (:func:`all_workers`, which ``any_worker`` is passed
    to). Running while a master pod (or, without one, a worker pod) is active."""
    specs = job.replica_specs()
    if master not in specs:
        return all_workers(job, status, now=now, worker=worker, any_worker=any_worker)
    rule = _Rule(job, status, now)
    for rtype in _ordered(specs, first=master):
        if rtype == master and status.replica_statuses.get(rtype) is not None:
            remaining, active = rule.remaining(rtype)
            if active > 0:
                rule.running(f"{rule.kind} {job.name} is running.")
            if remaining == 0:
                rule.succeeded(f"{rule.kind} {job.name} is successfully completed.")
                return []
        if rule.failures(rtype):
            return []
    return []


def all_workers(
    job: JobModel[Any],
    status: JobStatus,
    *,
    now: dt.datetime,
    worker: str = "Worker",
    any_worker: bool = False,
) -> list[Event]:
    """The job succeeds when every ``worker`` replica has succeeded, or with ``any_worker``
    when one has (an elastic PyTorchJob: the survivors finish the work); Running while one
    is active. v1.9 words these with the job's namespace: ``<Kind> <ns>/<name> is running.``"""
    rule = _Rule(job, status, now)
    for rtype in _ordered(job.replica_specs(), first=worker):
        counts = status.replica_statuses.get(rtype)
        if rtype == worker and counts is not None:
            remaining, active = rule.remaining(rtype)
            if remaining == 0 or (any_worker and counts.succeeded > 0):
                rule.succeeded(f"{rule.kind} {job.key} successfully completed.")
                return []
            if active > 0:
                rule.running(f"{rule.kind} {job.key} is running.")
        if rule.failures(rtype):
            return []
    return []


def worker0_decides(
    job: JobModel[Any],
    status: JobStatus,
    *,
    replicas: Mapping[str, ReplicaPods],
    now: dt.datetime,
    worker: str = "Worker",
    container: str | None = None,
) -> list[Event]:
    """The job succeeds when worker 0's pod has succeeded (exit code 0 in ``container``, the
    model's default container unless given), or when all workers have; Running while a worker
    is active."""
    rule = _Rule(job, status, now)
    name = container or job.DEFAULT_CONTAINER_NAME
    for rtype in _ordered(job.replica_specs(), first=worker):
        if rtype == worker and status.replica_statuses.get(rtype) is not None:
            remaining, active = rule.remaining(rtype)
            pods = replicas.get(rtype)
            worker0 = pods.by_index.get(0, ()) if pods is not None else ()
            if remaining == 0 or any(
                phase(pod) == PHASE_SUCCEEDED and exit_code_of(pod, container=name) == 0
                for pod in worker0
            ):
                rule.succeeded(f"{rule.kind} {job.key} successfully completed.")
                return []
            if active > 0:
                rule.running(f"{rule.kind} {job.key} is running.")
        if rule.failures(rtype):
            return []
    return []


def _ordered(specs: Mapping[str, object], *, first: str) -> list[str]:
    """The deciding type first, the others in their stable order."""
    return [first] * (first in specs) + [rtype for rtype in specs if rtype != first]
