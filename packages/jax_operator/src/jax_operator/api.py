"""JAXJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

Admission is done by the CRD (schema plus CEL rules); `validate_jaxjob` states the same rules in
Python for the controller and for tests. As in v1.9's webhook, which runs before any defaulting
(there is no mutating webhook), the only replica type is `Worker`, spelt exactly so. Beyond
the webhook: a Worker spec is required (v1.9 took `jaxReplicaSpecs: {}` and then did nothing
for ever), names must be short enough for the pod names, and `runPolicy.managedBy` is checked
and immutable as for the other kinds (v1.9's JAXJob webhook and controller ignore it).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field

from jobcontroller.api import (
    JobModel,
    JobSpec,
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
    container_errors,
    dns1035_label_errors,
    managed_by_errors,
    managed_by_update_errors,
    pod_name_length_errors,
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
MANAGED_BY_VALUES = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


class JAXReplicaType(StrEnum):
    WORKER = "Worker"


_SPECS = "spec.jaxReplicaSpecs"
# field.NotSupported's words, as v1.9's webhook returns them.
_SUPPORTED = 'supported values: "Worker"'
_MSG_TYPES = f"Unsupported value: {_SUPPORTED}"
_MSG_WORKER = "a Worker replica spec is required"


#: v1.9 never checked managedBy on a JAXJob: ratcheted, so a job stored under it stays writable.
_MANAGED_BY_RULES: list[Any] = cel_ratcheted(cel_managed_by_rule(allowed=MANAGED_BY_VALUES))


class JAXJobSpec(JobSpec):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _MANAGED_BY_RULES})

    jax_replica_specs: dict[
        str,
        Annotated[
            ReplicaSpec,
            Field(
                json_schema_extra={
                    "x-kubernetes-validations": [
                        cel_default_container_rule(container=JAX_CONTAINER_NAME)
                    ]
                }
            ),
        ],
    ] = Field(
        description=(
            "A map of JAXReplicaType (type) to ReplicaSpec (value): the JAX cluster. "
            "The only type is Worker; worker 0 is the coordinator."
        ),
        json_schema_extra={
            "maxProperties": MAX_REPLICA_TYPES,
            "x-kubernetes-validations": [
                # v1.9's webhook refused every other key, case-sensitively.
                {"rule": "self.all(k, k == 'Worker')", "message": _MSG_TYPES},
                *cel_ratcheted({"rule": "'Worker' in self", "message": _MSG_WORKER}),
            ],
        },
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

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": cel_root_rules(specs_path="self.spec.jaxReplicaSpecs")
        }
    )

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "JAXJob"
    PLURAL: ClassVar[str] = "jaxjobs"
    SINGULAR: ClassVar[str] = "jaxjob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(JAXReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = JAX_CONTAINER_NAME
    SCALE: ClassVar[ScaleSubresource | None] = JAX_SCALE


def default_jaxjob(job: JAXJob) -> JAXJob:
    """v1.9's SetDefaults_JAXJob, as a pure function returning a new object."""
    return default_job(
        job, restart_policy=RestartPolicy.NEVER, port_name=JAX_PORT_NAME, port=JAX_PORT
    )


def validate_jaxjob(job: JAXJob, *, old: JAXJob | None = None) -> list[str]:
    """Every rule admission enforces (v1.9's webhook checks, plus ours); [] when valid."""
    errors = dns1035_label_errors(job.name, path="metadata.name")
    specs = job.spec.jax_replica_specs
    for rtype, replica in specs.items():
        if rtype not in JAXJob.REPLICA_TYPES:
            errors.append(
                f'{_SPECS}[{rtype}]: Unsupported value: "{rtype}": supported values: "Worker"'
            )
        errors += container_errors(
            replica_type=rtype, spec=replica, path=_SPECS, default_container=JAX_CONTAINER_NAME
        )
    if JAXReplicaType.WORKER not in specs:
        # v1.9 only refused a missing map (``Required value: must be required``).
        errors.append(f"{_SPECS}: {_MSG_WORKER}")
    errors += pod_name_length_errors(job_name=job.name, replica_specs=specs)
    errors += managed_by_errors(run_policy=job.spec.run_policy, allowed=MANAGED_BY_VALUES)
    if old is not None:
        errors += managed_by_update_errors(old=old.spec.run_policy, new=job.spec.run_policy)
    return errors


def jaxjob_crd() -> dict[str, Any]:
    return build_crd(JAXJob)
