"""``runPolicy.restartScope``: the model, the CRD, and what Kubeflow's SDK 1.9 does with it."""

from __future__ import annotations

from typing import Any

import pytest
from kubeflow.training.api_client import ApiClient

from jobcontroller.api import RestartScope, RunPolicy
from tf_operator.api import TFJob
from tf_operator.controller import TFJobController


def tfjob(run_policy: dict[str, Any]) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "tf:1"}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {
            "runPolicy": run_policy,
            "tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [container]}}}},
        },
    }


def test_the_field_parses_and_defaults_to_per_pod_restarts() -> None:
    assert RunPolicy.model_validate({"restartScope": "All"}).restart_scope == RestartScope.ALL
    assert RunPolicy().restart_scope is None  # Pod, as in Kubeflow v1
    with pytest.raises(ValueError):
        RunPolicy.model_validate({"restartScope": "Gang"})


def test_every_crd_offers_it_as_an_enum() -> None:
    crd = TFJobController().crd()
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    run_policy = schema["properties"]["spec"]["properties"]["runPolicy"]
    assert run_policy["properties"]["restartScope"]["enum"] == ["Pod", "All"]


def test_kubeflow_sdk_1_9_drops_it_when_reading_and_leaves_it_out_when_patching() -> None:
    """The SDK's models have no such attribute: ``get_job`` returns a job without it, and
    ``update_job`` (a JSON merge patch of the serialised model) leaves the stored value alone
    because the key is absent, not null. A job re-created from the SDK's model loses it."""
    client = ApiClient()
    # (The run policy alone: the SDK cannot deserialise a pod template with the kubernetes
    # client installed here, whose type names it does not know.)
    model = client._ApiClient__deserialize(  # type: ignore[attr-defined]
        {"restartScope": "All", "backoffLimit": 2}, "KubeflowOrgV1RunPolicy"
    )
    assert not hasattr(model, "restart_scope")
    assert client.sanitize_for_serialization(model) == {"backoffLimit": 2}
    assert TFJob.parse(tfjob({"restartScope": "All"})).spec.run_policy.restart_scope == "All"
