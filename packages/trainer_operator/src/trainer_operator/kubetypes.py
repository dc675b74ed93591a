"""The built-in Kubernetes types the trainer API embeds, as raw dicts with their full schemas.

The v2 API embeds core and batch types in many places: a runtime's template holds Job templates
(``batch/v1``), volume claim templates (``core/v1`` PersistentVolumeClaim), and a TrainJob's
trainer and patches hold env vars, resource requirements, volumes, tolerations... As the v1
kinds do with pod templates, the models keep these as plain dicts (the controller copies them
into the JobSet it writes and must not lose a field a newer cluster knows), and the CRDs carry
their full schemas, so the API server refuses a malformed quantity or a misspelt field at
admission and ``kubectl explain`` walks them.

Where the schemas come from:

* every core type reachable from a pod (env var, volume, affinity...) is cut out of the pod
  template schema the base library commits (``jobcontroller.api.load_pod_template_schema``);
* the Job template and the PersistentVolumeClaim are converted the same way from the API
  server's own OpenAPI documents and committed beside this module (``data/``);
  ``hack/gen-pod-schema.py`` regenerates them with the pod schema, and an integration test fails
  when they no longer match what the local control plane serves.

The one change to a Kubernetes schema made here: a runtime's pod templates bound their
containers to 64 (as the v1 kinds' do), which keeps the CEL rules that look for a runtime's
``node`` container inside the API server's cost budget.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Annotated, Any, TypeAlias

from pydantic import WithJsonSchema

from jobcontroller.api import load_pod_template_schema
from trainer_operator.kubedata import load_data_file

__all__ = [
    "MAX_CONTAINERS",
    "Affinity",
    "ContainerSecurityContext",
    "EmbeddedMeta",
    "EnvVar",
    "JobTemplateSpec",
    "LocalObjectReference",
    "PersistentVolumeClaim",
    "PodSchedulingGate",
    "PodSecurityContext",
    "ResourceRequirements",
    "Toleration",
    "Volume",
    "VolumeMount",
    "embedded_meta_schema",
    "job_template_schema",
    "pvc_schema",
    "runtime_pod_template_schema",
]

#: Containers a runtime's pod template may have: far above any real pod, and a bound the CEL
#: rules looking for a step's container need (as the v1 kinds' pod templates have).
MAX_CONTAINERS = 64


def runtime_pod_template_schema() -> dict[str, Any]:
    """core/v1 PodTemplateSpec as Kubernetes defines it, its containers bounded."""
    schema = load_pod_template_schema()
    schema["properties"]["spec"]["properties"]["containers"]["maxItems"] = MAX_CONTAINERS
    return schema


def job_template_schema() -> dict[str, Any]:
    """batch/v1 JobTemplateSpec, its pod template being :func:`runtime_pod_template_schema`."""
    schema = load_data_file("jobtemplatespec.json")
    template = schema["properties"]["spec"]["properties"]["template"]
    description = template.get("description")
    template.clear()
    template.update(runtime_pod_template_schema())
    if description:
        template["description"] = description
    return schema


def pvc_schema() -> dict[str, Any]:
    return load_data_file("persistentvolumeclaim.json")


@cache
def _pod_schema() -> dict[str, Any]:
    return load_pod_template_schema()


def _cut(path: str) -> dict[str, Any]:
    """The schema at ``path`` (dotted; ``[]`` steps into list items) of the pod template."""
    node = _pod_schema()
    for step in path.split("."):
        items = step.endswith("[]")
        node = node["properties"][step.removesuffix("[]")]
        if items:
            node = node["items"]
    cut = copy.deepcopy(node)
    cut.pop("description", None)  # the field embedding it describes it
    return cut


def embedded_meta_schema() -> dict[str, Any]:
    """The part of ObjectMeta a template may carry (labels, annotations, name...)."""
    return _cut("metadata")


EnvVar: TypeAlias = Annotated[dict[str, Any], WithJsonSchema(_cut("spec.containers[].env[]"))]
"""core/v1 EnvVar."""
ResourceRequirements: TypeAlias = Annotated[
    dict[str, Any], WithJsonSchema(_cut("spec.containers[].resources"))
]
"""core/v1 ResourceRequirements (requests, limits, claims)."""
LocalObjectReference: TypeAlias = Annotated[
    dict[str, Any], WithJsonSchema(_cut("spec.imagePullSecrets[]"))
]
"""core/v1 LocalObjectReference (a name in the same namespace)."""
Volume: TypeAlias = Annotated[dict[str, Any], WithJsonSchema(_cut("spec.volumes[]"))]
"""core/v1 Volume."""
VolumeMount: TypeAlias = Annotated[
    dict[str, Any], WithJsonSchema(_cut("spec.containers[].volumeMounts[]"))
]
"""core/v1 VolumeMount."""
ContainerSecurityContext: TypeAlias = Annotated[
    dict[str, Any], WithJsonSchema(_cut("spec.containers[].securityContext"))
]
"""core/v1 SecurityContext (a container's)."""
PodSecurityContext: TypeAlias = Annotated[
    dict[str, Any], WithJsonSchema(_cut("spec.securityContext"))
]
"""core/v1 PodSecurityContext."""
Affinity: TypeAlias = Annotated[dict[str, Any], WithJsonSchema(_cut("spec.affinity"))]
"""core/v1 Affinity."""
Toleration: TypeAlias = Annotated[dict[str, Any], WithJsonSchema(_cut("spec.tolerations[]"))]
"""core/v1 Toleration."""
PodSchedulingGate: TypeAlias = Annotated[
    dict[str, Any], WithJsonSchema(_cut("spec.schedulingGates[]"))
]
"""core/v1 PodSchedulingGate."""
EmbeddedMeta: TypeAlias = Annotated[dict[str, Any], WithJsonSchema(embedded_meta_schema())]
"""ObjectMeta as a template carries it."""
JobTemplateSpec: TypeAlias = Annotated[dict[str, Any], WithJsonSchema(job_template_schema())]
"""batch/v1 JobTemplateSpec: a JobSet's replicated Job."""
PersistentVolumeClaim: TypeAlias = Annotated[dict[str, Any], WithJsonSchema(pvc_schema())]
"""core/v1 PersistentVolumeClaim: a JobSet's volume claim template."""
