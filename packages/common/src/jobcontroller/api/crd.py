"""CustomResourceDefinitions generated from the pydantic job models.

pydantic emits JSON Schema; the apiserver wants a *structural* OpenAPI v3 schema. The gap is
closed here, in one pass over the schema:

* `$ref`/`$defs` are inlined (a recursive model is an error: CRD schemas cannot recurse), and
  keys written beside a `$ref` are merged into the inlined node (CEL rules are concatenated);
* `X | None` loses its null branch. Optional fields are *not* marked `nullable`: a null sent by
  a client is pruned to "absent", as for the anchor's controller-gen schemas, so CEL rules only
  ever deal with present-or-absent;
* `int | str` becomes `x-kubernetes-int-or-string`, `const` becomes a one-value `enum`,
  numeric `exclusiveMinimum`/`exclusiveMaximum` become their OpenAPI v3.0 boolean forms;
* free-form `dict[str, Any]`/`Any` become `x-kubernetes-preserve-unknown-fields`;
* titles and pydantic's defaults are dropped. A CRD default is applied by the apiserver to
  every stored object, so only defaults asked for explicitly with the `x-crd-default` key
  (in a field's `json_schema_extra`) are emitted.

Anything else that the apiserver would refuse (tuples, sets, other unions, ...) raises
`UnsupportedSchema` at generation time rather than at `kubectl apply` time.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, JsonValue

from jobcontroller.api.cel import JsonDict, cel_create_only, cel_ratcheted
from jobcontroller.api.common import JobModel, JobSpec, ScaleSubresource
from jobcontroller.api.rules import ReplicaRules
from jobcontroller.api.validation import (
    DNS1035_LABEL_PATTERN,
    DNS1035_MESSAGE,
    MAX_DNS_LABEL_LENGTH,
)

__all__ = [
    "CRD_DEFAULT_KEY",
    "MAX_REPLICA_TYPES",
    "ScaleSubresource",
    "UnsupportedSchema",
    "build_crd",
    "cel_create_only",
    "cel_default_container_rule",
    "cel_managed_by_rule",
    "cel_ratcheted",
    "cel_root_rules",
    "crd_to_yaml",
    "structural_errors",
    "structural_schema",
]

MAX_REPLICA_TYPES = 16
"""`maxProperties` for replica-spec maps: bounds CEL cost; far above any real job's types.

Kept above the number of allowed types so an unknown type is reported by the readable CEL
rule ("replica types must be ...") rather than by a bare "must have at most N items"."""

CRD_DEFAULT_KEY = "x-crd-default"
"""Put `{CRD_DEFAULT_KEY: value}` in a field's json_schema_extra to emit a CRD default."""

_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"
_VALIDATIONS = "x-kubernetes-validations"
_FORBIDDEN = frozenset(
    {
        "prefixItems",
        "uniqueItems",
        "patternProperties",
        "oneOf",
        "not",
        "discriminator",
        "dependencies",
        "additionalItems",
    }
)
_DROPPED = frozenset({"title", "default", "examples", "readOnly", "writeOnly", "deprecated"})


class UnsupportedSchema(ValueError):
    """The model uses a construct that has no structural-schema equivalent."""


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if key == _VALIDATIONS:
            merged[key] = [*merged.get(key, []), *value]
        elif key == "required":
            merged[key] = list(dict.fromkeys([*merged.get(key, []), *value]))
        else:
            merged[key] = value
    return merged


def _inline(node: Any, defs: dict[str, Any], stack: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, stack) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        if name in stack:
            raise UnsupportedSchema(f"recursive model {' -> '.join((*stack, name))}")
        if name not in defs:
            raise UnsupportedSchema(f"unresolvable $ref {node['$ref']!r}")
        target = _inline(defs[name], defs, (*stack, name))
        siblings = {k: _inline(v, defs, stack) for k, v in node.items() if k != "$ref"}
        return _merge(target, siblings)
    return {k: _inline(v, defs, stack) for k, v in node.items() if k != "$defs"}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    raise UnsupportedSchema(f"const/enum value {value!r} has no OpenAPI scalar type")


def _normalise(node: dict[str, Any], path: str) -> dict[str, Any]:
    forbidden = _FORBIDDEN.intersection(node)
    if forbidden:
        raise UnsupportedSchema(f"{path or '<root>'}: unsupported keywords {sorted(forbidden)}")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == CRD_DEFAULT_KEY:
            out["default"] = copy.deepcopy(value)
        elif key == "properties":
            out[key] = {name: _normalise(sub, f"{path}.{name}") for name, sub in value.items()}
        elif key == "items":
            if not isinstance(value, dict):
                raise UnsupportedSchema(f"{path}: array-form items")
            out[key] = _normalise(value, f"{path}[*]")
        elif key == "additionalProperties":
            if value is True or value == {}:
                out[_PRESERVE] = True
            elif value is False:
                raise UnsupportedSchema(f"{path}: additionalProperties: false (use pruning)")
            else:
                out[key] = _normalise(value, f"{path}[*]")
        elif key in ("anyOf", "allOf"):
            out[key] = [_normalise(branch, path) for branch in value]
        else:
            out[key] = copy.deepcopy(value)
    return _fold_node(out, path)


def _fold_node(node: dict[str, Any], path: str) -> dict[str, Any]:
    all_of = node.pop("allOf", None)
    if all_of is not None:
        for branch in all_of:
            node = _merge(branch, node)
    any_of = node.pop("anyOf", None)
    if any_of is not None:
        branches = [b for b in any_of if b.get("type") != "null"]
        types = sorted(str(b.get("type")) for b in branches)
        if len(branches) == 1:
            node = _merge(branches[0], node)
        elif types == ["integer", "string"]:
            node.pop("type", None)
            node[_INT_OR_STRING] = True
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        else:
            raise UnsupportedSchema(f"{path}: union of {types} is not structural")
    if "const" in node:
        value = node.pop("const")
        node["enum"] = [value]
        node.setdefault("type", _json_type(value))
    for bound, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = node.get(bound)
        if isinstance(value, int | float) and not isinstance(value, bool):
            node[inclusive] = value
            node[bound] = True
    if "type" not in node and not node.get(_INT_OR_STRING) and not node.get(_PRESERVE):
        node[_PRESERVE] = True
    if node.get(_PRESERVE) and "type" not in node and "properties" in node:
        node["type"] = "object"
    return node


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of `model` (see the module docstring)."""
    raw = model.model_json_schema(mode="validation", by_alias=True)
    inlined = _inline(raw, raw.get("$defs", {}), ())
    if not isinstance(inlined, dict):  # pragma: no cover - pydantic always returns an object
        raise UnsupportedSchema("schema root is not an object")
    return _normalise(inlined, "")


def structural_errors(schema: dict[str, Any], path: str = "") -> list[str]:
    """Violations of the structural-schema rules the apiserver enforces, for tests and checks."""
    errors: list[str] = []
    where = path or "<root>"
    for key in ("$ref", "$defs", "definitions", "title", *_FORBIDDEN):
        if key in schema:
            errors.append(f"{where}: forbidden keyword {key!r}")
    if schema.get("default") is None and "default" in schema:
        errors.append(f"{where}: default: null")
    if schema.get("type") == "null":
        errors.append(f"{where}: type: null")
    typed = "type" in schema
    if not typed and not schema.get(_INT_OR_STRING) and not schema.get(_PRESERVE):
        errors.append(f"{where}: node has no type")
    if schema.get(_PRESERVE) is False:
        errors.append(f"{where}: {_PRESERVE}: false")
    if "additionalProperties" in schema and "properties" in schema:
        errors.append(f"{where}: both properties and additionalProperties")
    if "anyOf" in schema and not schema.get(_INT_OR_STRING):
        errors.append(f"{where}: anyOf outside an int-or-string node")
    for name, sub in schema.get("properties", {}).items():
        errors.extend(structural_errors(sub, f"{path}.{name}"))
    if isinstance(schema.get("items"), dict):
        errors.extend(structural_errors(schema["items"], f"{path}[*]"))
    elif "items" in schema:
        errors.append(f"{where}: array-form items")
    if isinstance(schema.get("additionalProperties"), dict):
        errors.extend(structural_errors(schema["additionalProperties"], f"{path}[*]"))
    return errors


def _cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def cel_root_rules(*, specs_path: str, not_pods: Sequence[str] = ()) -> list[JsonValue]:
    """Root-level rules for a job: a DNS-1035 name, short enough for all its pod names.

    `specs_path` is the CEL path of the replica-spec map, e.g. `self.spec.tfReplicaSpecs`. The
    length rule bounds `<name>-<replica type>-<last index>` (kubeflow #1101: longer names were
    accepted and then never got pods, because every Service creation failed), for every type
    but `not_pods`, whose objects are named otherwise (MPI's Launcher is a Job,
    `<name>-launcher`, which the framework bounds itself).
    """
    spec = f"{specs_path}[k]"
    last_index = f"(has({spec}.replicas) && {spec}.replicas > 1 ? {spec}.replicas - 1 : 0)"
    skipped = f"k in {_cel_list(not_pods)} || " if not_pods else ""
    rules: list[JsonDict] = [
        {
            "rule": (
                f"size(self.metadata.name) <= {MAX_DNS_LABEL_LENGTH} && "
                f"self.metadata.name.matches('{DNS1035_LABEL_PATTERN}')"
            ),
            "message": DNS1035_MESSAGE,
            "fieldPath": ".metadata.name",
            "reason": "FieldValueInvalid",
        },
        {
            "rule": (
                f"{specs_path}.all(k, {skipped}size(self.metadata.name) + size(k) + 2 "
                f"+ size(string({last_index})) <= {MAX_DNS_LABEL_LENGTH})"
            ),
            "message": (
                "too long: the pod and service names <name>-<replica type>-<index> "
                f"must be at most {MAX_DNS_LABEL_LENGTH} characters"
            ),
            "fieldPath": ".metadata.name",
            "reason": "FieldValueInvalid",
        },
    ]
    # The name cannot change after creation; replicas can, and the operator's validation
    # fails a job scaled past the limit.
    return [ratcheted for rule in rules for ratcheted in cel_ratcheted(rule)]


def cel_managed_by_rule(*, allowed: Sequence[str]) -> JsonDict:
    """A spec-level rule restricting runPolicy.managedBy to the given controllers."""
    return {
        "rule": (
            "!has(self.runPolicy) || !has(self.runPolicy.managedBy) || "
            f"self.runPolicy.managedBy in {_cel_list(allowed)}"
        ),
        "message": f"must be one of {', '.join(allowed)}",
        "fieldPath": ".runPolicy.managedBy",
    }


def cel_default_container_rule(*, container: str) -> JsonDict:
    """A replica-spec rule requiring a container with the framework's name."""
    return {
        # A missing template/spec/containers is reported by `required`; don't report it twice.
        "rule": (
            "!has(self.template) || !has(self.template.spec) || "
            "!has(self.template.spec.containers) || "
            f"self.template.spec.containers.exists(c, c.name == '{container}')"
        ),
        "message": f"the pod template must have a container named {container!r}",
        "fieldPath": ".template.spec.containers",
    }


def _root_schema(model: type[JobModel[Any]]) -> dict[str, Any]:
    schema = structural_schema(model)
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {
        "type": "string",
        "description": (
            "APIVersion defines the versioned schema of this representation of an object. "
            "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
            "api-conventions.md#resources"
        ),
    }
    properties["kind"] = {
        "type": "string",
        "description": (
            "Kind is a string value representing the REST resource this object represents. "
            "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
            "api-conventions.md#types-kinds"
        ),
    }
    # The apiserver owns ObjectMeta's schema; a CRD may only constrain name and generateName.
    # Declaring `name` lets the root CEL rules point their errors at `.metadata.name`.
    # The API server refuses anything else there, a description included.
    properties["metadata"] = {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": (
                    "The job's name: a DNS-1035 label, short enough that "
                    "<name>-<replica type>-<index> is one too."
                ),
            }
        },
    }
    schema["required"] = [r for r in schema.get("required", []) if r != "metadata"]
    if not schema["required"]:
        del schema["required"]
    return schema


def _complete(model: type[JobModel[Any]], schema: dict[str, Any]) -> dict[str, Any]:
    """What every kind needs and a model need not spell out (see :func:`build_crd`)."""
    spec_model = model.model_fields["spec"].annotation
    if not (isinstance(spec_model, type) and issubclass(spec_model, JobSpec)):
        raise UnsupportedSchema(f"{model.__name__}.spec must be a JobSpec subclass")
    alias = spec_model.model_fields[spec_model.replica_specs_field()].alias or ""
    spec_schema = schema["properties"]["spec"]
    replica_map = spec_schema["properties"][alias]
    replica_map.setdefault("maxProperties", MAX_REPLICA_TYPES)
    rules = model.REPLICA_RULES
    if rules is None:
        return schema
    _add_replica_rules(model, rules, replica_map)
    if _VALIDATIONS not in schema:
        schema[_VALIDATIONS] = _sorted(cel_root_rules(specs_path=f"self.spec.{alias}"))
    _add_spec_rules(model, rules, spec_schema, map_field=alias)
    return schema


def _add_replica_rules(
    model: type[JobModel[Any]], rules: ReplicaRules, replica_map: dict[str, Any]
) -> None:
    """The map's replica rules, and on each replica spec the default container's rule and the
    replica rules that judge one spec."""
    known = model.REPLICA_TYPES
    item = replica_map["additionalProperties"]
    item_rules = item.get(_VALIDATIONS, [])
    if model.DEFAULT_CONTAINER_NAME:
        wanted = cel_default_container_rule(container=model.DEFAULT_CONTAINER_NAME)
        item_rules += [] if wanted in item_rules else [wanted]
    item_rules += rules.cel(known=known, level="item")
    if item_rules:
        item[_VALIDATIONS] = _sorted(item_rules)
    replica_map[_VALIDATIONS] = _sorted(
        [*replica_map.get(_VALIDATIONS, []), *rules.cel(known=known)]
    )
    # Keywords in order, as pydantic writes the rest of the schema.
    for node in (replica_map, item):
        ordered = sorted(node.items())
        node.clear()
        node.update(ordered)


def _add_spec_rules(
    model: type[JobModel[Any]], rules: ReplicaRules, spec: dict[str, Any], *, map_field: str
) -> None:
    """The ``runPolicy.managedBy`` rule (unless the spec has its own) and the replica rules
    that judge the spec, before the spec's own rules."""
    own = spec.get(_VALIDATIONS, [])
    added = rules.cel(known=model.REPLICA_TYPES, level="spec", map_field=map_field)
    if not any(r.get("fieldPath") == ".runPolicy.managedBy" for r in own):
        added.insert(0, cel_managed_by_rule(allowed=model.managed_by_values()))
    # The spec model's keywords, then its description (from beside the JobModel's $ref).
    description = spec.pop("description", None)
    spec[_VALIDATIONS] = _sorted([*added, *own])
    if description is not None:
        spec["description"] = description


def _sorted(rules: list[Any]) -> list[Any]:
    """Each CEL rule's keys in alphabetical order, as pydantic writes those of a model."""
    return [dict(sorted(rule.items())) for rule in rules]


def build_crd(
    model: type[JobModel[Any]],
    *,
    categories: Sequence[str] | None = None,
    scale: ScaleSubresource | None = None,
) -> dict[str, Any]:
    """A complete apiextensions.k8s.io/v1 CRD for one job kind (one served, stored version),
    with the scale subresource ``scale`` or else the model's ``SCALE``.

    The replica-spec map always gets ``maxProperties`` (:data:`MAX_REPLICA_TYPES`), which
    keeps its CEL rules' estimated cost inside the API server's budget. A model with
    ``REPLICA_RULES`` gets the rest of a kind's admission from its class attributes too: the
    replica rules themselves (on the map, on each replica spec and on the spec, as each rule
    says), the default-container rule on every replica spec, the name rules at the root
    (:func:`cel_root_rules`) and the ``runPolicy.managedBy`` rule (first among the spec's),
    each of the last three unless the model's own schema already has it.
    """
    names: dict[str, Any] = {
        "kind": model.KIND,
        "listKind": f"{model.KIND}List",
        "plural": model.PLURAL,
        "singular": model.SINGULAR,
    }
    if model.SHORT_NAMES:
        names["shortNames"] = list(model.SHORT_NAMES)
    if categories is None:  # `kubectl get kubeflow` lists every kubeflow.org job
        categories = ("kubeflow",) if model.GROUP == "kubeflow.org" else ()
    if categories:
        names["categories"] = list(categories)
    subresources: dict[str, Any] = {"status": {}}
    scale = scale if scale is not None else model.SCALE
    if scale is not None:
        subresources["scale"] = {
            "specReplicasPath": scale.spec_replicas_path,
            "statusReplicasPath": scale.status_replicas_path,
        }
        if scale.label_selector_path is not None:
            subresources["scale"]["labelSelectorPath"] = scale.label_selector_path
    version = {
        "name": model.VERSION,
        "served": True,
        "storage": True,
        "additionalPrinterColumns": [
            {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "schema": {"openAPIV3Schema": _complete(model, _root_schema(model))},
        "subresources": subresources,
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{model.PLURAL}.{model.GROUP}"},
        "spec": {
            "group": model.GROUP,
            "names": names,
            "scope": "Namespaced",
            "versions": [version],
        },
    }


def crd_to_yaml(crd: dict[str, Any]) -> str:
    """Deterministic YAML for a committed manifest."""
    import yaml  # generating manifests only; an operator process never needs it

    body = yaml.safe_dump(crd, sort_keys=False, default_flow_style=False, width=100)
    return f"# Generated by hack/gen-crds.py from the pydantic models; do not edit.\n---\n{body}"
