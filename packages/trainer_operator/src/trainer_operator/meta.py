"""What the trainer and JobSet models share: schema markers, metav1.Condition, the root object.

The markers say in a field's ``json_schema_extra`` what Go's kubebuilder markers say in the
upstream types (list types, enums, formats, CEL rules); ``jobcontroller.api.crd`` turns the
models' JSON Schema into a structural CRD schema with them.

Models read leniently, as the v1 kinds' do: unknown fields are ignored (the API server, with the
CRD schema, is the gate), enums are plain strings in Python so that an object written by a newer
controller still parses, and fields the CRD defaults default to ``None`` here, so that a model
written back (``to_dict()``) holds exactly what was read.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, JsonValue
from typing_extensions import override

from jobcontroller.api import INT32_MAX, KubeModel, Time

__all__ = [
    "ATOMIC",
    "CRD_DEFAULT",
    "IMMUTABLE",
    "SET",
    "Condition",
    "Int32",
    "Int64",
    "JsonDict",
    "TrainerObject",
    "cel",
    "extra",
    "list_map",
    "one_of",
]

JsonDict = dict[str, JsonValue]

CRD_DEFAULT = "x-crd-default"  # jobcontroller.api.crd.CRD_DEFAULT_KEY
_VALIDATIONS = "x-kubernetes-validations"

ATOMIC: JsonDict = {"x-kubernetes-list-type": "atomic"}
"""A list replaced as a whole by server-side apply."""
SET: JsonDict = {"x-kubernetes-list-type": "set"}
"""A list of unique scalars."""


def list_map(*keys: str) -> JsonDict:
    """A list of objects keyed (and made unique) by ``keys``."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def one_of(*values: str) -> JsonDict:
    """A string restricted to ``values`` in the CRD (any string still parses in Python)."""
    return {"enum": list(values)}


def cel(
    rule: str,
    *,
    message: str | None = None,
    message_expression: str | None = None,
    field_path: str | None = None,
    reason: str | None = None,
) -> JsonDict:
    """One ``x-kubernetes-validations`` rule."""
    out: JsonDict = {"rule": rule}
    if message is not None:
        out["message"] = message
    if message_expression is not None:
        out["messageExpression"] = message_expression
    if field_path is not None:
        out["fieldPath"] = field_path
    if reason is not None:
        out["reason"] = reason
    return out


IMMUTABLE_MESSAGE = "field is immutable"
IMMUTABLE: JsonDict = cel("self == oldSelf", message=IMMUTABLE_MESSAGE)
"""The trainer API's immutability rule (JobSet's own types say "Value is immutable")."""


def extra(*parts: JsonDict, rules: list[JsonDict] | None = None) -> JsonDict:
    """Merge schema keywords; CEL rules (``rules`` and any in ``parts``) are concatenated."""
    merged: JsonDict = {}
    validations: list[JsonValue] = []
    for part in parts:
        for key, value in part.items():
            if key == _VALIDATIONS and isinstance(value, list):
                validations.extend(value)
            else:
                merged[key] = value
    validations.extend(rules or [])
    if validations:
        merged[_VALIDATIONS] = validations
    return merged


Int32 = Annotated[int, Field(le=INT32_MAX, json_schema_extra={"format": "int32"})]
"""A Go int32: what Kubernetes' decoder accepts for one."""
Int64 = Annotated[int, Field(json_schema_extra={"format": "int64"})]


class Condition(KubeModel):
    """metav1.Condition: one aspect of an object's state, as TrainJob and JobSet report them."""

    type: str = Field(
        max_length=316,
        pattern=(
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        ),
        description="What the condition is about, in CamelCase (Complete, Failed, Suspended...).",
    )
    status: str = Field(
        description="True, False or Unknown.",
        json_schema_extra=one_of("True", "False", "Unknown"),
    )
    observed_generation: Int64 | None = Field(
        default=None,
        ge=0,
        description="The metadata.generation the condition was computed from.",
    )
    last_transition_time: Time = Field(description="When status last changed.")
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description="Why status last changed, as a CamelCase word a program can match on.",
    )
    message: str = Field(
        max_length=32768, description="Why status last changed, for a human (may be empty)."
    )


class TrainerObject(KubeModel):
    """A whole trainer.kubeflow.org object: type metadata, raw metadata, the kind's fields.

    ``metadata`` stays a dict: readers need a few fields and writers must keep the others.
    """

    GROUP: ClassVar[str] = "trainer.kubeflow.org"
    VERSION: ClassVar[str] = "v1alpha1"
    KIND: ClassVar[str]
    PLURAL: ClassVar[str]
    SINGULAR: ClassVar[str]
    SCOPE: ClassVar[Literal["Namespaced", "Cluster"]] = "Namespaced"

    api_version: str = ""
    kind: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @override
    def model_post_init(self, context: Any, /) -> None:
        # List items and hand-written dicts may lack apiVersion/kind; the class knows them.
        if not self.api_version:
            object.__setattr__(self, "api_version", self.api_version_string())
        if not self.kind:
            object.__setattr__(self, "kind", self.KIND)

    @classmethod
    def api_version_string(cls) -> str:
        return f"{cls.GROUP}/{cls.VERSION}"

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Self:
        """Build a model from a stored object, ignoring fields the model does not know."""
        return cls.model_validate(raw)

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", ""))

    @property
    def uid(self) -> str:
        return str(self.metadata.get("uid", ""))

    @property
    def key(self) -> str:
        """``namespace/name`` (just ``name`` for a cluster-scoped object)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def generation(self) -> int:
        return int(self.metadata.get("generation", 0))

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.metadata.get("labels") or {})

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.metadata.get("annotations") or {})
