"""The OpenAPI v3 -> CRD conversion of the PodTemplateSpec schema, on a small document."""

from __future__ import annotations

from typing import Any

import pytest

from jobcontroller.api.podschema import QUANTITY_PATTERN, pod_template_schema

P = "#/components/schemas/"


def ref(name: str, **extra: Any) -> dict[str, Any]:
    return {"allOf": [{"$ref": P + name}], **extra}


def document(**overrides: Any) -> dict[str, Any]:
    schemas: dict[str, Any] = {
        "io.k8s.api.core.v1.PodTemplateSpec": {
            "description": "PodTemplateSpec describes a pod.",
            "type": "object",
            "properties": {
                "metadata": ref(
                    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                    description="Standard metadata.",
                    default={},
                ),
                "spec": ref("io.k8s.api.core.v1.PodSpec", description="The pod.", default={}),
            },
        },
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": ""},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "uid": {"type": "string"},
                "creationTimestamp": ref("io.k8s.apimachinery.pkg.apis.meta.v1.Time"),
            },
        },
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"},
        "io.k8s.apimachinery.pkg.api.resource.Quantity": {"description": "long", "type": "string"},
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
            "format": "int-or-string",
            "oneOf": [{"type": "integer"}, {"type": "string"}],
        },
        "io.k8s.api.core.v1.PodSpec": {
            "type": "object",
            "required": ["containers"],
            "properties": {
                "restartPolicy": {
                    "type": "string",
                    "enum": ["Always", "Never"],
                    "description": 'How.\n\nPossible enum values:\n - `"Always"`',
                },
                "containers": {
                    "type": "array",
                    "items": ref("io.k8s.api.core.v1.Container", default={}),
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "x-kubernetes-patch-merge-key": "name",
                    "x-kubernetes-patch-strategy": "merge",
                },
            },
        },
        "io.k8s.api.core.v1.Container": {
            "description": "A container.",
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "default": ""},
                "limits": {
                    "type": "object",
                    "additionalProperties": ref("io.k8s.apimachinery.pkg.api.resource.Quantity"),
                },
                "port": ref("io.k8s.apimachinery.pkg.util.intstr.IntOrString", description="P."),
                "ports": {
                    "type": "array",
                    "items": ref("io.k8s.api.core.v1.ContainerPort", default={}),
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                },
            },
        },
        "io.k8s.api.core.v1.ContainerPort": {
            "type": "object",
            "required": ["containerPort"],
            "properties": {
                "containerPort": {"type": "integer", "format": "int32", "default": 0},
                "protocol": {"type": "string", "default": "TCP", "enum": ["TCP", "UDP"]},
            },
        },
    }
    schemas.update(overrides)
    return {"components": {"schemas": schemas}}


def test_conversion() -> None:
    schema = pod_template_schema(document())
    assert schema["description"] == "PodTemplateSpec describes a pod."
    meta = schema["properties"]["metadata"]
    # ObjectMeta as a template may carry it; the field's description, not the type's.
    assert meta == {
        "type": "object",
        "description": "Standard metadata.",
        "properties": {
            "name": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    spec = schema["properties"]["spec"]
    assert spec["description"] == "The pod." and spec["required"] == ["containers"]
    assert "enum" not in spec["properties"]["restartPolicy"]
    assert "Possible enum values" in spec["properties"]["restartPolicy"]["description"]
    containers = spec["properties"]["containers"]
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    assert not {"x-kubernetes-patch-merge-key", "x-kubernetes-patch-strategy"} & set(containers)
    container = containers["items"]
    assert container["description"] == "A container."  # an item keeps its type's words
    props = container["properties"]
    assert props["name"] == {"type": "string"}  # required list-map key: no zero default
    assert props["limits"]["additionalProperties"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": QUANTITY_PATTERN,
    }
    assert props["port"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "description": "P.",
    }
    port = props["ports"]["items"]["properties"]
    assert port["containerPort"] == {"type": "integer", "format": "int32"}
    assert port["protocol"] == {"type": "string", "x-crd-default": "TCP"}


def test_a_list_map_key_neither_required_nor_defaulted_is_an_error() -> None:
    doc = document()
    port = doc["components"]["schemas"]["io.k8s.api.core.v1.ContainerPort"]
    del port["properties"]["protocol"]["default"]
    with pytest.raises(ValueError, match="list-map key 'protocol'"):
        pod_template_schema(doc)


def test_a_recursive_schema_is_an_error() -> None:
    doc = document()
    container = doc["components"]["schemas"]["io.k8s.api.core.v1.Container"]
    container["properties"]["child"] = ref("io.k8s.api.core.v1.Container")
    with pytest.raises(ValueError, match="recursive"):
        pod_template_schema(doc)


def test_quantity_pattern_accepts_what_kubernetes_accepts() -> None:
    import re

    pattern = re.compile(QUANTITY_PATTERN)
    for good in ("1", "500m", "1Gi", "2.5", ".5", "1e3", "+1", "-1", "10E-3"):
        assert pattern.match(good), good
    for bad in ("abc", "1 Gi", "1GB", "", "1.2.3", "m"):
        assert not pattern.match(bad), bad
