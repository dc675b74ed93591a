"""PaddleJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

The replica rules are declared once, in `PaddleJob.REPLICA_RULES`: the CRD's CEL and
`validate_paddlejob`'s checks are both made from them. As in v1.9's webhook, which runs before
any defaulting, replica types are Master and Worker exactly as spelt (the defaulter's case
folding never sees anything else). Ours on top: a job must name at least one replica type (v1.9
accepted `{}` and the job then never finished).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field

from jobcontroller.api import (
    GO_UNSUPPORTED_TYPE,
    INT32_MAX,
    MANAGED_BY_VALUES,
    MAX_REPLICAS,
    JobModel,
    JobSpec,
    KnownTypes,
    KubeModel,
    NonEmpty,
    ReplicaRules,
    ReplicaSpec,
    RestartPolicy,
    ScaleSubresource,
    build_crd,
    default_job,
    replica_rule_errors,
    replica_specs_path,
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


class PaddleReplicaType(StrEnum):
    # The parameter servers of parameter-server mode; absent in collective mode.
    MASTER = "Master"
    WORKER = "Worker"


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
    elastic_policy: PaddleElasticPolicy | None = Field(
        default=None, description="The elastic policy of the job (stored, not acted on)."
    )
    paddle_replica_specs: dict[str, ReplicaSpec] = Field(
        description=(
            "Replica specs keyed by type: Worker alone (collective mode), or Master (parameter "
            "servers) and Worker (trainers)."
        )
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

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "PaddleJob"
    PLURAL: ClassVar[str] = "paddlejobs"
    SINGULAR: ClassVar[str] = "paddlejob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(PaddleReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = PADDLE_CONTAINER_NAME
    SCALE: ClassVar[ScaleSubresource | None] = PADDLE_SCALE
    REPLICA_RULES: ClassVar[ReplicaRules | None] = ReplicaRules(
        exact=True,
        empty=None,
        rules=(
            # v1.9's webhook runs before any defaulting: types exactly as spelt.
            KnownTypes(
                message='unsupported replica type; supported values: "Master", "Worker"',
                error=GO_UNSUPPORTED_TYPE,
            ),
            # Ours: v1.9 accepted `{}` and the job never finished. One stored so runs as it ran.
            NonEmpty(
                message=(
                    "at least one of Master and Worker is required (a job without replicas "
                    "never ends)"
                ),
                ratcheted=True,
                tolerated=True,
            ),
        ),
    )


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
    """Every rule admission enforces: paddlepaddle_webhook.go's validatePaddleJob in its words,
    the pod-name length (#1101), and ours (:func:`stricter_than_anchor_errors`)."""
    errors = dns1035_label_errors(job.name, path="metadata.name")
    if old is not None:
        errors += managed_by_update_errors(old=old.spec.run_policy, new=job.spec.run_policy)
    errors += managed_by_errors(run_policy=job.spec.run_policy, allowed=job.managed_by_values())
    errors += replica_rule_errors(job)
    path = replica_specs_path(job)
    for rtype, replica in job.spec.paddle_replica_specs.items():
        errors += _container_errors(f"{path}[{rtype}].template.spec.containers", replica)
    errors += pod_name_length_errors(job_name=job.name, replica_specs=job.spec.paddle_replica_specs)
    return errors + _elastic_errors(job)


def _container_errors(path: str, replica: ReplicaSpec) -> list[str]:
    """The webhook's container checks, in its words."""
    listed = (replica.template.get("spec") or {}).get("containers") or []
    containers = [c for c in listed if isinstance(c, dict)]
    errors = [] if containers else [f"{path}: Required value: must be specified"]
    errors += [
        f"{path}[{i}].image: Required value: must be required"
        for i, container in enumerate(containers)
        if not container.get("image")
    ]
    if not any(c.get("name") == PADDLE_CONTAINER_NAME for c in containers):
        errors.append(
            f"{path}: Required value: must have at least one container with "
            f'name "{PADDLE_CONTAINER_NAME}"'
        )
    return errors


def stricter_than_anchor_errors(job: PaddleJob) -> list[str]:
    """Rules admission enforces that v1.9 never checked: a job stored before the swap that
    breaks one still runs as v1.9 ran it (it never finished), with a warning."""
    return replica_rule_errors(job, tolerated=True) + _elastic_errors(job)


def _elastic_errors(job: PaddleJob) -> list[str]:
    """The elastic bounds' ceilings. Stored and unread (no controller scales a PaddleJob), so
    harmless past them: tolerated in a stored job."""
    elastic = job.spec.elastic_policy
    if elastic is None:
        return []
    bounds = (("minReplicas", elastic.min_replicas), ("maxReplicas", elastic.max_replicas))
    return [
        f"spec.elasticPolicy.{field}: must be at most {MAX_REPLICAS}, got {value}"
        for field, value in bounds
        if value is not None and value > MAX_REPLICAS
    ]


def paddlejob_crd() -> dict[str, Any]:
    return build_crd(PaddleJob)
