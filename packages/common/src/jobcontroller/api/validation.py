"""Validation helpers shared by the framework validators.

Every function is pure and returns human-readable error strings prefixed with the offending
field path (`spec.tfReplicaSpecs[Worker].replicas: ...`), the shape of the apiserver's own
messages. The same rules are enforced at admission by the generated CRDs; these functions let
the controllers re-check objects that predate the CRD (or were stored with an older one) and
give unit tests a cluster-free oracle.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from jobcontroller.api.common import JobModel, JobSpec, ReplicaSpec, RunPolicy
from jobcontroller.api.rules import ReplicaRules

__all__ = [
    "DNS1035_LABEL_PATTERN",
    "DNS1035_MESSAGE",
    "MANAGED_BY_VALUES",
    "MAX_DNS_LABEL_LENGTH",
    "container_errors",
    "dns1035_label_errors",
    "job_errors",
    "managed_by_errors",
    "managed_by_update_errors",
    "pod_name_length_errors",
    "replica_pod_name",
    "replica_rule_errors",
    "replica_specs_path",
]

MAX_DNS_LABEL_LENGTH = 63
#: The ``runPolicy.managedBy`` values training-operator v1.9 accepts.
MANAGED_BY_VALUES = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")
DNS1035_LABEL_PATTERN = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
_DNS1035_LABEL = re.compile(DNS1035_LABEL_PATTERN)

DNS1035_MESSAGE = (
    "must be a DNS-1035 label: at most 63 lower-case letters, digits and '-', "
    "starting with a letter and ending with a letter or digit"
)


def dns1035_label_errors(value: str, *, path: str) -> list[str]:
    """Errors for `value` as a DNS-1035 label (the form Service names must take)."""
    errors: list[str] = []
    if len(value) > MAX_DNS_LABEL_LENGTH:
        errors.append(f"{path}: must be no more than {MAX_DNS_LABEL_LENGTH} characters")
    if not _DNS1035_LABEL.match(value):
        errors.append(f"{path}: {value!r} {DNS1035_MESSAGE}")
    return errors


def replica_pod_name(*, job_name: str, replica_type: str, index: int) -> str:
    """`<job>-<lower(rtype)>-<index>`: the name of a replica's pod and of its Service."""
    return f"{job_name}-{replica_type.lower()}-{index}".replace("/", "-")


def pod_name_length_errors(
    *,
    job_name: str,
    replica_specs: Mapping[str, ReplicaSpec],
    default_replicas: int = 1,
) -> list[str]:
    """Errors when a replica's pod/service name would exceed 63 characters (kubeflow #1101).

    Without this check such a job is accepted and then sits forever without pods, because every
    Service creation fails.
    """
    errors: list[str] = []
    for rtype, spec in replica_specs.items():
        replicas = spec.replicas if spec.replicas is not None else default_replicas
        longest = replica_pod_name(
            job_name=job_name, replica_type=rtype, index=max(replicas - 1, 0)
        )
        if len(longest) > MAX_DNS_LABEL_LENGTH:
            errors.append(
                f"metadata.name: too long: pod and service name {longest!r} would exceed "
                f"{MAX_DNS_LABEL_LENGTH} characters; shorten the job name to at most "
                f"{MAX_DNS_LABEL_LENGTH - (len(longest) - len(job_name))} characters"
            )
    return errors


def _containers(template: Mapping[str, Any]) -> list[Any]:
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return []
    containers = spec.get("containers")
    return list(containers) if isinstance(containers, list) else []


def container_errors(
    *, replica_type: str, spec: ReplicaSpec, path: str, default_container: str | None
) -> list[str]:
    """Each replica needs containers with images, and the framework's named container."""
    base = f"{path}[{replica_type}].template.spec.containers"
    containers = _containers(spec.template)
    if not containers:
        return [f"{base}: must have at least one container"]
    errors: list[str] = []
    names: list[str] = []
    for i, container in enumerate(containers):
        if not isinstance(container, Mapping):
            errors.append(f"{base}[{i}]: must be an object")
            continue
        names.append(str(container.get("name") or ""))
        if not container.get("image"):
            errors.append(f"{base}[{i}].image: must be set")
    if default_container is not None and default_container not in names:
        errors.append(f"{base}: must have a container named {default_container!r}")
    return errors


def managed_by_errors(*, run_policy: RunPolicy, allowed: Iterable[str]) -> list[str]:
    allowed = list(allowed)
    value = run_policy.managed_by
    if value is None or value in allowed:
        return []
    return [
        f"spec.runPolicy.managedBy: {value!r} is not supported; "
        f"must be one of {', '.join(repr(a) for a in allowed)}"
    ]


def managed_by_update_errors(*, old: RunPolicy, new: RunPolicy) -> list[str]:
    if old.managed_by == new.managed_by:
        return []
    return ["spec.runPolicy.managedBy: managedBy is immutable"]


def replica_specs_path(job: JobModel[Any]) -> str:
    """The replica map's path in errors: ``spec.`` and its JSON name (``spec.xgbReplicaSpecs``)."""
    spec_cls = type(job.spec)
    return f"spec.{spec_cls.model_fields[spec_cls.replica_specs_field()].alias}"


def _set_fields(spec: JobSpec) -> frozenset[str]:
    """The JSON names of the spec's fields that are set, for rules that depend on one."""
    return frozenset(
        info.alias or name
        for name, info in type(spec).model_fields.items()
        if getattr(spec, name) is not None
    )


#: The rules of a model without ``REPLICA_RULES``: a non-empty map, no case-only duplicates.
_NO_RULES = ReplicaRules(types=())


def replica_rule_errors(job: JobModel[Any], *, tolerated: bool = False) -> list[str]:
    """The model's ``REPLICA_RULES`` on the job's replica map (the CRD's replica rules, in
    Python); with ``tolerated``, only the errors of rules marked ``tolerated`` (what a
    framework's ``tolerated`` hook returns)."""
    return (job.REPLICA_RULES or _NO_RULES).errors(
        job.replica_specs(),
        path=replica_specs_path(job),
        known=job.REPLICA_TYPES,
        present=_set_fields(job.spec),
        tolerated=tolerated,
    )


def job_errors(
    job: JobModel[Any],
    *,
    old: JobModel[Any] | None = None,
    managed_by: Iterable[str] | None = None,
    containers_of_unknown_types: bool = True,
) -> list[str]:
    """The checks every kind shares, from the model's class attributes: a DNS-1035 name, the
    model's ``REPLICA_RULES`` (without them: a non-empty replica map without case-only
    duplicates), the default container and images in every template (of the types the model
    knows only, without ``containers_of_unknown_types``: the Go webhooks that check no further
    a replica whose type they refuse), pod names within 63 characters and
    ``runPolicy.managedBy`` (the model's ``managed_by_values()`` unless given; on an update,
    that it did not change). A framework's ``validate`` is this plus what only it knows."""
    specs = job.replica_specs()
    path = replica_specs_path(job)
    errors = dns1035_label_errors(job.name, path="metadata.name")
    errors += replica_rule_errors(job)
    for rtype, replica in specs.items():
        if containers_of_unknown_types or rtype in job.REPLICA_TYPES:
            errors += container_errors(
                replica_type=rtype,
                spec=replica,
                path=path,
                default_container=job.DEFAULT_CONTAINER_NAME,
            )
    errors += pod_name_length_errors(job_name=job.name, replica_specs=specs)
    allowed = job.managed_by_values() if managed_by is None else managed_by
    errors += managed_by_errors(run_policy=job.run_policy, allowed=allowed)
    if old is not None:
        errors += managed_by_update_errors(old=old.run_policy, new=job.run_policy)
    return errors
