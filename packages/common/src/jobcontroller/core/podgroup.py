"""Gang scheduling: the PodGroup a job needs and how its pods join it.

Two schedulers are supported, chosen by ``--gang-scheduler-name``: ``volcano`` (a
``scheduling.volcano.sh/v1beta1`` PodGroup) and any other value for the scheduler-plugins
coscheduling plugin (``scheduling.x-k8s.io/v1alpha1``). The PodGroup has the job's name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobcontroller.api.common import JobModel, ReplicaSpec
from jobcontroller.core.names import JOB_NAME_LABEL, owner_reference
from jobcontroller.core.quantity import ResourceSum
from jobcontroller.core.types import POD_GROUP, GangFlavor, Obj, PlanConfig

__all__ = [
    "MANAGED_POD_GROUP_FIELDS",
    "SCHEDULER_PLUGINS_API_VERSION",
    "SCHEDULER_PLUGINS_POD_GROUP_LABEL",
    "VOLCANO",
    "VOLCANO_API_VERSION",
    "VOLCANO_DEFAULT_QUEUE",
    "VOLCANO_GROUP_ANNOTATION",
    "VOLCANO_TASK_SPEC_ANNOTATION",
    "decorate_template",
    "delays_pod_creation",
    "desired_pod_group",
    "gang_enabled",
    "is_volcano",
    "min_member",
    "min_resources",
    "pod_group_patch",
]

VOLCANO = "volcano"
VOLCANO_API_VERSION = "scheduling.volcano.sh/v1beta1"
VOLCANO_DEFAULT_QUEUE = "default"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
SCHEDULER_PLUGINS_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
SCHEDULER_PLUGINS_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

#: Volcano phases in which the group is not admitted yet, so pods would only sit Pending.
_NOT_ADMITTED = ("", "Pending")


def gang_enabled(config: PlanConfig) -> bool:
    return config.pod_group_available and bool(config.gang_scheduler_name)


def is_volcano(config: PlanConfig) -> bool:
    return config.gang_scheduler_name == VOLCANO


def min_member(job: JobModel[Any]) -> int:
    """``schedulingPolicy.minAvailable``, else every replica of every type."""
    policy = job.run_policy.scheduling_policy
    if policy is not None and policy.min_available is not None:
        return policy.min_available
    return sum(spec.replicas or 0 for spec in job.replica_specs().values())


def _priority(spec: ReplicaSpec, priority_classes: Mapping[str, int]) -> int:
    name = (spec.template.get("spec") or {}).get("priorityClassName") or ""
    # An unknown class counts as priority 0, like the anchor's failed lookup.
    return priority_classes.get(str(name), 0)


def min_resources(
    job: JobModel[Any], *, members: int, priority_classes: Mapping[str, int]
) -> dict[str, str]:
    """The resources the first ``members`` pods request (limits where a container sets no
    requests), taking replica types by PriorityClass value, highest first.

    Ties keep the spec's order, so the result is deterministic (the anchor sorts a Go map).
    """
    specs = sorted(
        job.replica_specs().values(),
        key=lambda spec: _priority(spec, priority_classes),
        reverse=True,
    )
    total = ResourceSum()
    counted = 0
    for spec in specs:
        # Every pod of a type asks for the same: one multiplication per type, whatever the
        # replica count (a job asking for 2^31 pods costs no more to price than one of two).
        pods = min(spec.replicas or 0, members - counted)
        if pods <= 0:
            continue
        counted += pods
        for container in (spec.template.get("spec") or {}).get("containers") or []:
            resources = (container or {}).get("resources") or {}
            requests = resources.get("requests")
            if isinstance(requests, dict):
                total.add(requests, times=pods)
            elif isinstance(resources.get("limits"), dict):
                total.add(resources["limits"], times=pods)
    return total.as_dict()


def desired_pod_group(
    job: JobModel[Any],
    *,
    config: PlanConfig,
    existing: Obj | None,
    flavor: GangFlavor | None = None,
    priority_classes: Mapping[str, int] | None = None,
) -> Obj:
    """The complete PodGroup the job should have (spec only is compared later).
    ``priority_classes`` (name -> value, as the cluster has them) order the replica types
    counted into minResources."""
    flavor = flavor or GangFlavor()
    policy = job.run_policy.scheduling_policy
    members = min_member(job)
    resources: dict[str, Any]
    if policy is not None and policy.min_resources is not None:
        resources = dict(policy.min_resources)
    else:
        resources = min_resources(job, members=members, priority_classes=priority_classes or {})
    spec: dict[str, Any] = {"minMember": members}
    if is_volcano(config):
        api_version = VOLCANO_API_VERSION
        queue = flavor.default_queue
        if flavor.queue_annotation and job.annotations.get(flavor.queue_annotation):
            queue = job.annotations[flavor.queue_annotation]
        if policy is not None and policy.queue:
            queue = policy.queue
        # A queue already on the group wins: Volcano does not move admitted groups between
        # queues, and the job's queue field is immutable anyway.
        existing_queue = ((existing or {}).get("spec") or {}).get("queue")
        if existing_queue:
            queue = str(existing_queue)
        if queue:
            spec["queue"] = queue
        priority = _priority_class(job, flavor)
        if priority:
            spec["priorityClassName"] = priority
    else:
        api_version = SCHEDULER_PLUGINS_API_VERSION
        if policy is not None and policy.schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = policy.schedule_timeout_seconds
    if resources:
        # Omitted when empty, as Go's omitempty does, so the stored object compares equal.
        spec["minResources"] = resources
    metadata: dict[str, Any] = {
        "name": job.name,
        "namespace": job.namespace,
        # The operator's informers watch only objects carrying the job-name label.
        "labels": {JOB_NAME_LABEL: job.name},
        "ownerReferences": [owner_reference(job)],
    }
    if job.annotations:
        metadata["annotations"] = job.annotations
    return {"apiVersion": api_version, "kind": POD_GROUP, "metadata": metadata, "spec": spec}


def _priority_class(job: JobModel[Any], flavor: GangFlavor) -> str:
    """The scheduling policy's priority class, else (mpi-operator) the first template's."""
    policy = job.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        return policy.priority_class
    specs = job.replica_specs()
    for rtype in flavor.priority_from_templates:
        spec = specs.get(rtype)
        name = (spec.template.get("spec") or {}).get("priorityClassName") if spec else None
        if name:
            return str(name)
    return ""


#: The PodGroup spec fields the operators set (a TrainJob's Volcano group adds networkTopology).
MANAGED_POD_GROUP_FIELDS = (
    "minMember",
    "queue",
    "priorityClassName",
    "minResources",
    "scheduleTimeoutSeconds",
)


def pod_group_patch(
    *, desired: Obj, existing: Obj, fields: Sequence[str] = MANAGED_POD_GROUP_FIELDS
) -> Obj | None:
    """A JSON merge patch turning ``existing``'s spec into ``desired``'s; None if equal.

    Only the ``fields`` the operator sets are compared: schedulers and webhooks may add others.
    """
    want: dict[str, Any] = desired.get("spec") or {}
    have: dict[str, Any] = existing.get("spec") or {}
    patch: dict[str, Any] = {}
    for key in fields:
        if want.get(key) == have.get(key):
            continue
        if key == "minResources" and isinstance(want.get(key), dict):
            value: dict[str, Any] = dict(want[key])
            # Merge patches merge maps: a resource no longer wanted must be nulled out.
            for stale in set(have.get(key) or {}) - set(value):
                value[stale] = None
            patch[key] = value
        else:
            patch[key] = want.get(key)
    return {"spec": patch} if patch else None


def delays_pod_creation(*, config: PlanConfig, pod_group: Obj | None) -> bool:
    """Volcano only: hold pods back until the group is admitted (Inqueue or later).

    The PodGroup informer's update wakes the job when the phase moves, so no timer is needed.
    """
    if not is_volcano(config):
        return False
    if pod_group is None:
        return True
    return str((pod_group.get("status") or {}).get("phase") or "") in _NOT_ADMITTED


def decorate_template(
    template: Obj,
    *,
    job_name: str,
    rtype: str,
    config: PlanConfig,
    flavor: GangFlavor | None = None,
) -> bool:
    """Make a pod template join the job's gang (in place).

    A scheduler name set by the user is kept (unless the flavor forces ours); returns True
    when another scheduler's name was kept, so the caller can warn.
    """
    flavor = flavor or GangFlavor()
    spec = template.setdefault("spec", {})
    metadata = template.setdefault("metadata", {})
    own_scheduler = VOLCANO if is_volcano(config) else config.gang_scheduler_name
    foreign = bool(spec.get("schedulerName")) and spec.get("schedulerName") != own_scheduler
    if not spec.get("schedulerName") or flavor.force_scheduler_name:
        spec["schedulerName"] = own_scheduler
    if is_volcano(config):
        annotations = metadata.get("annotations") or {}
        annotations[VOLCANO_GROUP_ANNOTATION] = job_name
        if flavor.task_spec_annotation:
            annotations[VOLCANO_TASK_SPEC_ANNOTATION] = rtype.lower()
        metadata["annotations"] = annotations
    else:
        labels = metadata.get("labels") or {}
        labels[SCHEDULER_PLUGINS_POD_GROUP_LABEL] = job_name
        metadata["labels"] = labels
    # A forced name (mpi-operator overwrites it, with a log line only) is nothing to warn of.
    return foreign and not flavor.force_scheduler_name
