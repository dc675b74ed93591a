"""JobSet ``jobset.x-k8s.io/v1alpha2`` (JobSet v0.12.0): the spec a runtime's template holds,
and the JobSet object the TrainJob controller owns and reads the status of.

The JobSet CRD itself is JobSet's to install; these models give the trainer CRDs the JobSet spec
schema (with JobSet's own CEL rules, so a runtime's template is judged as a JobSet would be) and
give the controller typed access to the JobSets it creates. Each replicated Job's template is a
raw dict with the batch/v1 JobTemplateSpec schema (kubetypes.py).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import ConfigDict, Field

from jobcontroller.api import KubeModel
from trainer_operator.kubetypes import JobTemplateSpec, PersistentVolumeClaim
from trainer_operator.meta import (
    ATOMIC,
    CRD_DEFAULT,
    Condition,
    Int32,
    TrainerObject,
    cel,
    extra,
    list_map,
    one_of,
)

__all__ = [
    "JOBSET_CONTROLLER",
    "JOBSET_GROUP",
    "JOBSET_NAME_LABEL",
    "JOBSET_VERSION",
    "JOB_INDEX_LABEL",
    "REPLICATED_JOB_NAME_LABEL",
    "Coordinator",
    "DependsOn",
    "FailurePolicy",
    "FailurePolicyAction",
    "FailurePolicyRule",
    "JobSet",
    "JobSetConditionType",
    "JobSetSpec",
    "JobSetStatus",
    "Network",
    "ReplicatedJob",
    "ReplicatedJobStatus",
    "StartupPolicy",
    "SuccessPolicy",
    "VolumeClaimPolicy",
    "VolumeRetentionPolicy",
]

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
#: managedBy of the JobSets JobSet's own controller runs.
JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
#: Labels JobSet puts on its Jobs and pods.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"

#: JobSet's own words for its immutable fields.
_IMMUTABLE = cel("self == oldSelf", message="Value is immutable")
#: Replicated jobs a runtime's template may have. JobSet sets no bound; a TrainJob's
#: status.jobsStatus holds at most 100 entries (one per replicated job), and a bound keeps the
#: CEL rules iterating the list inside the API server's cost budget.
MAX_REPLICATED_JOBS = 100


class JobSetConditionType(StrEnum):
    COMPLETED = "Completed"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    RESTARTING = "RestartingJobSet"
    STARTUP_POLICY_IN_PROGRESS = "StartupPolicyInProgress"
    STARTUP_POLICY_COMPLETED = "StartupPolicyCompleted"


class FailurePolicyAction(StrEnum):
    FAIL_JOBSET = "FailJobSet"
    RESTART_JOBSET = "RestartJobSet"
    RESTART_JOBSET_IGNORE_MAX = "RestartJobSetAndIgnoreMaxRestarts"
    RESTART_JOB = "RestartJob"
    RESTART_JOB_IGNORE_MAX = "RestartJobAndIgnoreMaxRestarts"


class DependsOn(KubeModel):
    """A replicated job this one waits for."""

    name: str = Field(description="The earlier replicated job.")
    status: str = Field(
        description=(
            "What the earlier job must reach first: Ready (all its Jobs ready or finished) "
            "or Complete (all succeeded)."
        ),
        json_schema_extra=one_of("Ready", "Complete"),
    )


class ReplicatedJob(KubeModel):
    """A group of identical Jobs, ``<jobset>-<name>-<index>``."""

    name: str = Field(description="The group's name; the suffix of its Jobs' names.")
    group_name: str | None = Field(
        default=None,
        description='The group of replicated jobs this one is counted in. Defaults to "default".',
        json_schema_extra={CRD_DEFAULT: "default"},
    )
    template: JobTemplateSpec = Field(description="The Job each replica is created from.")
    replicas: Int32 | None = Field(
        default=None,
        description="How many Jobs to create from the template. Defaults to 1.",
        json_schema_extra={CRD_DEFAULT: 1},
    )
    depends_on: list[DependsOn] | None = Field(
        default=None,
        max_length=5,
        description=(
            "Earlier replicated jobs (one, today) whose state this one waits for before its "
            "Jobs are created. Not on the first replicated job; not with startupPolicy InOrder. "
            "Immutable."
        ),
        json_schema_extra=extra(list_map("name"), rules=[_IMMUTABLE]),
    )


class Network(KubeModel):
    """How the JobSet's pods find each other."""

    enable_dns_hostnames: bool | None = Field(
        default=None,
        alias="enableDNSHostnames",
        description=(
            "Give every pod a DNS name, <jobset>-<replicated job>-<job index>-<pod index>."
            "<subdomain>, through a headless Service."
        ),
    )
    subdomain: str | None = Field(
        default=None, description="The headless Service's name. Defaults to the JobSet's name."
    )
    publish_not_ready_addresses: bool | None = Field(
        default=None,
        description="Publish the pods' DNS records before they are ready. Defaults to true.",
    )


class SuccessPolicy(KubeModel):
    """When the JobSet has succeeded."""

    operator: str = Field(
        description="All: every selected Job must succeed; Any: one is enough.",
        json_schema_extra=one_of("All", "Any"),
    )
    target_replicated_jobs: list[str] | None = Field(
        default=None,
        description="The replicated jobs whose Jobs count; all of them when empty.",
        json_schema_extra=ATOMIC,
    )


class FailurePolicyRule(KubeModel):
    """What to do when a Job fails with a matching reason and message (first match wins)."""

    name: str = Field(description="The rule's name, unique in the policy.")
    action: str = Field(
        description=(
            "FailJobSet, RestartJobSet, RestartJobSetAndIgnoreMaxRestarts, RestartJob or "
            "RestartJobAndIgnoreMaxRestarts."
        ),
        json_schema_extra=one_of(*FailurePolicyAction),
    )
    on_job_failure_reasons: list[str] | None = Field(
        default=None,
        description="The Job failure reasons the rule matches; any reason when empty.",
    )
    on_job_failure_message_patterns: list[str] | None = Field(
        default=None,
        description=(
            "Regular expressions (RE2) one of which the Job's failure message must match; "
            "any message when empty."
        ),
    )
    target_replicated_jobs: list[str] | None = Field(
        default=None,
        description="The replicated jobs the rule applies to; all of them when empty.",
        json_schema_extra=ATOMIC,
    )


class FailurePolicy(KubeModel):
    """What a failed Job does to the JobSet. Without a matching rule: RestartJobSet."""

    max_restarts: Int32 | None = Field(
        default=None, description="Restarts of the whole JobSet allowed before it fails."
    )
    restart_strategy: str | None = Field(
        default=None,
        description=(
            "Recreate (each Job as soon as its predecessor is gone), BlockingRecreate (once "
            "every old Job is gone) or InPlaceRestart (alpha). Defaults to Recreate."
        ),
        json_schema_extra=extra(
            one_of("Recreate", "BlockingRecreate", "InPlaceRestart"), {CRD_DEFAULT: "Recreate"}
        ),
    )
    rules: list[FailurePolicyRule] | None = Field(
        default=None, description="Rules tried in order for each failed Job."
    )


class StartupPolicy(KubeModel):
    """Deprecated in JobSet (use dependsOn): the order in which replicated jobs start."""

    startup_policy_order: str = Field(
        description=(
            "AnyOrder, or InOrder: each replicated job starts once the previous one is ready."
        ),
        json_schema_extra=one_of("AnyOrder", "InOrder"),
    )


class Coordinator(KubeModel):
    """The pod every other pod is told about (a stable address in a label and annotation)."""

    replicated_job: str = Field(description="The replicated job holding the coordinator.")
    job_index: int | None = Field(default=None, description="The Job's index in it.")
    pod_index: int | None = Field(default=None, description="The pod's completion index.")


class VolumeRetentionPolicy(KubeModel):
    when_deleted: str | None = Field(
        default=None,
        description="Delete (default) or Retain the claims when the JobSet is deleted.",
        json_schema_extra=extra(one_of("Delete", "Retain"), {CRD_DEFAULT: "Delete"}),
    )


class VolumeClaimPolicy(KubeModel):
    """Claims JobSet creates once, named <claim>-<jobset>, shared by the pods mounting them."""

    templates: list[PersistentVolumeClaim] | None = Field(
        default=None,
        max_length=50,
        description="The claims, each mounted by name in some replicated job; no namespace.",
        json_schema_extra=ATOMIC,
    )
    retention_policy: VolumeRetentionPolicy | None = Field(
        default=None, description="What happens to the claims when the JobSet goes."
    )


_VOLUME_CLAIM_RULES = [
    cel(
        "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",
        message="namespace cannot be set for VolumeClaimPolicies templates",
    )
]


class JobSetSpec(KubeModel):
    """A set of replicated Jobs run, restarted and finished as one."""

    model_config = ConfigDict(
        json_schema_extra=extra(
            rules=[
                cel(
                    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == "
                    "'InOrder' && self.replicatedJobs.exists(x, has(x.dependsOn)))",
                    message="StartupPolicy and DependsOn APIs are mutually exclusive",
                )
            ]
        )
    )

    replicated_jobs: list[ReplicatedJob] | None = Field(
        default=None,
        max_length=MAX_REPLICATED_JOBS,
        description="The groups of Jobs in the set, by name.",
        json_schema_extra=list_map("name"),
    )
    network: Network | None = Field(
        default=None,
        description="DNS for the pods. Immutable.",
        json_schema_extra=extra(rules=[_IMMUTABLE]),
    )
    success_policy: SuccessPolicy | None = Field(
        default=None,
        description="When the set has succeeded; when every Job has, without one. Immutable.",
        json_schema_extra=extra(rules=[_IMMUTABLE]),
    )
    failure_policy: FailurePolicy | None = Field(
        default=None,
        description="What a failed Job does to the set; it fails, without one. Immutable.",
        json_schema_extra=extra(rules=[_IMMUTABLE]),
    )
    startup_policy: StartupPolicy | None = Field(
        default=None,
        description="Deprecated (use dependsOn): the order replicated jobs start in. Immutable.",
        json_schema_extra=extra(rules=[_IMMUTABLE]),
    )
    suspend: bool | None = Field(default=None, description="Suspend every Job of the set.")
    coordinator: Coordinator | None = Field(
        default=None, description="A pod whose address every Job and pod is labelled with."
    )
    managed_by: str | None = Field(
        default=None,
        description=(
            "The controller reconciling the JobSet (a domain-prefixed path); JobSet's own when "
            "absent or jobset.sigs.k8s.io/jobset-controller. Immutable."
        ),
    )
    ttl_seconds_after_finished: Int32 | None = Field(
        default=None,
        ge=0,
        description="Delete the JobSet this many seconds after it finished.",
    )
    volume_claim_policies: (
        list[
            Annotated[
                VolumeClaimPolicy,
                Field(json_schema_extra={"x-kubernetes-validations": _VOLUME_CLAIM_RULES}),
            ]
        ]
        | None
    ) = Field(
        default=None,
        max_length=50,
        description="Persistent volume claims shared by the set's pods. Immutable.",
        json_schema_extra=extra(ATOMIC, rules=[_IMMUTABLE]),
    )

    def replicated_job(self, name: str) -> ReplicatedJob | None:
        return next((r for r in self.replicated_jobs or [] if r.name == name), None)


class ReplicatedJobStatus(KubeModel):
    """Job counts of one replicated job."""

    name: str
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0
    job_restarts: list[int] | None = None
    job_restarts_count_towards_max: list[int] | None = None


class JobSetStatus(KubeModel):
    conditions: list[Condition] | None = None
    restarts: int | None = None
    restarts_count_towards_max: int | None = None
    terminal_state: str | None = None
    replicated_jobs_status: list[ReplicatedJobStatus] | None = None
    previous_in_place_restart_attempt: int | None = None
    current_in_place_restart_attempt: int | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions or [] if c.type == type_), None)


class JobSet(TrainerObject):
    """A JobSet, as the TrainJob controller creates and reads it."""

    GROUP: ClassVar[str] = JOBSET_GROUP
    VERSION: ClassVar[str] = JOBSET_VERSION
    KIND: ClassVar[str] = "JobSet"
    PLURAL: ClassVar[str] = "jobsets"
    SINGULAR: ClassVar[str] = "jobset"

    spec: JobSetSpec = Field(default_factory=JobSetSpec)
    status: JobSetStatus | None = None
