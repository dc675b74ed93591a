"""The MPI policy (``mlPolicy.mpi``) on the runtimes v2.3.0 ships (deepspeed-distributed,
mlx-distributed) and on upstream's plugin test shapes (plugins/mpi/mpi_test.go
``TestMPI``/``TestValidate``): the node count, the slots, the SSH keys and hostfile the
launcher and nodes mount, and what a TrainJob may not say."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from trainjob_fixtures import NOW, observed, stored, trainjob

from jobcontroller import CreateObject, Event, PatchObject, Plan
from trainer_operator.controller import TrainJobController
from trainer_operator.planner import plan_trainjob

Obj = dict[str, Any]
RUNTIMES = Path(__file__).resolve().parents[1] / "data" / "trainer-v2.3.0" / "runtimes"
SSH_ITEMS = [
    {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
    {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
    {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
]


def _shipped(file: str) -> Obj:
    runtime: Obj = yaml.safe_load((RUNTIMES / file).read_text())
    runtime["metadata"]["uid"] = "runtime-uid"
    return runtime


DEEPSPEED = _shipped("deepspeed_distributed.yaml")


def _job(name: str = "ds", **trainer: Any) -> Obj:
    return trainjob(
        name,
        runtime_kind="ClusterTrainingRuntime",
        runtime_name="deepspeed-distributed",
        trainer=trainer,
    )


def _plan(raw: Obj, runtime: Obj = DEEPSPEED, **cached: Any) -> Plan:
    return plan_trainjob(raw, observed(runtime=runtime, **cached), now=NOW)


def _created(plan: Plan) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = {}
    for action in plan.actions:
        if isinstance(action, CreateObject):
            out.setdefault(action.kind, []).append(action.body)
    return out


def _rjob(jobset: Obj, name: str) -> Obj:
    return next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == name)


def _pod(jobset: Obj, name: str) -> Obj:
    spec: Obj = _rjob(jobset, name)["template"]["spec"]["template"]["spec"]
    return spec


def _node_container(jobset: Obj, name: str) -> Obj:
    return next(c for c in _pod(jobset, name)["containers"] if c["name"] == "node")


def _hostfile(plan: Plan) -> str:
    [cm] = [c for c in _created(plan)["ConfigMap"] if c["metadata"]["name"].endswith("hostfile")]
    text: str = cm["data"]["hostfile"]
    return text


def test_deepspeed_runs_numnodes_minus_one_nodes_and_the_launcher_as_the_last_host() -> None:
    plan = _plan(_job(numNodes=3, image="example.com/ds:1", command=["mpirun", "train.py"]))
    created = _created(plan)
    [jobset] = created["JobSet"]
    node, launcher = _rjob(jobset, "node"), _rjob(jobset, "launcher")
    assert node["template"]["spec"]["parallelism"] == 2
    assert launcher["template"]["spec"]["parallelism"] == 1
    # The hosts in the runtime's order of replicated jobs: the nodes, then the launcher
    # (which runs training processes too), each as the JobSet's headless Service names it.
    assert _hostfile(plan) == (
        "ds-node-0-0.ds slots=1\nds-node-0-1.ds slots=1\nds-launcher-0-0.ds slots=1\n"
    )
    # The TrainJob's image and command run the launcher; the nodes keep the runtime's sshd.
    launcher_node = _node_container(jobset, "launcher")
    assert launcher_node["image"] == "example.com/ds:1"
    assert launcher_node["command"] == ["mpirun", "train.py"]
    assert _node_container(jobset, "node")["command"] == ["/usr/sbin/sshd"]


def test_launcher_and_nodes_mount_the_keys_and_only_the_launcher_the_hostfile() -> None:
    plan = _plan(_job(numNodes=2))
    [jobset] = _created(plan)["JobSet"]
    ssh_volume = {
        "name": "mpi-ssh-auth",
        "secret": {"secretName": "ds-mpi-ssh-auth", "defaultMode": 0o400, "items": SSH_ITEMS},
    }
    hostfile_volume = {
        "name": "mpi-hostfile",
        "configMap": {
            "name": "ds-mpi-hostfile",
            "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
        },
    }
    assert _pod(jobset, "node")["volumes"] == [ssh_volume]
    assert _pod(jobset, "launcher")["volumes"] == [ssh_volume, hostfile_volume]
    ssh_mount = {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}
    assert _node_container(jobset, "node")["volumeMounts"] == [ssh_mount]
    assert _node_container(jobset, "launcher")["volumeMounts"] == [
        ssh_mount,
        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    ]
    env = {e["name"]: e["value"] for e in _node_container(jobset, "launcher")["env"]}
    assert env == {
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": "1",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
    }
    assert "env" not in _node_container(jobset, "node")


def test_the_secret_and_hostfile_are_the_trainjobs_and_come_before_the_jobset() -> None:
    plan = _plan(_job(numNodes=2))
    kinds = [a.kind for a in plan.actions if isinstance(a, CreateObject)]
    assert kinds.index("Secret") < kinds.index("JobSet")
    [secret] = _created(plan)["Secret"]
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    assert "data" not in secret  # the keys are materialized at the create, never planned
    for obj in (secret, *_created(plan)["ConfigMap"]):
        [ref] = obj["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            "TrainJob",
            "ds",
            "uid",
            True,
        )
        assert obj["metadata"]["labels"] == {"training.kubeflow.org/job-name": "ds"}


@pytest.mark.parametrize(
    ("trainer", "runtime_slots", "want"),
    [
        ({"numProcPerNode": 4}, 1, 4),  # the TrainJob's numProcPerNode wins
        ({}, 2, 2),  # else the runtime's
        ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}, 1, 8),  # 1: one per GPU
        ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}, 2, 2),  # not when set
        ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}}, 1, 1),
    ],
)
def test_slots_per_node(trainer: Obj, runtime_slots: int, want: int) -> None:
    runtime = copy.deepcopy(DEEPSPEED)
    runtime["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] = runtime_slots
    plan = _plan(_job(numNodes=2, **trainer), runtime)
    assert _hostfile(plan) == f"ds-node-0-0.ds slots={want}\nds-launcher-0-0.ds slots={want}\n"
    [jobset] = _created(plan)["JobSet"]
    env = {e["name"]: e["value"] for e in _node_container(jobset, "launcher")["env"]}
    assert env["OMPI_MCA_orte_set_default_slots"] == str(want)
    assert runtime_slots == runtime["spec"]["mlPolicy"]["mpi"]["numProcPerNode"]  # not mutated


def test_without_run_launcher_as_node_the_nodes_are_all_the_hosts() -> None:
    runtime = copy.deepcopy(DEEPSPEED)
    runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    plan = _plan(_job(numNodes=3), runtime)
    [jobset] = _created(plan)["JobSet"]
    assert _rjob(jobset, "node")["template"]["spec"]["parallelism"] == 3
    assert _hostfile(plan) == "".join(f"ds-node-0-{i}.ds slots=1\n" for i in range(3))


def test_a_jobset_subdomain_names_the_hosts() -> None:
    runtime = copy.deepcopy(DEEPSPEED)
    runtime["spec"]["template"]["spec"]["network"]["subdomain"] = "hosts"
    plan = _plan(_job(numNodes=2), runtime)
    assert _hostfile(plan) == "ds-node-0-0.hosts slots=1\nds-launcher-0-0.hosts slots=1\n"


def test_objects_that_exist_are_not_created_again_and_a_stale_hostfile_is_patched() -> None:
    raw = _job(numNodes=3)
    raw["spec"]["suspend"] = True
    first = _created(_plan(raw))
    secret = stored(first["Secret"][0], uid="s-uid")
    secret["data"] = {"ssh-privatekey": "a2V5", "ssh-publickey": "cHVi"}
    snapshot, hostfile = sorted(first["ConfigMap"], key=lambda c: c["metadata"]["name"])[::-1]
    stale = stored(hostfile, uid="h-uid")
    stale["data"] = {"hostfile": "ds-node-0-0.ds slots=1\nds-launcher-0-0.ds slots=1\n"}
    jobset = stored(first["JobSet"][0])
    plan = plan_trainjob(
        raw,
        observed(
            runtime=DEEPSPEED,
            jobsets=[jobset],
            configmaps=[stored(snapshot, uid="c-uid"), stale],
            others={("Secret", "ds-mpi-ssh-auth"): secret},
        ),
        now=NOW,
    )
    # The Secret the TrainJob controls is kept as it is (it is immutable; its keys stay).
    assert not [a for a in plan.actions if isinstance(a, CreateObject)], plan.actions
    [patch] = [a for a in plan.actions if isinstance(a, PatchObject) and a.kind == "ConfigMap"]
    assert patch.name == "ds-mpi-hostfile"
    assert patch.patch == {"data": {"hostfile": first_hostfile(first)}}


def first_hostfile(created: dict[str, list[Obj]]) -> str:
    [cm] = [c for c in created["ConfigMap"] if c["metadata"]["name"].endswith("hostfile")]
    text: str = cm["data"]["hostfile"]
    return text


def test_someone_elses_secret_of_that_name_stops_the_jobset() -> None:
    foreign = {"metadata": {"name": "ds-mpi-ssh-auth", "namespace": "default", "uid": "x"}}
    plan = _plan(_job(numNodes=2), others={("Secret", "ds-mpi-ssh-auth"): foreign})
    assert "JobSet" not in _created(plan)
    [event] = plan.events
    assert event.reason == "TrainJobResourcesCreationFailed"
    assert 'Resource "ds-mpi-ssh-auth" of Kind "Secret" already exists' in event.message


@pytest.mark.parametrize(
    ("env", "want"),
    [
        (
            ["OMPI_MCA_orte_default_hostfile"],
            "configured: [OMPI_MCA_orte_default_hostfile]",
        ),
        (
            ["OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_set_default_slots", "MY_VAR"],
            "configured: [OMPI_MCA_orte_set_default_slots OMPI_MCA_plm_rsh_args]",
        ),
    ],
)
def test_reserved_mpi_env_is_refused(env: list[str], want: str) -> None:
    plan = _plan(_job(numNodes=2, env=[{"name": n, "value": "x"} for n in env]))
    assert not _created(plan).get("JobSet")
    [event] = plan.events
    assert event == Event(
        "Warning",
        "TrainJobResourcesCreationFailed",
        "TrainJob resources reconciliation failed: spec.trainer.env: Invalid value: must not "
        f"have reserved envs, invalid envs {want}",
    )


@pytest.mark.parametrize(("drop", "nodes", "refused"), [("launcher", 2, True), ("node", 1, False)])
def test_launcher_as_node_needs_both_replicated_jobs_for_more_than_one_node(
    drop: str, nodes: int, refused: bool
) -> None:
    runtime = copy.deepcopy(DEEPSPEED)
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    runtime["spec"]["template"]["spec"]["replicatedJobs"] = [j for j in jobs if j["name"] != drop]
    plan = _plan(_job(numNodes=nodes), runtime)
    messages = [e.message for e in plan.events]
    wanted = "spec.trainer.numNodes: Invalid value: must have 1 when MPI trainingRuntime"
    assert any(wanted in m for m in messages) is refused


def test_only_open_mpi_is_served() -> None:
    runtime = copy.deepcopy(DEEPSPEED)
    runtime["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = "MPICH"
    plan = _plan(_job(numNodes=2), runtime)
    assert not _created(plan).get("JobSet")
    assert "MPI implementation for MPICH doesn't supported" in plan.events[0].message


def test_the_controller_materializes_a_fresh_key_pair_into_the_secret_only() -> None:
    controller = TrainJobController()
    [secret] = _created(_plan(_job(numNodes=2)))["Secret"]
    first = controller.materialize(CreateObject(kind="Secret", body=secret)).body
    second = controller.materialize(CreateObject(kind="Secret", body=secret)).body
    private = base64.b64decode(first["data"]["ssh-privatekey"])
    public = base64.b64decode(first["data"]["ssh-publickey"])
    assert private.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    assert public.startswith(b"ecdsa-sha2-nistp521 ") and public.endswith(b"\n")
    assert first["data"] != second["data"]  # one pair per TrainJob, never shared
    config = CreateObject(kind="ConfigMap", body={"metadata": {"name": "x"}})
    assert controller.materialize(config) is config


def test_mlx_runtime_runs_on_the_same_policy() -> None:
    mlx = _shipped("mlx_distributed.yaml")
    raw = trainjob("mlx", runtime_kind="ClusterTrainingRuntime", runtime_name="mlx-distributed")
    raw["spec"]["trainer"] = {"numNodes": 2}
    plan = plan_trainjob(raw, observed(runtime=mlx), now=NOW)
    created = _created(plan)
    assert created.get("JobSet") and created.get("Secret")
    assert "mlx-launcher-0-0.mlx" in _hostfile(plan)
