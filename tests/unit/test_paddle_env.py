"""The PADDLE_* environment of every pod, in v1.9's order and values (envvar.go)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from jobcontroller import PlanConfig
from paddle_operator.api import PaddleJob, default_paddlejob
from paddle_operator.controller import PaddleJobController
from paddle_operator.env import pod_env

EXAMPLE = Path(__file__).parents[2] / "examples" / "paddlejob-simple-cpu.yaml"
POD_IP = {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _var(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _replica(replicas: int, *, port: int | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "paddle", "image": "paddle:1"}
    if port is not None:
        container["ports"] = [{"name": "master", "containerPort": port}]
    return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}


def _job(specs: dict[str, Any]) -> PaddleJob:
    raw = {"metadata": {"name": "pd", "namespace": "ns"}, "spec": {"paddleReplicaSpecs": specs}}
    return default_paddlejob(PaddleJob.parse(raw))


def test_docs_example_collective_mode_every_pod() -> None:
    job = default_paddlejob(PaddleJob.parse(yaml.safe_load(EXAMPLE.read_text())))
    common = [
        _var("PYTHONUNBUFFERED", "1"),
        _var("PADDLE_JOB_ID", "paddle-simple-cpu"),
        _var("PADDLE_NNODES", "2"),
    ]
    # Worker 0 is the rendezvous: it announces its own IP with the example's port 37777.
    assert pod_env(job, rtype="Worker", index=0) == [
        *common,
        POD_IP,
        _var("PADDLE_MASTER", "$(POD_IP_DUMMY):37777"),
    ]
    assert pod_env(job, rtype="Worker", index=1) == [
        *common,
        _var("PADDLE_MASTER", "paddle-simple-cpu-worker-0:37777"),
    ]


def test_parameter_server_mode_every_pod() -> None:
    job = _job({"Master": _replica(2, port=40000), "Worker": _replica(3, port=1234)})
    common = [
        _var("PYTHONUNBUFFERED", "1"),
        _var("PADDLE_JOB_ID", "pd"),
        _var("PADDLE_NNODES", "5"),
    ]
    assert pod_env(job, rtype="Master", index=0) == [
        *common,
        POD_IP,
        _var("PADDLE_MASTER", "$(POD_IP_DUMMY):40000"),
        _var("PADDLE_SERVER_NUM", "1"),
    ]
    assert pod_env(job, rtype="Master", index=1) == [
        *common,
        _var("PADDLE_MASTER", "pd-master-0:40000"),
        _var("PADDLE_SERVER_NUM", "1"),
    ]
    for index in range(3):
        # Worker 0 is no rendezvous here: the Master's port, never the Worker's, is used.
        assert pod_env(job, rtype="Worker", index=index) == [
            *common,
            _var("PADDLE_MASTER", "pd-master-0:40000"),
            _var("PADDLE_TRAINER_NUM", "1"),
        ]


def test_default_port_is_36543() -> None:
    job = _job({"Worker": _replica(2)})
    assert pod_env(job, rtype="Worker", index=1)[-1] == _var("PADDLE_MASTER", "pd-worker-0:36543")


def test_every_container_gets_the_env_after_its_own_and_the_operator_wins() -> None:
    job = _job({"Worker": _replica(2)})
    template: dict[str, Any] = {
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [
                {
                    "name": "paddle",
                    "env": [_var("LR", "0.1"), _var("PADDLE_MASTER", "mine:1")],
                },
                {"name": "sidecar"},
            ],
        }
    }
    env = pod_env(job, rtype="Worker", index=1)
    PaddleJobController().set_cluster_spec(
        job, template, rtype="Worker", index=1, config=PlanConfig()
    )
    paddle, sidecar = template["spec"]["containers"]
    assert paddle["env"] == [_var("LR", "0.1"), *env]
    assert sidecar["env"] == env
    assert "env" not in template["spec"]["initContainers"][0]
