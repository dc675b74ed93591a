"""TFJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

The replica rules are declared once, in `TFJob.REPLICA_RULES`: the CRD's CEL and
`validate_tfjob`'s checks are both made from them. Unlike the anchor's webhook, replica types are
limited to the five TFJob knows (in any case: the defaulter canonicalises it, and keys that
differ only in case are refused since it would merge them), and one of Chief, Master or Worker
is required: a job of PS or Evaluator replicas alone was accepted upstream and then never
finished.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field

from jobcontroller import override
from jobcontroller.api import (
    MANAGED_BY_VALUES,
    AtLeastOne,
    AtMostOne,
    DistinctCase,
    JobModel,
    JobSpec,
    KnownTypes,
    ReplicaRules,
    Replicas,
    ReplicaSpec,
    RestartPolicy,
    build_crd,
    default_job,
    job_errors,
    replica_rule_errors,
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


#: Master is the backward-compatible name of Chief.
_CHIEFS = (TFReplicaType.CHIEF, TFReplicaType.MASTER)


class TFJobSpec(JobSpec):
    success_policy: SuccessPolicy | None = Field(
        default=None,
        description=(
            '"" (default): the job succeeds when the chief, or else worker 0, succeeds; '
            '"AllWorkers": when every worker has succeeded.'
        ),
    )
    tf_replica_specs: dict[str, ReplicaSpec] = Field(
        description="Replica specs keyed by type: Chief (or Master), PS, Worker, Evaluator."
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

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "TFJob"
    PLURAL: ClassVar[str] = "tfjobs"
    SINGULAR: ClassVar[str] = "tfjob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(TFReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = TF_CONTAINER_NAME
    # Rules v1.9 never checked are ratcheted and tolerated: judged at creation, and on updates
    # only for jobs that met them, so a job stored under the Go operator that breaks one still
    # runs (and can be written), with a warning from the operator.
    REPLICA_RULES: ClassVar[ReplicaRules | None] = ReplicaRules(
        empty="{path}: must be specified",
        rules=(
            KnownTypes(
                message="replica types must be Chief, Master, PS, Worker or Evaluator",
                ratcheted=True,
                tolerated=True,
            ),
            AtLeastOne(
                types=(TFReplicaType.CHIEF, TFReplicaType.MASTER, TFReplicaType.WORKER),
                message=(
                    "a Chief, Master or Worker replica is required (without one nothing "
                    "decides the job's success)"
                ),
                ratcheted=True,
                tolerated=True,
            ),
            DistinctCase(),
            AtMostOne(types=_CHIEFS, message="at most one of Chief and Master may be given"),
            Replicas(
                types=_CHIEFS,
                max=1,
                message="Chief/Master replicas must be at most 1",
                ratcheted=True,
                tolerated=True,
            ),
        ),
    )


def default_tfjob(job: TFJob) -> TFJob:
    """The anchor's SetDefaults_TFJob, as a pure function returning a new object."""
    job = default_job(job, restart_policy=RestartPolicy.NEVER, port_name=TF_PORT_NAME, port=TF_PORT)
    if job.spec.success_policy is None:
        job.spec.success_policy = SuccessPolicy.DEFAULT
    return job


def validate_tfjob(job: TFJob, *, old: TFJob | None = None) -> list[str]:
    """Every rule admission enforces (the anchor webhook's checks, plus ours); [] when valid."""
    return job_errors(job, old=old)


def stricter_than_anchor_errors(job: TFJob) -> list[str]:
    """Those of :func:`validate_tfjob`'s errors that break rules v1.9 never checked (replica
    types outside the five, no Chief, Master or Worker, a Chief or Master with more than one
    replica). A TFJob stored before the swap that breaks one still runs as v1.9 ran it, with
    a warning."""
    return replica_rule_errors(job, tolerated=True)


def tfjob_crd() -> dict[str, Any]:
    return build_crd(TFJob)
