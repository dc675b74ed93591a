"""Types shared by every Kubeflow job kind (the kubeflow.org/v1 "common" API).

Models read stored objects tolerantly (unknown fields are ignored) because the apiserver, not
these models, is the admission gate: the generated CRD schema and its CEL rules reject bad
input, and pruning plus strict field validation deal with unknown fields. Consequently a model
must never be written back as a whole object (that would drop fields it does not know); write
the status subresource or merge-patch the fields you own.

Field names are snake_case in Python and camelCase on the wire; `to_dict()` produces the wire
form without `None` values, which matches Go's `omitempty` for the pointer fields of the anchor.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Generic, Self, TypeVar, get_args, get_origin

from msgspec import Struct
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PlainSerializer,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, TzInfo
from typing_extensions import override

from jobcontroller.api.podschema import QUANTITY_PATTERN, load_pod_template_schema
from jobcontroller.api.rules import ReplicaRules

__all__ = [
    "INT32_MAX",
    "MAX_PROCESSES_PER_POD",
    "MAX_REPLICAS",
    "ApiObject",
    "CleanPodPolicy",
    "ConditionStatus",
    "JobCondition",
    "JobConditionType",
    "JobModel",
    "JobSpec",
    "JobStatus",
    "KubeModel",
    "PodTemplateSpec",
    "ProgressMetric",
    "Quantity",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RestartScope",
    "RunPolicy",
    "ScaleSubresource",
    "SchedulingPolicy",
    "Time",
    "TrainerStatus",
    "format_time",
    "job_pod_template_schema",
]


#: Bound of the anchors' int32 fields: what Kubernetes can hold, so a job asking for 2^31
#: replicas is refused at admission instead of overflowing something later.
INT32_MAX = 2**31 - 1

#: The most replicas one replica type (and, by default, one job: ``--max-pods-per-job``) may
#: ask for: the largest Indexed Job Kubernetes itself accepts (``completions`` <= 10^5).
#: Admission refuses more, and elastic bounds (min/maxReplicas) above it.
MAX_REPLICAS = 100_000

#: The most processes one pod may ask to run (PyTorch's nprocPerNode, MPI's slotsPerWorker):
#: a node's process count, which its cores and accelerators bound. The largest machines have
#: a few hundred hardware threads; 1,024 leaves room for them and refuses values that only a
#: typo or an attack produces (a WORLD_SIZE of 2^31 x replicas).
MAX_PROCESSES_PER_POD = 1024


class KubeModel(BaseModel):
    """Base for every API model: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        validate_assignment=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready wire form (camelCase keys, `None` fields omitted)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


_ZERO = timedelta(0)
#: Zones whose offset never changes (pydantic's parsed `Z`, datetime.UTC): one at offset 0 now
#: is UTC at every instant, unlike a ZoneInfo that is at 0 only in winter.
_FIXED = (timezone, TzInfo)


def _to_utc_seconds(value: datetime) -> datetime:
    # metav1.Time has second precision; truncating on the way in keeps a status computed in
    # memory equal to the same status read back from the apiserver (no spurious updates).
    if not value.microsecond and type(value.tzinfo) in _FIXED and value.utcoffset() == _ZERO:
        # Already whole seconds in UTC, as every stored time parses (`...Z`): kept as it is,
        # a third of the conversion's cost, on each time of each job parsed each pass.
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(microsecond=0)


def format_time(value: datetime) -> str:
    """RFC 3339 with a `Z` suffix and whole seconds, the form metav1.Time serialises to.
    ``isoformat`` rather than ``strftime``: 40% less CPU on every time of every status
    written, and four-digit years always (``%Y`` gives ``1`` for year 1, Go ``0001``)."""
    return _to_utc_seconds(value).isoformat()[:19] + "Z"


Time = Annotated[
    datetime,
    AfterValidator(_to_utc_seconds),
    PlainSerializer(format_time, return_type=str, when_used="json"),
]
"""A timestamp: parsed from RFC 3339, held as an aware UTC datetime, written as `...Z`."""

Quantity = Annotated[
    int | str,
    Field(json_schema_extra={"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN}),
]
"""A resource quantity (`2`, `"500m"`, `"1Gi"`); kept as given, never normalised here."""


def job_pod_template_schema() -> dict[str, Any]:
    """The full core/v1 PodTemplateSpec schema (api/podschema.py), plus what the operators need
    (a fresh copy each call).

    Every container has a name of at most 63 characters (a DNS label, as the API server checks
    it for pods) and an image; a template has a spec with 1 to 64 containers, bounded so that
    the CEL rules iterating containers stay inside the cost budget.
    """
    schema = load_pod_template_schema()
    schema["required"] = ["spec"]
    spec = schema["properties"]["spec"]
    containers = spec["properties"]["containers"]
    containers.update(minItems=1, maxItems=64)
    container = containers["items"]
    container["required"] = sorted({*container.get("required", []), "name", "image"})
    container["properties"]["name"]["maxLength"] = 63
    container["properties"]["image"]["minLength"] = 1
    return schema


@dataclass(frozen=True)
class _PodTemplateJsonSchema:
    """:func:`job_pod_template_schema` as the JSON schema of the type it annotates, read
    only when a JSON schema is generated (the CRDs): parsed, it is about 1 MB that an
    operator at work never reads."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return job_pod_template_schema()


PodTemplateSpec = Annotated[dict[str, Any], _PodTemplateJsonSchema()]
"""A raw core/v1 PodTemplateSpec dict; typed pod models would cost parse time and memory."""


class RestartPolicy(StrEnum):
    """Per-replica restart policy; `ExitCode` restarts only on retryable exit codes (>= 128)."""

    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"
    EXIT_CODE = "ExitCode"


class RestartScope(StrEnum):
    """What a retryable pod failure restarts: that pod (the Kubeflow v1 behaviour) or the whole
    gang, every pod of the job (see docs/architecture.md, "Whole-gang restart")."""

    POD = "Pod"
    ALL = "All"


class CleanPodPolicy(StrEnum):
    """Which pods to delete once a job has finished."""

    NONE = "None"
    RUNNING = "Running"
    ALL = "All"


class JobConditionType(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    SUSPENDED = "Suspended"
    FAILED = "Failed"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class SchedulingPolicy(KubeModel):
    """Gang-scheduling settings, passed on to the job's PodGroup."""

    min_available: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="Pods that must be schedulable together. Defaults to all replicas.",
    )
    queue: str | None = Field(
        default=None,
        description="The scheduler queue (Volcano). Immutable once set.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "queue is immutable"},
            ]
        },
    )
    min_resources: dict[str, Quantity] | None = Field(
        default=None,
        description="Resources the gang needs; defaults to the sum over minAvailable pods.",
    )
    priority_class: str | None = Field(
        default=None,
        description="The PriorityClass of the job's PodGroup; defaults to the pods' priority.",
    )
    schedule_timeout_seconds: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description=(
            "Seconds the gang scheduler may take to place the whole gang "
            "(the PodGroup's scheduleTimeoutSeconds)."
        ),
    )


class RunPolicy(KubeModel):
    """Policies for the job as a whole, the same for every framework."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    # Written as one rule over both presences so adding or removing the field
                    # on update is caught too, not only changing its value.
                    "rule": (
                        "has(self.managedBy) == has(oldSelf.managedBy) && "
                        "(!has(self.managedBy) || self.managedBy == oldSelf.managedBy)"
                    ),
                    "message": "managedBy is immutable",
                    "fieldPath": ".managedBy",
                }
            ]
        }
    )

    clean_pod_policy: CleanPodPolicy | None = Field(
        default=None,
        description="Which pods to delete once the job has finished: None (default), Running, All.",
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="Delete the job this many seconds after it finished.",
    )
    active_deadline_seconds: int | None = Field(
        default=None,
        ge=0,
        description="Fail the job once it has been active this long.",
    )
    backoff_limit: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="Restarts allowed before the job is marked Failed.",
    )
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool | None = Field(
        default=None,
        description="Delete the job's pods and create none until set back to false.",
        json_schema_extra={"x-crd-default": False},
    )
    managed_by: str | None = Field(
        default=None,
        max_length=63,
        description="The controller that reconciles the job; other controllers skip it. Immutable.",
    )
    restart_scope: RestartScope | None = Field(
        default=None,
        description=(
            "What a pod failure that its replica's restartPolicy retries restarts: Pod "
            "(default) recreates that pod only; All deletes and recreates every pod of the job "
            "(an MPIJob's launcher too), counted once per gang restart against backoffLimit. "
            "Not part of Kubeflow v1.9's API."
        ),
    )


class ReplicaSpec(KubeModel):
    """One replica type: how many pods, their template, and how they are restarted."""

    model_config = ConfigDict(json_schema_extra={"required": ["template"]})

    replicas: int | None = Field(
        default=None,
        ge=0,
        # Read up to int32 (a job stored before the ceiling still parses, and the operator's
        # --max-pods-per-job fails it with a message); admitted up to MAX_REPLICAS.
        le=INT32_MAX,
        description=f"Number of pods. Defaults to 1. At most {MAX_REPLICAS}.",
        json_schema_extra={"maximum": MAX_REPLICAS},
    )
    template: PodTemplateSpec = Field(default_factory=dict)
    restart_policy: RestartPolicy | None = Field(
        default=None,
        description=(
            "Always, OnFailure, Never, or ExitCode (restart only on exit codes >= 128). "
            "Overrides the pod template's restartPolicy."
        ),
    )


class JobCondition(KubeModel):
    """An observation of the job's state (Created, Running, Restarting, Succeeded, ...)."""

    # `type` is a plain string, not JobConditionType, so conditions added by other
    # controllers still parse.

    type: str = Field(description="Created, Running, Restarting, Succeeded, Suspended or Failed.")
    status: str = Field(description="True, False or Unknown.")
    reason: str | None = Field(
        default=None, description="A CamelCase word for why the condition last changed."
    )
    message: str | None = Field(
        default=None, description="Details of the last change, for a human."
    )
    last_update_time: Time | None = Field(
        default=None, description="When the condition was last updated."
    )
    last_transition_time: Time | None = Field(
        default=None, description="When the condition's status last changed."
    )


class ReplicaStatus(KubeModel):
    """Pod counts of one replica type."""

    active: int = Field(default=0, description="Pods that are pending or running.")
    succeeded: int = Field(default=0, description="Pods that reached phase Succeeded.")
    failed: int = Field(default=0, description="Pods that reached phase Failed.")
    # Deprecated in the anchor and never set; kept so stored objects round-trip.
    label_selector: dict[str, Any] | None = Field(
        default=None, description="Deprecated and never set: use selector."
    )
    # A formatted label selector, set for the scale subresource (PyTorchJob).
    selector: str | None = Field(
        default=None,
        description="The label selector of this type's pods, as a string (scale subresource).",
    )


class ProgressMetric(KubeModel):
    """One metric a training pod reported."""

    name: str = Field(min_length=1, max_length=64, description='A name such as "loss".')
    value: str = Field(min_length=1, max_length=64, description="The value, as a string.")


class TrainerStatus(KubeModel):
    """Progress the training pods report (Trainer v2.3.0's TrainJob ``trainerStatus``, the
    same shape). On the v1 kinds it is this project's extension: upstream's v1 API has no such
    field, and clients that do not know it ignore it."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.lastUpdatedTime)",
                    "message": "lastUpdatedTime is required when trainerStatus is present",
                }
            ]
        }
    )

    progress_percentage: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="How far training is, 0 to 100.",
        json_schema_extra={"format": "int32"},
    )
    estimated_remaining_seconds: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="Estimated seconds left.",
        json_schema_extra={"format": "int32"},
    )
    metrics: list[ProgressMetric] | None = Field(
        default=None,
        max_length=256,
        description="The latest values of the model's metrics.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    last_updated_time: Time | None = Field(default=None, description="When this was observed.")


class JobStatus(KubeModel):
    """The observed state of the job, written by its operator."""

    conditions: list[JobCondition] = Field(
        default_factory=list,
        description="The job's conditions; the last one is its current state.",
    )
    replica_statuses: dict[str, ReplicaStatus] = Field(
        default_factory=dict, description="Pod counts per replica type."
    )
    start_time: Time | None = Field(
        default=None, description="When the operator first acted on the job."
    )
    completion_time: Time | None = Field(
        default=None, description="When the job succeeded (or failed)."
    )
    last_reconcile_time: Time | None = Field(
        default=None, description="When the operator last reconciled the job."
    )
    trainer_status: TrainerStatus | None = Field(
        default=None,
        description="Training progress the job's pods reported to the operator's progress "
        "endpoint (an extension of this project; Trainer v2's TrainJob has the same field).",
    )

    def condition(self, type_: str) -> JobCondition | None:
        """The condition of this type, if any (types are unique within a status)."""
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None

    def is_condition_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == ConditionStatus.TRUE

    def is_finished(self) -> bool:
        return self.is_condition_true(JobConditionType.SUCCEEDED) or self.is_condition_true(
            JobConditionType.FAILED
        )


class ScaleSubresource(Struct, frozen=True, kw_only=True):
    """JSON paths of the scale subresource (used by `kubectl scale` and the HPA)."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None


class JobSpec(KubeModel):
    """Base of every framework spec: the run policy plus the replica-spec hook."""

    run_policy: RunPolicy = Field(
        default_factory=RunPolicy,
        # Defaulting an absent runPolicy to {} lets CEL rules and readers assume it exists.
        json_schema_extra={"x-crd-default": {}},
    )

    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """The framework's replica-spec map (tfReplicaSpecs, pytorchReplicaSpecs, ...)."""
        specs: dict[str, ReplicaSpec] = getattr(self, type(self).replica_specs_field())
        return specs

    @classmethod
    def replica_specs_field(cls) -> str:
        """The Python name of the spec's one ``dict[str, ReplicaSpec]`` field.

        Found from the annotations, so a framework spec declares its map (under v1.9's JSON
        name: ``xgbReplicaSpecs``...) and nothing else; a spec with none or several must
        override :meth:`replica_specs` and this.
        """
        return _replica_specs_field(cls)

    def set_replica_specs(self, specs: dict[str, ReplicaSpec]) -> None:
        """Replace the replica-spec map (defaulting renames its keys)."""
        setattr(self, type(self).replica_specs_field(), specs)


@functools.cache
def _replica_specs_field(cls: type[JobSpec]) -> str:
    found = [
        name
        for name, info in cls.model_fields.items()
        if get_origin(info.annotation) is dict
        and _unannotated(get_args(info.annotation)[1]) is ReplicaSpec
    ]
    if len(found) != 1:
        raise TypeError(
            f"{cls.__name__} must have exactly one dict[str, ReplicaSpec] field, "
            f"found {found or 'none'}"
        )
    return found[0]


def _unannotated(tp: Any) -> Any:
    """``Annotated[X, ...]`` -> ``X``."""
    return get_args(tp)[0] if get_origin(tp) is Annotated else tp


SpecT = TypeVar("SpecT", bound=JobSpec)


class ApiObject(KubeModel):
    """A whole API object: type metadata, the raw ``metadata`` dict (readers need a handful of
    its fields and writers must keep the others) and read-only accessors for those fields.
    :class:`JobModel` (the v1 kinds) and Kubeflow Trainer's objects share it."""

    GROUP: ClassVar[str]
    VERSION: ClassVar[str]
    KIND: ClassVar[str]

    api_version: str = ""
    kind: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @override
    def model_post_init(self, context: Any, /) -> None:
        # List items and hand-written dicts may lack apiVersion/kind; the class knows them.
        if not self.api_version:
            object.__setattr__(self, "api_version", self.api_version_string())
        if not self.kind:
            object.__setattr__(self, "kind", self.KIND)

    @classmethod
    def api_version_string(cls) -> str:
        return f"{cls.GROUP}/{cls.VERSION}"

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Self:
        """Build a model from a stored object, ignoring fields the model does not know."""
        return cls.model_validate(raw)

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", ""))

    @property
    def uid(self) -> str:
        return str(self.metadata.get("uid", ""))

    @property
    def key(self) -> str:
        """``namespace/name``, the work-queue key (just ``name`` for a cluster-scoped one)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def generation(self) -> int:
        return int(self.metadata.get("generation", 0))

    @property
    def resource_version(self) -> str:
        return str(self.metadata.get("resourceVersion", ""))

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.metadata.get("labels") or {})

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.metadata.get("annotations") or {})

    @property
    def deletion_timestamp(self) -> str | None:
        value = self.metadata.get("deletionTimestamp")
        return str(value) if value else None

    @property
    def owner_references(self) -> list[dict[str, Any]]:
        return list(self.metadata.get("ownerReferences") or [])


class JobModel(ApiObject, Generic[SpecT]):
    """A whole job object, uniform across frameworks so the base controller can handle any.

    `metadata` stays a raw dict: the controller reads a handful of fields and must preserve the
    rest exactly.
    """

    GROUP: ClassVar[str] = "kubeflow.org"
    VERSION: ClassVar[str]
    KIND: ClassVar[str]
    PLURAL: ClassVar[str]
    SINGULAR: ClassVar[str]
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()
    # Replica types in a stable order (the anchor iterates them in this order for status).
    REPLICA_TYPES: ClassVar[tuple[str, ...]]
    # The container whose ports, exit code and env the operator reads or sets; None means the
    # first container of the template (MPIJob has no named default container).
    DEFAULT_CONTAINER_NAME: ClassVar[str | None]
    # The ``runPolicy.managedBy`` value naming this kind's own operator (an absent value means
    # the same); jobs naming anything else are left to that controller.
    MANAGED_BY_SELF: ClassVar[str] = "kubeflow.org/training-operator"
    # Every ``runPolicy.managedBy`` value admission accepts (None: this operator's own and
    # Kueue's MultiKueue, as v1.9 accepts).
    MANAGED_BY_VALUES: ClassVar[tuple[str, ...] | None] = None
    # Replica-type rules for admission and validation; ``build_crd`` and ``job_errors`` apply
    # them (None: the framework states its own).
    REPLICA_RULES: ClassVar[ReplicaRules | None] = None
    # The CRD's scale subresource (``kubectl scale``, an HPA), if the kind has one.
    SCALE: ClassVar[ScaleSubresource | None] = None

    spec: SpecT = Field(description="Specification of the desired state of the job.")
    status: JobStatus = Field(
        default_factory=JobStatus, description="Most recently observed status of the job."
    )

    @classmethod
    def managed_by_values(cls) -> tuple[str, ...]:
        """``MANAGED_BY_VALUES``, or this operator's own value and MultiKueue's."""
        if cls.MANAGED_BY_VALUES is not None:
            return cls.MANAGED_BY_VALUES
        return (cls.MANAGED_BY_SELF, "kueue.x-k8s.io/multikueue")

    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.replica_specs()

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy

    @property
    @override
    def key(self) -> str:
        """``namespace/name``, the work-queue key."""
        return f"{self.namespace}/{self.name}"
