"""Our trainer CRDs against Kubeflow Trainer v2.3.0's own, field by field.

tests/data/trainer-v2.3.0/crd-digest.json is upstream's generated CRDs
(manifests/base/crds/trainer.kubeflow.org_*.yaml at v2.3.0) without descriptions: names, scope,
printer columns, subresources, and the keywords (type, format, bounds, enums, defaults, list
types, CEL rules) of every trainer field, plus the set of paths inside the embedded Kubernetes
types. ``hack/compare-trainer-crds.py`` writes it from the upstream repository and prints the
same comparison in full. Every difference allowed here is one docs/trainjob.md lists.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from jobcontroller.api import INT32_MAX
from trainer_operator.crd import crds

ROOT = Path(__file__).parents[2]
UPSTREAM: dict[str, dict[str, Any]] = json.loads(
    (ROOT / "tests" / "data" / "trainer-v2.3.0" / "crd-digest.json").read_text()
)
PLURALS = ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
RUNTIMES = ("trainingruntimes", "clustertrainingruntimes")


def _compare_module() -> ModuleType:
    path = ROOT / "hack" / "compare-trainer-crds.py"
    spec = importlib.util.spec_from_file_location("compare_trainer_crds", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("compare_trainer_crds", module)
    spec.loader.exec_module(module)
    return module


COMPARE = _compare_module()
OURS = {crd["spec"]["names"]["plural"]: COMPARE.digest(crd) for crd in crds()}

#: Where our CEL rules go beyond upstream's CRD: its webhooks' checks (docs/trainjob.md).
EXTRA_RULES = {
    "trainjobs": {
        ".spec",  # runtimePatches change only while suspended
        ".spec.runtimeRef",  # unsupported runtime
        ".spec.runtimePatches[].manager",  # a domain-prefixed path
        # no env for node / dataset-initializer / model-initializer through a patch
        ".spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].template"
        ".spec.template.spec.containers[]",
    },
    "trainingruntimes": {".spec.template.spec.replicatedJobs[]"},  # a step's replicas, container
    "clustertrainingruntimes": {".spec.template.spec.replicatedJobs[]"},
}
#: Other keywords that differ, each on purpose: (kind, path, keyword) -> our value.
OTHER_DIFFERENCES: dict[tuple[str, str, str], Any] = {
    # A TrainJob without a spec has no runtime to run; upstream's webhook refused it
    # ("unsupported runtime"), the schema does here.
    ("trainjobs", ".", "required"): ["spec"],
    # A bound for the CEL rules on each replicated job; TrainJob status holds at most 100 jobs.
    **{(p, ".spec.template.spec.replicatedJobs", "maxItems"): 100 for p in RUNTIMES},
}


def _rules(keywords: dict[str, Any]) -> list[tuple[str, str]]:
    rules: list[tuple[str, str]] = COMPARE._rules(keywords.get("x-kubernetes-validations", []))
    return rules


@pytest.mark.parametrize("plural", PLURALS)
def test_names_scope_printer_columns_and_subresources_are_upstreams(plural: str) -> None:
    ours, theirs = OURS[plural], UPSTREAM[plural]
    assert ours["names"] == theirs["names"]
    assert ours["scope"] == theirs["scope"]
    assert ours["version"] == theirs["version"]


def test_trainjob_prints_state_and_age_and_has_a_status_subresource() -> None:
    version = OURS["trainjobs"]["version"]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["State", "Age"]
    assert version["subresources"] == {"status": {}}
    assert OURS["clustertrainingruntimes"]["scope"] == "Cluster"


@pytest.mark.parametrize("plural", PLURALS)
def test_the_embedded_kubernetes_types_have_upstreams_fields(plural: str) -> None:
    """Inside pod and Job templates, volumes, env...: the same set of paths (the keywords
    there are Kubernetes' own, converted from the API server; see kubetypes.py)."""
    ours, theirs = OURS[plural], UPSTREAM[plural]
    assert ours["builtin_paths"] == theirs["builtin_paths"]
    assert ours["builtin_paths_sha256"] == theirs["builtin_paths_sha256"], (
        "run hack/compare-trainer-crds.py for the paths that differ"
    )


@pytest.mark.parametrize("plural", PLURALS)
def test_every_trainer_field_is_upstreams_with_the_documented_differences(plural: str) -> None:
    ours, theirs = OURS[plural]["fields"], UPSTREAM[plural]["fields"]
    # Declared so the name rules can point at it; upstream's metadata is an empty object.
    assert set(ours) == set(theirs) | {".metadata.name"}
    wrong = []
    for path, expected in theirs.items():
        actual = ours[path]
        for keyword in sorted(set(actual) | set(expected)):
            mine, upstream = actual.get(keyword), expected.get(keyword)
            if keyword == "required":  # a set
                mine, upstream = sorted(mine or []), sorted(upstream or [])
            if keyword == "x-kubernetes-validations":
                missing = set(_rules(expected)) - set(_rules(actual))
                extra = set(_rules(actual)) - set(_rules(expected))
                if missing or (extra and path not in EXTRA_RULES[plural]):
                    wrong.append(f"{path}: rules missing {missing}, extra {extra}")
                continue
            if mine == upstream:
                continue
            if (plural, path, keyword) in OTHER_DIFFERENCES:
                assert mine == OTHER_DIFFERENCES[plural, path, keyword]
                continue
            # An int32 field holds no more than an int32 (Go's decoder refused more upstream).
            if keyword == "maximum" and upstream is None and actual.get("format") == "int32":
                assert mine == INT32_MAX
                continue
            wrong.append(f"{path} {keyword}: ours {mine!r}, upstream {upstream!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("plural", PLURALS)
def test_every_extra_rule_place_has_extra_rules(plural: str) -> None:
    """The allowance above is not a blank cheque: each place listed does add rules."""
    for path in EXTRA_RULES[plural]:
        ours = _rules(OURS[plural]["fields"][path])
        theirs = _rules(UPSTREAM[plural]["fields"].get(path, {}))
        assert len(ours) > len(theirs), path
