"""PaddleJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

Admission is done by the CRD (schema plus CEL rules); `validate_paddlejob` states the same rules
in Python. As in v1.9's webhook, which runs before any defaulting, replica types are Master and
Worker exactly as spelt (the defaulter's case folding never sees anything else). Ours on top:
a job must name at least one replica type (v1.9 accepted `{}` and the job then never finished).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field

from jobcontroller.api import (
    INT32_MAX,
    MAX_REPLICAS,
    JobModel,
    JobSpec,
    KubeModel,
    ReplicaSpec,
    RestartPolicy,
    default_job,
)
from jobcontroller.api.crd import (
    MAX_REPLICA_TYPES,
    ScaleSubresource,
    build_crd,
    cel_default_container_rule,
    cel_managed_by_rule,
    cel_ratcheted,
    cel_root_rules,
)
from jobcontroller.api.validation import (
    dns1035_label_errors,
    managed_by_errors,
    managed_by_update_errors,
    pod_name_length_errors,
)

__all__ = [
    "MANAGED_BY_VALUES",
    "PADDLE_CONTAINER_NAME",
    "PADDLE_PORT",
    "PADDLE_PORT_NAME",
    "PaddleElasticPolicy",
    "PaddleJob",
    "PaddleJobSpec",
    "PaddleReplicaType",
    "default_paddlejob",
    "paddlejob_crd",
    "stricter_than_anchor_errors",
    "validate_paddlejob",
]

# paddlepaddle_types.go: PaddleJobDefaultContainerName, PaddleJobDefaultPortName, ...Port.
PADDLE_CONTAINER_NAME = "paddle"
PADDLE_PORT_NAME = "master"
PADDLE_PORT = 36543
MANAGED_BY_VALUES = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


class PaddleReplicaType(StrEnum):
    # The parameter servers of parameter-server mode; absent in collective mode.
    MASTER = "Master"
    WORKER = "Worker"


_SPECS = "spec.paddleReplicaSpecs"
_SUPPORTED = 'supported values: "Master", "Worker"'
_MSG_NONE = "at least one of Master and Worker is required (a job without replicas never ends)"


class PaddleElasticPolicy(KubeModel):
    """v1.9's PaddleElasticPolicy: stored and defaulted, but no controller reads it (v1.9
    creates no HPA for a PaddleJob); the elasticity is Paddle's own, within the pods."""

    min_replicas: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description=(
            "Lower limit of workers; defaults to maxReplicas or Worker replicas. "
            f"At most {MAX_REPLICAS}."
        ),
        json_schema_extra={"maximum": MAX_REPLICAS},
    )
    max_replicas: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description=(
            "Upper limit of workers; defaults to minReplicas or Worker replicas. "
            f"At most {MAX_REPLICAS}."
        ),
        json_schema_extra={"maximum": MAX_REPLICAS},
    )
    max_restarts: int | None = Field(
        default=None, ge=0, le=INT32_MAX, description="Restarts of pods in elastic mode."
    )
    metrics: list[dict[str, Any]] | None = Field(
        default=None, description="autoscaling/v2 MetricSpecs (unused, as in v1.9)."
    )


class PaddleJobSpec(JobSpec):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [cel_managed_by_rule(allowed=MANAGED_BY_VALUES)]
        }
    )

    elastic_policy: PaddleElasticPolicy | None = Field(
        default=None, description="The elastic policy of the job (stored, not acted on)."
    )
    paddle_replica_specs: dict[
        str,
        Annotated[
            ReplicaSpec,
            Field(
                json_schema_extra={
                    "x-kubernetes-validations": [
                        cel_default_container_rule(container=PADDLE_CONTAINER_NAME)
                    ]
                }
            ),
        ],
    ] = Field(
        description=(
            "Replica specs keyed by type: Worker alone (collective mode), or Master (parameter "
            "servers) and Worker (trainers)."
        ),
        json_schema_extra={
            "maxProperties": MAX_REPLICA_TYPES,
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(k, k in ['Master', 'Worker'])",
                    "message": f"unsupported replica type; {_SUPPORTED}",
                },
                *cel_ratcheted({"rule": "size(self) > 0", "message": _MSG_NONE}),
            ],
        },
    )


# paddlepaddle_types.go:53, +kubebuilder:subresource:scale.
PADDLE_SCALE = ScaleSubresource(
    spec_replicas_path=".spec.paddleReplicaSpecs.Worker.replicas",
    status_replicas_path=".status.replicaStatuses.Worker.active",
    label_selector_path=".status.replicaStatuses.Worker.selector",
)


class PaddleJob(JobModel[PaddleJobSpec]):
    """PaddleJob is a distributed PaddlePaddle training job: workers alone (collective), or
    parameter servers (Master) and trainers (Worker), with PADDLE_MASTER and PADDLE_NNODES set."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": cel_root_rules(specs_path="self.spec.paddleReplicaSpecs")
        }
    )

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "PaddleJob"
    PLURAL: ClassVar[str] = "paddlejobs"
    SINGULAR: ClassVar[str] = "paddlejob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(PaddleReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = PADDLE_CONTAINER_NAME
    SCALE: ClassVar[ScaleSubresource | None] = PADDLE_SCALE


def default_paddlejob(job: PaddleJob) -> PaddleJob:
    """v1.9's SetDefaults_PaddleJob, as a pure function returning a new object."""
    job = default_job(
        job, restart_policy=RestartPolicy.ON_FAILURE, port_name=PADDLE_PORT_NAME, port=PADDLE_PORT
    )
    spec = job.spec
    elastic = spec.elastic_policy
    if elastic is not None:
        if elastic.min_replicas is None and elastic.max_replicas is not None:
            elastic.min_replicas = elastic.max_replicas
        elif elastic.max_replicas is None and elastic.min_replicas is not None:
            elastic.max_replicas = elastic.min_replicas
        elif elastic.min_replicas is None and elastic.max_replicas is None:
            worker = spec.paddle_replica_specs.get(PaddleReplicaType.WORKER)
            # Without a Worker the anchor dereferences nil (its reconcile panics).
            if worker is not None:
                elastic.min_replicas = elastic.max_replicas = worker.replicas
    return job


def validate_paddlejob(job: PaddleJob, *, old: PaddleJob | None = None) -> list[str]:
    """Every rule admission enforces (v1.9's webhook checks, in its words, plus ours)."""
    return [*_anchor_errors(job, old=old), *stricter_than_anchor_errors(job)]


def _anchor_errors(job: PaddleJob, *, old: PaddleJob | None) -> list[str]:
    """paddlepaddle_webhook.go's validatePaddleJob, and the pod-name length (#1101)."""
    errors = dns1035_label_errors(job.name, path="metadata.name")
    if old is not None:
        errors += managed_by_update_errors(old=old.spec.run_policy, new=job.spec.run_policy)
    errors += managed_by_errors(run_policy=job.spec.run_policy, allowed=MANAGED_BY_VALUES)
    for rtype, replica in job.spec.paddle_replica_specs.items():
        path = f"{_SPECS}[{rtype}]"
        containers_path = f"{path}.template.spec.containers"
        if rtype not in PaddleJob.REPLICA_TYPES:
            errors.append(f'{path}: Unsupported value: "{rtype}": {_SUPPORTED}')
        containers = [
            c
            for c in (replica.template.get("spec") or {}).get("containers") or []
            if isinstance(c, dict)
        ]
        if not containers:
            errors.append(f"{containers_path}: Required value: must be specified")
        for i, container in enumerate(containers):
            if not container.get("image"):
                errors.append(f"{containers_path}[{i}].image: Required value: must be required")
        if not any(c.get("name") == PADDLE_CONTAINER_NAME for c in containers):
            errors.append(
                f"{containers_path}: Required value: must have at least one container with "
                f'name "{PADDLE_CONTAINER_NAME}"'
            )
    errors += pod_name_length_errors(job_name=job.name, replica_specs=job.spec.paddle_replica_specs)
    return errors


def stricter_than_anchor_errors(job: PaddleJob) -> list[str]:
    """Rules admission enforces that v1.9 never checked: a job stored before the swap that
    breaks one still runs as v1.9 ran it (it never finished), with a warning."""
    errors = [] if job.spec.paddle_replica_specs else [f"{_SPECS}: {_MSG_NONE}"]
    elastic = job.spec.elastic_policy
    for field, value in (
        ("minReplicas", elastic.min_replicas if elastic else None),
        ("maxReplicas", elastic.max_replicas if elastic else None),
    ):
        # Stored and unread (no controller scales a PaddleJob): harmless past the ceiling.
        if value is not None and value > MAX_REPLICAS:
            errors.append(
                f"spec.elasticPolicy.{field}: must be at most {MAX_REPLICAS}, got {value}"
            )
    return errors


def paddlejob_crd() -> dict[str, Any]:
    return build_crd(PaddleJob)
