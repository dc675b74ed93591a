"""Kubeflow Trainer's TrainJob (``trainer.kubeflow.org/v1alpha1``) for the ``kfjob`` commands.

A TrainJob is not a v1 job: no replica specs, no start or completion time, three conditions
(Suspended, Complete, Failed) kept in place, per-replicated-job counts in ``jobsStatus``, its pods
labelled by its JobSet's name, and the trainer's progress in ``trainerStatus``. So it is not one
of :data:`kfjob.kinds.KINDS` (those render offline through a v1 operator); :class:`TrainJobs`
talks to the API for it through a :class:`kfjob.client.JobClient`'s connection, with
trainer_operator's own model as the type.
"""

from __future__ import annotations

import builtins
import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from kfjob.client import JobClient, _failure, _json, pod_order
from trainer_operator.api import TrainJob

__all__ = [
    "JOBSET_NAME_LABEL",
    "TrainJobFailedError",
    "TrainJobProgress",
    "TrainJobs",
    "finished_at",
    "is_trainjob",
    "trainjob_state",
]

Obj = dict[str, Any]
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: How a user may name the kind on the command line (``kfjob get trainjob/NAME``).
NAMES = frozenset({TrainJob.KIND.lower(), TrainJob.PLURAL, TrainJob.SINGULAR})
#: Conditions strongest first: the state is the first True one (as ``kfjob ui`` shows it).
STATES = ("Failed", "Complete", "Suspended")


def is_trainjob(name: str | None) -> bool:
    return name is not None and name.lower() in NAMES


def trainjob_state(job: TrainJob) -> str:
    """Failed, Complete or Suspended when that condition is True (the first of them, in that
    order: a resumed TrainJob's Suspended turns False in place), else ``Running`` while its
    JobSet has an active job, else ``Pending``."""
    status = job.trainjob_status
    for state in STATES:
        if status.is_true(state):
            return state
    if any(s.active for s in status.jobs_status or ()):
        return "Running"
    return "Pending"


def finished_at(job: TrainJob) -> dt.datetime | None:
    """When the TrainJob turned Complete or Failed (it records no completion time)."""
    for state in ("Complete", "Failed"):
        cond = job.trainjob_status.condition(state)
        if cond is not None and cond.status == "True":
            return cond.last_transition_time
    return None


@dataclass(frozen=True, slots=True)
class TrainJobProgress:
    """What :meth:`TrainJobs.wait` passes to its callback after each look."""

    job: TrainJob
    state: str
    elapsed: float


class TrainJobFailedError(RuntimeError):
    """The TrainJob turned Failed while it was waited for."""

    def __init__(self, job: TrainJob) -> None:
        cond = job.trainjob_status.condition("Failed")
        self.reason = cond.reason if cond else ""
        self.message = cond.message if cond else ""
        super().__init__(
            f"TrainJob {job.namespace}/{job.name} failed: {self.reason}: {self.message}"
        )
        self.job = job


class TrainJobs:
    """TrainJobs through ``client``'s connection and default namespace."""

    def __init__(self, client: JobClient) -> None:
        self.client = client

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.client.namespace

    def create(self, body: Mapping[str, Any], *, namespace: str | None = None) -> TrainJob:
        ns = namespace or str((body.get("metadata") or {}).get("namespace") or "") or None
        try:
            created = self.client.custom.create_namespaced_custom_object(
                TrainJob.GROUP,
                TrainJob.VERSION,
                self._ns(ns),
                TrainJob.PLURAL,
                dict(body),
                _preload_content=False,
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        return TrainJob.parse(_json(created))

    def get(self, name: str, *, namespace: str | None = None) -> TrainJob:
        try:
            raw = self.client.custom.get_namespaced_custom_object(
                TrainJob.GROUP,
                TrainJob.VERSION,
                self._ns(namespace),
                TrainJob.PLURAL,
                name,
                _preload_content=False,
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        return TrainJob.parse(_json(raw))

    def list(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        missing_ok: bool = False,
    ) -> builtins.list[TrainJob]:
        """The TrainJobs, oldest first; none when ``missing_ok`` and the trainer CRDs are not
        installed."""
        try:
            if all_namespaces:
                resp = self.client.custom.list_cluster_custom_object(
                    TrainJob.GROUP, TrainJob.VERSION, TrainJob.PLURAL, _preload_content=False
                )
            else:
                resp = self.client.custom.list_namespaced_custom_object(
                    TrainJob.GROUP,
                    TrainJob.VERSION,
                    self._ns(namespace),
                    TrainJob.PLURAL,
                    _preload_content=False,
                )
        except ApiException as exc:
            if exc.status == 404 and missing_ok:
                return []
            raise _failure(exc) from exc
        items = _json(resp).get("items") or []
        out = [TrainJob.parse(item) for item in items if isinstance(item, dict)]
        out.sort(key=lambda j: (str(j.metadata.get("creationTimestamp") or ""), j.name))
        return out

    def pods(self, name: str, *, namespace: str | None = None) -> builtins.list[Obj]:
        """The pods of the TrainJob's JobSet (named after the TrainJob)."""
        try:
            resp = self.client.core.list_namespaced_pod(
                self._ns(namespace),
                label_selector=f"{JOBSET_NAME_LABEL}={name}",
                _preload_content=False,
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        pods = [p for p in _json(resp).get("items") or [] if isinstance(p, dict)]
        return sorted(pods, key=pod_order)

    def events(self, name: str, *, namespace: str | None = None) -> builtins.list[Obj]:
        """Events about the TrainJob and its pods, oldest first."""
        ns = self._ns(namespace)
        pods = {str(p["metadata"]["name"]) for p in self.pods(name, namespace=ns)}
        try:
            resp = self.client.core.list_namespaced_event(ns, _preload_content=False)
        except ApiException as exc:
            raise _failure(exc) from exc
        out = []
        for event in _json(resp).get("items") or []:
            obj = event.get("involvedObject") or {}
            if (obj.get("kind") == TrainJob.KIND and obj.get("name") == name) or (
                obj.get("kind") == "Pod" and obj.get("name") in pods
            ):
                out.append(event)
        out.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        return out

    def wait(
        self,
        name: str,
        *,
        namespace: str | None = None,
        timeout: float = 600,
        polling_interval: float = 2,
        callback: Callable[[TrainJobProgress], None] | None = None,
    ) -> TrainJob:
        """Wait until the TrainJob is Complete (returned); :class:`TrainJobFailedError` when it
        fails, ``TimeoutError`` after ``timeout`` seconds."""
        start = time.monotonic()
        while True:
            job = self.get(name, namespace=namespace)
            state = trainjob_state(job)
            if callback is not None:
                callback(TrainJobProgress(job=job, state=state, elapsed=time.monotonic() - start))
            if state == "Complete":
                return job
            if state == "Failed":
                raise TrainJobFailedError(job)
            if time.monotonic() - start >= timeout:
                raise TimeoutError(
                    f"TrainJob {job.namespace}/{name} did not reach Complete within "
                    f"{timeout:g}s (state: {state})"
                )
            time.sleep(polling_interval)
