"""NodeLost's wiring: the flag, what the node informer keeps, the RBAC rule, and the wake-up
of the jobs whose pods are on a node that changed."""

from __future__ import annotations

from typing import Any

import pytest

from jobcontroller.controller.nodes import NODE_NAME_INDEX, pod_node_name
from jobcontroller.core.nodes import node_state
from jobcontroller.core.types import PlanConfig
from jobcontroller.manifests import cluster_role_rules
from jobcontroller.operator import add_job_flags, plan_config
from jobcontroller.runtime.flags import parse_settings
from jobcontroller.runtime.informer import compact_node
from jobcontroller.runtime.store import Store
from tf_operator.controller import TFJobController


def _config(*argv: str) -> PlanConfig:
    return plan_config(
        parse_settings(name="op", argv=list(argv), add_flags=add_job_flags, environ={})
    )


@pytest.mark.parametrize(
    ("flag", "seconds"),
    [(None, 300.0), ("5m", 300.0), ("90s", 90.0), ("1m30s", 90.0), ("45", 45.0), ("0", 0.0)],
)
def test_the_grace_period_flag_takes_durations(flag: str | None, seconds: float) -> None:
    argv = [] if flag is None else [f"--node-lost-grace-period={flag}"]
    assert _config(*argv).node_lost_grace_seconds == seconds


@pytest.mark.parametrize("bad", ["-1", "5x", "m5", ""])
def test_the_grace_period_flag_refuses_what_is_not_a_duration(bad: str) -> None:
    with pytest.raises(SystemExit):
        _config(f"--node-lost-grace-period={bad}")


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "uid": "u1",
            "resourceVersion": "7",
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": {"kubernetes.io/hostname": "n1"},
            "annotations": {"a": "b" * 500},
            "managedFields": [{"manager": "kubelet"}],
        },
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {
            "capacity": {"cpu": "8"},
            "images": [{"names": ["x" * 200], "sizeBytes": 1}] * 20,
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "KubeletNotReady",
                    "message": "long message " * 20,
                    "lastHeartbeatTime": "2024-01-01T01:00:00Z",
                    "lastTransitionTime": "2024-01-01T00:30:00Z",
                },
            ],
        },
    }


def test_the_node_informer_keeps_only_name_and_readiness() -> None:
    node = _node()
    compact = compact_node(node)
    assert compact == {
        "metadata": {
            "name": "n1",
            "uid": "u1",
            "resourceVersion": "7",
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": "2024-01-01T00:30:00Z"}
            ]
        },
    }
    assert node_state(compact) == node_state(node)
    # A heartbeat alone changes nothing the handlers compare.
    beat = _node()
    beat["status"]["conditions"][1]["lastHeartbeatTime"] = "2024-01-01T02:00:00Z"
    assert node_state(compact_node(beat)) == node_state(compact)


def test_a_node_without_a_ready_condition_is_not_ready_since_its_creation() -> None:
    node = _node()
    node["status"]["conditions"] = []
    state = node_state(compact_node(node))
    assert state.ready is False
    assert state.since is not None and state.since.isoformat() == "2024-01-01T00:00:00+00:00"


def test_rbac_reads_nodes_unless_node_lost_is_off() -> None:
    rule = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
    assert rule in cluster_role_rules([TFJobController()])
    off = TFJobController(config=PlanConfig(node_lost_grace_seconds=0))
    assert rule not in cluster_role_rules([off])


def test_pods_are_indexed_by_node_name() -> None:
    store = Store()
    store.add_index(NODE_NAME_INDEX, pod_node_name)
    on = {"metadata": {"name": "a", "namespace": "ns"}, "spec": {"nodeName": "n1"}}
    pending = {"metadata": {"name": "b", "namespace": "ns"}, "spec": {}}
    store.upsert(on)
    store.upsert(pending)
    assert store.by_index(NODE_NAME_INDEX, "n1") == [on]
    store.remove(on)
    assert store.by_index(NODE_NAME_INDEX, "n1") == []
