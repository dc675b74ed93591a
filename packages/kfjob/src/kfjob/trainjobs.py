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
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kfjob.client import JobClient, _container_run, _failure, _json, pod_order
from trainer_operator.api import ANCESTOR_LABEL, NODE, TRAINER, TrainJob

__all__ = [
    "JOBSET_NAME_LABEL",
    "TrainJobFailedError",
    "TrainJobProgress",
    "TrainJobs",
    "finished_at",
    "is_trainjob",
    "log_container",
    "log_pod",
    "trainjob_state",
]

Obj = dict[str, Any]
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: What JobSet v0.12.0 puts on each pod besides its name (api/jobset/v1alpha2 keys), and what
#: the Job controller adds to an Indexed Job's pods.
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
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


def _index(pod: Obj, key: str) -> int | None:
    """An index the pod carries as a label (or, for the completion index, an annotation: the
    Job controller sets the label only since Kubernetes 1.28)."""
    meta = pod.get("metadata") or {}
    value = str(
        ((meta.get("labels") or {}).get(key)) or ((meta.get("annotations") or {}).get(key)) or ""
    )
    return int(value) if value.isdigit() else None


def _pod_rank(pod: Obj) -> tuple[int, int, str]:
    big = 1 << 30
    job_index, completion = _index(pod, JOB_INDEX_LABEL), _index(pod, COMPLETION_INDEX)
    return (
        big if job_index is None else job_index,
        big if completion is None else completion,
        str((pod.get("metadata") or {}).get("name") or ""),
    )


def log_pod(
    pods: Collection[Obj],
    *,
    trainer_jobs: Collection[str] = (),
    replicated_job: str | None = None,
    index: int | None = None,
) -> Obj | None:
    """The pod whose log ``kfjob logs`` shows: of ``replicated_job`` (else of the trainer step:
    a replicated job named in ``trainer_jobs``, else ``node``, the trainer's in every shipped
    runtime), the one of completion index ``index`` (default 0), the JobSet's first job's when
    the replicated job has several. Without ``replicated_job`` and ``index``, when no trainer
    pod is there (the initializers still run), the first pod, as v1's logs fall back to the
    first pod when there is no master."""
    wanted = {replicated_job} if replicated_job else set(trainer_jobs) or {NODE}
    of_step = [
        p
        for p in pods
        if ((p.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_LABEL) in wanted
    ]
    at = [p for p in of_step if _index(p, COMPLETION_INDEX) == (index or 0)]
    if at:
        return min(at, key=_pod_rank)
    if replicated_job is None and index is None and pods:
        return min(pods, key=lambda p: (str(_labels(p).get(REPLICATED_JOB_LABEL)), _pod_rank(p)))
    return None


def _labels(pod: Obj) -> dict[str, str]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def log_container(pod: Obj | None) -> str | None:
    """The trainer's container (``node``), else the pod's first (an initializer's)."""
    names = [str(c.get("name")) for c in ((pod or {}).get("spec") or {}).get("containers") or ()]
    return NODE if NODE in names else (names[0] if names else None)


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

    def delete(self, name: str, *, namespace: str | None = None) -> None:
        """Delete the TrainJob; its JobSet (and so its Jobs and pods) goes with it by
        ownership, in the background as v1's ``delete``."""
        try:
            self.client.custom.delete_namespaced_custom_object(
                TrainJob.GROUP,
                TrainJob.VERSION,
                self._ns(namespace),
                TrainJob.PLURAL,
                name,
                body=k8s.V1DeleteOptions(propagation_policy="Background"),
                _preload_content=False,
            )
        except ApiException as exc:
            raise _failure(exc) from exc

    def set_suspend(self, name: str, *, suspend: bool, namespace: str | None = None) -> TrainJob:
        """Set ``spec.suspend`` (merge patch): the TrainJob's switch, which the controller
        passes on to its JobSet."""
        try:
            raw = self.client.custom.patch_namespaced_custom_object(
                TrainJob.GROUP,
                TrainJob.VERSION,
                self._ns(namespace),
                TrainJob.PLURAL,
                name,
                {"spec": {"suspend": suspend}},
                _preload_content=False,
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        return TrainJob.parse(_json(raw))

    def trainer_jobs(self, name: str, *, namespace: str | None = None) -> set[str]:
        """The replicated jobs of the trainer step: the ancestor label is on the JobSet's Job
        templates, not on their pods, so it is read from the Jobs. Empty when there are none
        yet or they may not be listed (then ``node`` is taken)."""
        try:
            resp = k8s.BatchV1Api(self.client.api_client).list_namespaced_job(
                self._ns(namespace),
                label_selector=f"{JOBSET_NAME_LABEL}={name},{ANCESTOR_LABEL}={TRAINER}",
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status in (401, 403, 404):
                return set()
            raise _failure(exc) from exc
        items = _json(resp).get("items") or []
        return {
            str(_labels(j)[REPLICATED_JOB_LABEL])
            for j in items
            if _labels(j).get(REPLICATED_JOB_LABEL)
        }

    def log_pod(
        self,
        name: str,
        *,
        namespace: str | None = None,
        replicated_job: str | None = None,
        index: int | None = None,
    ) -> Obj | None:
        pods = self.pods(name, namespace=namespace)
        if not pods:
            return None
        trainer = set() if replicated_job else self.trainer_jobs(name, namespace=namespace)
        return log_pod(pods, trainer_jobs=trainer, replicated_job=replicated_job, index=index)

    def get_logs(
        self,
        name: str,
        *,
        namespace: str | None = None,
        replicated_job: str | None = None,
        index: int | None = None,
        container: str | None = None,
    ) -> dict[str, str]:
        """The log of :func:`log_pod`'s pod, as ``{pod name: text}``; empty without one."""
        ns = self._ns(namespace)
        pod = self.log_pod(name, namespace=ns, replicated_job=replicated_job, index=index)
        if pod is None:
            return {}
        pod_name = str(pod["metadata"]["name"])
        try:
            text = self.client.core.read_namespaced_pod_log(
                pod_name, ns, container=container or log_container(pod)
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        return {pod_name: str(text)}

    def follow_logs(
        self,
        name: str,
        *,
        namespace: str | None = None,
        replicated_job: str | None = None,
        index: int | None = None,
        container: str | None = None,
        poll: float = 1.0,
    ) -> Iterator[str]:
        """:meth:`JobClient.follow_logs` for a TrainJob: across restarts (a marker line), until
        it is Complete or Failed and the last stream has ended."""
        ns = self._ns(namespace)
        seen: tuple[str, int] | None = None
        while True:
            pod = self.log_pod(name, namespace=ns, replicated_job=replicated_job, index=index)
            chosen = container or log_container(pod)
            state = _container_run(pod, chosen)
            if pod is not None and state is not None and state != seen:
                if seen is not None:
                    yield f"--- {pod['metadata']['name']} restarted (restart {state[1]}) ---"
                seen = state
                yield from self.client._stream(pod, ns, chosen)
                continue
            if trainjob_state(self.get(name, namespace=ns)) in ("Complete", "Failed"):
                return
            time.sleep(poll)

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
