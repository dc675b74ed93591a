"""The Rabit / LightGBM environment of each XGBoostJob pod (pure), as v1.9's SetPodEnv."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from xgboost_operator.api import XGBoostJob, default_xgboostjob
from xgboost_operator.controller import XGBoostJobController
from xgboost_operator.env import pod_env

EXAMPLE = Path(__file__).parents[2] / "examples" / "xgboostjob-iris.yaml"


def _example() -> XGBoostJob:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["metadata"]["namespace"] = "ns"
    return default_xgboostjob(XGBoostJob.parse(raw))


def _replica(replicas: int, *, port: int | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "xgboost", "image": "xgb:1"}
    if port is not None:
        container["ports"] = [{"name": "xgboostjob-port", "containerPort": port}]
    return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}


def _job(specs: dict[str, Any]) -> XGBoostJob:
    raw = {"metadata": {"name": "xgb", "namespace": "ns"}, "spec": {"xgbReplicaSpecs": specs}}
    return default_xgboostjob(XGBoostJob.parse(raw))


def test_docs_example_every_pod_in_v19s_order() -> None:
    job = _example()
    workers = "xgboost-dist-iris-test-train-worker-0,xgboost-dist-iris-test-train-worker-1"

    def expected(rank: int) -> list[tuple[str, str]]:
        return [
            ("MASTER_PORT", "9991"),
            ("MASTER_ADDR", "xgboost-dist-iris-test-train-master-0"),
            ("WORLD_SIZE", "3"),
            ("RANK", str(rank)),
            ("PYTHONUNBUFFERED", "1"),
            ("WORKER_PORT", "9991"),
            ("WORKER_ADDRS", workers),
        ]

    assert pod_env(job, rtype="Master", index=0) == expected(0)
    assert pod_env(job, rtype="Worker", index=0) == expected(1)
    assert pod_env(job, rtype="Worker", index=1) == expected(2)


def test_default_port_and_per_type_ports() -> None:
    env = dict(
        pod_env(_job({"Master": _replica(1), "Worker": _replica(2)}), rtype="Worker", index=1)
    )
    assert (env["MASTER_PORT"], env["WORKER_PORT"], env["RANK"]) == ("9999", "9999", "2")
    split = _job({"Master": _replica(1, port=9000), "Worker": _replica(1, port=9100)})
    env = dict(pod_env(split, rtype="Master", index=0))
    assert (env["MASTER_PORT"], env["WORKER_PORT"]) == ("9000", "9100")


def test_a_lone_master_gets_no_worker_variables() -> None:
    job = _job({"Master": _replica(1)})
    assert pod_env(job, rtype="Master", index=0) == [
        ("MASTER_PORT", "9999"),
        ("MASTER_ADDR", "xgb-master-0"),
        ("WORLD_SIZE", "1"),
        ("RANK", "0"),
        ("PYTHONUNBUFFERED", "1"),
    ]


def test_worker_addrs_lists_world_size_minus_one_workers() -> None:
    env = dict(
        pod_env(_job({"Master": _replica(1), "Worker": _replica(4)}), rtype="Master", index=0)
    )
    assert env["WORLD_SIZE"] == "5"
    assert env["WORKER_ADDRS"] == "xgb-worker-0,xgb-worker-1,xgb-worker-2,xgb-worker-3"


def test_every_container_gets_the_env_after_its_own_and_the_operators_values_win() -> None:
    job = _job({"Master": _replica(1), "Worker": _replica(1)})
    template: dict[str, Any] = {
        "spec": {
            "initContainers": [{"name": "fetch", "image": "busybox"}],
            "containers": [
                {
                    "name": "xgboost",
                    "env": [{"name": "DATA", "value": "/d"}, {"name": "RANK", "value": "7"}],
                },
                {"name": "sidecar"},
            ],
        }
    }
    XGBoostJobController().set_cluster_spec(
        job, template, rtype="Worker", index=0, config=XGBoostJobController().config
    )
    xgb, sidecar = template["spec"]["containers"]
    assert [e["name"] for e in xgb["env"]] == [
        "DATA",
        "MASTER_PORT",
        "MASTER_ADDR",
        "WORLD_SIZE",
        "RANK",
        "PYTHONUNBUFFERED",
        "WORKER_PORT",
        "WORKER_ADDRS",
    ]
    assert {e["name"]: e["value"] for e in xgb["env"]}["RANK"] == "1"
    assert sidecar["env"] == xgb["env"][1:]
    assert "env" not in template["spec"]["initContainers"][0]


def test_only_the_master_has_the_master_role() -> None:
    ctl = XGBoostJobController()
    job = _example()
    assert ctl.is_master_role(job, "Master", 0)
    assert not ctl.is_master_role(job, "Worker", 0)
