"""CRD generation: pydantic JSON Schema turned into a structural schema the apiserver accepts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from jobcontroller.api import JobModel, JobSpec, ReplicaSpec
from jobcontroller.api.crd import (
    UnsupportedSchema,
    build_crd,
    structural_errors,
    structural_schema,
)
from jobcontroller.api.podschema import QUANTITY_PATTERN
from mpi_operator.api import mpijob_crd
from pytorch_operator.api import pytorchjob_crd
from tf_operator.api import tfjob_crd

CRDS = {"tfjobs": tfjob_crd(), "pytorchjobs": pytorchjob_crd(), "mpijobs": mpijob_crd()}


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{path}[*]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{*}}")


@pytest.mark.parametrize("plural", CRDS)
def test_schema_is_structural(plural: str) -> None:
    assert structural_errors(_schema(CRDS[plural])) == []


@pytest.mark.parametrize("plural", CRDS)
def test_every_node_is_typed_and_free_of_json_schema_leftovers(plural: str) -> None:
    for path, node in _nodes(_schema(CRDS[plural])):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        assert not {"$ref", "$defs", "title", "const", "prefixItems"} & node.keys(), path
        assert node.get("default", "unset") is not None, f"{path}: default: null"
        assert node.get("type") != "null", path


@pytest.mark.parametrize("plural", CRDS)
def test_unknown_fields_are_preserved_only_in_pod_templates_and_free_form_maps(
    plural: str,
) -> None:
    preserved = {
        path
        for path, node in _nodes(_schema(CRDS[plural]))
        if node.get("x-kubernetes-preserve-unknown-fields")
    }
    # The pod template has the full core/v1 schema: a misspelt field is pruned (kubectl warns),
    # a wrong type is refused. Only two free-form maps remain.
    assert preserved <= {
        ".status.replicaStatuses{*}.labelSelector",
        ".spec.elasticPolicy.metrics[*]",
    }


@pytest.mark.parametrize("plural", CRDS)
def test_every_field_is_described_for_kubectl_explain(plural: str) -> None:
    """Every named field (not the values of a map or a list, which their field describes, nor
    the root's metadata, where the API server allows nothing but name and generateName)."""
    undescribed = [
        path
        for path, node in _nodes(_schema(CRDS[plural]))
        if not path.endswith(("[*]", "{*}")) and not node.get("description")
    ]
    assert undescribed == [".metadata"]


@pytest.mark.parametrize("plural", CRDS)
def test_crd_metadata(plural: str) -> None:
    crd = CRDS[plural]
    assert crd["metadata"]["name"] == f"{plural}.kubeflow.org"
    names = crd["spec"]["names"]
    assert names["plural"] == plural
    assert names["categories"] == ["kubeflow"]
    version = crd["spec"]["versions"][0]
    assert version["served"] and version["storage"]
    assert version["subresources"]["status"] == {}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "State": ".status.conditions[-1:].type",
        "Age": ".metadata.creationTimestamp",
    }


def test_pod_template_checks_containers_and_defaults_suspend() -> None:
    spec = _schema(CRDS["tfjobs"])["properties"]["spec"]
    replica = spec["properties"]["tfReplicaSpecs"]["additionalProperties"]
    containers = replica["properties"]["template"]["properties"]["spec"]["properties"]["containers"]
    assert (containers["minItems"], containers["maxItems"]) == (1, 64)
    assert containers["items"]["required"] == ["image", "name"]
    assert containers["x-kubernetes-list-type"] == "map"
    run_policy = spec["properties"]["runPolicy"]
    assert run_policy["default"] == {}
    assert run_policy["properties"]["suspend"]["default"] is False
    queue = run_policy["properties"]["schedulingPolicy"]["properties"]["queue"]
    assert queue["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "queue is immutable"}
    ]


QUANTITY = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": QUANTITY_PATTERN,
}


def test_quantities_are_int_or_string_with_the_quantity_pattern() -> None:
    run_policy = _schema(CRDS["pytorchjobs"])["properties"]["spec"]["properties"]["runPolicy"]
    min_resources = run_policy["properties"]["schedulingPolicy"]["properties"]["minResources"]
    assert min_resources["additionalProperties"] == QUANTITY
    replica = _schema(CRDS["mpijobs"])["properties"]["spec"]["properties"]["mpiReplicaSpecs"]
    pod = replica["additionalProperties"]["properties"]["template"]["properties"]["spec"]
    container = pod["properties"]["containers"]["items"]["properties"]
    limits = container["resources"]["properties"]["limits"]
    assert limits["additionalProperties"] == QUANTITY
    assert "description" in limits


def test_pod_template_is_the_core_schema_as_controller_gen_embeds_it() -> None:
    replica = _schema(CRDS["tfjobs"])["properties"]["spec"]["properties"]["tfReplicaSpecs"]
    template = replica["additionalProperties"]["properties"]["template"]
    # ObjectMeta as generateEmbeddedObjectMeta has it.
    assert sorted(template["properties"]["metadata"]["properties"]) == [
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
    ]
    pod = template["properties"]["spec"]["properties"]
    port = pod["containers"]["items"]["properties"]["ports"]["items"]["properties"]
    assert port["protocol"]["default"] == "TCP"  # a list-map key needs it
    assert port["containerPort"]["type"] == "integer"
    probe = pod["containers"]["items"]["properties"]["livenessProbe"]["properties"]
    assert probe["httpGet"]["properties"]["port"]["x-kubernetes-int-or-string"] is True
    assert "enum" not in pod["restartPolicy"]  # a newer cluster's values stay accepted
    assert "Possible enum values" in pod["restartPolicy"]["description"]
    # No OpenAPI zero-value defaults leak into stored jobs.
    defaults = [path for path, node in _nodes(template) if "default" in node]
    assert sorted(defaults) == [
        ".spec.containers[*].ports[*].protocol",
        ".spec.ephemeralContainers[*].ports[*].protocol",
        ".spec.imagePullSecrets[*].name",
        ".spec.initContainers[*].ports[*].protocol",
    ]


def test_cel_rules_reach_the_replica_spec_values_and_the_root() -> None:
    root = _schema(CRDS["pytorchjobs"])
    assert any("self.metadata.name" in r["rule"] for r in root["x-kubernetes-validations"])
    replica = root["properties"]["spec"]["properties"]["pytorchReplicaSpecs"]
    value_rules = replica["additionalProperties"]["x-kubernetes-validations"]
    assert any("'pytorch'" in r["rule"] for r in value_rules)
    # Bounded collections keep the CEL cost estimate inside the apiserver's budget.
    assert replica["maxProperties"] >= 2


class _Inner(BaseModel):
    mode: Literal["fast"] = "fast"
    ratio: float = Field(default=1.0, gt=0, lt=10)


class _Sample(BaseModel):
    inner: _Inner | None = None
    size: int | str = 1
    anything: Any = None
    free: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)


def test_transforms_on_a_small_model() -> None:
    schema = structural_schema(_Sample)
    props = schema["properties"]
    assert props["inner"] == {
        "properties": {
            "mode": {"enum": ["fast"], "type": "string"},
            "ratio": {
                "exclusiveMinimum": True,
                "minimum": 0,
                "exclusiveMaximum": True,
                "maximum": 10,
                "type": "number",
            },
        },
        "type": "object",
    }
    assert props["size"] == {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
    }
    assert props["anything"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert props["free"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert props["tags"] == {"items": {"type": "string"}, "type": "array"}
    assert structural_errors(schema) == []


class _Tree(BaseModel):
    children: list[_Tree] = Field(default_factory=list)


class _Pair(BaseModel):
    pair: tuple[int, int] = (0, 0)


class _Union(BaseModel):
    value: int | list[int] = 0


@pytest.mark.parametrize(
    ("model", "match"), [(_Tree, "recursive"), (_Pair, "prefixItems"), (_Union, "union")]
)
def test_unsupported_constructs_fail_at_generation(model: type[BaseModel], match: str) -> None:
    with pytest.raises(UnsupportedSchema, match=match):
        structural_schema(model)


def test_structural_errors_catches_what_the_apiserver_rejects() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A"},
            "b": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "c": {"type": "string", "default": None},
            "d": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
        },
    }
    errors = structural_errors(bad)
    assert any(e.startswith(".a: forbidden keyword '$ref'") for e in errors)
    assert ".b: anyOf outside an int-or-string node" in errors
    assert ".c: default: null" in errors
    assert ".d: both properties and additionalProperties" in errors


def test_build_crd_works_for_a_new_job_kind() -> None:
    class _Spec(JobSpec):
        things: dict[str, ReplicaSpec]

        def replica_specs(self) -> dict[str, ReplicaSpec]:
            return self.things

    class _Thing(JobModel[_Spec]):
        VERSION = "v1alpha1"
        KIND = "Thing"
        PLURAL = "things"
        SINGULAR = "thing"
        REPLICA_TYPES = ("A",)
        DEFAULT_CONTAINER_NAME = None

    crd = build_crd(_Thing, categories=())
    assert "categories" not in crd["spec"]["names"]
    assert structural_errors(_schema(crd)) == []
    assert _schema(crd)["properties"]["metadata"]["type"] == "object"
