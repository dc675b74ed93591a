"""Replica-type rules, declared once for admission (CEL in the CRD) and for the operator (Python).

A job kind's replica rules (the types it knows, those it needs, how many pods one may run...)
are values: each rule renders itself as a CEL rule for the CRD and checks a replica map in
Python with the same meaning, so admission and the operator cannot drift apart. Set them on
the job model as ``REPLICA_RULES``; :func:`jobcontroller.api.crd.build_crd` puts them in the
CRD and :func:`jobcontroller.api.validation.job_errors` checks them::

    class ToyJob(JobModel[ToyJobSpec]):
        REPLICA_TYPES = ("Master", "Worker")
        REPLICA_RULES = ReplicaRules(required=("Master",), single=("Master",))

That short form says things in the house words. A kind that must keep words of its own (the
messages users of the Go operators know) lists its rules, each with its admission ``message``
and, where the Python error is worded otherwise, its ``error``::

    REPLICA_RULES = ReplicaRules(exact=True, empty=None, rules=(
        KnownTypes(message="replica types must be Launcher or Worker"),
        Required(rtype="Launcher", message="a Launcher replica spec is required"),
        Replicas(types=("Launcher",), min=1, max=1, message="Launcher replicas must be 1"),
    ))

Each rule's CEL stays inside the API server's cost budget on its own: the map is bounded by
``maxProperties``, which ``build_crd`` sets.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Mapping, Sequence, Set
from typing import ClassVar, Literal, Protocol

from msgspec import Struct, StructMeta
from typing_extensions import override

from jobcontroller.api.cel import JsonDict, cel_ratcheted

__all__ = [
    "GO_REPLICAS_MUST_BE_1",
    "GO_REQUIRED_TYPE",
    "GO_UNSUPPORTED_TYPE",
    "AtLeastOne",
    "AtMostOne",
    "DistinctCase",
    "KnownTypes",
    "NonEmpty",
    "ReplicaRule",
    "ReplicaRules",
    "Replicas",
    "Required",
    "RequiredWith",
    "RestartPolicies",
]

#: The Go webhooks' field errors (``field.NotSupported``, ``field.Required``,
#: ``field.Forbidden``) as Go renders them, for a rule's ``error``.
GO_UNSUPPORTED_TYPE = '{path}[{key}]: Unsupported value: "{key}": supported values: {supported}'
GO_REQUIRED_TYPE = "{path}[{key}]: Required value: must be present"
GO_REPLICAS_MUST_BE_1 = "{path}[{key}].replicas: Forbidden: must be 1"


class _Replica(Protocol):
    """What the rules read of a replica spec (``jobcontroller.api.common.ReplicaSpec``, which
    imports this module: it is not imported back)."""

    @property
    def replicas(self) -> int | None: ...

    @property
    def restart_policy(self) -> str | None: ...


class _Scope(Struct, frozen=True):
    """What a rule is judged against: the replica map (``specs``; in CEL, the node the rule
    sits on), how its keys compare, and, for spec-level rules, the spec's set fields."""

    exact: bool
    known: tuple[str, ...]
    map_field: str = ""
    specs: Mapping[str, _Replica] | None = None
    present: Set[str] = frozenset()

    def fold(self, key: str) -> str:
        return key if self.exact else key.lower()

    def matches(self, key: str, types: Sequence[str]) -> bool:
        return self.fold(key) in {self.fold(t) for t in types}

    def missing(self, rtype: str) -> bool:
        return not any(self.matches(k, (rtype,)) for k in self.replica_map)

    @property
    def replica_map(self) -> Mapping[str, _Replica]:
        return self.specs or {}

    def key(self, var: str) -> str:
        return var if self.exact else f"{var}.lowerAscii()"

    def literal(self, rtype: str) -> str:
        return f"'{self.fold(rtype)}'"

    def cel_in(self, var: str, types: Sequence[str]) -> str:
        if len(types) == 1:
            return f"{self.key(var)} == {self.literal(types[0])}"
        return f"{self.key(var)} in [{', '.join(self.literal(t) for t in types)}]"

    def cel_not_in(self, var: str, types: Sequence[str]) -> str:
        if len(types) == 1:
            return f"{self.key(var)} != {self.literal(types[0])}"
        return f"!({self.cel_in(var, types)})"

    def cel_has(self, map_expr: str, rtype: str) -> str:
        if self.exact:
            return f"'{rtype}' in {map_expr}"
        return f"{map_expr}.exists(k, {self.cel_in('k', (rtype,))})"


def _quoted(values: Sequence[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


class _RuleMeta(StructMeta, ABCMeta):
    """A Struct's metaclass that also enforces ``@abstractmethod``."""


class ReplicaRule(Struct, metaclass=_RuleMeta, frozen=True, kw_only=True):
    """One replica rule: a CEL rule for the CRD and the same check in Python.

    ``message``: what admission says. ``error``: the Python error, a ``str.format`` template
    with ``{path}`` (the map's path, ``spec.tfReplicaSpecs``), ``{message}``, ``{key}`` (the
    replica type at fault) and ``{supported}`` (the rule's types, quoted); each rule has a
    default. ``ratcheted``: judged for new jobs, and on updates only for jobs that met it
    (:func:`~jobcontroller.api.cel.cel_ratcheted`), for a rule the Go operator never checked,
    so a job stored under it stays writable. ``tolerated`` (ratcheted rules only): a stored
    job that breaks it runs, with a warning, instead of failing validation (a framework's
    ``tolerated`` hook returns these errors: ``replica_rule_errors(job, tolerated=True)``).

    Authors declare rules; :class:`ReplicaRules` calls :meth:`cel` and :meth:`errors`.
    """

    #: Where the CEL rule goes: on the replica map, on each replica spec, or on the spec.
    level: ClassVar[Literal["map", "item", "spec"]] = "map"
    default_error: ClassVar[str] = "{path}: {message}"

    message: str
    error: str | None = None
    ratcheted: bool = False
    tolerated: bool = False

    def __post_init__(self) -> None:
        if self.tolerated and not self.ratcheted:
            raise ValueError(f"{self.message!r}: only a ratcheted rule can be tolerated")

    def cel(self, scope: _Scope) -> list[JsonDict]:
        rule: JsonDict = {"rule": self.cel_rule(scope), "message": self.message}
        rule.update(self.cel_extra())
        return cel_ratcheted(rule) if self.ratcheted else [rule]

    def errors(self, scope: _Scope, *, path: str) -> list[str]:
        template = self.error if self.error is not None else self.default_error
        return [template.format(path=path, message=self.message, **f) for f in self.broken(scope)]

    @abstractmethod
    def cel_rule(self, scope: _Scope) -> str:
        """The CEL expression, on the node of the rule's ``level``."""

    def cel_extra(self) -> JsonDict:
        """More keys of the CEL rule (a ``fieldPath``)."""
        return {}

    @abstractmethod
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        """One dict of ``error`` fields for each violation; [] when the map meets the rule."""


class KnownTypes(ReplicaRule, frozen=True, kw_only=True):
    """Every key is one of ``types`` (``None``: the model's ``REPLICA_TYPES``)."""

    default_error: ClassVar[str] = "{path}[{key}]: {message}"
    types: Sequence[str] | None = None

    def _types(self, scope: _Scope) -> Sequence[str]:
        return scope.known if self.types is None else self.types

    @override
    def cel_rule(self, scope: _Scope) -> str:
        return f"self.all(k, {scope.cel_in('k', self._types(scope))})"

    @override
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        types = self._types(scope)
        supported = _quoted(types)
        return [
            {"key": k, "supported": supported}
            for k in scope.replica_map
            if not scope.matches(k, types)
        ]


class DistinctCase(ReplicaRule, frozen=True, kw_only=True):
    """No two keys differ only in case: the defaulter, which matches types case-insensitively,
    would merge them."""

    default_error: ClassVar[str] = "{path}: replica types {first!r} and {key!r} differ only in case"
    message: str = "replica types must not differ only in case"

    @override
    def cel_rule(self, scope: _Scope) -> str:
        return "self.all(k, self.exists_one(j, j.lowerAscii() == k.lowerAscii()))"

    @override
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        seen: dict[str, str] = {}
        found: list[dict[str, str]] = []
        for key in scope.replica_map:
            first = seen.setdefault(key.lower(), key)
            if first != key:
                found.append({"first": first, "key": key})
        return found


class Required(ReplicaRule, frozen=True, kw_only=True):
    """A ``rtype`` replica spec must be present."""

    rtype: str

    @override
    def cel_rule(self, scope: _Scope) -> str:
        return scope.cel_has("self", self.rtype)

    @override
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        return [{"key": self.rtype}] if scope.missing(self.rtype) else []


class RequiredWith(ReplicaRule, frozen=True, kw_only=True):
    """A ``rtype`` replica spec must be present when the spec sets ``field`` (its JSON name):
    PyTorch's elasticPolicy scales the Workers. Judged on the spec, which holds both."""

    level: ClassVar[Literal["map", "item", "spec"]] = "spec"
    default_error: ClassVar[str] = "spec.{field}: {message}"
    rtype: str
    field: str

    @override
    def cel_rule(self, scope: _Scope) -> str:
        has = scope.cel_has(f"self.{scope.map_field}", self.rtype)
        return f"!has(self.{self.field}) || {has}"

    @override
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        if self.field in scope.present and scope.missing(self.rtype):
            return [{"key": self.rtype, "field": self.field}]
        return []


class AtLeastOne(ReplicaRule, frozen=True, kw_only=True):
    """One of ``types`` at least must be present (TF: something must decide success)."""

    types: Sequence[str]

    @override
    def cel_rule(self, scope: _Scope) -> str:
        return f"self.exists(k, {scope.cel_in('k', self.types)})"

    @override
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        if any(scope.matches(k, self.types) for k in scope.replica_map):
            return []
        return [{"supported": _quoted(self.types)}]


class AtMostOne(ReplicaRule, frozen=True, kw_only=True):
    """At most one of ``types`` may be present (TF: Master is another name for Chief)."""

    types: Sequence[str]

    @override
    def cel_rule(self, scope: _Scope) -> str:
        return f"size(self.filter(k, {scope.cel_in('k', self.types)})) <= 1"

    @override
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        present = [k for k in scope.replica_map if scope.matches(k, self.types)]
        return [{"supported": _quoted(self.types)}] if len(present) > 1 else []


class NonEmpty(ReplicaRule, frozen=True, kw_only=True):
    """The map names at least one replica type."""

    @override
    def cel_rule(self, scope: _Scope) -> str:
        return "size(self) > 0"

    @override
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        return [] if scope.replica_map else [{}]


class Replicas(ReplicaRule, frozen=True, kw_only=True):
    """The ``replicas`` of each of ``types`` present lie in ``[min, max]`` (either bound may be
    open); with ``must_set``, an absent ``replicas`` breaks the rule too (a Go webhook that
    ran before defaulting), else it passes (defaulting will set it)."""

    default_error: ClassVar[str] = "{path}[{key}].replicas: {message}"
    types: Sequence[str]
    min: int | None = None
    max: int | None = None
    must_set: bool = False

    @override
    def __post_init__(self) -> None:
        ReplicaRule.__post_init__(self)
        if self.min is None and self.max is None:
            raise ValueError(f"{self.message!r}: a Replicas rule needs min or max")

    def _bound(self, value: str) -> str:
        if self.min is not None and self.min == self.max:
            return f"{value} == {self.min}"
        bounds = [
            f"{value} {op} {n}" for op, n in ((">=", self.min), ("<=", self.max)) if n is not None
        ]
        return bounds[0] if len(bounds) == 1 else f"({' && '.join(bounds)})"

    def _check(self, value: str) -> str:
        if self.must_set:
            return f"(has({value}) && {self._bound(value)})"
        return f"!has({value}) || {self._bound(value)}"

    @override
    def cel_rule(self, scope: _Scope) -> str:
        if scope.exact and len(self.types) == 1:
            rtype = self.types[0]
            value = "self['" + rtype + "'].replicas"
            return f"!('{rtype}' in self) || {self._check(value)}"
        return (
            f"self.all(k, {scope.cel_not_in('k', self.types)} || {self._check('self[k].replicas')})"
        )

    def _ok(self, replicas: int | None) -> bool:
        if replicas is None:
            return not self.must_set
        return (self.min is None or replicas >= self.min) and (
            self.max is None or replicas <= self.max
        )

    @override
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        return [
            {"key": k}
            for k, spec in scope.replica_map.items()
            if scope.matches(k, self.types) and not self._ok(spec.replicas)
        ]


class RestartPolicies(ReplicaRule, frozen=True, kw_only=True):
    """Every replica spec's ``restartPolicy``, when set, is one of ``allowed``."""

    level: ClassVar[Literal["map", "item", "spec"]] = "item"
    default_error: ClassVar[str] = "{path}[{key}].restartPolicy: {message}"
    allowed: Sequence[str]

    @override
    def cel_rule(self, scope: _Scope) -> str:
        values = ", ".join(f"'{v}'" for v in self.allowed)
        return f"!has(self.restartPolicy) || self.restartPolicy in [{values}]"

    @override
    def cel_extra(self) -> JsonDict:
        return {"fieldPath": ".restartPolicy"}

    @override
    def broken(self, scope: _Scope) -> list[dict[str, str]]:
        return [
            {"key": k}
            for k, spec in scope.replica_map.items()
            if spec.restart_policy is not None and spec.restart_policy not in self.allowed
        ]


#: What Python says of an empty map unless a kind says otherwise (v1.9's webhooks' words).
_EMPTY = "{path}: Required value: must be required"


class ReplicaRules(Struct, frozen=True, kw_only=True):
    """The replica rules of one job kind, for :func:`~jobcontroller.api.crd.build_crd` (CEL)
    and :func:`~jobcontroller.api.validation.job_errors` (Python).

    The short form: ``types``, the replica types a job may have (empty: any; ``None``: the
    model's ``REPLICA_TYPES``); ``required``, types every job must have; ``one_of``, at least
    one of these must be present; ``single``, types that run exactly one pod (``replicas``
    absent or 1); and keys that differ only in case are refused. Or ``rules``: the kind's own
    list, in the order admission reports them (the short form's fields must then be left
    alone).

    ``exact``: keys compare as spelt (the Go webhooks that ran before any defaulting), not
    case-insensitively as the defaulters match them. ``empty``: the Python error for an empty
    map (``{path}`` its path; ``None``: none beyond the rules'). It is a Python check alone:
    the map's rules refuse ``{}`` at admission for every kind but PyTorchJob, whose CRD has
    always let ``{}`` through to fail validation in the operator.
    """

    types: Sequence[str] | None = None
    required: Sequence[str] = ()
    one_of: Sequence[str] = ()
    single: Sequence[str] = ()
    rules: Sequence[ReplicaRule] = ()
    exact: bool = False
    empty: str | None = _EMPTY

    def __post_init__(self) -> None:
        short = self.types is not None or self.required or self.one_of or self.single
        if self.rules and short:
            raise ValueError("give either rules or the short form (types, required, ...)")

    def declared(self, *, known: Sequence[str]) -> list[ReplicaRule]:
        """The rules, the short form's spelt out (``known``: the model's ``REPLICA_TYPES``)."""
        if self.rules:
            return list(self.rules)
        rules: list[ReplicaRule] = [] if self.exact else [DistinctCase()]
        types = known if self.types is None else self.types
        if types:
            rules.append(
                KnownTypes(
                    types=types,
                    message=f"replica types must be one of {_quoted(types)}",
                    error=GO_UNSUPPORTED_TYPE,
                )
            )
        rules += [
            Required(rtype=t, message=f"a {t} replica spec is required", error=GO_REQUIRED_TYPE)
            for t in self.required
        ]
        if self.one_of:
            quoted = _quoted(self.one_of)
            rules.append(
                AtLeastOne(
                    types=self.one_of,
                    message=f"one of the replica types {quoted} is required",
                    error=f"{{path}}: Required value: one of {quoted} must be present",
                )
            )
        rules += [
            Replicas(
                types=(t,),
                min=1,
                max=1,
                message=f"{t} replicas must be 1",
                error=GO_REPLICAS_MUST_BE_1,
            )
            for t in self.single
        ]
        return rules

    def cel(
        self,
        *,
        known: Sequence[str],
        level: Literal["map", "item", "spec"] = "map",
        map_field: str = "",
    ) -> list[JsonDict]:
        """``x-kubernetes-validations`` for the replica-spec map (which must carry
        ``maxProperties``, as ``build_crd`` sets), for each replica spec (``level="item"``),
        or for the spec (``level="spec"``, with ``map_field`` the map's JSON name)."""
        scope = _Scope(exact=self.exact, known=tuple(known), map_field=map_field)
        rules = [r for r in self.declared(known=known) if r.level == level]
        return [cel for rule in rules for cel in rule.cel(scope)]

    def errors(
        self,
        specs: Mapping[str, _Replica],
        *,
        path: str,
        known: Sequence[str],
        present: Set[str] = frozenset(),
        tolerated: bool = False,
    ) -> list[str]:
        """The same rules on a replica map, ``empty`` first, then in the rules' order (with
        ``tolerated``, those of the ``tolerated`` rules alone). ``path`` is the map's
        (``spec.xgbReplicaSpecs``); ``present``, the JSON names of the spec's fields that are
        set (for :class:`RequiredWith`)."""
        scope = _Scope(exact=self.exact, known=tuple(known), specs=specs, present=present)
        errors = [] if specs or not self.empty or tolerated else [self.empty.format(path=path)]
        for rule in self.declared(known=known):
            if rule.tolerated or not tolerated:
                errors += rule.errors(scope, path=path)
        return errors
