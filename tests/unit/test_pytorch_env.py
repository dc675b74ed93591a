"""The torch.distributed / torchrun environment of each PyTorchJob pod (pure)."""

from __future__ import annotations

from typing import Any

from pytorch_operator.api import PyTorchJob, default_pytorchjob
from pytorch_operator.env import pod_env


def _replica(replicas: int, *, port: int | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "pytorch", "image": "pt:1"}
    if port is not None:
        container["ports"] = [{"name": "pytorchjob-port", "containerPort": port}]
    return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}


def _job(specs: dict[str, Any], **spec: Any) -> PyTorchJob:
    raw = {
        "metadata": {"name": "mnist", "namespace": "ns"},
        "spec": {"pytorchReplicaSpecs": specs, **spec},
    }
    return default_pytorchjob(PyTorchJob.parse(raw))


def _env(job: PyTorchJob, rtype: str, index: int) -> dict[str, str]:
    pairs = pod_env(job, rtype=rtype, index=index)
    assert len({name for name, _ in pairs}) == len(pairs), "a variable is set twice"
    return dict(pairs)


def test_master_and_workers_get_the_anchor_variables_in_its_order() -> None:
    job = _job({"Master": _replica(1), "Worker": _replica(2)})
    assert pod_env(job, rtype="Master", index=0) == [
        ("PYTHONUNBUFFERED", "1"),
        ("MASTER_PORT", "23456"),
        ("PET_MASTER_PORT", "23456"),
        ("MASTER_ADDR", "mnist-master-0"),
        ("PET_MASTER_ADDR", "mnist-master-0"),
        ("WORLD_SIZE", "3"),
        ("RANK", "0"),
        ("PET_NODE_RANK", "0"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_NNODES", "3"),
    ]
    worker1 = _env(job, "Worker", 1)
    assert (worker1["RANK"], worker1["PET_NODE_RANK"], worker1["WORLD_SIZE"]) == ("2", "2", "3")
    assert worker1["MASTER_ADDR"] == "mnist-master-0"


def test_integer_nproc_multiplies_the_world_size_and_names_cpu_count_one() -> None:
    job = _job({"Master": _replica(1), "Worker": _replica(3)}, nprocPerNode="4")
    env = _env(job, "Worker", 0)
    assert (env["WORLD_SIZE"], env["PET_NPROC_PER_NODE"], env["PET_NNODES"]) == ("16", "4", "4")
    cpu = _env(
        _job({"Master": _replica(1), "Worker": _replica(3)}, nprocPerNode="cpu"), "Worker", 0
    )
    assert (cpu["WORLD_SIZE"], cpu["PET_NPROC_PER_NODE"]) == ("4", "cpu")


def test_master_port_is_the_masters_named_port() -> None:
    job = _job({"Master": _replica(1, port=29500), "Worker": _replica(1, port=1234)})
    env = _env(job, "Worker", 0)
    assert (env["MASTER_PORT"], env["PET_MASTER_PORT"]) == ("29500", "29500")


def test_without_master_worker_zero_is_the_rendezvous_and_ranks_start_at_zero() -> None:
    job = _job({"Worker": _replica(3)})
    env = _env(job, "Worker", 2)
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "mnist-worker-0"
    assert (env["RANK"], env["PET_NODE_RANK"], env["WORLD_SIZE"]) == ("2", "2", "3")
    assert "PET_RDZV_ENDPOINT" not in env


def test_elastic_without_master_has_rendezvous_but_no_fixed_rank_or_address() -> None:
    job = _job(
        {"Worker": _replica(2)},
        elasticPolicy={
            "minReplicas": 1,
            "maxReplicas": 4,
            "rdzvBackend": "etcd",
            "rdzvHost": "etcd-svc",
            "rdzvPort": 2379,
            "rdzvId": "run-7",
            "rdzvConf": [{"key": "timeout", "value": "60"}, {"key": "x", "value": "y"}],
            "maxRestarts": 3,
            "standalone": True,
        },
    )
    assert pod_env(job, rtype="Worker", index=1) == [
        ("PYTHONUNBUFFERED", "1"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_RDZV_ENDPOINT", "etcd-svc:2379"),
        ("PET_RDZV_BACKEND", "etcd"),
        ("PET_NNODES", "1:4"),
        ("PET_MAX_RESTARTS", "3"),
        ("PET_RDZV_ID", "run-7"),
        ("PET_RDZV_CONF", "timeout=60,x=y"),
        ("PET_STANDALONE", ""),
    ]


def test_elastic_defaults_rendezvous_at_worker_zero_with_c10d_and_bounds_from_replicas() -> None:
    job = _job({"Worker": _replica(3, port=29400)}, elasticPolicy={})
    env = _env(job, "Worker", 0)
    assert env["PET_RDZV_ENDPOINT"] == "mnist-worker-0:29400"
    assert (env["PET_RDZV_BACKEND"], env["PET_NNODES"]) == ("c10d", "3:3")
    assert "PET_STANDALONE" not in env and "PET_MAX_RESTARTS" not in env


def test_deprecated_elastic_nproc_is_passed_on_and_counts_in_the_world_size() -> None:
    job = _job({"Master": _replica(1), "Worker": _replica(1)}, elasticPolicy={"nProcPerNode": 8})
    env = _env(job, "Master", 0)
    assert (env["PET_NPROC_PER_NODE"], env["WORLD_SIZE"]) == ("8", "16")


def test_every_container_gets_the_env_and_the_operators_values_win() -> None:
    # v1.9 appends its values after the user's and the kubelet takes the last: the operator's
    # MASTER_PORT is the one the process, PET_MASTER_PORT and the init container all agree on.
    from jobcontroller import PlanConfig
    from pytorch_operator.controller import PyTorchJobController

    template: dict[str, Any] = {
        "spec": {
            "containers": [
                {
                    "name": "pytorch",
                    "env": [
                        {"name": "MASTER_PORT", "value": "9999"},
                        {"name": "DATA", "value": "/data"},
                    ],
                },
                {"name": "sidecar"},
            ]
        }
    }
    job = _job({"Master": _replica(1)})
    PyTorchJobController().set_cluster_spec(
        job, template, rtype="Master", index=0, config=PlanConfig()
    )
    pytorch, sidecar = template["spec"]["containers"]
    operators = [
        {"name": name, "value": value} for name, value in pod_env(job, rtype="Master", index=0)
    ]
    assert {"name": "MASTER_PORT", "value": "23456"} in operators
    assert pytorch["env"] == [{"name": "DATA", "value": "/data"}, *operators]
    assert sidecar["env"] == operators


def test_worker_zero_has_the_master_role_when_there_is_no_master() -> None:
    # As v1.9's IsMasterRole: the Kubeflow SDK's get_job_logs looks for job-role=master.
    from pytorch_operator.controller import PyTorchJobController

    ctl = PyTorchJobController()
    elastic = _job({"Worker": _replica(3)}, elasticPolicy={})
    assert [ctl.is_master_role(elastic, "Worker", i) for i in range(3)] == [True, False, False]
    with_master = _job({"Master": _replica(1), "Worker": _replica(2)})
    assert ctl.is_master_role(with_master, "Master", 0)
    assert not ctl.is_master_role(with_master, "Worker", 0)
