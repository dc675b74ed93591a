"""A TrainJob's ``runtimePatches``: changes to its runtime's JobSet, one entry per manager.

Each manager (a user, Kueue, a platform webhook) owns one entry, keyed by its name, and may
touch only what these types expose: labels and annotations at every level and a short list of
pod fields. v2.3.0's TrainJob webhook added two checks that need no runtime, here as CEL rules:
a manager's name is a domain-prefixed path, and a patch gives no env to the containers whose env
belongs to the TrainJob's own fields (node, dataset-initializer, model-initializer).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from jobcontroller.api import KubeModel, Time
from trainer_operator.kubetypes import (
    Affinity,
    ContainerSecurityContext,
    EmbeddedMeta,
    EnvVar,
    LocalObjectReference,
    PodSchedulingGate,
    PodSecurityContext,
    Toleration,
    Volume,
    VolumeMount,
)
from trainer_operator.meta import ATOMIC, IMMUTABLE, Int64, cel, extra, list_map

__all__ = [
    "ENV_OWNED_CONTAINERS",
    "ContainerPatch",
    "JobSetSpecPatch",
    "JobSetTemplatePatch",
    "JobSpecPatch",
    "JobTemplatePatch",
    "PodSpecPatch",
    "PodTemplatePatch",
    "ReplicatedJobPatch",
    "RuntimePatch",
    "TrainingRuntimeSpecPatch",
]

#: Containers whose env only the TrainJob's trainer and initializer fields may set.
ENV_OWNED_CONTAINERS = ("dataset-initializer", "model-initializer", "node")

_DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_HTTP_PATH = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_SPLIT = r"^[^/]+/.+$"

#: apimachinery's IsDomainPrefixedPath, which v2.3.0's webhook applied to each manager: one
#: rule per error it can give, each with its words.
_MANAGER_RULES = [
    cel(
        f"self.matches(r'{_SPLIT}')",
        message='must be a domain-prefixed path (such as "acme.io/foo")',
        reason="FieldValueInvalid",
    ),
    cel(
        f"!self.matches(r'{_SPLIT}') || self.find(r'^[^/]+').matches(r'^{_DNS1123_SUBDOMAIN}$')",
        message=(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character (e.g. "
            f"'example.com', regex used for validation is '{_DNS1123_SUBDOMAIN}')"
        ),
        reason="FieldValueInvalid",
    ),
    cel(
        f"!self.matches(r'{_SPLIT}') || self.matches(r\"^[^/]+/{_HTTP_PATH}$\")",
        message=f"Invalid path: regex used for validation is '{_HTTP_PATH}'",
        reason="FieldValueInvalid",
    ),
]

_ENV_OWNED_RULE = cel(
    f"!(self.name in {list(ENV_OWNED_CONTAINERS)}) || !has(self.env) || size(self.env) == 0",
    message=f"must not have envs for the {', '.join(ENV_OWNED_CONTAINERS)} containers",
    field_path=".env",
    reason="FieldValueInvalid",
)


class ContainerPatch(KubeModel):
    """Changes to one of the runtime's containers, by name."""

    name: str = Field(
        min_length=1, max_length=253, description="The container; the runtime must have it."
    )
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=128,
        description=(
            "Variables merged into the container's env. Not for node, dataset-initializer or "
            "model-initializer, whose env comes from the TrainJob's trainer and initializer."
        ),
        json_schema_extra=list_map("name"),
    )
    volume_mounts: list[VolumeMount] | None = Field(
        default=None,
        max_length=128,
        description="Volume mounts added to the container.",
        json_schema_extra=list_map("name"),
    )
    security_context: ContainerSecurityContext | None = Field(
        default=None, description="The container's security context."
    )


class PodSpecPatch(KubeModel):
    """The pod fields a manager may set in a runtime's pods."""

    service_account_name: str | None = Field(
        default=None,
        max_length=253,
        description="The pods' service account. Immutable.",
        json_schema_extra=extra(rules=[IMMUTABLE]),
    )
    volumes: list[Volume] | None = Field(
        default=None,
        max_length=128,
        description="Volumes added to the pods. Immutable.",
        json_schema_extra=extra(list_map("name"), rules=[IMMUTABLE]),
    )
    init_containers: list[ContainerPatch] | None = Field(
        default=None,
        max_length=64,
        description="Changes to the runtime's init containers. Immutable.",
        json_schema_extra=extra(list_map("name"), rules=[IMMUTABLE]),
    )
    containers: (
        list[
            Annotated[
                ContainerPatch,
                Field(json_schema_extra={"x-kubernetes-validations": [_ENV_OWNED_RULE]}),
            ]
        ]
        | None
    ) = Field(
        default=None,
        max_length=64,
        description="Changes to the runtime's containers. Immutable.",
        json_schema_extra=extra(list_map("name"), rules=[IMMUTABLE]),
    )
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None,
        max_length=64,
        description="Image pull secrets added to the pods. Immutable.",
        json_schema_extra=extra(list_map("name"), rules=[IMMUTABLE]),
    )
    security_context: PodSecurityContext | None = Field(
        default=None,
        description="The pods' security context. Immutable.",
        json_schema_extra=extra(rules=[IMMUTABLE]),
    )
    node_selector: dict[str, str] | None = Field(
        default=None, description="Node labels the pods must be placed on."
    )
    affinity: Affinity | None = Field(default=None, description="The pods' affinity.")
    tolerations: list[Toleration] | None = Field(
        default=None,
        max_length=128,
        description="Tolerations added to the pods.",
        json_schema_extra=ATOMIC,
    )
    scheduling_gates: list[PodSchedulingGate] | None = Field(
        default=None,
        max_length=16,
        description="Scheduling gates added to the pods (they wait until all are removed).",
        json_schema_extra=list_map("name"),
    )
    termination_grace_period_seconds: Int64 | None = Field(
        default=None,
        ge=0,
        description="The pods' termination grace period. Immutable.",
        json_schema_extra=extra(rules=[IMMUTABLE]),
    )


class PodTemplatePatch(KubeModel):
    metadata: EmbeddedMeta | None = Field(
        default=None, description="Labels and annotations for the pods."
    )
    spec: PodSpecPatch | None = Field(default=None, description="Pod fields.")


class JobSpecPatch(KubeModel):
    template: PodTemplatePatch | None = Field(
        default=None, description="Changes to the Job's pod template."
    )


class JobTemplatePatch(KubeModel):
    metadata: EmbeddedMeta | None = Field(
        default=None, description="Labels and annotations for the Jobs."
    )
    spec: JobSpecPatch | None = Field(default=None, description="Changes to the Job's spec.")


class ReplicatedJobPatch(KubeModel):
    """Changes to one replicated job of the runtime, by name."""

    name: str = Field(
        min_length=1, max_length=253, description="The replicated job; the runtime must have it."
    )
    template: JobTemplatePatch | None = Field(
        default=None, description="Changes to its Job template."
    )


class JobSetSpecPatch(KubeModel):
    replicated_jobs: list[ReplicatedJobPatch] | None = Field(
        default=None,
        max_length=100,
        description="Changes to replicated jobs, by name.",
        json_schema_extra=list_map("name"),
    )


class JobSetTemplatePatch(KubeModel):
    metadata: EmbeddedMeta | None = Field(
        default=None, description="Labels and annotations for the JobSet."
    )
    spec: JobSetSpecPatch | None = Field(default=None, description="Changes to the JobSet spec.")


class TrainingRuntimeSpecPatch(KubeModel):
    template: JobSetTemplatePatch | None = Field(
        default=None, description="Changes to the runtime's JobSet template."
    )


class RuntimePatch(KubeModel):
    """One manager's changes to the TrainJob's runtime."""

    manager: str = Field(
        min_length=1,
        max_length=253,
        description=(
            "Who owns this entry, as a domain-prefixed path (kueue.x-k8s.io/manager, "
            "example.com/platform). Immutable."
        ),
        json_schema_extra=extra(rules=[IMMUTABLE, *_MANAGER_RULES]),
    )
    time: Time | None = Field(
        default=None,
        description=(
            "When the entry was last changed, for people reading the object; nothing acts on it."
        ),
    )
    training_runtime_spec: TrainingRuntimeSpecPatch | None = Field(
        default=None, description="Changes to a TrainingRuntime or ClusterTrainingRuntime."
    )
