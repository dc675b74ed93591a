"""The base's wait-for-replica init container: any framework can hold a replica's pods until
another replica is reachable, by replica type and index (no name hard-coded)."""

from __future__ import annotations

from jobcontroller import (
    CHECK_DNS,
    WAIT_FOR_MASTER_DNS_SCRIPT,
    WAIT_FOR_MASTER_SCRIPT,
    add_init_containers,
    tcp_wait_script,
    wait_for_replica,
)
from tf_operator.api import TFJob


def _job() -> TFJob:
    return TFJob.parse(
        {
            "metadata": {"name": "mnist", "namespace": "ns", "uid": "u"},
            "spec": {"tfReplicaSpecs": {"Chief": {"replicas": 1, "template": {}}}},
        }
    )


def _env(container: dict[str, object]) -> dict[str, str]:
    env = container["env"]
    assert isinstance(env, list)
    return {e["name"]: e["value"] for e in env}


def test_the_container_waits_for_the_named_replica_and_port() -> None:
    built = wait_for_replica(
        _job(), rtype="Chief", index=0, port=2222, name="wait-chief", image="busybox"
    )
    assert built["name"] == "wait-chief"
    assert _env(built) == {"MASTER_ADDR": "mnist-chief-0", "MASTER_PORT": "2222", "MAX_TRIES": "0"}
    assert built["command"] == ["sh", "-c", WAIT_FOR_MASTER_SCRIPT]
    other = wait_for_replica(
        _job(), rtype="Worker", index=3, port=1, name="w", image="i", check=CHECK_DNS, max_tries=5
    )
    assert _env(other)["MASTER_ADDR"] == "mnist-worker-3"
    assert _env(other)["MAX_TRIES"] == "5"
    assert other["command"][-1] == WAIT_FOR_MASTER_DNS_SCRIPT


def test_the_missing_nc_option_message_names_the_frameworks_flag() -> None:
    assert "--my-image-flag" in tcp_wait_script(image_hint="choose another --my-image-flag")
    assert "choose another image" in WAIT_FOR_MASTER_SCRIPT


def test_init_containers_go_after_the_users_own_and_never_twice() -> None:
    template: dict[str, object] = {"spec": {"initContainers": [{"name": "stage", "image": "x"}]}}
    wait = wait_for_replica(_job(), rtype="Chief", port=1, name="wait", image="busybox")
    add_init_containers(template, [wait])
    add_init_containers(template, [wait])
    spec = template["spec"]
    assert isinstance(spec, dict)
    assert [c["name"] for c in spec["initContainers"]] == ["stage", "wait"]
