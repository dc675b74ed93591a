"""Typed models shared by every job kind, plus CRD generation and shared validation.

What a framework operator's ``api.py`` uses: the common models (:class:`JobModel`,
:class:`JobSpec`, :class:`ReplicaSpec`...), :class:`ReplicaRules` (with the rule types it lists:
:class:`KnownTypes`, :class:`Required`, :class:`Replicas`...) for its replica rules, stated
once for admission and for Python, :func:`default_job` for the defaulting every kind shares,
:func:`job_errors` for the validation every kind shares, and :func:`build_crd` (with the
``cel_*`` rule helpers) for its CustomResourceDefinition. See docs/writing-an-operator.md.
"""

from typing import Any

from jobcontroller.api.common import (
    INT32_MAX,
    MAX_PROCESSES_PER_POD,
    MAX_REPLICAS,
    ApiObject,
    CleanPodPolicy,
    ConditionStatus,
    JobCondition,
    JobConditionType,
    JobModel,
    JobSpec,
    JobStatus,
    KubeModel,
    PodTemplateSpec,
    ProgressMetric,
    Quantity,
    ReplicaSpec,
    ReplicaStatus,
    RestartPolicy,
    RestartScope,
    RunPolicy,
    SchedulingPolicy,
    Time,
    TrainerStatus,
    format_time,
    job_pod_template_schema,
)
from jobcontroller.api.crd import (
    MAX_REPLICA_TYPES,
    ScaleSubresource,
    build_crd,
    cel_create_only,
    cel_default_container_rule,
    cel_managed_by_rule,
    cel_ratcheted,
    cel_root_rules,
    crd_to_yaml,
)
from jobcontroller.api.deepcopy import deep_copy
from jobcontroller.api.defaults import (
    canonical_replica_types,
    default_job,
    replica_port,
    set_default_port,
)
from jobcontroller.api.podschema import load_pod_template_schema, openapi_schema
from jobcontroller.api.rules import (
    GO_REPLICAS_MUST_BE_1,
    GO_REQUIRED_TYPE,
    GO_UNSUPPORTED_TYPE,
    AtLeastOne,
    AtMostOne,
    DistinctCase,
    KnownTypes,
    NonEmpty,
    ReplicaRule,
    ReplicaRules,
    Replicas,
    Required,
    RequiredWith,
    RestartPolicies,
)
from jobcontroller.api.validation import (
    MANAGED_BY_VALUES,
    job_errors,
    replica_rule_errors,
    replica_specs_path,
)

__all__ = [
    "GO_REPLICAS_MUST_BE_1",
    "GO_REQUIRED_TYPE",
    "GO_UNSUPPORTED_TYPE",
    "INT32_MAX",
    "MANAGED_BY_VALUES",
    "MAX_PROCESSES_PER_POD",
    "MAX_REPLICAS",
    "MAX_REPLICA_TYPES",
    "POD_TEMPLATE_SCHEMA",
    "ApiObject",
    "AtLeastOne",
    "AtMostOne",
    "CleanPodPolicy",
    "ConditionStatus",
    "DistinctCase",
    "JobCondition",
    "JobConditionType",
    "JobModel",
    "JobSpec",
    "JobStatus",
    "KnownTypes",
    "KubeModel",
    "NonEmpty",
    "PodTemplateSpec",
    "ProgressMetric",
    "Quantity",
    "ReplicaRule",
    "ReplicaRules",
    "ReplicaSpec",
    "ReplicaStatus",
    "Replicas",
    "Required",
    "RequiredWith",
    "RestartPolicies",
    "RestartPolicy",
    "RestartScope",
    "RunPolicy",
    "ScaleSubresource",
    "SchedulingPolicy",
    "Time",
    "TrainerStatus",
    "build_crd",
    "canonical_replica_types",
    "cel_create_only",
    "cel_default_container_rule",
    "cel_managed_by_rule",
    "cel_ratcheted",
    "cel_root_rules",
    "crd_to_yaml",
    "deep_copy",
    "default_job",
    "format_time",
    "job_errors",
    "job_pod_template_schema",
    "load_pod_template_schema",
    "openapi_schema",
    "replica_port",
    "replica_rule_errors",
    "replica_specs_path",
    "set_default_port",
]


def __getattr__(name: str) -> Any:
    if name == "POD_TEMPLATE_SCHEMA":  # built when asked for (api/common.py)
        return job_pod_template_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
