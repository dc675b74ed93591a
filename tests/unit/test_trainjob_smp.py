"""The strategic merge of runtime patches and resourcesPerNode gives what Kubernetes' own gives.

tests/data/trainjob-strategic-merge.json holds each case's original, patch and the merge
``k8s.io/apimachinery`` v0.36.3's ``strategicpatch.StrategicMergePatch`` computed for it, with
a Go struct carrying JobSetSpec's merge keys (replicatedJobs by name, batch/v1's Job template)
and trainingruntime.go's ``resourceRequirementsPatchMeta``: merge keys, the order of merged
lists (the patch's elements first where the original cannot place them), replaced lists, null.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainer_operator.smp import JOBSET_SPEC_KEYS, RESOURCES_KEYS, strategic_merge

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "trainjob-strategic-merge.json").read_text()
)


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_merge_is_kubernetes_strategic_merge(case: dict[str, Any]) -> None:
    keys = RESOURCES_KEYS if case["keys"] == "resources" else JOBSET_SPEC_KEYS
    original = json.loads(json.dumps(case["original"]))
    assert strategic_merge(case["original"], case["patch"], keys) == case["merged"]
    assert case["original"] == original  # neither input is changed
