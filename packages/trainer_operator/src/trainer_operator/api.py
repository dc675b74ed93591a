"""TrainJob, ``trainer.kubeflow.org/v1alpha1`` (Kubeflow Trainer v2.3.0): model and constants.

A TrainJob names a runtime (``runtimeRef``) and says what differs for this run: the trainer's
image, command, env, node count and resources, the dataset and model to fetch first, and
patches from the managers that own parts of it (``runtimePatches``). The controller merges the
pair into one JobSet.

Admission is the CRD's: its schema, defaults and CEL rules hold what v2.3.0's types and
webhooks check without looking at another object (docs/trainjob.md lists each check and where
it is enforced). What needs the runtime (does it exist, has it the initializer job the TrainJob
asks for, are the env names the framework reserves left alone) the controller reports on the
TrainJob once it has read the runtime.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import ConfigDict, Field

from jobcontroller.api import KubeModel, Time
from trainer_operator.kubetypes import EnvVar, LocalObjectReference, ResourceRequirements
from trainer_operator.meta import (
    ATOMIC,
    CRD_DEFAULT,
    IMMUTABLE,
    Condition,
    Int32,
    Int64,
    TrainerObject,
    cel,
    extra,
    list_map,
)
from trainer_operator.patches import RuntimePatch

__all__ = [
    "ANCESTOR_CONTAINERS",
    "ANCESTOR_LABEL",
    "DATASET_INITIALIZER",
    "MANAGED_BY_KUEUE",
    "MANAGED_BY_SELF",
    "MODEL_INITIALIZER",
    "NODE",
    "TRAINER",
    "DatasetInitializer",
    "Initializer",
    "JobStatus",
    "Metric",
    "ModelInitializer",
    "RuntimeRef",
    "TrainJob",
    "TrainJobConditionReason",
    "TrainJobConditionType",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
    "TrainerStatus",
]

GROUP = "trainer.kubeflow.org"
#: managedBy of the TrainJobs this operator reconciles (also the default), and MultiKueue's.
MANAGED_BY_SELF = "trainer.kubeflow.org/trainjob-controller"
MANAGED_BY_KUEUE = "kueue.x-k8s.io/multikueue"
MANAGED_BY_VALUES = (MANAGED_BY_SELF, MANAGED_BY_KUEUE)
#: The runtime kinds a TrainJob may name (v2.3.0's runtime registry).
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")

#: The label on a runtime's Job templates saying which step of a TrainJob they run.
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER = "trainer"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
NODE = "node"
#: Each step and the container its TrainJob fields apply to.
ANCESTOR_CONTAINERS = {
    TRAINER: NODE,
    DATASET_INITIALIZER: DATASET_INITIALIZER,
    MODEL_INITIALIZER: MODEL_INITIALIZER,
}


class TrainJobConditionType(StrEnum):
    SUSPENDED = "Suspended"
    COMPLETE = "Complete"
    FAILED = "Failed"


class TrainJobConditionReason(StrEnum):
    SUSPENDED = "Suspended"
    RESUMED = "Resumed"
    RUNTIME_NOT_SUPPORTED = "TrainingRuntimeNotSupported"
    DEADLINE_EXCEEDED = "DeadlineExceeded"


_STORAGE_URI_RULE = cel(
    "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
    message="storageUri may be empty, or it must be a valid URI (scheme://...)",
)


class RuntimeRef(KubeModel):
    """The runtime a TrainJob runs on."""

    model_config = ConfigDict(
        json_schema_extra=extra(
            rules=[
                # v2.3.0's webhook looked the pair up in its runtime registry.
                cel(
                    f"has(self.apiGroup) && self.apiGroup == '{GROUP}' && "
                    f"has(self.kind) && self.kind in {list(RUNTIME_KINDS)}",
                    message_expression=(
                        "'unsupported runtime: ' + (has(self.kind) ? self.kind : '') + "
                        "(has(self.apiGroup) && self.apiGroup != '' ? '.' + self.apiGroup : '')"
                    ),
                    reason="FieldValueInvalid",
                )
            ]
        )
    )

    name: str = Field(
        min_length=1,
        max_length=253,
        description=("The runtime's name; a TrainingRuntime must be in the TrainJob's namespace."),
    )
    api_group: str | None = Field(
        default=None,
        max_length=253,
        description="The runtime's API group. Defaults to trainer.kubeflow.org.",
        json_schema_extra={CRD_DEFAULT: GROUP},
    )
    kind: str | None = Field(
        default=None,
        max_length=253,
        description=(
            "TrainingRuntime or ClusterTrainingRuntime. Defaults to ClusterTrainingRuntime."
        ),
        json_schema_extra={CRD_DEFAULT: "ClusterTrainingRuntime"},
    )


class _InitializerStep(KubeModel):
    storage_uri: str | None = Field(
        default=None,
        max_length=2048,
        description="Where to fetch from (hf://..., s3://...): empty, or scheme://something.",
        json_schema_extra=extra(rules=[_STORAGE_URI_RULE]),
    )
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=128,
        description="Variables merged into the initializer container's env from the runtime.",
        json_schema_extra=list_map("name"),
    )
    secret_ref: LocalObjectReference | None = Field(
        default=None,
        description="A Secret in the TrainJob's namespace with the credentials to fetch with.",
    )


class DatasetInitializer(_InitializerStep):
    """Fetches (and may pre-process) the dataset: the runtime's dataset-initializer step."""


class ModelInitializer(_InitializerStep):
    """Fetches the pre-trained model: the runtime's model-initializer step."""


class Initializer(KubeModel):
    """The steps run before training to put the dataset and model in place."""

    dataset: DatasetInitializer | None = Field(default=None, description="The dataset.")
    model: ModelInitializer | None = Field(default=None, description="The pre-trained model.")


class Trainer(KubeModel):
    """What this run changes in the runtime's trainer step (its node container)."""

    image: str | None = Field(default=None, max_length=500, description="The container image.")
    command: list[Annotated[str, Field(max_length=1048576)]] | None = Field(
        default=None,
        max_length=128,
        description="The container's entrypoint.",
        json_schema_extra=ATOMIC,
    )
    args: list[Annotated[str, Field(max_length=1048576)]] | None = Field(
        default=None,
        max_length=128,
        description="The entrypoint's arguments.",
        json_schema_extra=ATOMIC,
    )
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=128,
        description="Variables merged into the container's env from the runtime.",
        json_schema_extra=list_map("name"),
    )
    num_nodes: Int32 | None = Field(
        default=None, description="Training nodes (pods); the runtime's mlPolicy.numNodes if unset."
    )
    resources_per_node: ResourceRequirements | None = Field(
        default=None, description="Compute resources of each node's container."
    )
    num_proc_per_node: Int32 | None = Field(
        default=None,
        description=(
            "Processes (or MPI slots) per node. For torch, 'auto' when unset: one per GPU, "
            "else one."
        ),
    )


class TrainJobSpec(KubeModel):
    runtime_ref: RuntimeRef = Field(
        description="The runtime to run on. Immutable.",
        json_schema_extra=extra(rules=[IMMUTABLE]),
    )
    initializer: Initializer | None = Field(
        default=None,
        description="Dataset and model to fetch before training. Immutable.",
        json_schema_extra=extra(rules=[IMMUTABLE]),
    )
    trainer: Trainer | None = Field(
        default=None,
        description="What this run changes in the runtime's trainer. Immutable.",
        json_schema_extra=extra(rules=[IMMUTABLE]),
    )
    runtime_patches: list[RuntimePatch] | None = Field(
        default=None,
        max_length=16,
        description=(
            "Changes to the runtime's JobSet, one entry per manager. Changed only while the "
            "TrainJob is suspended (before or after the change)."
        ),
        json_schema_extra=list_map("manager"),
    )
    suspend: bool | None = Field(
        default=None,
        description="Stop the TrainJob's pods (and create none) until set back to false.",
        json_schema_extra={CRD_DEFAULT: False},
    )
    active_deadline_seconds: Int64 | None = Field(
        default=None,
        ge=1,
        description=(
            "Seconds the TrainJob may run, counted from its start (again after a resume), "
            "before its pods are stopped and it fails with reason DeadlineExceeded. Immutable."
        ),
        json_schema_extra=extra(rules=[IMMUTABLE]),
    )
    managed_by: str | None = Field(
        default=None,
        max_length=253,
        description=(
            f"The controller reconciling the TrainJob: {MANAGED_BY_SELF} (the default) or "
            f"{MANAGED_BY_KUEUE}, which leaves it to Kueue's MultiKueue. Immutable."
        ),
        json_schema_extra=extra(
            {CRD_DEFAULT: MANAGED_BY_SELF},
            rules=[
                cel(
                    f"self in {list(MANAGED_BY_VALUES)}",
                    message=(f"ManagedBy must be {MANAGED_BY_SELF} or {MANAGED_BY_KUEUE} if set"),
                ),
                IMMUTABLE,
            ],
        ),
    )


class JobStatus(KubeModel):
    """Job counts of one of the TrainJob's replicated jobs."""

    name: str = Field(min_length=1, max_length=253, description="The replicated job.")
    ready: Int32 = Field(ge=0, description="Jobs whose pods are all ready or finished.")
    succeeded: Int32 = Field(ge=0, description="Jobs that succeeded.")
    failed: Int32 = Field(ge=0, description="Jobs that failed.")
    active: Int32 = Field(ge=0, description="Jobs with a pending or running pod.")
    suspended: Int32 = Field(ge=0, description="Jobs suspended.")


class Metric(KubeModel):
    name: str = Field(min_length=1, max_length=64, description='A name such as "loss".')
    value: str = Field(min_length=1, max_length=64, description="The value, as a string.")


class TrainerStatus(KubeModel):
    """Progress the trainer reports (alpha, behind the TrainJobStatus feature gate)."""

    model_config = ConfigDict(
        json_schema_extra=extra(
            rules=[
                cel(
                    "has(self.lastUpdatedTime)",
                    message="lastUpdatedTime is required when trainerStatus is present",
                )
            ]
        )
    )

    progress_percentage: Int32 | None = Field(
        default=None, ge=0, le=100, description="How far training is, 0 to 100."
    )
    estimated_remaining_seconds: Int32 | None = Field(
        default=None, ge=0, description="Estimated seconds left."
    )
    metrics: list[Metric] | None = Field(
        default=None,
        max_length=256,
        description="The latest values of the model's metrics.",
        json_schema_extra=ATOMIC,
    )
    last_updated_time: Time | None = Field(default=None, description="When this was observed.")


class TrainJobStatus(KubeModel):
    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    conditions: list[Condition] | None = Field(
        default=None,
        max_length=8,
        description="Suspended, Complete, Failed; the last one is the TrainJob's state.",
        json_schema_extra=list_map("type"),
    )
    jobs_status: list[JobStatus] | None = Field(
        default=None,
        max_length=100,
        description="Job counts per replicated job of the TrainJob's JobSet.",
        json_schema_extra=list_map("name"),
    )
    trainer_status: TrainerStatus | None = Field(
        default=None,
        description="Progress and metrics the trainer reported, when it reports any (alpha).",
    )

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions or [] if c.type == type_), None)

    def is_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"

    def is_finished(self) -> bool:
        return self.is_true(TrainJobConditionType.COMPLETE) or self.is_true(
            TrainJobConditionType.FAILED
        )


#: The spec-level rule of v2.3.0's webhook on runtimePatches: set while suspended only.
_PATCHES_WHILE_SUSPENDED = cel(
    "(has(self.runtimePatches) == has(oldSelf.runtimePatches) && (!has(self.runtimePatches) "
    "|| self.runtimePatches == oldSelf.runtimePatches)) || "
    "(has(oldSelf.suspend) && oldSelf.suspend) || (has(self.suspend) && self.suspend)",
    message=(
        "RuntimePatches can only be modified when the TrainJob is suspended before or after "
        "the update"
    ),
    field_path=".runtimePatches",
    reason="FieldValueForbidden",
)
#: As v2.3.0's CRD: the name is what the JobSet, its Jobs and Services are named after.
_NAME_RULES = [
    cel(
        "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        message="metadata.name must match RFC 1035 DNS label format",
        field_path=".metadata.name",
    ),
    cel(
        "size(self.metadata.name) <= 63",
        message="metadata.name must be no more than 63 characters",
        field_path=".metadata.name",
    ),
]


class TrainJob(TrainerObject):
    """A training run: a runtime, and what this run changes in it."""

    model_config = ConfigDict(json_schema_extra=extra(rules=_NAME_RULES))

    KIND: ClassVar[str] = "TrainJob"
    PLURAL: ClassVar[str] = "trainjobs"
    SINGULAR: ClassVar[str] = "trainjob"

    spec: TrainJobSpec = Field(
        description="The run.", json_schema_extra=extra(rules=[_PATCHES_WHILE_SUSPENDED])
    )
    status: TrainJobStatus | None = Field(
        default=None, description="What the controller observed, last."
    )

    @property
    def suspended(self) -> bool:
        return bool(self.spec.suspend)

    @property
    def managed_by(self) -> str:
        return self.spec.managed_by or MANAGED_BY_SELF

    @property
    def trainjob_status(self) -> TrainJobStatus:
        """The status, empty when absent."""
        return self.status or TrainJobStatus()
