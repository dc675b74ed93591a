"""TFJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

Admission is done by the CRD (schema plus the CEL rules below); `validate_tfjob` states the same
rules in Python for the controller and for tests. Unlike the anchor's webhook, replica types are
limited to the five TFJob knows (in any case: the defaulter canonicalises it, and keys that
differ only in case are refused since it would merge them), and one of Chief, Master or Worker
is required: a job of PS or Evaluator replicas alone was accepted upstream and then never
finished.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field

from jobcontroller import override
from jobcontroller.api import (
    CleanPodPolicy,
    JobModel,
    JobSpec,
    ReplicaSpec,
    RestartPolicy,
    canonical_replica_types,
    set_default_port,
)
from jobcontroller.api.crd import (
    MAX_REPLICA_TYPES,
    build_crd,
    cel_default_container_rule,
    cel_managed_by_rule,
    cel_ratcheted,
    cel_root_rules,
)
from jobcontroller.api.validation import (
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
    "stricter_than_anchor_errors",
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
    """When a TFJob without a chief succeeds: on worker 0's success, or on all workers'."""

    DEFAULT = ""
    ALL_WORKERS = "AllWorkers"


_SPECS = "spec.tfReplicaSpecs"
_CHIEF_KEYS = "['chief', 'master']"
_MSG_ONE_CHIEF = "at most one of Chief and Master may be given"
_MSG_CHIEF_REPLICAS = "Chief/Master replicas must be at most 1"
_MSG_CASE = "replica types must not differ only in case"
_MSG_TYPES = "replica types must be Chief, Master, PS, Worker or Evaluator"
_MSG_LEADER = (
    "a Chief, Master or Worker replica is required (without one nothing decides the job's success)"
)
_KNOWN_KEYS = "['chief', 'master', 'ps', 'worker', 'evaluator']"
_LEADER_KEYS = "['chief', 'master', 'worker']"


class TFJobSpec(JobSpec):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [cel_managed_by_rule(allowed=MANAGED_BY_VALUES)]
        }
    )

    success_policy: SuccessPolicy | None = Field(
        default=None,
        description=(
            '"" (default): the job succeeds when the chief, or else worker 0, succeeds; '
            '"AllWorkers": when every worker has succeeded.'
        ),
    )
    tf_replica_specs: dict[
        str,
        Annotated[
            ReplicaSpec,
            Field(
                json_schema_extra={
                    "x-kubernetes-validations": [
                        cel_default_container_rule(container=TF_CONTAINER_NAME)
                    ]
                }
            ),
        ],
    ] = Field(
        description="Replica specs keyed by type: Chief (or Master), PS, Worker, Evaluator.",
        json_schema_extra={
            "maxProperties": MAX_REPLICA_TYPES,
            "x-kubernetes-validations": [
                # Rules v1.9 never checked are ratcheted: judged at creation, and on updates
                # only for jobs that met them, so a job stored under the Go operator that
                # breaks one still runs (and can be written), with a warning from the operator.
                *cel_ratcheted(
                    {"rule": f"self.all(k, k.lowerAscii() in {_KNOWN_KEYS})", "message": _MSG_TYPES}
                ),
                *cel_ratcheted(
                    {
                        "rule": f"self.exists(k, k.lowerAscii() in {_LEADER_KEYS})",
                        "message": _MSG_LEADER,
                    }
                ),
                {
                    "rule": "self.all(k, self.exists_one(j, j.lowerAscii() == k.lowerAscii()))",
                    "message": _MSG_CASE,
                },
                {
                    "rule": f"size(self.filter(k, k.lowerAscii() in {_CHIEF_KEYS})) <= 1",
                    "message": _MSG_ONE_CHIEF,
                },
                *cel_ratcheted(
                    {
                        "rule": (
                            f"self.all(k, !(k.lowerAscii() in {_CHIEF_KEYS}) || "
                            "!has(self[k].replicas) || self[k].replicas <= 1)"
                        ),
                        "message": _MSG_CHIEF_REPLICAS,
                    }
                ),
            ],
        },
    )
    enable_dynamic_worker: bool | None = Field(
        default=None,
        description="Give each worker a sparse TF_CONFIG so workers can join and leave.",
    )

    @override
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.tf_replica_specs


class TFJob(JobModel[TFJobSpec]):
    """TFJob is a distributed TensorFlow training job: a chief, parameter servers, workers and
    an evaluator, each replica type a set of pods with TF_CONFIG set."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": cel_root_rules(specs_path="self.spec.tfReplicaSpecs")
        }
    )

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "TFJob"
    PLURAL: ClassVar[str] = "tfjobs"
    SINGULAR: ClassVar[str] = "tfjob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(TFReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = TF_CONTAINER_NAME


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
    spec.tf_replica_specs = canonical_replica_types(
        spec.tf_replica_specs, known=TFJob.REPLICA_TYPES
    )
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
    """Every rule admission enforces (the anchor webhook's checks, plus ours); [] when valid."""
    return [*_anchor_errors(job, old=old), *stricter_than_anchor_errors(job)]


def _anchor_errors(job: TFJob, *, old: TFJob | None) -> list[str]:
    """The checks of v1.9's webhook, and ours that no job can run without (a pod or Service
    name the API server would refuse; replica types that default onto each other)."""
    errors = dns1035_label_errors(job.name, path="metadata.name")
    specs = job.spec.tf_replica_specs
    if not specs:
        errors.append(f"{_SPECS}: must be specified")
    errors += duplicate_replica_type_errors(replica_specs=specs, path=_SPECS)
    chiefs = [k for k in specs if k.lower() in ("chief", "master")]
    for rtype, replica in specs.items():
        errors += container_errors(
            replica_type=rtype, spec=replica, path=_SPECS, default_container=TF_CONTAINER_NAME
        )
    if len(chiefs) > 1:
        errors.append(f"{_SPECS}: {_MSG_ONE_CHIEF}")
    errors += pod_name_length_errors(job_name=job.name, replica_specs=specs)
    errors += managed_by_errors(run_policy=job.spec.run_policy, allowed=MANAGED_BY_VALUES)
    if old is not None:
        errors += managed_by_update_errors(old=old.spec.run_policy, new=job.spec.run_policy)
    return errors


def stricter_than_anchor_errors(job: TFJob) -> list[str]:
    """Rules admission enforces that v1.9 never checked: replica types outside the five, a job
    with no Chief, Master or Worker, a Chief or Master with more than one replica. A TFJob
    stored before the swap that breaks one still runs as v1.9 ran it, with a warning."""
    specs = job.spec.tf_replica_specs
    known = {rtype.lower() for rtype in TFJob.REPLICA_TYPES}
    errors = [f"{_SPECS}[{k}]: {_MSG_TYPES}" for k in specs if k.lower() not in known]
    if specs and not any(k.lower() in ("chief", "master", "worker") for k in specs):
        errors.append(f"{_SPECS}: {_MSG_LEADER}")
    errors += [
        f"{_SPECS}[{k}].replicas: {_MSG_CHIEF_REPLICAS}"
        for k in specs
        if k.lower() in ("chief", "master") and (specs[k].replicas or 0) > 1
    ]
    return errors


def tfjob_crd() -> dict[str, Any]:
    return build_crd(TFJob)
