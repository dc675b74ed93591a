"""XGBoostJob: the docs example parses; defaulting and validation match v1.9's
SetDefaults_XGBoostJob and webhook (pkg/webhooks/xgboost/xgboostjob_webhook.go)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jobcontroller.api import CleanPodPolicy, RestartPolicy
from xgboost_operator.api import (
    XGBoostJob,
    default_xgboostjob,
    validate_xgboostjob,
    xgboostjob_crd,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "xgboostjob-iris.yaml"
SPECS = "spec.xgbReplicaSpecs"


def _replica(
    replicas: int | None = 1, *, container: str = "xgboost", image: str = "xgb:1"
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": container, "image": image}]}}
    }
    if replicas is not None:
        out["replicas"] = replicas
    return out


def _job(specs: dict[str, Any], *, name: str = "iris", **spec: Any) -> XGBoostJob:
    return XGBoostJob.parse(
        {"metadata": {"name": name}, "spec": {"xgbReplicaSpecs": specs, **spec}}
    )


def test_docs_example_validates_and_keeps_its_ports_and_policies() -> None:
    job = XGBoostJob.parse(yaml.safe_load(EXAMPLE.read_text()))
    assert job.name == "xgboost-dist-iris-test-train"
    assert validate_xgboostjob(job) == []
    defaulted = default_xgboostjob(job)
    assert validate_xgboostjob(defaulted) == []
    specs = defaulted.spec.xgb_replica_specs
    assert (specs["Master"].restart_policy, specs["Worker"].restart_policy) == (
        RestartPolicy.NEVER,
        RestartPolicy.EXIT_CODE,
    )
    for replica in specs.values():
        # The example names its port 9991: the defaulter adds no second one.
        [container] = replica.template["spec"]["containers"]
        assert container["ports"] == [{"containerPort": 9991, "name": "xgboostjob-port"}]


def test_defaults_are_v19s() -> None:
    job = default_xgboostjob(_job({"master": _replica(None), "WORKER": _replica(None)}))
    assert job.spec.run_policy.clean_pod_policy is CleanPodPolicy.NONE
    assert job.spec.run_policy.suspend is False
    specs = job.spec.xgb_replica_specs
    assert list(specs) == ["Master", "Worker"]
    for replica in specs.values():
        assert replica.replicas == 1
        assert replica.restart_policy is RestartPolicy.NEVER
        assert replica.template["spec"]["containers"][0]["ports"] == [
            {"name": "xgboostjob-port", "containerPort": 9999}
        ]


def test_default_port_goes_to_the_xgboost_container_not_a_sidecar() -> None:
    sidecar = {"name": "log", "image": "log:1"}
    replica = _replica(1)
    replica["template"]["spec"]["containers"].insert(0, sidecar)
    job = default_xgboostjob(_job({"Master": replica}))
    log, xgb = job.spec.xgb_replica_specs["Master"].template["spec"]["containers"]
    assert "ports" not in log
    assert xgb["ports"] == [{"name": "xgboostjob-port", "containerPort": 9999}]


def test_defaulting_keeps_what_the_user_set() -> None:
    job = default_xgboostjob(
        _job(
            {"Master": _replica(1) | {"restartPolicy": "OnFailure"}, "Worker": _replica(4)},
            runPolicy={"cleanPodPolicy": "All"},
        )
    )
    assert job.spec.run_policy.clean_pod_policy is CleanPodPolicy.ALL
    specs = job.spec.xgb_replica_specs
    assert specs["Master"].restart_policy is RestartPolicy.ON_FAILURE
    assert specs["Worker"].replicas == 4


@pytest.mark.parametrize(
    ("specs", "extra", "name", "expected"),
    [
        pytest.param({"Master": _replica(1), "Worker": _replica(3)}, {}, "iris", None, id="valid"),
        pytest.param({"Master": _replica(1)}, {}, "iris", None, id="master-only"),
        pytest.param({"Master": _replica(1), "Worker": _replica(0)}, {}, "iris", None, id="w0"),
        pytest.param(
            {},
            {},
            "iris",
            f"{SPECS}: Required value: must be required",
            id="no-specs",
        ),
        pytest.param(
            {"Worker": _replica(2)},
            {},
            "iris",
            f"{SPECS}[Master]: Required value: must be present",
            id="no-master",
        ),
        pytest.param(
            {"Master": _replica(None)},
            {},
            "iris",
            f"{SPECS}[Master].replicas: Forbidden: must be 1",
            id="master-replicas-omitted",
        ),
        pytest.param(
            {"Master": _replica(2)},
            {},
            "iris",
            f"{SPECS}[Master].replicas: Forbidden: must be 1",
            id="two-masters",
        ),
        pytest.param(
            {"Master": _replica(1), "PS": _replica(1)},
            {},
            "iris",
            f'{SPECS}[PS]: Unsupported value: "PS": supported values: "Master", "Worker"',
            id="unknown-type",
        ),
        pytest.param(
            # The webhook runs before any defaulting: lower case is refused, not fixed.
            {"master": _replica(1)},
            {},
            "iris",
            f'{SPECS}[master]: Unsupported value: "master": supported values: "Master", "Worker"',
            id="lowercase-type",
        ),
        pytest.param(
            {"Master": _replica(1, container="main")},
            {},
            "iris",
            f"{SPECS}[Master].template.spec.containers: must have a container named 'xgboost'",
            id="no-xgboost-container",
        ),
        pytest.param(
            {"Master": _replica(1, image="")},
            {},
            "iris",
            f"{SPECS}[Master].template.spec.containers[0].image: must be set",
            id="no-image",
        ),
        pytest.param({"Master": _replica(1)}, {}, "Iris", "DNS-1035", id="name-not-dns1035"),
        pytest.param(
            {"Master": _replica(1), "Worker": _replica(10)},
            {},
            "x" * 55,
            "would exceed 63 characters",
            id="name-too-long-for-pods",
        ),
        pytest.param(
            {"Master": _replica(1)},
            {"runPolicy": {"managedBy": "example.com/mine"}},
            "iris",
            "spec.runPolicy.managedBy: 'example.com/mine' is not supported",
            id="foreign-managed-by",
        ),
    ],
)
def test_validation(
    specs: dict[str, Any], extra: dict[str, Any], name: str, expected: str | None
) -> None:
    errors = validate_xgboostjob(_job(specs, name=name, **extra))
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


def test_managed_by_is_immutable_on_update() -> None:
    old = _job({"Master": _replica(1)})
    new = _job({"Master": _replica(1)}, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})
    assert validate_xgboostjob(new, old=old) == ["spec.runPolicy.managedBy: managedBy is immutable"]


def test_crd_names_and_no_scale_subresource() -> None:
    crd = xgboostjob_crd()
    assert crd["metadata"]["name"] == "xgboostjobs.kubeflow.org"
    assert crd["spec"]["names"] | {"categories": None} == {
        "kind": "XGBoostJob",
        "listKind": "XGBoostJobList",
        "plural": "xgboostjobs",
        "singular": "xgboostjob",
        "categories": None,
    }
    [version] = crd["spec"]["versions"]
    assert version["name"] == "v1"
    assert version["subresources"] == {"status": {}}
