"""Replica rules declared once: each rule's CEL and its Python check, and the six kinds' CRDs
carrying exactly their declared rules (tests/integration/test_replica_rules_agree.py runs the
same maps through a real API server and compares the two)."""

from __future__ import annotations

from typing import Any

import pytest

from jax_operator.api import JAXJob
from jobcontroller.api import (
    GO_UNSUPPORTED_TYPE,
    AtLeastOne,
    AtMostOne,
    DistinctCase,
    JobModel,
    KnownTypes,
    NonEmpty,
    ReplicaRule,
    ReplicaRules,
    Replicas,
    ReplicaSpec,
    Required,
    RequiredWith,
    RestartPolicies,
    build_crd,
    cel_default_container_rule,
)
from mpi_operator.api import MPIJob
from paddle_operator.api import PaddleJob
from pytorch_operator.api import PyTorchJob
from tf_operator.api import TFJob
from xgboost_operator.api import XGBoostJob

KINDS: list[type[JobModel[Any]]] = [TFJob, PyTorchJob, MPIJob, XGBoostJob, PaddleJob, JAXJob]
PATH = "spec.toyReplicaSpecs"
KNOWN = ("Master", "Worker")


def _specs(**replicas: int | str | None) -> dict[str, ReplicaSpec]:
    """``Worker=2`` -> a Worker with 2 replicas; a string is a restart policy."""
    out = {}
    for rtype, value in replicas.items():
        fields: dict[str, Any] = {"template": {}}
        if isinstance(value, int):
            fields["replicas"] = value
        elif isinstance(value, str):
            fields["restartPolicy"] = value
        out[rtype] = ReplicaSpec.model_validate(fields)
    return out


def _one(rule: ReplicaRule, *, exact: bool = False) -> ReplicaRules:
    return ReplicaRules(rules=(rule,), exact=exact, empty=None)


def _errors(rules: ReplicaRules, specs: dict[str, ReplicaSpec], **kw: Any) -> list[str]:
    return rules.errors(specs, path=PATH, known=KNOWN, **kw)


CASES: list[Any] = [
    # rule, exact, CEL, [(replica map, Python errors)]
    pytest.param(
        KnownTypes(message="m"),
        True,
        "self.all(k, k in ['Master', 'Worker'])",
        [(_specs(Master=1), []), (_specs(master=1), [f"{PATH}[master]: m"])],
        id="known-types-exact",
    ),
    pytest.param(
        KnownTypes(types=("Chief", "PS"), message="m", error=GO_UNSUPPORTED_TYPE),
        False,
        "self.all(k, k.lowerAscii() in ['chief', 'ps'])",
        [
            (_specs(chief=1, PS=2), []),
            (
                _specs(Ps=1, X=1),
                [f'{PATH}[X]: Unsupported value: "X": supported values: "Chief", "PS"'],
            ),
        ],
        id="known-types-folded-go-words",
    ),
    pytest.param(
        KnownTypes(types=("Worker",), message="m"),
        True,
        "self.all(k, k == 'Worker')",
        [(_specs(Worker=1), []), (_specs(worker=1), [f"{PATH}[worker]: m"])],
        id="known-types-one",
    ),
    pytest.param(
        DistinctCase(),
        False,
        "self.all(k, self.exists_one(j, j.lowerAscii() == k.lowerAscii()))",
        [
            (_specs(Worker=1, Master=1), []),
            (
                _specs(Worker=1, worker=1),
                [f"{PATH}: replica types 'Worker' and 'worker' differ only in case"],
            ),
        ],
        id="distinct-case",
    ),
    pytest.param(
        Required(rtype="Launcher", message="m"),
        True,
        "'Launcher' in self",
        [(_specs(Launcher=1), []), (_specs(launcher=1), [f"{PATH}: m"]), ({}, [f"{PATH}: m"])],
        id="required-exact",
    ),
    pytest.param(
        Required(rtype="Master", message="m"),
        False,
        "self.exists(k, k.lowerAscii() == 'master')",
        [(_specs(MASTER=1), []), (_specs(Worker=1), [f"{PATH}: m"])],
        id="required-folded",
    ),
    pytest.param(
        AtLeastOne(types=("Chief", "Worker"), message="m"),
        False,
        "self.exists(k, k.lowerAscii() in ['chief', 'worker'])",
        [(_specs(worker=1, PS=1), []), (_specs(PS=1), [f"{PATH}: m"]), ({}, [f"{PATH}: m"])],
        id="at-least-one",
    ),
    pytest.param(
        AtMostOne(types=("Chief", "Master"), message="m"),
        False,
        "size(self.filter(k, k.lowerAscii() in ['chief', 'master'])) <= 1",
        [(_specs(Chief=1, Worker=1), []), (_specs(chief=1, Master=1), [f"{PATH}: m"])],
        id="at-most-one",
    ),
    pytest.param(
        NonEmpty(message="m"),
        True,
        "size(self) > 0",
        [(_specs(X=1), []), ({}, [f"{PATH}: m"])],
        id="non-empty",
    ),
    pytest.param(
        Replicas(types=("Master",), min=1, max=1, must_set=True, message="m"),
        True,
        "!('Master' in self) || (has(self['Master'].replicas) && self['Master'].replicas == 1)",
        [
            (_specs(Master=1, Worker=5), []),
            (_specs(Worker=5), []),
            (_specs(Master=None), [f"{PATH}[Master].replicas: m"]),
            (_specs(Master=2), [f"{PATH}[Master].replicas: m"]),
        ],
        id="replicas-exactly-one-given",
    ),
    pytest.param(
        Replicas(types=("Worker",), min=1, message="m"),
        True,
        "!('Worker' in self) || !has(self['Worker'].replicas) || self['Worker'].replicas >= 1",
        [
            (_specs(Worker=None), []),
            (_specs(Worker=3), []),
            (_specs(Worker=0), [f"{PATH}[Worker].replicas: m"]),
        ],
        id="replicas-at-least",
    ),
    pytest.param(
        Replicas(types=("Chief", "Master"), max=1, message="m"),
        False,
        "self.all(k, !(k.lowerAscii() in ['chief', 'master']) || !has(self[k].replicas) "
        "|| self[k].replicas <= 1)",
        [
            (_specs(chief=None, Worker=9), []),
            (_specs(chief=0), []),
            (_specs(master=2), [f"{PATH}[master].replicas: m"]),
        ],
        id="replicas-at-most-folded",
    ),
    pytest.param(
        Replicas(types=("Worker",), min=2, max=4, must_set=True, message="m"),
        False,
        "self.all(k, k.lowerAscii() != 'worker' || (has(self[k].replicas) && "
        "(self[k].replicas >= 2 && self[k].replicas <= 4)))",
        [
            (_specs(worker=2), []),
            (_specs(Worker=5), [f"{PATH}[Worker].replicas: m"]),
            (_specs(Worker=None), [f"{PATH}[Worker].replicas: m"]),
        ],
        id="replicas-range-folded",
    ),
]


@pytest.mark.parametrize(("rule", "exact", "cel", "checks"), CASES)
def test_each_rule_states_its_cel_and_the_same_check_in_python(
    rule: ReplicaRule, exact: bool, cel: str, checks: list[tuple[dict[str, ReplicaSpec], list[str]]]
) -> None:
    rules = _one(rule, exact=exact)
    assert rules.cel(known=KNOWN) == [{"rule": cel, "message": rule.message}]
    for specs, expected in checks:
        assert _errors(rules, specs) == expected, specs


def test_a_rule_on_each_replica_spec_goes_on_the_map_values() -> None:
    rules = _one(RestartPolicies(allowed=("Never", "OnFailure"), message="m"), exact=True)
    assert rules.cel(known=KNOWN) == []
    assert rules.cel(known=KNOWN, level="item") == [
        {
            "rule": "!has(self.restartPolicy) || self.restartPolicy in ['Never', 'OnFailure']",
            "message": "m",
            "fieldPath": ".restartPolicy",
        }
    ]
    specs = _specs(Launcher="OnFailure", Worker="ExitCode", Other=None)
    assert _errors(rules, specs) == [f"{PATH}[Worker].restartPolicy: m"]


def test_a_rule_that_needs_another_spec_field_goes_on_the_spec() -> None:
    rules = _one(RequiredWith(rtype="Worker", field="elasticPolicy", message="m"), exact=True)
    assert rules.cel(known=KNOWN) == []
    assert rules.cel(known=KNOWN, level="spec", map_field="toyReplicaSpecs") == [
        {"rule": "!has(self.elasticPolicy) || 'Worker' in self.toyReplicaSpecs", "message": "m"}
    ]
    master = _specs(Master=1)
    assert _errors(rules, master) == []
    assert _errors(rules, master, present={"elasticPolicy"}) == ["spec.elasticPolicy: m"]
    assert _errors(rules, _specs(Worker=2), present={"elasticPolicy"}) == []


def test_a_ratcheted_rule_judges_new_jobs_and_jobs_that_met_it() -> None:
    rules = _one(NonEmpty(message="m", ratcheted=True))
    assert rules.cel(known=KNOWN) == [
        {"rule": "oldSelf.hasValue() || (size(self) > 0)", "message": "m", "optionalOldSelf": True},
        {"rule": "!(size(oldSelf) > 0) || (size(self) > 0)", "message": "m"},
    ]


def test_only_tolerated_rules_are_tolerated_and_the_empty_map_error_is_not() -> None:
    rules = ReplicaRules(
        rules=(
            KnownTypes(message="types", ratcheted=True, tolerated=True),
            Required(rtype="Master", message="master", ratcheted=True),
        ),
        empty="{path}: empty",
    )
    assert _errors(rules, {}) == [f"{PATH}: empty", f"{PATH}: master"]
    assert _errors(rules, {}, tolerated=True) == []
    assert _errors(rules, _specs(PS=1), tolerated=True) == [f"{PATH}[PS]: types"]


def test_declarations_that_cannot_mean_anything_are_refused() -> None:
    with pytest.raises(ValueError, match="only a ratcheted rule"):
        NonEmpty(message="m", tolerated=True)
    with pytest.raises(ValueError, match="min or max"):
        Replicas(types=("Worker",), message="m")
    with pytest.raises(ValueError, match="either rules or the short form"):
        ReplicaRules(required=("Master",), rules=(NonEmpty(message="m"),))


def test_the_short_form_spells_out_to_the_same_rules() -> None:
    short = ReplicaRules(required=("Master",), one_of=("Master", "Worker"), single=("Master",))
    assert [type(r) for r in short.declared(known=KNOWN)] == [
        DistinctCase,
        KnownTypes,
        Required,
        AtLeastOne,
        Replicas,
    ]
    assert _errors(short, _specs(Chief=2)) == [
        f'{PATH}[Chief]: Unsupported value: "Chief": supported values: "Master", "Worker"',
        f"{PATH}[Master]: Required value: must be present",
        f'{PATH}: Required value: one of "Master", "Worker" must be present',
    ]
    assert _errors(short, {}) == [
        f"{PATH}: Required value: must be required",
        f"{PATH}[Master]: Required value: must be present",
        f'{PATH}: Required value: one of "Master", "Worker" must be present',
    ]


@pytest.mark.parametrize("model", KINDS, ids=lambda m: m.KIND)
def test_every_kinds_crd_carries_exactly_its_declared_replica_rules(
    model: type[JobModel[Any]],
) -> None:
    """No replica rule is written by hand beside the declaration: the CRD's rules on the map,
    on its values and on the spec are the declared ones (plus, on the values, the default
    container's and, on the spec, the kind's own non-replica rules)."""
    rules = model.REPLICA_RULES
    assert rules is not None
    schema = build_crd(model)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    [(alias, replica_map)] = [
        (name, node) for name, node in spec["properties"].items() if name.endswith("ReplicaSpecs")
    ]

    def ordered(rule: dict[str, Any]) -> dict[str, Any]:
        return dict(sorted(rule.items()))

    known = model.REPLICA_TYPES
    assert replica_map["x-kubernetes-validations"] == [ordered(r) for r in rules.cel(known=known)]
    container = model.DEFAULT_CONTAINER_NAME
    default = [ordered(cel_default_container_rule(container=container))] if container else []
    item_rules = [ordered(r) for r in rules.cel(known=known, level="item")]
    assert replica_map["additionalProperties"].get("x-kubernetes-validations", []) == [
        *default,
        *item_rules,
    ]
    spec_rules = [ordered(r) for r in rules.cel(known=known, level="spec", map_field=alias)]
    on_the_map = [r for r in spec["x-kubernetes-validations"] if alias in r["rule"]]
    assert on_the_map == spec_rules


@pytest.mark.parametrize("model", KINDS, ids=lambda m: m.KIND)
def test_an_empty_map_is_refused_at_admission_by_every_kind_but_pytorchjob(
    model: type[JobModel[Any]],
) -> None:
    """``empty`` is a Python check alone. The declared rules refuse ``{}`` at admission for
    every kind but PyTorchJob, whose CRD has always let it through to fail validation in the
    operator (v1.9's webhook refused only an absent map)."""
    rules = model.REPLICA_RULES
    assert rules is not None
    rules_alone = ReplicaRules(
        rules=rules.declared(known=model.REPLICA_TYPES), exact=rules.exact, empty=None
    )
    refused = rules_alone.errors({}, path=PATH, known=model.REPLICA_TYPES) != []
    assert refused == (model is not PyTorchJob)
    if model is PyTorchJob:
        assert _errors(rules, {}) == [f"{PATH}: must be specified"]
