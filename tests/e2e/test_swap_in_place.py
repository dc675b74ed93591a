"""Swapping the Go operators for ours with jobs in flight (issue 13, item 1).

Each test builds, on the local cluster, a job in the middle of its run exactly as the Go
operator left it: the objects it created, with the labels, names and owner references its
source gives them (mpi-operator v0.8 ``pkg/controller/mpi_job_controller.go``; training-operator
v1.9 ``pkg/controller.v1/common`` and ``control/podgroup_control.go``), and the status it wrote.
No Go binary is involved. Then our operator starts, as after a swap, and must carry the job to
its end with what is there: adopting the objects that lack our job-name label, classifying
mpi-operator's workers (which have no replica-type label) by name, creating nothing twice.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from jobcontroller import PlanConfig
from jobcontroller.runtime.kube import (
    CONFIGMAPS,
    EVENTS,
    JOBS,
    NODES,
    PODS,
    SECRETS,
    SERVICES,
    KubeApi,
    Resource,
)
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.volcano import POD_GROUPS, install_volcano_crd
from jobcontroller.testing.waiting import wait_for, wait_for_list
from mpi_operator.controller import MPIJobController
from mpi_operator.ssh import generate_key_pair
from tf_operator.controller import TFJobController

MPIJOBS = Resource("kubeflow.org", "v2beta1", "MPIJob", "mpijobs")
TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")

JOB_NAME = "training.kubeflow.org/job-name"
OPERATOR_NAME = "training.kubeflow.org/operator-name"
JOB_ROLE = "training.kubeflow.org/job-role"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"

Obj = dict[str, Any]


def _owner(job: Obj) -> list[Obj]:
    return [
        {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _running_status(kind: str, replica_statuses: Obj) -> Obj:
    now = _now()
    return {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": f"{kind}Created",
                "message": f"{kind} is created.",
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            },
            {
                "type": "Running",
                "status": "True",
                "reason": f"{kind}Running",
                "message": f"{kind} is running.",
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            },
        ],
        "replicaStatuses": replica_statuses,
        "startTime": now,
    }


async def _events(kube: KubeApi, namespace: str, job: Obj) -> list[Obj]:
    uid = job["metadata"]["uid"]
    items, _ = await kube.list(EVENTS, namespace=namespace)
    return [e for e in items if (e.get("involvedObject") or {}).get("uid") == uid]


async def _uids(kube: KubeApi, resource: Resource, namespace: str) -> dict[str, str]:
    items, _ = await kube.list(resource, namespace=namespace)
    return {o["metadata"]["name"]: o["metadata"]["uid"] for o in items}


async def _succeeded(kube: KubeApi, resource: Resource, name: str, *, namespace: str) -> Obj:
    """Wait for the job to finish; it must have succeeded."""
    done = await wait_for(
        kube,
        resource,
        name,
        namespace=namespace,
        timeout=60,
        until=lambda j: any(
            c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
            for c in ((j or {}).get("status") or {}).get("conditions") or []
        ),
    )
    assert done is not None
    true = [c["type"] for c in done["status"]["conditions"] if c["status"] == "True"]
    assert true[-1] == "Succeeded", done["status"]
    return done


# --------------------------------------------------------------------------- MPIJob


async def _mpijob_as_mpi_operator_left_it(kube: KubeApi, ns: str, name: str) -> Obj:
    """An MPIJob with two workers Running and its launcher Job running, as mpi-operator v0.8
    creates them: Service, ConfigMap, Secret and launcher Job labelled ``app: <name>`` only,
    workers labelled without a replica type."""
    body = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "launcher", "image": "mpi:latest", "command": ["mpirun"]}
                            ]
                        }
                    },
                },
                "Worker": {
                    "replicas": 2,
                    "template": {
                        "spec": {"containers": [{"name": "worker", "image": "mpi:latest"}]}
                    },
                },
            },
        },
    }
    job = await kube.create(MPIJOBS, body, namespace=ns)
    owner = _owner(job)
    app = {"app": name}
    await kube.create(
        SERVICES,
        {
            "metadata": {"name": name, "labels": app, "ownerReferences": owner},
            "spec": {
                "clusterIP": "None",
                "selector": {OPERATOR_NAME: "mpi-operator", JOB_NAME: name},
                "publishNotReadyAddresses": False,
            },
        },
        namespace=ns,
    )
    hostfile = "".join(f"{name}-worker-{i}.{name}.{ns}.svc:1\n" for i in range(2))
    await kube.create(
        CONFIGMAPS,
        {
            "metadata": {"name": f"{name}-config", "labels": app, "ownerReferences": owner},
            "data": {"hostfile": hostfile},
        },
        namespace=ns,
    )
    private, public = generate_key_pair()  # mpi-operator's kind: ECDSA P-521
    await kube.create(
        SECRETS,
        {
            "metadata": {"name": f"{name}-ssh", "labels": app, "ownerReferences": owner},
            "type": "kubernetes.io/ssh-auth",
            "stringData": {"ssh-privatekey": private.decode(), "ssh-publickey": public.decode()},
        },
        namespace=ns,
    )
    for i in range(2):
        await kube.create(
            PODS,
            {
                "metadata": {
                    "name": f"{name}-worker-{i}",
                    "labels": {
                        OPERATOR_NAME: "mpi-operator",
                        JOB_NAME: name,
                        JOB_ROLE: "worker",
                        REPLICA_INDEX: str(i),
                    },
                    "ownerReferences": owner,
                },
                "spec": {
                    "hostname": f"{name}-worker-{i}",
                    "subdomain": name,
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "worker",
                            "image": "mpi:latest",
                            "command": ["/usr/sbin/sshd", "-De"],
                            "env": [{"name": "K_MPI_JOB_ROLE", "value": "worker"}],
                        }
                    ],
                },
            },
            namespace=ns,
        )
    launcher_template = simulate(
        {
            "metadata": {
                "labels": {OPERATOR_NAME: "mpi-operator", JOB_NAME: name, JOB_ROLE: "launcher"}
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "launcher",
                        "image": "mpi:latest",
                        "command": ["mpirun"],
                        "env": [{"name": "K_MPI_JOB_ROLE", "value": "launcher"}],
                    }
                ],
            },
        },
        0,
        run_for="6s",
    )
    await kube.create(
        JOBS,
        {
            "metadata": {"name": f"{name}-launcher", "labels": app, "ownerReferences": owner},
            "spec": {"backoffLimit": 6, "template": launcher_template},
        },
        namespace=ns,
    )
    await wait_for_list(
        kube,
        PODS,
        namespace=ns,
        label_selector=f"{JOB_NAME}={name}",
        until=lambda pods: (
            len(pods) == 3 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
        ),
        what="the workers and the launcher running",
    )
    status = _running_status(
        "MPIJob",
        {"Launcher": {"active": 1}, "Worker": {"active": 2}},
    )
    return await kube.replace(
        MPIJOBS, {**job, "status": status}, namespace=ns, subresource="status"
    )


async def test_an_mpijob_in_flight_under_mpi_operator_finishes_after_the_swap(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns, name = namespace, "inflight"
    job = await _mpijob_as_mpi_operator_left_it(kube, ns, name)
    before = {
        "services": await _uids(kube, SERVICES, ns),
        "configmaps": await _uids(kube, CONFIGMAPS, ns),
        "secrets": await _uids(kube, SECRETS, ns),
        "jobs": await _uids(kube, JOBS, ns),
        "pods": await _uids(kube, PODS, ns),
    }
    secret_before = await kube.get(SECRETS, f"{name}-ssh", namespace=ns)

    async with running(kubeconfig, MPIJobController()):
        done = await _succeeded(kube, MPIJOBS, name, namespace=ns)
        assert done["status"]["replicaStatuses"]["Launcher"]["succeeded"] == 1

        # Nothing was made twice: the same objects, now wearing our label.
        assert await _uids(kube, SERVICES, ns) == before["services"]
        assert await _uids(kube, CONFIGMAPS, ns) == before["configmaps"]
        assert await _uids(kube, SECRETS, ns) == before["secrets"]
        assert await _uids(kube, JOBS, ns) == before["jobs"]
        for resource, object_name in (
            (SERVICES, name),
            (CONFIGMAPS, f"{name}-config"),
            (SECRETS, f"{name}-ssh"),
            (JOBS, f"{name}-launcher"),
        ):
            obj = await kube.get(resource, object_name, namespace=ns)
            assert obj["metadata"]["labels"][JOB_NAME] == name, object_name
            assert obj["metadata"]["labels"]["app"] == name, object_name
        # The workers' SSH keys are the ones they started with.
        secret = await kube.get(SECRETS, f"{name}-ssh", namespace=ns)
        assert secret["data"] == secret_before["data"]
        pods_now = await _uids(kube, PODS, ns)
        assert all(before["pods"].get(n) == uid for n, uid in pods_now.items()), pods_now

        events = await _events(kube, ns, job)
        reasons = [e["reason"] for e in events]
        assert not [r for r in reasons if r.startswith(("FailedCreate", "SuccessfulCreate"))]
        adopted = sorted(r for r in reasons if r.startswith("Adopted"))
        assert adopted == ["AdoptedConfigMap", "AdoptedJob", "AdoptedSecret", "AdoptedService"]


# --------------------------------------------------------------------------- TFJob


async def _tfjob_as_training_operator_left_it(kube: KubeApi, ns: str, name: str) -> Obj:
    """A Volcano gang-scheduled TFJob with two workers bound and running, as v1.9 creates
    them: a PodGroup with no labels, pods and Services with v1.9's labels."""
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "tf:latest"}]}}
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"minAvailable": 2}},
            "tfReplicaSpecs": {
                "Worker": {"replicas": 2, "restartPolicy": "Never", "template": template}
            },
        },
    }
    job = await kube.create(TFJOBS, body, namespace=ns)
    owner = _owner(job)
    group = await kube.create(
        POD_GROUPS,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "ownerReferences": owner},
            "spec": {"minMember": 2},
        },
        namespace=ns,
    )
    await kube.replace(
        POD_GROUPS, {**group, "status": {"phase": "Running"}}, namespace=ns, subresource="status"
    )
    nodes = await wait_for_list(
        kube,
        NODES,
        label_selector="type=kwok",
        until=lambda items: bool(items),
        what="a kwok node",
    )
    node = nodes[0]["metadata"]["name"]
    cluster = {"worker": [f"{name}-worker-{i}.{ns}.svc:2222" for i in range(2)]}
    for i in range(2):
        labels = {
            OPERATOR_NAME: "tfjob-controller",
            JOB_NAME: name,
            REPLICA_TYPE: "worker",
            REPLICA_INDEX: str(i),
        }
        if i == 0:
            labels[JOB_ROLE] = "master"  # worker 0 of a job with no chief
        tf_config = (
            '{"cluster":' + str(cluster).replace("'", '"') + ',"task":{"type":"worker","index":'
            f'{i}}},"environment":"cloud"}}'
        )
        pod = simulate(
            {
                "metadata": {
                    "name": f"{name}-worker-{i}",
                    "labels": labels,
                    "annotations": {
                        "scheduling.k8s.io/group-name": name,
                        "volcano.sh/task-spec": "worker",
                    },
                    "ownerReferences": owner,
                },
                "spec": {
                    "schedulerName": "volcano",
                    "nodeName": node,  # Volcano bound it
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "tf:latest",
                            "ports": [{"name": "tfjob-port", "containerPort": 2222}],
                            "env": [{"name": "TF_CONFIG", "value": tf_config}],
                        }
                    ],
                },
            },
            0,
            run_for="4s",
        )
        await kube.create(PODS, pod, namespace=ns)
        await kube.create(
            SERVICES,
            {
                "metadata": {
                    "name": f"{name}-worker-{i}",
                    "labels": labels,
                    "ownerReferences": owner,
                },
                "spec": {
                    "clusterIP": "None",
                    "selector": labels,
                    "ports": [{"name": "tfjob-port", "port": 2222, "targetPort": 2222}],
                },
            },
            namespace=ns,
        )
    status = _running_status("TFJob", {"Worker": {"active": 2}})
    return await kube.replace(TFJOBS, {**job, "status": status}, namespace=ns, subresource="status")


async def test_a_gang_scheduled_tfjob_in_flight_under_the_training_operator_finishes_after_the_swap(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    await install_volcano_crd(kube)
    ns, name = namespace, "gang-inflight"
    job = await _tfjob_as_training_operator_left_it(kube, ns, name)
    pods_before = await _uids(kube, PODS, ns)
    group_uid = (await kube.get(POD_GROUPS, name, namespace=ns))["metadata"]["uid"]

    config = PlanConfig(gang_scheduler_name="volcano", pod_group_available=True)
    async with running(kubeconfig, TFJobController(config=config)):
        done = await _succeeded(kube, TFJOBS, name, namespace=ns)
        assert done["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2
        # The job's PodGroup was adopted (not replaced) and, the job finished, deleted as v1.9
        # deletes it.
        events = await _events(kube, ns, job)
        reasons = [e["reason"] for e in events]
        assert "AdoptedPodGroup" in reasons, reasons
        assert not [r for r in reasons if r.startswith(("FailedCreate", "SuccessfulCreate"))]
        await wait_for(
            kube,
            POD_GROUPS,
            name,
            namespace=ns,
            until=lambda g: g is None or g["metadata"]["uid"] != group_uid,
            what="the PodGroup deleted",
        )
        pods_now = await _uids(kube, PODS, ns)
        assert pods_now == {n: u for n, u in pods_before.items() if n in pods_now}
