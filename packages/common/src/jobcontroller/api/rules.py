"""Replica-type rules, stated once for admission (CEL in the CRD) and for the operator (Python).

Every framework says which replica types it knows, which must be present and which run a single
pod. :class:`ReplicaRules` turns that into CEL rules that stay inside the API server's cost
budget on their own (keys are compared case-insensitively, as the defaulters match them, and the
map is bounded by ``maxProperties``) and into the same errors for jobs that reach the operator
without the CRD's rules (stored before them). Set it on the job model as ``REPLICA_RULES`` and
:func:`jobcontroller.api.crd.build_crd` adds the rules to the CRD by itself::

    class XGBoostJob(JobModel[XGBoostJobSpec]):
        REPLICA_TYPES = ("Master", "Worker")
        REPLICA_RULES = ReplicaRules(required=("Master",), single=("Master",))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import JsonValue

__all__ = ["ReplicaRules"]

JsonDict = dict[str, JsonValue]


class _Replicas(Protocol):
    """What the rules read of a replica spec (``jobcontroller.api.common.ReplicaSpec``, which
    imports this module: it is not imported back)."""

    @property
    def replicas(self) -> int | None: ...


def _cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{v.lower()}'" for v in values) + "]"


def _quoted(values: Sequence[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaRules:
    """The replica-type rules of one job kind.

    ``types``: the replica types a job may have (empty: any; ``build_crd`` and
    :meth:`errors` use the model's ``REPLICA_TYPES`` when given ``None``). ``required``: types
    every job must have. ``one_of``: at least one of these must be present (TF: Chief, Master
    or Worker). ``single``: types that run exactly one pod (``replicas`` absent or 1).
    Keys that differ only in case are always refused: the defaulter would merge them.
    """

    types: Sequence[str] | None = None
    required: Sequence[str] = ()
    one_of: Sequence[str] = ()
    single: Sequence[str] = ()

    def cel(self, *, known: Sequence[str]) -> list[JsonDict]:
        """``x-kubernetes-validations`` for the replica-spec map (which must carry
        ``maxProperties``, as ``build_crd`` sets)."""
        types = list(self.types if self.types is not None else known)
        rules: list[JsonDict] = [
            {
                "rule": "self.all(k, self.exists_one(j, j.lowerAscii() == k.lowerAscii()))",
                "message": "replica types must not differ only in case",
            }
        ]
        if types:
            rules.append(
                {
                    "rule": f"self.all(k, k.lowerAscii() in {_cel_list(types)})",
                    "message": f"replica types must be one of {_quoted(types)}",
                }
            )
        rules += [
            {
                "rule": f"self.exists(k, k.lowerAscii() == '{rtype.lower()}')",
                "message": f"a {rtype} replica spec is required",
            }
            for rtype in self.required
        ]
        if self.one_of:
            rules.append(
                {
                    "rule": f"self.exists(k, k.lowerAscii() in {_cel_list(self.one_of)})",
                    "message": f"one of the replica types {_quoted(self.one_of)} is required",
                }
            )
        rules += [
            {
                "rule": (
                    f"self.all(k, k.lowerAscii() != '{rtype.lower()}' || "
                    "!has(self[k].replicas) || self[k].replicas == 1)"
                ),
                "message": f"{rtype} replicas must be 1",
            }
            for rtype in self.single
        ]
        return rules

    def errors(
        self, specs: Mapping[str, _Replicas], *, path: str, known: Sequence[str]
    ) -> list[str]:
        """The same rules as :meth:`cel` on a (defaulted) replica map, in the words of the
        Go webhooks' field errors: ``spec.xgbReplicaSpecs[Master]: Required value: must be
        present``."""
        types = list(self.types if self.types is not None else known)
        folded = {k.lower(): k for k in specs}
        errors: list[str] = []
        if types:
            allowed = {t.lower() for t in types}
            errors += [
                f'{path}[{k}]: Unsupported value: "{k}": supported values: {_quoted(types)}'
                for k in specs
                if k.lower() not in allowed
            ]
        errors += [
            f"{path}[{rtype}]: Required value: must be present"
            for rtype in self.required
            if rtype.lower() not in folded
        ]
        if self.one_of and not any(t.lower() in folded for t in self.one_of):
            errors.append(f"{path}: Required value: one of {_quoted(self.one_of)} must be present")
        for rtype in self.single:
            key = folded.get(rtype.lower())
            replicas = specs[key].replicas if key is not None else None
            if replicas is not None and replicas != 1:
                errors.append(f"{path}[{key}].replicas: Forbidden: must be 1")
        return errors
