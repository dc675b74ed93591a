"""The jax.distributed environment of each JAXJob pod (pure): v1.9's envvar.go, exactly."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from jax_operator.api import JAXJob, default_jaxjob
from jax_operator.controller import JAXJobController
from jobcontroller import PlanConfig

EXAMPLE = Path(__file__).parents[2] / "examples" / "jaxjob-simple.yaml"


def _example() -> JAXJob:
    return default_jaxjob(JAXJob.parse(yaml.safe_load(EXAMPLE.read_text())))


def _pod_template(job: JAXJob, index: int) -> dict[str, Any]:
    """What the controller makes of the Worker template for pod ``index``."""
    template = copy.deepcopy(job.spec.jax_replica_specs["Worker"].template)
    JAXJobController().set_cluster_spec(
        job, template, rtype="Worker", index=index, config=PlanConfig()
    )
    return template


def test_every_pod_of_the_docs_example_gets_v19s_variables_in_its_order() -> None:
    job = _example()
    for index in (0, 1):
        [container] = _pod_template(job, index)["spec"]["containers"]
        assert container["env"] == [
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "COORDINATOR_PORT", "value": "6666"},
            {"name": "COORDINATOR_ADDRESS", "value": "jaxjob-simple-worker-0"},
            {"name": "NUM_PROCESSES", "value": "2"},
            {"name": "PROCESS_ID", "value": str(index)},
        ]


def _job(containers: list[dict[str, Any]], replicas: int = 3) -> JAXJob:
    raw = {
        "metadata": {"name": "train", "namespace": "ns"},
        "spec": {
            "jaxReplicaSpecs": {
                "Worker": {"replicas": replicas, "template": {"spec": {"containers": containers}}}
            }
        },
    }
    return default_jaxjob(JAXJob.parse(raw))


def test_every_container_gets_it_and_the_coordinator_port_is_the_workers_jaxjob_port() -> None:
    jax = {
        "name": "jax",
        "image": "jax:1",
        "ports": [{"name": "jaxjob-port", "containerPort": 7777}],
    }
    job = _job([{"name": "sidecar", "image": "s:1"}, jax])
    template = _pod_template(job, 2)
    sidecar, main = template["spec"]["containers"]
    assert sidecar["env"] == main["env"]
    env = {e["name"]: e["value"] for e in main["env"]}
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "COORDINATOR_PORT": "7777",
        "COORDINATOR_ADDRESS": "train-worker-0",
        "NUM_PROCESSES": "3",
        "PROCESS_ID": "2",
    }


def test_init_containers_get_nothing() -> None:
    job = _job([{"name": "jax", "image": "jax:1"}])
    template = copy.deepcopy(job.spec.jax_replica_specs["Worker"].template)
    template["spec"]["initContainers"] = [{"name": "fetch", "image": "busybox"}]
    JAXJobController().set_cluster_spec(job, template, rtype="Worker", index=0, config=PlanConfig())
    assert "env" not in template["spec"]["initContainers"][0]


def test_the_operators_values_replace_the_users_and_other_variables_stay_first() -> None:
    """v1.9 appends after the user's variables and the kubelet takes the last definition, so
    the operator's values win; ours keep one definition of each name."""
    user_env = [{"name": "NUM_PROCESSES", "value": "99"}, {"name": "XLA_FLAGS", "value": "-x"}]
    job = _job([{"name": "jax", "image": "jax:1", "env": user_env}], replicas=2)
    [container] = _pod_template(job, 1)["spec"]["containers"]
    names = [e["name"] for e in container["env"]]
    assert names == [
        "XLA_FLAGS",
        "PYTHONUNBUFFERED",
        "COORDINATOR_PORT",
        "COORDINATOR_ADDRESS",
        "NUM_PROCESSES",
        "PROCESS_ID",
    ]
    assert {e["name"]: e["value"] for e in container["env"]}["NUM_PROCESSES"] == "2"
