"""Typed models shared by every job kind, plus CRD generation and shared validation.

What a framework operator's ``api.py`` uses: the common models (:class:`JobModel`,
:class:`JobSpec`, :class:`ReplicaSpec`...), :class:`ReplicaRules` for its replica types,
:func:`default_job` for the defaulting every kind shares, :func:`job_errors` for the
validation every kind shares, and :func:`build_crd` (with the ``cel_*`` rule helpers) for its
CustomResourceDefinition. See docs/writing-an-operator.md.
"""

from jobcontroller.api.common import (
    INT32_MAX,
    MAX_PROCESSES_PER_POD,
    MAX_REPLICAS,
    POD_TEMPLATE_SCHEMA,
    CleanPodPolicy,
    ConditionStatus,
    JobCondition,
    JobConditionType,
    JobModel,
    JobSpec,
    JobStatus,
    KubeModel,
    PodTemplateSpec,
    Quantity,
    ReplicaSpec,
    ReplicaStatus,
    RestartPolicy,
    RestartScope,
    RunPolicy,
    SchedulingPolicy,
    Time,
    format_time,
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
from jobcontroller.api.defaults import (
    canonical_replica_types,
    default_job,
    replica_port,
    set_default_port,
)
from jobcontroller.api.podschema import load_pod_template_schema, openapi_schema
from jobcontroller.api.rules import ReplicaRules
from jobcontroller.api.validation import MANAGED_BY_VALUES, job_errors

__all__ = [
    "INT32_MAX",
    "MANAGED_BY_VALUES",
    "MAX_PROCESSES_PER_POD",
    "MAX_REPLICAS",
    "MAX_REPLICA_TYPES",
    "POD_TEMPLATE_SCHEMA",
    "CleanPodPolicy",
    "ConditionStatus",
    "JobCondition",
    "JobConditionType",
    "JobModel",
    "JobSpec",
    "JobStatus",
    "KubeModel",
    "PodTemplateSpec",
    "Quantity",
    "ReplicaRules",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RestartScope",
    "RunPolicy",
    "ScaleSubresource",
    "SchedulingPolicy",
    "Time",
    "build_crd",
    "canonical_replica_types",
    "cel_create_only",
    "cel_default_container_rule",
    "cel_managed_by_rule",
    "cel_ratcheted",
    "cel_root_rules",
    "crd_to_yaml",
    "default_job",
    "format_time",
    "job_errors",
    "load_pod_template_schema",
    "openapi_schema",
    "replica_port",
    "set_default_port",
]
