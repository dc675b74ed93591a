"""The JobSet a TrainJob and its runtime make, field for field: Trainer v2.3.0's cases
(pkg/runtime/core/trainingruntime_test.go ``TestTrainingRuntimeNewObjects``,
test/integration/controller/trainjob_controller_test.go, plugins/jobset/jobset_test.go
``TestBuild``/``TestSyncParallelCount``), ported to JSON. Like upstream's comparisons, env,
volumes, mounts and tolerations are compared as sets where upstream sorts them; their order is
checked on its own where it is ours to keep."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from trainjob_fixtures import (
    DATASET,
    MODEL,
    NODE,
    NOW,
    container,
    jobset_spec,
    observed,
    owner,
    pod_spec,
    rjob,
    runtime,
    set_container,
    torch_env,
    trainjob,
)

from jobcontroller import CreateObject
from trainer_operator.builder import build_jobset
from trainer_operator.info import Container, Info, PodSet, new_info
from trainer_operator.planner import plan_trainjob
from trainer_operator.policies import enforce_ml_policy

Obj = dict[str, Any]
RES = {"cpu": "1"}
JOB_LABEL = "training.kubeflow.org/job-name"


def _sorted(value: Any) -> Any:
    """Lists of objects sorted by name (or mount path, or key), recursively."""
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_sorted(v) for v in value]
        if all(isinstance(v, dict) for v in items):
            return sorted(items, key=lambda v: str(v.get("name", v.get("mountPath", v.get("key")))))
        return items
    return value


def _jobset(raw: Obj, rt: Obj) -> Obj:
    """The JobSet the planner creates for a new TrainJob ``raw`` on runtime ``rt``."""
    plan = plan_trainjob(raw, observed(runtime=rt), now=NOW)
    [body] = [a.body for a in plan.actions if isinstance(a, CreateObject) and a.kind == "JobSet"]
    return body


def _expected_spec(*, node_count: int, suspend: bool = False) -> Obj:
    """``MakeJobSetWrapper`` with ``Replicas(1, all)``, ``Parallelism``/``Completions(1)`` for
    the initializers and ``NumNodes(node_count)``."""
    spec = jobset_spec()
    for job in spec["replicatedJobs"]:
        job["replicas"] = 1
        count = node_count if job["name"] == NODE else 1
        job["template"]["spec"].update({"parallelism": count, "completions": count})
    spec["suspend"] = suspend
    return spec


def test_num_nodes_from_the_trainjob_container_from_the_runtime() -> None:
    """Upstream's "succeeded to build PodGroup and JobSet with NumNodes from the TrainJob and
    container from the Runtime." (less its PodGroup: pod group policies are not built here). The
    runtime object's own labels do not reach the JobSet; a runtime patch's do."""
    spec = jobset_spec()
    for job, name in ((DATASET, DATASET), (MODEL, MODEL), (NODE, NODE)):
        set_container(spec, job, name, "test:runtime", ["runtime"], ["runtime"], RES)
    rt = runtime(spec, ml_policy={"numNodes": 100})
    rt["metadata"]["labels"] = {"conflictLabel": "overridden"}
    patch = {
        "manager": "test.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "metadata": {
                    "labels": {"conflictLabel": "override"},
                    "annotations": {"conflictAnnotation": "override"},
                }
            }
        },
    }
    raw = trainjob(suspend=True, runtimePatches=[patch], trainer={"numNodes": 30})
    got = _jobset(raw, rt)

    want_spec = _expected_spec(node_count=30, suspend=True)
    for job, name in ((DATASET, DATASET), (MODEL, MODEL), (NODE, NODE)):
        set_container(want_spec, job, name, "test:runtime", ["runtime"], ["runtime"], RES)
    assert got == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "labels": {"conflictLabel": "override", JOB_LABEL: "test-job"},
            "annotations": {"conflictAnnotation": "override"},
            "ownerReferences": [owner()],
        },
        "spec": want_spec,
    }


def test_num_nodes_from_the_runtime_container_and_env_from_the_trainjob() -> None:
    """Upstream's "succeeded to build JobSet with NumNodes from the Runtime and container from the
    TrainJob." The TrainJob's env overrides the runtime's by name and adds its own after."""
    spec = set_container(jobset_spec(), NODE, NODE, "test:runtime", ["runtime"], ["runtime"], RES)
    container(spec, NODE, NODE)["env"] = [
        {"name": "TRAIN_JOB", "value": "original"},
        {"name": "RUNTIME", "value": "test:runtime"},
    ]
    raw = trainjob(
        trainer={
            "image": "test:trainjob",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "resourcesPerNode": {"requests": RES},
            "env": [
                {"name": "TRAIN_JOB", "value": "override"},
                {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"},
            ],
        }
    )
    got = _jobset(raw, runtime(spec, ml_policy={"numNodes": 100}))

    want = _expected_spec(node_count=100)
    set_container(want, NODE, NODE, "test:trainjob", ["trainjob"], ["trainjob"], RES)
    container(want, NODE, NODE)["env"] = [
        {"name": "TRAIN_JOB", "value": "override"},
        {"name": "RUNTIME", "value": "test:runtime"},
        {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"},
    ]
    assert got["spec"] == want


def test_runtime_patches_merge_into_the_pod_templates() -> None:
    """Upstream's "succeeded to build JobSet with TrainJob's RuntimePatches.": two managers'
    patches, merged strategically into the initializer's and the node's pod specs."""
    spec = jobset_spec()
    pod_spec(spec, DATASET)["initContainers"] = [
        {
            "name": "override-init-container",
            "image": "test:runtime",
            "env": [
                {"name": "INIT_ENV", "value": "original_init"},
                {"name": "DATASET_PATH", "value": "runtime"},
            ],
        }
    ]
    pod_spec(spec, NODE)["initContainers"] = [
        {
            "name": "override-init-container",
            "image": "test:runtime",
            "env": [{"name": "INIT_ENV", "value": "original_init"}],
        }
    ]
    set_container(spec, NODE, NODE, "test:runtime", ["runtime"], ["runtime"], RES)
    container(spec, NODE, NODE)["env"] = [{"name": "TRAIN_JOB", "value": "original"}]
    set_container(spec, NODE, "override-container", "test:runtime", ["runtime"], ["runtime"], RES)
    container(spec, NODE, "override-container")["env"] = [
        {"name": "CONTAINER_ENV", "value": "original_container"}
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["antarctica-east1", "antarctica-west1"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    toleration = {"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    selector = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    gate = {"name": "kueue.x-k8s.io/admission"}

    def pod_patch(job: str, pod: Obj) -> Obj:
        return {"name": job, "template": {"spec": {"template": {"spec": pod}}}}

    dataset_patch = {
        "initContainers": [
            {
                "name": "override-init-container",
                "env": [
                    {"name": "INIT_ENV", "value": "override_init"},
                    {"name": "NEW_VALUE", "value": "from_overrides"},
                ],
            }
        ],
        "containers": [
            {
                "name": DATASET,
                "volumeMounts": [
                    {"name": "initializer_secret", "mountPath": "initializer_secret_mount_path"},
                    {"name": "initializer_claim", "mountPath": "initializer_claim_mount_path"},
                ],
            }
        ],
        "affinity": affinity,
        "nodeSelector": selector,
        "schedulingGates": [gate],
        "tolerations": [toleration],
        "volumes": [
            {"name": "initializer_secret", "secret": {"secretName": "initializer_secret_name"}},
            {
                "name": "initializer_claim",
                "persistentVolumeClaim": {"claimName": "initializer_claim_name"},
            },
        ],
    }
    node_patch = {
        "serviceAccountName": "override-sa",
        "initContainers": [
            {
                "name": "override-init-container",
                "env": [{"name": "INIT_ENV", "value": "override_init"}],
            }
        ],
        "containers": [
            {
                "name": NODE,
                "volumeMounts": [
                    {"name": "node_secret", "mountPath": "node_secret_mount_path"},
                    {"name": "node_claim", "mountPath": "node_claim_mount_path"},
                ],
            },
            {
                "name": "override-container",
                "env": [{"name": "CONTAINER_ENV", "value": "override_container"}],
            },
        ],
        "affinity": affinity,
        "imagePullSecrets": [{"name": "registry-credential"}],
        "nodeSelector": selector,
        "schedulingGates": [gate],
        "tolerations": [toleration],
        "terminationGracePeriodSeconds": 300,
        "volumes": [
            {"name": "node_secret", "secret": {"secretName": "node_secret_name"}},
            {"name": "node_claim", "persistentVolumeClaim": {"claimName": "node_claim_name"}},
        ],
    }
    patches = [
        {
            "manager": "manager-1",
            "trainingRuntimeSpec": {
                "template": {"spec": {"replicatedJobs": [pod_patch(DATASET, dataset_patch)]}}
            },
        },
        {
            "manager": "manager-2",
            "trainingRuntimeSpec": {
                "template": {"spec": {"replicatedJobs": [pod_patch(NODE, node_patch)]}}
            },
        },
    ]
    raw = trainjob(
        trainer={
            "image": "test:trainjob",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "resourcesPerNode": {"requests": RES},
        },
        runtimePatches=patches,
    )
    got = _jobset(raw, runtime(spec, ml_policy={"numNodes": 100}))

    want = _expected_spec(node_count=100)
    pod_spec(want, NODE)["serviceAccountName"] = "override-sa"
    pod_spec(want, DATASET)["initContainers"] = [
        {
            "name": "override-init-container",
            "image": "test:runtime",
            "env": [
                {"name": "INIT_ENV", "value": "override_init"},
                {"name": "DATASET_PATH", "value": "runtime"},
                {"name": "NEW_VALUE", "value": "from_overrides"},
            ],
        }
    ]
    pod_spec(want, NODE)["initContainers"] = [
        {
            "name": "override-init-container",
            "image": "test:runtime",
            "env": [{"name": "INIT_ENV", "value": "override_init"}],
        }
    ]
    set_container(want, NODE, NODE, "test:trainjob", ["trainjob"], ["trainjob"], RES)
    container(want, NODE, NODE)["env"] = [{"name": "TRAIN_JOB", "value": "original"}]
    set_container(want, NODE, "override-container", "test:runtime", ["runtime"], ["runtime"], RES)
    container(want, NODE, "override-container")["env"] = [
        {"name": "CONTAINER_ENV", "value": "override_container"}
    ]
    for job in (DATASET, NODE):
        pod = pod_spec(want, job)
        pod.update(
            {
                "affinity": affinity,
                "nodeSelector": selector,
                "schedulingGates": [gate],
                "tolerations": [toleration],
            }
        )
        pod["volumes"] = pod["volumes"] + copy.deepcopy(
            dataset_patch["volumes"] if job == DATASET else node_patch["volumes"]
        )
    pod_spec(want, NODE)["imagePullSecrets"] = [{"name": "registry-credential"}]
    pod_spec(want, NODE)["terminationGracePeriodSeconds"] = 300
    container(want, DATASET, DATASET)["volumeMounts"] += dataset_patch["containers"][0][
        "volumeMounts"
    ]
    container(want, NODE, NODE)["volumeMounts"] += node_patch["containers"][0]["volumeMounts"]
    assert _sorted(got["spec"]) == _sorted(want)
    # The replicated jobs keep the runtime's order whatever the patches' order.
    assert [r["name"] for r in got["spec"]["replicatedJobs"]] == [DATASET, MODEL, NODE]


def test_torch_runtime() -> None:
    """Upstream's "Should succeed to create TrainJob with Torch TrainingRuntime": the TrainJob's
    env, then torchrun's, and the trainer port on the node container; one process per requested
    CPU."""
    spec = set_container(jobset_spec(), NODE, NODE, "test:runtime", ["runtime"], ["runtime"], {})
    res = {"cpu": "1", "memory": "4Gi"}
    raw = trainjob(
        "alpha",
        trainer={
            "image": "test:trainjob",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "resourcesPerNode": {"requests": res},
            "env": [{"name": "TRAIN_JOB", "value": "value"}],
        },
    )
    got = _jobset(raw, runtime(spec, ml_policy={"numNodes": 100, "torch": {}}))

    want = _expected_spec(node_count=100)
    set_container(want, NODE, NODE, "test:trainjob", ["trainjob"], ["trainjob"], res)
    node = container(want, NODE, NODE)
    node["ports"] = [{"containerPort": 29500}]
    node["env"] = [{"name": "TRAIN_JOB", "value": "value"}, *torch_env("alpha", nodes=100, procs=1)]
    assert got["spec"] == want


def test_initializers_get_the_trainjobs_sources() -> None:
    """The integration test's TrainJob: storage URIs on the initializers' containers, a Secret
    as envFrom."""
    spec = jobset_spec()
    raw = trainjob(
        initializer={
            "dataset": {
                "storageUri": "hf://trainjob-dataset",
                "env": [{"name": "A", "value": "1"}],
                "secretRef": {"name": "creds"},
            },
            "model": {"storageUri": "hf://trainjob-model"},
        }
    )
    got = _jobset(raw, runtime(spec, ml_policy={"numNodes": 1}))
    dataset = container(got["spec"], DATASET, DATASET)
    assert dataset["env"] == [
        {"name": "STORAGE_URI", "value": "hf://trainjob-dataset"},
        {"name": "A", "value": "1"},
    ]
    assert dataset["envFrom"] == [{"secretRef": {"name": "creds"}}]
    assert container(got["spec"], MODEL, MODEL)["env"] == [
        {"name": "STORAGE_URI", "value": "hf://trainjob-model"}
    ]
    assert "env" not in container(got["spec"], NODE, NODE)


def test_resources_per_node_merge_with_the_runtimes() -> None:
    """fix(runtimes) #3602: resourcesPerNode over the runtime's node resources, per resource."""
    spec = jobset_spec()
    container(spec, NODE, NODE)["resources"] = {
        "requests": {"cpu": "1", "example.com/gpu": "1"},
        "limits": {"example.com/gpu": "1"},
    }
    raw = trainjob(trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}}})
    got = _jobset(raw, runtime(spec, ml_policy={"numNodes": 1}))
    assert container(got["spec"], NODE, NODE)["resources"] == {
        "limits": {"example.com/gpu": "1", "nvidia.com/gpu": "2"},
        "requests": {"cpu": "1", "example.com/gpu": "1"},
    }


def _info(pod_sets: list[PodSet], spec: Obj) -> Info:
    return Info(
        labels={},
        annotations={},
        ml_policy=None,
        pod_group_policy=None,
        spec=spec,
        pod_sets=pod_sets,
    )


def _node_spec(init: list[str]) -> Obj:
    pod: Obj = {"containers": [{"name": NODE}]}
    if init:
        pod["initContainers"] = [{"name": name} for name in init]
    return {"replicatedJobs": [{"name": NODE, "template": {"spec": {"template": {"spec": pod}}}}]}


@pytest.mark.parametrize("listed", [True, False], ids=["in-template", "auto-appended"])
def test_init_containers_of_pod_sets_are_synced(listed: bool) -> None:
    """``TestBuild``: "init containers synced to JobSet replicated jobs" and "auto-append
    initContainers from podSet when missing from apply configuration"."""
    init = Container(
        name="preflight-check",
        image="preflight:latest",
        command=["/bin/sh", "-c"],
        env=[
            {"name": "PET_NNODES", "value": "2"},
            {"name": "PET_MASTER_ADDR", "value": "test-job-node-0-0.test-job"},
        ],
        ports=[{"containerPort": 8080, "name": "http"}],
        volume_mounts=[{"name": "mount", "mountPath": "/data"}],
    )
    ps = PodSet(
        name=NODE,
        ancestor=None,
        count=2,
        init_containers=[init],
        containers=[Container(name=NODE, image="pytorch:latest")],
    )
    got = build_jobset(_info([ps], _node_spec(["preflight-check"] if listed else [])), trainjob())
    pod = pod_spec(got["spec"], NODE)
    assert pod["initContainers"] == [
        {
            "name": "preflight-check",
            "command": ["/bin/sh", "-c"],
            "image": "preflight:latest",
            "env": init.env,
            "ports": [{"containerPort": 8080, "name": "http"}],
            "volumeMounts": [{"name": "mount", "mountPath": "/data"}],
        }
    ]
    assert pod["containers"] == [{"name": NODE, "image": "pytorch:latest"}]
    assert rjob(got["spec"], NODE)["template"]["spec"]["parallelism"] == 2


def test_sync_counts_matches_pod_sets_by_name() -> None:
    """``TestSyncParallelCount``: each replicated job gets its own pod set's count."""
    spec = jobset_spec()
    info = new_info(
        trainjob(trainer={"numNodes": 4}), runtime(spec, ml_policy={"numNodes": 2})["spec"]
    )
    enforce_ml_policy(info, trainjob(trainer={"numNodes": 4}))
    got = build_jobset(info, trainjob())
    counts = {
        r["name"]: (r["template"]["spec"]["parallelism"], r["template"]["spec"]["completions"])
        for r in got["spec"]["replicatedJobs"]
    }
    assert counts == {DATASET: (1, 1), MODEL: (1, 1), NODE: (4, 4)}
