"""The core/v1 PodTemplateSpec schema of the job CRDs, taken from a real API server.

The job models keep pod templates as raw dicts (typed pod models would cost parse time and
memory), but the CRDs carry the full schema, as the anchors' controller-gen CRDs do: the API
server then rejects `cpu: "abc"` at admission with its own message, prunes misspelt fields
instead of letting a job sit in Created while pod creation fails, and `kubectl explain` walks the
template field by field.

The schema is converted from the API server's OpenAPI v3 document (`/openapi/v3/api/v1`) by
:func:`pod_template_schema` and committed as ``podtemplatespec.json`` beside this module;
``hack/gen-pod-schema.py`` regenerates it from the local control plane, and an integration test
fails when the committed file no longer matches what that API server serves. The conversion,
for a structural CRD schema that means what the core types mean:

* `$ref` and `allOf: [$ref]` are inlined, the referring field's description winning over its
  type's; descriptions are kept whole (the enum notes included), so `kubectl explain` prints
  what it prints for a Pod;
* `IntOrString` and `Quantity` become `x-kubernetes-int-or-string` (a Quantity also gets the
  quantity pattern controller-gen emits, so a malformed quantity is refused at admission);
  `Time` and `MicroTime` become date-time strings;
* `ObjectMeta` becomes the part a template may carry (labels, annotations, name, namespace,
  finalizers), as controller-gen's `generateEmbeddedObjectMeta` does;
* strategic-merge-patch hints, unions and enums are dropped (an enum would refuse a value a
  newer cluster accepts), and so are OpenAPI's zero-value defaults, except the default of a
  list-map key that is not required (`protocol: TCP` of container ports, `name: ""` of image
  pull secrets), which the API server insists on.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "POD_TEMPLATE_SPEC",
    "QUANTITY_PATTERN",
    "SCHEMA_FILE",
    "load_pod_template_schema",
    "openapi_schema",
    "pod_template_schema",
]

POD_TEMPLATE_SPEC = "io.k8s.api.core.v1.PodTemplateSpec"
SCHEMA_FILE = "podtemplatespec.json"
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""resource.Quantity's serialised form, as controller-gen writes it into CRDs."""

_PREFIX = "#/components/schemas/"
_CRD_DEFAULT = "x-crd-default"  # jobcontroller.api.crd.CRD_DEFAULT_KEY: a default the CRD keeps
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_TIMES = frozenset(
    {"io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"}
)
_INT_OR_STRING_NODE = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_EMBEDDED_META = ("annotations", "finalizers", "labels", "name", "namespace")
_DROPPED = frozenset(
    {
        "x-kubernetes-patch-merge-key",
        "x-kubernetes-patch-strategy",
        "x-kubernetes-unions",
        "x-kubernetes-group-version-kind",
        "enum",
        "default",
    }
)


def _ref_name(node: dict[str, Any]) -> str | None:
    if "$ref" in node:
        return str(node["$ref"]).removeprefix(_PREFIX)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).removeprefix(_PREFIX)
    return None


class _Converter:
    def __init__(self, schemas: dict[str, Any]) -> None:
        self._schemas = schemas

    def named(self, name: str, stack: tuple[str, ...]) -> dict[str, Any]:
        if name in stack:
            raise ValueError(f"recursive schema {' -> '.join((*stack, name))}")
        if name == _QUANTITY:
            return {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": QUANTITY_PATTERN,
                "x-kubernetes-int-or-string": True,
            }
        if name == _INT_OR_STRING:
            return {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            }
        if name in _TIMES:
            return {"type": "string", "format": "date-time"}
        target = self._schemas.get(name)
        if target is None:
            raise ValueError(f"unresolvable schema {name!r}")
        if name == _OBJECT_META:
            props = target.get("properties", {})
            target = {
                "type": "object",
                "properties": {key: props[key] for key in _EMBEDDED_META if key in props},
            }
        return self.node(target, (*stack, name))

    def node(self, node: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
        ref = _ref_name(node)
        out: dict[str, Any] = self.named(ref, stack) if ref is not None else {}
        for key, value in node.items():
            if key in _DROPPED or key in ("$ref", "allOf"):
                continue
            if key == "properties":
                out[key] = {name: self.node(sub, stack) for name, sub in value.items()}
            elif key in ("items", "additionalProperties"):
                out[key] = self.node(value, stack) if isinstance(value, dict) else value
            else:
                out[key] = copy.deepcopy(value)
        self._keep_list_map_key_defaults(node, out, stack)
        return out

    def _keep_list_map_key_defaults(
        self, raw: dict[str, Any], out: dict[str, Any], stack: tuple[str, ...]
    ) -> None:
        """A list-map key must be required or defaulted: keep the API's default for it."""
        keys = raw.get("x-kubernetes-list-map-keys") or []
        items = raw.get("items")
        if not keys or not isinstance(items, dict):
            return
        item_ref = _ref_name(items)
        item_raw = self._schemas.get(item_ref, {}) if item_ref is not None else items
        required = set(item_raw.get("required", []))
        for key in keys:
            if key in required:
                continue
            field = item_raw.get("properties", {}).get(key, {})
            if "default" not in field:
                raise ValueError(f"list-map key {key!r} under {stack} has no default")
            out["items"]["properties"][key][_CRD_DEFAULT] = field["default"]


def openapi_schema(openapi: dict[str, Any], name: str) -> dict[str, Any]:
    """The CRD schema of the type ``name`` (``io.k8s.api.batch.v1.JobTemplateSpec``...) of an
    OpenAPI v3 document, converted as the module docstring says; for kinds that embed other
    built-in types than a pod template (TrainingRuntime's Job templates)."""
    return _Converter(openapi["components"]["schemas"]).named(name, ())


def pod_template_schema(openapi: dict[str, Any]) -> dict[str, Any]:
    """The CRD schema of a PodTemplateSpec, from an OpenAPI v3 document of the core group."""
    return openapi_schema(openapi, POD_TEMPLATE_SPEC)


@cache
def _committed() -> str:
    # Next to this module in the installed package (importlib.resources would import tempfile,
    # shutil and the compression modules into every operator: about 0.5 MB of RSS).
    return Path(__file__).with_name(SCHEMA_FILE).read_text()


def load_pod_template_schema() -> dict[str, Any]:
    """The committed PodTemplateSpec schema (a fresh copy each call)."""
    data: dict[str, Any] = json.loads(_committed())
    return data
