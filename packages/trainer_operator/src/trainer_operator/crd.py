"""The CustomResourceDefinitions of TrainJob, TrainingRuntime and ClusterTrainingRuntime.

Generated from the models as the v1 kinds' are (``jobcontroller.api.crd.structural_schema``),
with what v2.3.0's CRDs have around the schema: the scope, the TrainJob's status subresource
and printer columns (State, Age; none for the runtimes, which have no status either).

The runtime webhooks of v2.3.0 are rules here, on each replicated job of a runtime's template:
a job labelled as a TrainJob step (``trainer.kubeflow.org/trainjob-ancestor-step``: trainer,
dataset-initializer, model-initializer) runs exactly one Job, and has the container the step's
TrainJob fields go to (node, dataset-initializer, model-initializer). They are added here, not in
jobset.py's models, because they are the trainer's rules about a JobSet, not JobSet's own.
"""

from __future__ import annotations

from typing import Any

from jobcontroller.api.crd import structural_schema
from trainer_operator.api import ANCESTOR_CONTAINERS, ANCESTOR_LABEL, TrainJob
from trainer_operator.meta import JsonDict, TrainerObject, cel
from trainer_operator.runtime import ClusterTrainingRuntime, TrainingRuntime

__all__ = ["KINDS", "STEP_RULES", "crds", "trainer_crd"]

KINDS: tuple[type[TrainerObject], ...] = (TrainJob, TrainingRuntime, ClusterTrainingRuntime)

_LABELS = "self.template.metadata.labels"
_STEP = f"{_LABELS}['{ANCESTOR_LABEL}']"
_IS_STEP = (
    f"has(self.template.metadata) && has({_LABELS}) && '{ANCESTOR_LABEL}' in {_LABELS} && "
    f"{_STEP} in {sorted(ANCESTOR_CONTAINERS)}"
)
_CONTAINERS = "self.template.spec.template.spec.containers"
_HAS_CONTAINERS = (
    "has(self.template.spec) && has(self.template.spec.template) && "
    f"has(self.template.spec.template.spec) && has({_CONTAINERS})"
)
_CONTAINER_OF_STEP = (
    "{" + ", ".join(f"'{step}': '{c}'" for step, c in sorted(ANCESTOR_CONTAINERS.items())) + "}"
)

#: v2.3.0's TrainingRuntime and ClusterTrainingRuntime webhooks, on each replicated job.
STEP_RULES: list[JsonDict] = [
    cel(
        f"!({_IS_STEP}) || !has(self.replicas) || self.replicas == 1",
        message="always must be 1",
        field_path=".replicas",
        reason="FieldValueInvalid",
    ),
    cel(
        f"!({_IS_STEP}) || ({_HAS_CONTAINERS} && "
        f"{_CONTAINERS}.exists(c, c.name == {_CONTAINER_OF_STEP}[{_STEP}]))",
        message_expression=f"'must contain the required container for the ancestor: ' + {_STEP}",
        field_path=".template.spec.template.spec.containers",
        reason="FieldValueInvalid",
    ),
]

_API_VERSION = (
    "APIVersion defines the versioned schema of this representation of an object. "
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#resources"
)
_KIND = (
    "Kind is a string value representing the REST resource this object represents. "
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#types-kinds"
)


def _drop_empty_properties(node: Any) -> None:
    """An object without fields (the jax and xgboost policies) says so by having no
    ``properties``: the API server drops ``properties: {}`` when it stores a CRD, and the
    manifest then differs from the stored CRD (a server-side re-apply conflicts)."""
    if isinstance(node, dict):
        if node.get("properties") == {}:
            del node["properties"]
        for value in node.values():
            _drop_empty_properties(value)
    elif isinstance(node, list):
        for value in node:
            _drop_empty_properties(value)


def _root_schema(model: type[TrainerObject]) -> dict[str, Any]:
    schema = structural_schema(model)
    _drop_empty_properties(schema)
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"type": "string", "description": _API_VERSION}
    properties["kind"] = {"type": "string", "description": _KIND}
    # The API server owns ObjectMeta's schema; a CRD may only declare name and generateName
    # (declared so a rule can point its error at .metadata.name), and no description.
    properties["metadata"] = {"type": "object", "properties": {"name": {"type": "string"}}}
    required = [r for r in schema.get("required", []) if r != "metadata"]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    return schema


def _node(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema at a dotted path; ``[]`` steps into list items."""
    node = schema
    for step in path.split("."):
        items = step.endswith("[]")
        node = node["properties"][step.removesuffix("[]")]
        if items:
            node = node["items"]
    return node


def trainer_crd(model: type[TrainerObject]) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CRD of one trainer kind (one served, stored version)."""
    schema = _root_schema(model)
    if model is not TrainJob:
        replicated_job = _node(schema, "spec.template.spec.replicatedJobs[]")
        replicated_job.setdefault("x-kubernetes-validations", []).extend(STEP_RULES)
    version: dict[str, Any] = {"name": model.VERSION, "served": True, "storage": True}
    if model is TrainJob:
        version["additionalPrinterColumns"] = [
            {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ]
    version["schema"] = {"openAPIV3Schema": schema}
    if model is TrainJob:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{model.PLURAL}.{model.GROUP}"},
        "spec": {
            "group": model.GROUP,
            "names": {
                "kind": model.KIND,
                "listKind": f"{model.KIND}List",
                "plural": model.PLURAL,
                "singular": model.SINGULAR,
            },
            "scope": model.SCOPE,
            "versions": [version],
        },
    }


def crds() -> list[dict[str, Any]]:
    """The three CRDs, TrainJob first."""
    return [trainer_crd(model) for model in KINDS]
