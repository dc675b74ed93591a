"""The ML policies' env, ports and node counts: Trainer v2.3.0's plugin tests
(plugins/torch/torch_test.go ``TestTorchEnforceMLPolicy``, plugins/jax/jax_test.go,
plugins/xgboost/xgboost_test.go), case for case where the case is about what reaches the
pods."""

from __future__ import annotations

from typing import Any

import pytest
from trainjob_fixtures import (
    NODE,
    RANK_FIELD,
    container,
    jobset_spec,
    pod_spec,
    runtime,
    torch_env,
    trainjob,
)

from trainer_operator.info import Info, RuntimeProblem, new_info
from trainer_operator.policies import enforce_ml_policy

Obj = dict[str, Any]


def _enforced(raw: Obj, rt: Obj) -> Info:
    info = new_info(raw, rt["spec"])
    enforce_ml_policy(info, raw)
    return info


def _node(info: Info) -> tuple[int, list[Obj], list[Obj]]:
    ps = info.pod_set_of_ancestor("trainer")
    assert ps is not None
    node = next(c for c in ps.containers if c.name == NODE)
    return ps.count, node.env, node.ports


TORCH = {"numNodes": 1, "torch": {}}


@pytest.mark.parametrize(
    ("requests", "proc_per_node", "want"),
    [
        ({"cpu": "4"}, None, "4"),  # nproc_per_node=auto with CPU limit
        (None, None, "1"),  # with no CPU resources
        ({"cpu": "2"}, None, "2"),  # with low CPU limit
        ({"cpu": "3"}, None, "3"),  # with CPU request but no limit
        ({"cpu": "2.5"}, None, "3"),  # with millicore CPU limit (rounded up)
        ({"cpu": "0.7"}, None, "1"),  # with fractional CPU limit
        ({"example.com/gpu": "2"}, None, "auto"),  # with GPU request should remain auto
        ({"cpu": "8"}, 3, "3"),  # explicitly set nproc_per_node should be preserved
        ({"cpu": "2500m"}, None, "3"),  # with millicore CPU limit in m format
        ({"cpu": "6", "example.com/gpu": "2"}, None, "auto"),  # GPU resources present
        ({"cpu": "3.7"}, None, "4"),  # nproc_per_node=cpu with fractional CPU
    ],
)
def test_torch_processes_per_node(
    requests: Obj | None, proc_per_node: int | None, want: str
) -> None:
    trainer: Obj = {"image": "test:image", "resourcesPerNode": {"requests": requests}}
    if proc_per_node is not None:
        trainer["numProcPerNode"] = proc_per_node
    count, env, ports = _node(_enforced(trainjob(trainer=trainer), runtime(ml_policy=TORCH)))
    assert count == 1
    assert env == torch_env("test-job", nodes=1, procs=want)
    assert ports == [{"containerPort": 29500}]


def test_torch_cpu_limit_counts_when_nothing_is_requested() -> None:
    trainer = {"resourcesPerNode": {"limits": {"cpu": "6"}}}
    _, env, _ = _node(_enforced(trainjob(trainer=trainer), runtime(ml_policy=TORCH)))
    assert env[1] == {"name": "PET_NPROC_PER_NODE", "value": "6"}


def test_torch_multi_node_multi_gpu() -> None:
    """Upstream's "multi-node multi-GPU training with complete info"."""
    trainer = {
        "numNodes": 4,
        "image": "pytorch/pytorch:2.0.0-cuda11.7-cudnn8-runtime",
        "resourcesPerNode": {"requests": {"cpu": "8", "memory": "16Gi", "example.com/gpu": "4"}},
    }
    count, env, _ = _node(_enforced(trainjob("gpu-job", trainer=trainer), runtime(ml_policy=TORCH)))
    assert count == 4
    assert env == torch_env("gpu-job", nodes=4, procs="auto")


def test_torch_reads_the_runtimes_resources_when_the_trainjob_has_none() -> None:
    spec = jobset_spec()
    container(spec, NODE, NODE)["resources"] = {"limits": {"cpu": "5"}}
    _, env, _ = _node(_enforced(trainjob(trainer={}), runtime(spec, ml_policy=TORCH)))
    assert env[1] == {"name": "PET_NPROC_PER_NODE", "value": "5"}


def test_torch_numnodes_from_the_trainjob_rather_than_the_policy() -> None:
    """Upstream's "trainJob numNodes is respected rather than mlPolicy one"."""
    rt = runtime(ml_policy={"numNodes": 7, "torch": {}})
    count, env, _ = _node(_enforced(trainjob("trainJob", trainer={"numNodes": 2}), rt))
    assert count == 2
    assert env == torch_env("trainJob", nodes=2, procs=1)


def test_torch_without_trainer_sets_no_env() -> None:
    count, env, ports = _node(
        _enforced(trainjob(), runtime(ml_policy={"numNodes": 3, "torch": {}}))
    )
    assert (count, env, ports) == (3, [], [])


def test_torch_env_injection_reaches_an_init_container() -> None:
    """Upstream's "envInjection with init container"."""
    spec = jobset_spec()
    pod_spec(spec, NODE)["initContainers"] = [{"name": "preflight-check"}]
    policy = {
        "numNodes": 1,
        "torch": {
            "envInjection": {"targets": [{"jobName": NODE, "containerNames": ["preflight-check"]}]}
        },
    }
    info = _enforced(trainjob(trainer={"numNodes": 2}), runtime(spec, ml_policy=policy))
    ps = info.pod_set_of_ancestor("trainer")
    assert ps is not None
    [init] = ps.init_containers
    assert init.env == torch_env("test-job", nodes=2, procs=1)
    assert init.ports == []
    _, env, _ = _node(info)
    assert env == torch_env("test-job", nodes=2, procs=1)


def test_torch_env_injection_to_a_missing_container_is_an_error() -> None:
    """Upstream's "envInjection target container does not exist"."""
    policy = {
        "numNodes": 1,
        "torch": {"envInjection": {"targets": [{"jobName": NODE, "containerNames": ["nope"]}]}},
    }
    with pytest.raises(RuntimeProblem, match="envInjection target podSet 'node' container 'nope'"):
        _enforced(trainjob(trainer={}), runtime(ml_policy=policy))


def test_jax_env_and_port() -> None:
    """plugins/jax: the process count, the rank and the coordinator; the TrainJob's env is the
    builder's to add (after these)."""
    rt = runtime(ml_policy={"numNodes": 1, "jax": {}})
    count, env, ports = _node(_enforced(trainjob("jx", trainer={"numNodes": 2}), rt))
    assert count == 2
    assert env == [
        {"name": "JAX_NUM_PROCESSES", "value": "2"},
        {"name": "JAX_PROCESS_ID", "valueFrom": {"fieldRef": {"fieldPath": RANK_FIELD}}},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": "jx-node-0-0.jx:29500"},
    ]
    assert ports == [{"containerPort": 29500}]


def _dmlc(name: str, workers: int) -> list[Obj]:
    return [
        {"name": "DMLC_TRACKER_URI", "value": f"{name}-node-0-0.{name}"},
        {"name": "DMLC_TRACKER_PORT", "value": "29500"},
        {"name": "DMLC_TASK_ID", "valueFrom": {"fieldRef": {"fieldPath": RANK_FIELD}}},
        {"name": "DMLC_NUM_WORKER", "value": str(workers)},
    ]


@pytest.mark.parametrize(
    ("nodes", "runtime_gpus", "trainjob_resources", "workers"),
    [
        (1, None, None, 1),  # single node XGBoost training (CPU)
        (4, None, None, 4),  # multi-node XGBoost training (CPU)
        (2, None, {"cpu": "8", "memory": "32Gi", "example.com/gpu": "4"}, 8),  # with GPUs
        (3, "2", None, 6),  # resources set in Runtime only
        (2, None, {"example.com/gpu": "4"}, 8),  # resources set in TrainJob only
        (2, "1", {"example.com/gpu": "3"}, 6),  # resources set in both: the TrainJob's
    ],
)
def test_xgboost_workers(
    nodes: int, runtime_gpus: str | None, trainjob_resources: Obj | None, workers: int
) -> None:
    spec = jobset_spec()
    if runtime_gpus is not None:
        container(spec, NODE, NODE)["resources"] = {"limits": {"example.com/gpu": runtime_gpus}}
    trainer: Obj = {"numNodes": nodes, "env": [{"name": "A", "value": "1"}]}
    if trainjob_resources is not None:
        trainer["resourcesPerNode"] = {"limits": trainjob_resources}
    rt = runtime(spec, ml_policy={"numNodes": 1, "xgboost": {}})
    count, env, ports = _node(_enforced(trainjob("xgb", trainer=trainer), rt))
    assert count == nodes
    # The plain policy runs for XGBoost runtimes too: the TrainJob's env, then the tracker's.
    assert env == [{"name": "A", "value": "1"}, *_dmlc("xgb", workers)]
    assert ports == [{"containerPort": 29500}]


def test_plain_policy_without_ml_policy_keeps_the_templates_parallelism() -> None:
    spec = jobset_spec()
    node_job = next(r for r in spec["replicatedJobs"] if r["name"] == NODE)
    node_job["template"]["spec"]["parallelism"] = 3
    count, env, ports = _node(
        _enforced(trainjob(trainer={"env": [{"name": "X", "value": "y"}]}), runtime(spec))
    )
    assert (count, env, ports) == (3, [{"name": "X", "value": "y"}], [])
    count, _, _ = _node(_enforced(trainjob(trainer={"numNodes": 5}), runtime(spec)))
    assert count == 5


def test_the_flux_policy_says_it_is_not_served() -> None:
    with pytest.raises(RuntimeProblem, match="the flux ML policy is not supported"):
        _enforced(trainjob(trainer={}), runtime(ml_policy={"numNodes": 1, "flux": {}}))
