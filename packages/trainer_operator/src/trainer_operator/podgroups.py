"""Gang scheduling of a TrainJob (the runtime's ``podGroupPolicy``): Trainer v2.3.0's
coscheduling and volcano plugins (pkg/runtime/framework/plugins/{coscheduling,volcano}), on
plain JSON.

- ``coscheduling``: every pod template gets the label ``scheduling.x-k8s.io/pod-group:
  <trainjob>``, and the TrainJob a scheduler-plugins PodGroup (``scheduling.x-k8s.io/v1alpha1``)
  of its name: ``minMember`` every pod of every replicated job, ``minResources`` their
  requests, ``scheduleTimeoutSeconds`` the policy's.
- ``volcano``: every pod template gets the annotation ``scheduling.k8s.io/group-name:
  <trainjob>``, and the TrainJob a Volcano PodGroup (``scheduling.volcano.sh/v1beta1``): the same
  ``minMember`` and ``minResources``, the queue of the JobSet's
  ``scheduling.volcano.sh/queue-name`` annotation, the last replicated job's
  ``priorityClassName``, the policy's ``networkTopology``. Before that, v2.3.0's webhook checks:
  that annotation, when there, is not empty; a pod template's PriorityClass exists (the two
  ``system-`` classes always do; v2.3.0 stops looking at the first of them).

A pod's requests are Kubernetes' own sum (``PodRequests``): its containers and sidecars, or its
largest init container with the sidecars before it when that is more, the pod-level requests
for CPU, memory and hugepages when set, and the overhead; requests only, not limits (a
template is not defaulted). The trainer's are taken after ``resourcesPerNode`` is merged in,
and each pod set counts its pods after the ML policy set them.

The PodGroup is created with the TrainJob as controller and then changed only while the
TrainJob is suspended (v2.3.0's rule), by a merge patch of the fields set here (one left out,
as a queue, is not removed: it may be the scheduler's default). It carries the
operator's job-name label (its informers select on it; upstream's carries none). Where a
policy's PodGroup CRD is not installed the TrainJob gets no JobSet and an event with the words
v2.3.0's client gives (``no matches for kind ...``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from jobcontroller import (
    LABEL_JOB_NAME,
    MANAGED_POD_GROUP_FIELDS,
    SCHEDULER_PLUGINS_API_VERSION,
    SCHEDULER_PLUGINS_POD_GROUP_LABEL,
    VOLCANO_API_VERSION,
    VOLCANO_GROUP_ANNOTATION,
    Action,
    CreateObject,
    Observed,
    PatchObject,
    ResourceSum,
    format_quantity,
    is_controlled_by,
    parse_quantity,
    pod_group_patch,
)
from trainer_operator.builder import owner_reference
from trainer_operator.info import Info, RuntimeProblem

__all__ = [
    "COSCHEDULING_KIND",
    "POD_GROUP_CRDS",
    "POD_GROUP_KINDS",
    "PRIORITY_CLASS",
    "PRIORITY_CLASS_EXISTS",
    "VOLCANO_KIND",
    "VOLCANO_QUEUE_ANNOTATION",
    "desired_pod_groups",
    "enforce_pod_group_policy",
    "pod_group_actions",
    "pod_group_errors",
    "pod_requests",
]

Obj = dict[str, Any]

COSCHEDULING_KIND = "PodGroup.scheduling.x-k8s.io"
VOLCANO_KIND = "PodGroup.scheduling.volcano.sh"
"""The two PodGroup kinds, as the controller's owned kinds name them (both are ``PodGroup``)."""
POD_GROUP_CRDS: Mapping[str, str] = {
    COSCHEDULING_KIND: "podgroups.scheduling.x-k8s.io",
    VOLCANO_KIND: "podgroups.scheduling.volcano.sh",
}
POD_GROUP_KINDS = "podGroupKinds"
"""The key of :attr:`Observed.extra` holding the PodGroup kinds whose CRD is installed."""
PRIORITY_CLASS = "PriorityClass"
PRIORITY_CLASS_EXISTS = "priorityClassExists"
"""The key of :attr:`Observed.extra` holding a PriorityClass look-up by name (the cache's)."""
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
SYSTEM_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
_API_VERSIONS = {
    COSCHEDULING_KIND: SCHEDULER_PLUGINS_API_VERSION,
    VOLCANO_KIND: VOLCANO_API_VERSION,
}
_FIELDS = (*MANAGED_POD_GROUP_FIELDS, "networkTopology")
_POD_LEVEL = ("cpu", "memory")
_HUGEPAGES = "hugepages-"


def _policy(info: Info, name: str) -> Obj | None:
    """The runtime's ``coscheduling`` or ``volcano`` policy (None: not that one)."""
    policy = info.pod_group_policy if isinstance(info.pod_group_policy, dict) else {}
    found = policy.get(name)
    return found if isinstance(found, dict) else None


def enforce_pod_group_policy(info: Info, trainjob: Obj) -> None:
    """The label or annotation that puts every pod of ``trainjob`` in its PodGroup."""
    name = str(trainjob["metadata"]["name"])
    if _policy(info, "coscheduling") is not None:
        info.pod_labels[SCHEDULER_PLUGINS_POD_GROUP_LABEL] = name
    if _policy(info, "volcano") is not None:
        info.pod_annotations[VOLCANO_GROUP_ANNOTATION] = name


# A quantity is its exact value and whether it is written with a binary suffix: a sum keeps
# its first term's format, a maximum the larger term's, as Kubernetes' Quantity does.
_Quantity = tuple[Fraction, bool]


def _requests(container: Any) -> dict[str, _Quantity]:
    resources = (container.get("resources") if isinstance(container, dict) else None) or {}
    requests = resources.get("requests") if isinstance(resources, dict) else None
    out: dict[str, _Quantity] = {}
    for name, raw in (requests or {}).items() if isinstance(requests, dict) else ():
        if not isinstance(raw, int | float | str):
            continue
        try:
            out[str(name)] = parse_quantity(raw)
        except (ValueError, ZeroDivisionError):
            continue  # the API server refuses such a pod: it never counts
    return out


def _add(into: dict[str, _Quantity], more: Mapping[str, _Quantity]) -> None:
    for name, (value, binary) in more.items():
        have = into.get(name)
        into[name] = (value, binary) if have is None else (have[0] + value, have[1])


def _max(into: dict[str, _Quantity], more: Mapping[str, _Quantity]) -> None:
    for name, quantity in more.items():
        if name not in into or quantity[0] > into[name][0]:
            into[name] = quantity


def pod_requests(pod_spec: Obj) -> dict[str, str]:
    """What one pod of ``pod_spec`` requests, as Kubernetes' ``resource.PodRequests`` sums it
    with no options (the scheduler's view of a pod)."""
    total: dict[str, _Quantity] = {}
    for container in pod_spec.get("containers") or ():
        _add(total, _requests(container))
    sidecars: dict[str, _Quantity] = {}
    init_peak: dict[str, _Quantity] = {}
    for container in pod_spec.get("initContainers") or ():
        own = _requests(container)
        if isinstance(container, dict) and container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            _max(init_peak, sidecars)
        else:
            during: dict[str, _Quantity] = {}
            _add(during, own)
            _add(during, sidecars)
            _max(init_peak, during)
    _max(total, init_peak)
    pod_level = _requests(pod_spec)  # spec.resources.requests (PodLevelResources)
    for name, quantity in pod_level.items():
        if name in _POD_LEVEL or name.startswith(_HUGEPAGES):
            total[name] = quantity
    overhead = pod_spec.get("overhead")
    if isinstance(overhead, dict):
        _add(total, _requests({"resources": {"requests": overhead}}))
    return {name: format_quantity(v, binary=b) for name, (v, b) in total.items()}


def _pod_spec(rjob: Obj) -> Obj:
    spec = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _gang(info: Info) -> tuple[int, dict[str, str]]:
    """``minMember`` and ``minResources``: every pod set's pods and their requests."""
    jobs = {str(r.get("name")): r for r in info.spec.get("replicatedJobs") or ()}
    members = 0
    total = ResourceSum()
    for ps in info.pod_sets:
        members += ps.count
        rjob = jobs.get(ps.name)
        if rjob is not None:
            total.add(pod_requests(_pod_spec(rjob)), times=ps.count)
    return members, total.as_dict()


def _metadata(trainjob: Obj) -> Obj:
    meta = trainjob["metadata"]
    return {
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "labels": {LABEL_JOB_NAME: meta["name"]},
        "ownerReferences": [owner_reference(trainjob)],
    }


def _priority_classes(info: Info) -> list[str]:
    """The pod templates' ``priorityClassName``s, in the replicated jobs' order."""
    out = []
    for rjob in info.spec.get("replicatedJobs") or ():
        spec = _pod_spec(rjob)
        if "priorityClassName" in spec:
            out.append(str(spec["priorityClassName"] or ""))
    return out


def desired_pod_groups(info: Info, trainjob: Obj) -> list[tuple[str, Obj]]:
    """(kind, PodGroup) for each policy of the runtime: none, or one."""
    out: list[tuple[str, Obj]] = []
    coscheduling, volcano = _policy(info, "coscheduling"), _policy(info, "volcano")
    if coscheduling is None and volcano is None:
        return out
    members, resources = _gang(info)
    if coscheduling is not None:
        spec: Obj = {"minMember": members, "minResources": resources}
        timeout = coscheduling.get("scheduleTimeoutSeconds")
        if timeout is not None:  # the CRD defaults it (60): absent only in hand-made objects
            spec["scheduleTimeoutSeconds"] = int(timeout)
        out.append((COSCHEDULING_KIND, _pod_group(COSCHEDULING_KIND, trainjob, spec)))
    if volcano is not None:
        spec = {"minMember": members, "minResources": resources}
        if VOLCANO_QUEUE_ANNOTATION in info.annotations:
            spec["queue"] = info.annotations[VOLCANO_QUEUE_ANNOTATION]
        priorities = _priority_classes(info)
        if priorities:
            spec["priorityClassName"] = priorities[-1]
        topology = volcano.get("networkTopology")
        if isinstance(topology, dict):
            spec["networkTopology"] = {
                key: topology[key] for key in ("mode", "highestTierAllowed") if key in topology
            }
        out.append((VOLCANO_KIND, _pod_group(VOLCANO_KIND, trainjob, spec)))
    return out


def _pod_group(kind: str, trainjob: Obj, spec: Obj) -> Obj:
    return {
        "apiVersion": _API_VERSIONS[kind],
        "kind": "PodGroup",
        "metadata": _metadata(trainjob),
        "spec": spec,
    }


def _no_class(name: str) -> bool:
    return False


def pod_group_errors(info: Info, observed: Observed) -> list[str]:
    """What v2.3.0's volcano plugin refused a TrainJob for (its ``Validate``); the
    PriorityClasses are looked up with ``observed.extra[PRIORITY_CLASS_EXISTS]``."""
    if _policy(info, "volcano") is None:
        return []
    found = observed.extra.get(PRIORITY_CLASS_EXISTS)
    priority_class_exists: Callable[[str], bool] = found if callable(found) else _no_class
    errors: list[str] = []
    queue = info.annotations.get(VOLCANO_QUEUE_ANNOTATION)
    if queue is not None and queue == "":
        errors.append(
            f"spec.annotations[{VOLCANO_QUEUE_ANNOTATION}]: Invalid value: Volcano queue name "
            "must not be empty"
        )
    for name in _priority_classes(info):
        if name in SYSTEM_PRIORITY_CLASSES:
            break  # v2.3.0 returns here, looking at no later replicated job
        if not priority_class_exists(name):
            errors.append(
                f'spec.templateSpec.priorityClassName: Invalid value: PriorityClass "{name}" '
                f'doesn\'t exist: priorityclasses.scheduling.k8s.io "{name}" not found'
            )
    return errors


def pod_group_actions(info: Info, trainjob: Obj, observed: Observed) -> list[Action]:
    """Create the TrainJob's PodGroup, or bring it to what it should be while the TrainJob is
    suspended. Raises :class:`RuntimeProblem` when its CRD is not installed, or when another
    object controls a PodGroup of its name (no gang runs in someone else's group)."""
    meta = trainjob["metadata"]
    name, namespace = str(meta["name"]), str(meta.get("namespace") or "")
    uid = str(meta.get("uid") or "")
    installed = observed.extra.get(POD_GROUP_KINDS) or frozenset()
    suspended = bool((trainjob.get("spec") or {}).get("suspend"))
    actions: list[Action] = []
    for kind, want in desired_pod_groups(info, trainjob):
        if kind not in installed:
            raise RuntimeProblem(
                f'no matches for kind "PodGroup" in version "{_API_VERSIONS[kind]}"'
            )
        have = observed.owned_named(kind, name)
        if have is None:
            other = observed.lookup(kind, name)
            if other is not None and not is_controlled_by(other, uid=uid):
                raise RuntimeProblem(
                    f'Resource "{name}" of Kind "PodGroup" already exists and is not managed '
                    f"by TrainJob {namespace}/{name}"
                )
            if other is None:
                actions.append(CreateObject(kind=kind, body=want))
            continue
        if not suspended:
            continue
        # Only the fields it sets: a field it leaves out may be the scheduler's to fill in
        # (Volcano's webhook puts a group with no queue in queue "default").
        fields = [f for f in _FIELDS if f in want["spec"]]
        patch = pod_group_patch(desired=want, existing=have, fields=fields)
        if patch is not None:
            actions.append(PatchObject(kind=kind, namespace=namespace, name=name, patch=patch))
    return actions
