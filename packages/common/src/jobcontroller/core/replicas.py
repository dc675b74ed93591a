"""Reading pods: which replica they are, how they ended, and how many are in each state.

Frameworks use these helpers in their success rules (e.g. TF's "worker 0 exited 0 in container
tensorflow"), so they take raw pod dicts exactly as the informer holds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from jobcontroller.api.common import JobModel, ReplicaStatus
from jobcontroller.core.names import REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL
from jobcontroller.core.types import Event, Obj, ReplicaPods

__all__ = [
    "NOT_TERMINATED_EXIT_CODE",
    "PHASE_FAILED",
    "PHASE_PENDING",
    "PHASE_RUNNING",
    "PHASE_SUCCEEDED",
    "abnormal_pod_events",
    "count_replica_status",
    "exit_code_of",
    "finished_at",
    "group_by_index",
    "is_pod_ready",
    "is_retryable",
    "is_terminating",
    "missing_indices",
    "phase",
    "pod_container_name",
    "pod_reason",
    "pods_by_rtype",
    "pods_in_range",
    "replica_index",
    "replica_pods",
    "replica_ready",
    "replica_slots",
    "restart_count",
    "terminated_state",
]

PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"

#: The anchor's "no exit code" value for a default container that has not terminated (an
#: evicted pod, a pod whose node vanished). It is >= 128, so such failures are retryable.
NOT_TERMINATED_EXIT_CODE = 0xBEEF


def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def pod_reason(pod: Obj) -> str:
    """The pod's ``status.reason`` (Evicted, DeadlineExceeded...), empty when it has none."""
    return str((pod.get("status") or {}).get("reason") or "")


def is_pod_ready(pod: Obj) -> bool:
    """Whether a pod's Ready condition is True (its containers pass their readiness)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def is_terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def replica_index(obj: Obj) -> int | None:
    """The ``replica-index`` label as an int; None when missing or not a number."""
    raw = ((obj.get("metadata") or {}).get("labels") or {}).get(REPLICA_INDEX_LABEL)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def pods_by_rtype(
    pods: Iterable[Obj], *, rtypes: Iterable[str], job_name: str | None = None
) -> dict[str, list[Obj]]:
    """Pods keyed by replica type (as spelled in the spec), matched on the lower-cased label.

    Every requested type gets a (possibly empty) list; pods of other types are dropped. With
    ``job_name``, a pod without the replica-type label (mpi-operator's workers lack it) is
    classified by its name, ``<job>-<type>-<index>``, and returned as a copy that carries the
    labels it would have had (the index label only when it has none).
    """
    out: dict[str, list[Obj]] = {rtype: [] for rtype in rtypes}
    by_label = {rtype.lower(): rtype for rtype in out}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        label = labels.get(REPLICA_TYPE_LABEL)
        if label is None and job_name is not None:
            classified = _classified_by_name(pod, job_name=job_name, known=by_label)
            if classified is not None:
                pod, label = classified, classified["metadata"]["labels"][REPLICA_TYPE_LABEL]
        rtype = by_label.get(str(label)) if label is not None else None
        if rtype is not None:
            out[rtype].append(pod)
    return out


def _classified_by_name(pod: Obj, *, job_name: str, known: Mapping[str, str]) -> Obj | None:
    meta = pod.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name.startswith(f"{job_name}-"):
        return None
    rtype, _, index = name[len(job_name) + 1 :].rpartition("-")
    if rtype not in known or not index.isdigit():
        return None
    labels = dict(meta.get("labels") or {})
    labels[REPLICA_TYPE_LABEL] = rtype
    labels.setdefault(REPLICA_INDEX_LABEL, str(int(index)))
    return {**pod, "metadata": {**meta, "labels": labels}}


def group_by_index(objs: Iterable[Obj], *, offset: int = 0) -> dict[int, list[Obj]]:
    """Objects by slot (``replica-index`` minus ``offset``); objects without a valid index
    are left out (the anchor logs and ignores them)."""
    out: dict[int, list[Obj]] = {}
    for obj in objs:
        index = replica_index(obj)
        if index is not None and index - offset >= 0:
            out.setdefault(index - offset, []).append(obj)
    return out


def missing_indices(replicas: int, taken: Mapping[int, object]) -> Iterator[int]:
    """Indices 0..replicas-1 that ``taken`` lacks, in order, found lazily: a caller that stops
    after k of them has looked at k indices plus those taken before them, whatever
    ``replicas`` is (2^31 included)."""
    return (index for index in range(replicas) if index not in taken)


def replica_pods(pods: Sequence[Obj], *, rtype: str, replicas: int, offset: int = 0) -> ReplicaPods:
    return ReplicaPods(rtype=rtype, replicas=replicas, by_index=group_by_index(pods, offset=offset))


def replica_slots(
    job: JobModel[Any], pods: Iterable[Obj], *, rtype: str, offset: int = 0
) -> ReplicaPods:
    """The pods of ``rtype`` by slot, grouped as the planner groups them for
    ``update_status`` (for a hook that gets the whole :class:`Observed`, such as ``children``):
    by replica type (label, else name) and by ``replica-index`` less ``offset``
    (the framework's ``replica_index_offset``)."""
    spec = job.replica_specs().get(rtype)
    replicas = (spec.replicas or 0) if spec is not None else 0
    grouped = pods_by_rtype(pods, rtypes=[rtype], job_name=job.name)[rtype]
    return replica_pods(grouped, rtype=rtype, replicas=replicas, offset=offset)


def pods_in_range(slots: ReplicaPods) -> list[Obj]:
    """The pods of the slots below the replica count: those past it are being scaled away
    and count nowhere."""
    return [pod for index, pods in slots.by_index.items() if index < slots.replicas for pod in pods]


def replica_ready(slots: ReplicaPods) -> bool:
    """Every replica has its pod, Ready and not being deleted (the moment a launcher that
    waits for its workers may start)."""
    pods = pods_in_range(slots)
    return len(pods) == slots.replicas and all(
        is_pod_ready(pod) and not is_terminating(pod) for pod in pods
    )


def count_replica_status(pods: Iterable[Obj]) -> ReplicaStatus:
    """Active, succeeded and failed counts (common's UpdateJobReplicaStatuses).

    A Running pod that is being deleted counts as failed: a pod on a lost node stays Running
    and Terminating forever and never reaches Failed. Pending pods count nowhere.
    """
    active = succeeded = failed = 0
    for pod in pods:
        current = phase(pod)
        if current == PHASE_RUNNING:
            if is_terminating(pod):
                failed += 1
            else:
                active += 1
        elif current == PHASE_SUCCEEDED:
            succeeded += 1
        elif current == PHASE_FAILED:
            failed += 1
    return ReplicaStatus(active=active, succeeded=succeeded, failed=failed)


def pod_container_name(pod: Obj, *, default: str | None) -> str | None:
    """``default``, or the pod's first container when the framework names none (MPI)."""
    if default is not None:
        return default
    containers = (pod.get("spec") or {}).get("containers") or []
    if containers and isinstance(containers[0], dict):
        name = containers[0].get("name")
        return str(name) if name is not None else None
    return None


def terminated_state(pod: Obj, *, container: str | None) -> Mapping[str, Any] | None:
    """``state.terminated`` of the named container (first container when None), if any."""
    name = pod_container_name(pod, default=container)
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(status, dict) and status.get("name") == name:
            terminated = (status.get("state") or {}).get("terminated")
            return terminated if isinstance(terminated, dict) else None
    return None


def exit_code_of(pod: Obj, *, container: str | None) -> int:
    """The exit code of ``container``, or :data:`NOT_TERMINATED_EXIT_CODE` if it has none."""
    terminated = terminated_state(pod, container=container)
    if terminated is None:
        return NOT_TERMINATED_EXIT_CODE
    try:
        return int(terminated.get("exitCode", NOT_TERMINATED_EXIT_CODE))
    except (TypeError, ValueError):
        return NOT_TERMINATED_EXIT_CODE


def finished_at(pod: Obj, *, container: str | None) -> str:
    """``finishedAt`` of the container's terminated state ("" when unknown); RFC 3339 strings
    sort chronologically, which is all the caller needs."""
    terminated = terminated_state(pod, container=container)
    return str(terminated.get("finishedAt") or "") if terminated else ""


def is_retryable(exit_code: int) -> bool:
    """Exit codes >= 128 (signals: OOM kill, preemption, eviction) are worth a retry; 1-127 are
    the program's own verdict and permanent."""
    return exit_code >= 128


def restart_count(pod: Obj) -> int:
    """The kubelet's in-place restarts of this pod's training containers, as backoffLimit
    counts them (the training-operator's rule): not init containers (a Pending pod whose init
    container waits for the master is not failing its training), and nothing for a pod that
    succeeded (its restarts did not keep it from finishing)."""
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return 0
    total = 0
    for item in status.get("containerStatuses") or []:
        if isinstance(item, dict):
            try:
                total += int(item.get("restartCount") or 0)
            except (TypeError, ValueError):
                continue
    return total


def abnormal_pod_events(pods: Iterable[Obj]) -> list[Event]:
    """Warnings about active pods in trouble, as v1.9's ``RecordAbnormalPods`` words them.

    For each pod not finished and not terminating: a container that terminated with a
    non-zero code, or waits with a message (ImagePullBackOff, CrashLoopBackOff); or, before
    any container has a status, an init container in that state; or, before that, a newest
    pod condition that is not True (Unschedulable). Identical events are aggregated by the
    recorder, so a pod stuck for an hour is one event with a count, not a stream.
    """
    events: list[Event] = []
    for pod in pods:
        if phase(pod) in (PHASE_SUCCEEDED, PHASE_FAILED) or is_terminating(pod):
            continue
        name = str((pod.get("metadata") or {}).get("name") or "")
        status = pod.get("status") or {}
        statuses = status.get("containerStatuses") or status.get("initContainerStatuses") or []
        if statuses:
            for container in statuses:
                events += _container_events(name, container)
            continue
        conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
        if not conditions:
            continue
        newest = max(conditions, key=lambda c: str(c.get("lastTransitionTime") or ""))
        if newest.get("status") != "True":
            events.append(
                Event(
                    "Warning",
                    str(newest.get("reason") or "PodConditionFalse"),
                    f"Error pod {name} condition message: {newest.get('message') or ''}",
                )
            )
    return events


def _container_events(pod: str, container: Obj) -> list[Event]:
    state = container.get("state") or {}
    name = container.get("name")
    events: list[Event] = []
    terminated = state.get("terminated") or {}
    if terminated and terminated.get("exitCode", 0) != 0:
        events.append(
            Event(
                "Warning",
                str(terminated.get("reason") or "Error"),
                f"Error pod {pod} container {name} exitCode: {terminated.get('exitCode')} "
                f"terminated message: {terminated.get('message') or ''}",
            )
        )
    waiting = state.get("waiting") or {}
    if waiting.get("message"):
        events.append(
            Event(
                "Warning",
                str(waiting.get("reason") or "Waiting"),
                f"Error pod {pod} container {name} waiting message: {waiting['message']}",
            )
        )
    return events
