"""TFJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

Admission is done by the CRD (schema plus the CEL rules below); `validate_tfjob` states the same
rules in Python for the controller and for tests. The anchor webhook does not restrict TF
replica-type names, so neither do we, beyond rejecting keys that differ only in case (the
defaulter canonicalises case and would merge them).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field

from jobcontroller.api import (
    CleanPodPolicy,
    JobModel,
    JobSpec,
    ReplicaSpec,
    RestartPolicy,
)
from jobcontroller.api.crd import build_crd
from jobcontroller.api.validation import (
    DNS1035_LABEL_PATTERN,
    DNS1035_MESSAGE,
    MAX_DNS_LABEL_LENGTH,
    container_errors,
    dns1035_label_errors,
    duplicate_replica_type_errors,
    managed_by_errors,
    managed_by_update_errors,
    pod_name_length_errors,
)

__all__ = [
    "MANAGED_BY_VALUES",
    "TF_CONTAINER_NAME",
    "TF_PORT",
    "TF_PORT_NAME",
    "SuccessPolicy",
    "TFJob",
    "TFJobSpec",
    "TFReplicaType",
    "default_tfjob",
    "set_default_port",
    "tfjob_crd",
    "validate_tfjob",
]

TF_CONTAINER_NAME = "tensorflow"
TF_PORT_NAME = "tfjob-port"
TF_PORT = 2222
MANAGED_BY_VALUES = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


class TFReplicaType(StrEnum):
    CHIEF = "Chief"
    # Backward-compatible alias of Chief.
    MASTER = "Master"
    PS = "PS"
    WORKER = "Worker"
    EVALUATOR = "Evaluator"


class SuccessPolicy(StrEnum):
    """`""`: the job succeeds when the chief (or worker 0) does; `AllWorkers`: all workers."""

    DEFAULT = ""
    ALL_WORKERS = "AllWorkers"


_SPECS = "spec.tfReplicaSpecs"
_CHIEF_KEYS = "['chief', 'master']"
_MSG_CONTAINER = f"each replica's template must have a container named {TF_CONTAINER_NAME!r}"
_MSG_ONE_CHIEF = "at most one Chief/Master replica is allowed"
_MSG_CASE = "replica types must not differ only in case"


def _quote_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _name_length_rule(specs_path: str) -> dict[str, str]:
    """A root-level CEL rule bounding `<job>-<rtype>-<last index>` by 63 characters."""
    spec = f"{specs_path}[k]"
    last_index = f"(has({spec}.replicas) && {spec}.replicas > 1 ? {spec}.replicas - 1 : 0)"
    return {
        "rule": (
            f"{specs_path}.all(k, size(self.metadata.name) + size(k) + 2 "
            f"+ size(string({last_index})) <= {MAX_DNS_LABEL_LENGTH})"
        ),
        "message": (
            "metadata.name is too long: the pod and service names "
            f"<name>-<replica type>-<index> must be at most {MAX_DNS_LABEL_LENGTH} characters"
        ),
        "fieldPath": ".metadata.name",
        "reason": "FieldValueInvalid",
    }


def _root_rules(specs_path: str) -> list[dict[str, str]]:
    """Rules every Kubeflow job root carries: a DNS-1035 name short enough for its pods."""
    return [
        {
            "rule": f"self.metadata.name.matches('{DNS1035_LABEL_PATTERN}')",
            "message": f"metadata.name {DNS1035_MESSAGE}",
            "fieldPath": ".metadata.name",
            "reason": "FieldValueInvalid",
        },
        _name_length_rule(specs_path),
    ]


def _managed_by_rule(values: tuple[str, ...]) -> dict[str, str]:
    return {
        "rule": (
            "!has(self.runPolicy) || !has(self.runPolicy.managedBy) || "
            f"self.runPolicy.managedBy in {_quote_list(values)}"
        ),
        "message": f"runPolicy.managedBy must be one of {', '.join(values)}",
        "fieldPath": ".runPolicy.managedBy",
    }


_TF_REPLICA_RULES = [
    {
        # Missing template/spec/containers is reported by `required`; don't report it twice.
        "rule": (
            "!has(self.template) || !has(self.template.spec) || "
            "!has(self.template.spec.containers) || "
            f"self.template.spec.containers.exists(c, c.name == '{TF_CONTAINER_NAME}')"
        ),
        "message": _MSG_CONTAINER,
    }
]


class TFJobSpec(JobSpec):
    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_managed_by_rule(MANAGED_BY_VALUES)]}
    )

    success_policy: SuccessPolicy | None = None
    tf_replica_specs: dict[
        str, Annotated[ReplicaSpec, Field(json_schema_extra={"x-kubernetes-validations": _TF_REPLICA_RULES})]
    ] = Field(
        json_schema_extra={
            # Five replica types; the bound also keeps the CEL rules below cheap.
            "maxProperties": len(TFReplicaType),
            "x-kubernetes-validations": [
                {"rule": "self.all(k, self.exists_one(j, j.lowerAscii() == k.lowerAscii()))", "message": _MSG_CASE},
                {
                    "rule": f"size(self.filter(k, k.lowerAscii() in {_CHIEF_KEYS})) <= 1",
                    "message": _MSG_ONE_CHIEF,
                },
                {
                    "rule": (
                        f"self.all(k, !(k.lowerAscii() in {_CHIEF_KEYS}) || "
                        "!has(self[k].replicas) || self[k].replicas <= 1)"
                    ),
                    "message": _MSG_ONE_CHIEF,
                },
            ],
        }
    )
    enable_dynamic_worker: bool | None = None

    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.tf_replica_specs


class TFJob(JobModel[TFJobSpec]):
    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": _root_rules("self.spec.tfReplicaSpecs")}
    )

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "TFJob"
    PLURAL: ClassVar[str] = "tfjobs"
    SINGULAR: ClassVar[str] = "tfjob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(TFReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = TF_CONTAINER_NAME


def canonical_replica_types(
    specs: dict[str, ReplicaSpec], *, known: tuple[str, ...]
) -> dict[str, ReplicaSpec]:
    """Rename keys to their canonical case (`ps` -> `PS`); unknown keys are kept as given."""
    by_folded = {k.lower(): k for k in known}
    out: dict[str, ReplicaSpec] = {}
    for key, spec in specs.items():
        canonical = by_folded.get(key.lower(), key)
        # An exact canonical key wins over a case variant (validation rejects such pairs).
        if canonical not in out or key == canonical:
            out[canonical] = spec
    return out


def set_default_port(
    template: dict[str, Any], *, container_name: str, port_name: str, port: int
) -> None:
    """Append the framework port to its container when no port of that name exists.

    Falls back to container 0 when no container has the framework's name, as the anchor does.
    """
    containers = (template.get("spec") or {}).get("containers") or []
    if not containers:
        return
    target = next((c for c in containers if c.get("name") == container_name), containers[0])
    ports = target.setdefault("ports", [])
    if not any(p.get("name") == port_name for p in ports):
        ports.append({"name": port_name, "containerPort": port})


def default_tfjob(job: TFJob) -> TFJob:
    """The anchor's SetDefaults_TFJob, as a pure function returning a new object."""
    job = job.model_copy(deep=True)
    spec = job.spec
    if spec.run_policy.clean_pod_policy is None:
        spec.run_policy.clean_pod_policy = CleanPodPolicy.NONE
    if spec.run_policy.suspend is None:
        spec.run_policy.suspend = False
    if spec.success_policy is None:
        spec.success_policy = SuccessPolicy.DEFAULT
    spec.tf_replica_specs = canonical_replica_types(spec.tf_replica_specs, known=TFJob.REPLICA_TYPES)
    for replica in spec.tf_replica_specs.values():
        if replica.replicas is None:
            replica.replicas = 1
        if replica.restart_policy is None:
            replica.restart_policy = RestartPolicy.NEVER
        set_default_port(
            replica.template, container_name=TF_CONTAINER_NAME, port_name=TF_PORT_NAME, port=TF_PORT
        )
    return job


def validate_tfjob(job: TFJob, *, old: TFJob | None = None) -> list[str]:
    """The anchor webhook's checks (plus the pod-name length check); [] when valid."""
    errors = dns1035_label_errors(job.name, path="metadata.name")
    specs = job.spec.tf_replica_specs
    if not specs:
        errors.append(f"{_SPECS}: must be specified")
    errors += duplicate_replica_type_errors(replica_specs=specs, path=_SPECS)
    chiefs = 0
    for rtype, replica in specs.items():
        errors += container_errors(
            replica_type=rtype, spec=replica, path=_SPECS, default_container=TF_CONTAINER_NAME
        )
        if rtype.lower() in ("chief", "master"):
            chiefs += 1 if replica.replicas is None else replica.replicas
    if chiefs > 1:
        errors.append(f"{_SPECS}: {_MSG_ONE_CHIEF}")
    errors += pod_name_length_errors(job_name=job.name, replica_specs=specs)
    errors += managed_by_errors(run_policy=job.spec.run_policy, allowed=MANAGED_BY_VALUES)
    if old is not None:
        errors += managed_by_update_errors(old=old.spec.run_policy, new=job.spec.run_policy)
    return errors


def tfjob_crd() -> dict[str, Any]:
    return build_crd(TFJob)
