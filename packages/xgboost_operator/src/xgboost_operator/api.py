"""XGBoostJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

Admission is done by the CRD (schema plus CEL rules); `validate_xgboostjob` states the same
rules in Python with the words of v1.9's webhook (pkg/webhooks/xgboost/xgboostjob_webhook.go).
As there, which runs before any defaulting: replica types are Master and Worker, exactly so
spelt; a Master is required and its replicas must be given explicitly and equal 1.
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
    build_crd,
    cel_default_container_rule,
    cel_managed_by_rule,
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
    "MANAGED_BY_VALUES",
    "XGBOOST_CONTAINER_NAME",
    "XGBOOST_PORT",
    "XGBOOST_PORT_NAME",
    "XGBoostJob",
    "XGBoostJobSpec",
    "XGBoostReplicaType",
    "default_xgboostjob",
    "validate_xgboostjob",
    "xgboostjob_crd",
]

# xgboost_types.go: XGBoostJobDefault{ContainerName,PortName,Port}.
XGBOOST_CONTAINER_NAME = "xgboost"
XGBOOST_PORT_NAME = "xgboostjob-port"
XGBOOST_PORT = 9999
MANAGED_BY_VALUES = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


class XGBoostReplicaType(StrEnum):
    # The Rabit tracker (XGBoost) or the LightGBM master: rank 0, MASTER_ADDR.
    MASTER = "Master"
    WORKER = "Worker"


_SPECS = "spec.xgbReplicaSpecs"
# The webhook's field.NotSupported, Forbidden and Required details.
_MSG_TYPES = 'supported values: "Master", "Worker"'
_MSG_MASTER_REPLICAS = "must be 1"
_MSG_MASTER_PRESENT = "must be present"


class XGBoostJobSpec(JobSpec):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [cel_managed_by_rule(allowed=MANAGED_BY_VALUES)]
        }
    )

    xgb_replica_specs: dict[
        str,
        Annotated[
            ReplicaSpec,
            Field(
                json_schema_extra={
                    "x-kubernetes-validations": [
                        cel_default_container_rule(container=XGBOOST_CONTAINER_NAME)
                    ]
                }
            ),
        ],
    ] = Field(
        description="Replica specs keyed by type: Master (exactly 1 replica, required) and Worker.",
        json_schema_extra={
            "maxProperties": MAX_REPLICA_TYPES,
            # All three are v1.9 webhook checks, so stored jobs meet them: none is ratcheted.
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(k, k in ['Master', 'Worker'])",
                    "message": f"replica types: {_MSG_TYPES}",
                },
                {"rule": "'Master' in self", "message": f"Master: {_MSG_MASTER_PRESENT}"},
                {
                    "rule": (
                        "!('Master' in self) || "
                        "(has(self['Master'].replicas) && self['Master'].replicas == 1)"
                    ),
                    "message": f"Master.replicas: {_MSG_MASTER_REPLICAS}",
                },
            ],
        },
    )


class XGBoostJob(JobModel[XGBoostJobSpec]):
    """XGBoostJob is a distributed XGBoost (Rabit) or LightGBM training job: one master and
    workers, with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, WORKER_ADDRS and WORKER_PORT
    set."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": cel_root_rules(specs_path="self.spec.xgbReplicaSpecs")
        }
    )

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "XGBoostJob"
    PLURAL: ClassVar[str] = "xgboostjobs"
    SINGULAR: ClassVar[str] = "xgboostjob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(XGBoostReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = XGBOOST_CONTAINER_NAME


def default_xgboostjob(job: XGBoostJob) -> XGBoostJob:
    """The anchor's SetDefaults_XGBoostJob, as a pure function returning a new object."""
    return default_job(
        job, restart_policy=RestartPolicy.NEVER, port_name=XGBOOST_PORT_NAME, port=XGBOOST_PORT
    )


def validate_xgboostjob(job: XGBoostJob, *, old: XGBoostJob | None = None) -> list[str]:
    """The anchor webhook's checks (plus the pod-name length check); [] when valid.

    The replica-type and Master messages are the webhook's field errors as Go renders them.
    """
    errors = dns1035_label_errors(job.name, path="metadata.name")
    specs = job.spec.xgb_replica_specs
    if not specs:
        errors.append(f"{_SPECS}: Required value: must be required")
    for rtype, replica in specs.items():
        if rtype not in XGBoostJob.REPLICA_TYPES:
            errors.append(f'{_SPECS}[{rtype}]: Unsupported value: "{rtype}": {_MSG_TYPES}')
        errors += container_errors(
            replica_type=rtype, spec=replica, path=_SPECS, default_container=XGBOOST_CONTAINER_NAME
        )
    master = specs.get(XGBoostReplicaType.MASTER)
    if master is None:
        errors.append(f"{_SPECS}[Master]: Required value: {_MSG_MASTER_PRESENT}")
    elif master.replicas != 1:
        errors.append(f"{_SPECS}[Master].replicas: Forbidden: {_MSG_MASTER_REPLICAS}")
    errors += pod_name_length_errors(job_name=job.name, replica_specs=specs)
    errors += managed_by_errors(run_policy=job.spec.run_policy, allowed=MANAGED_BY_VALUES)
    if old is not None:
        errors += managed_by_update_errors(old=old.spec.run_policy, new=job.spec.run_policy)
    return errors


def xgboostjob_crd() -> dict[str, Any]:
    return build_crd(XGBoostJob)
