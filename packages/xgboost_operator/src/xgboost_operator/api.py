"""XGBoostJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

The replica rules are declared once, in `XGBoostJob.REPLICA_RULES`: the CRD's CEL and
`validate_xgboostjob`'s checks (in the words of v1.9's webhook,
pkg/webhooks/xgboost/xgboostjob_webhook.go) are both made from them.
As there, which runs before any defaulting: replica types are Master and Worker, exactly so
spelt; a Master is required and its replicas must be given explicitly and equal 1.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field

from jobcontroller.api import (
    GO_REPLICAS_MUST_BE_1,
    GO_REQUIRED_TYPE,
    GO_UNSUPPORTED_TYPE,
    MANAGED_BY_VALUES,
    JobModel,
    JobSpec,
    KnownTypes,
    ReplicaRules,
    Replicas,
    ReplicaSpec,
    Required,
    RestartPolicy,
    build_crd,
    default_job,
    job_errors,
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


class XGBoostReplicaType(StrEnum):
    # The Rabit tracker (XGBoost) or the LightGBM master: rank 0, MASTER_ADDR.
    MASTER = "Master"
    WORKER = "Worker"


class XGBoostJobSpec(JobSpec):
    xgb_replica_specs: dict[str, ReplicaSpec] = Field(
        description="Replica specs keyed by type: Master (exactly 1 replica, required) and Worker."
    )


class XGBoostJob(JobModel[XGBoostJobSpec]):
    """XGBoostJob is a distributed XGBoost (Rabit) or LightGBM training job: one master and
    workers, with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, WORKER_ADDRS and WORKER_PORT
    set."""

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "XGBoostJob"
    PLURAL: ClassVar[str] = "xgboostjobs"
    SINGULAR: ClassVar[str] = "xgboostjob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(XGBoostReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = XGBOOST_CONTAINER_NAME
    # v1.9's webhook checks, so stored jobs meet them: none is ratcheted. Python says them in
    # the webhook's words (field errors as Go renders them), admission in shorter ones.
    REPLICA_RULES: ClassVar[ReplicaRules | None] = ReplicaRules(
        exact=True,
        rules=(
            KnownTypes(
                message='replica types: supported values: "Master", "Worker"',
                error=GO_UNSUPPORTED_TYPE,
            ),
            Required(rtype="Master", message="Master: must be present", error=GO_REQUIRED_TYPE),
            Replicas(
                types=("Master",),
                min=1,
                max=1,
                must_set=True,
                message="Master.replicas: must be 1",
                error=GO_REPLICAS_MUST_BE_1,
            ),
        ),
    )


def default_xgboostjob(job: XGBoostJob) -> XGBoostJob:
    """The anchor's SetDefaults_XGBoostJob, as a pure function returning a new object."""
    return default_job(
        job, restart_policy=RestartPolicy.NEVER, port_name=XGBOOST_PORT_NAME, port=XGBOOST_PORT
    )


def validate_xgboostjob(job: XGBoostJob, *, old: XGBoostJob | None = None) -> list[str]:
    """The anchor webhook's checks (plus the pod-name length check); [] when valid."""
    return job_errors(job, old=old)


def xgboostjob_crd() -> dict[str, Any]:
    return build_crd(XGBoostJob)
