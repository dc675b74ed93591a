"""JAXJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

The replica rules are declared once, in `JAXJob.REPLICA_RULES`: the CRD's CEL and
`validate_jaxjob`'s checks are both made from them. As in v1.9's webhook, which runs before any
defaulting (there is no mutating webhook), the only replica type is `Worker`, spelt exactly so.
Beyond the webhook: a Worker spec is required (v1.9 took `jaxReplicaSpecs: {}` and then did
nothing for ever), names must be short enough for the pod names, and `runPolicy.managedBy` is
checked and immutable as for the other kinds (v1.9's JAXJob webhook and controller ignore it).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from jobcontroller.api import (
    GO_UNSUPPORTED_TYPE,
    MANAGED_BY_VALUES,
    JobModel,
    JobSpec,
    KnownTypes,
    ReplicaRules,
    ReplicaSpec,
    Required,
    RestartPolicy,
    ScaleSubresource,
    build_crd,
    cel_managed_by_rule,
    cel_ratcheted,
    default_job,
    job_errors,
)

__all__ = [
    "JAX_CONTAINER_NAME",
    "JAX_PORT",
    "JAX_PORT_NAME",
    "MANAGED_BY_VALUES",
    "JAXJob",
    "JAXJobSpec",
    "JAXReplicaType",
    "default_jaxjob",
    "jaxjob_crd",
    "validate_jaxjob",
]

# jax_types.go: JAXJobDefaultContainerName, JAXJobDefaultPortName, JAXJobDefaultPort.
JAX_CONTAINER_NAME = "jax"
JAX_PORT_NAME = "jaxjob-port"
JAX_PORT = 6666


class JAXReplicaType(StrEnum):
    WORKER = "Worker"


#: v1.9 never checked managedBy on a JAXJob: ratcheted, so a job stored under it stays writable.
_MANAGED_BY_RULES: list[Any] = cel_ratcheted(cel_managed_by_rule(allowed=MANAGED_BY_VALUES))


class JAXJobSpec(JobSpec):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _MANAGED_BY_RULES})

    jax_replica_specs: dict[str, ReplicaSpec] = Field(
        description=(
            "A map of JAXReplicaType (type) to ReplicaSpec (value): the JAX cluster. "
            "The only type is Worker; worker 0 is the coordinator."
        )
    )


# jax_types.go's +kubebuilder:subresource:scale marker.
JAX_SCALE = ScaleSubresource(
    spec_replicas_path=".spec.jaxReplicaSpecs.Worker.replicas",
    status_replicas_path=".status.replicaStatuses.Worker.active",
    label_selector_path=".status.replicaStatuses.Worker.selector",
)


class JAXJob(JobModel[JAXJobSpec]):
    """JAXJob is a distributed JAX training job: workers, worker 0 being the coordinator of
    ``jax.distributed.initialize``, with COORDINATOR_ADDRESS, NUM_PROCESSES and PROCESS_ID set."""

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "JAXJob"
    PLURAL: ClassVar[str] = "jaxjobs"
    SINGULAR: ClassVar[str] = "jaxjob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(JAXReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = JAX_CONTAINER_NAME
    SCALE: ClassVar[ScaleSubresource | None] = JAX_SCALE
    REPLICA_RULES: ClassVar[ReplicaRules | None] = ReplicaRules(
        exact=True,
        empty=None,
        rules=(
            # v1.9's webhook refused every other key, case-sensitively (and in these words).
            KnownTypes(
                message='Unsupported value: supported values: "Worker"', error=GO_UNSUPPORTED_TYPE
            ),
            # Ours (v1.9 took `{}` and then did nothing for ever): a job stored so stays
            # writable, and fails validation.
            Required(rtype="Worker", message="a Worker replica spec is required", ratcheted=True),
        ),
    )


def default_jaxjob(job: JAXJob) -> JAXJob:
    """v1.9's SetDefaults_JAXJob, as a pure function returning a new object."""
    return default_job(
        job, restart_policy=RestartPolicy.NEVER, port_name=JAX_PORT_NAME, port=JAX_PORT
    )


def validate_jaxjob(job: JAXJob, *, old: JAXJob | None = None) -> list[str]:
    """Every rule admission enforces (v1.9's webhook checks, plus ours); [] when valid."""
    return job_errors(job, old=old)


def jaxjob_crd() -> dict[str, Any]:
    return build_crd(JAXJob)
