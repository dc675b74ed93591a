"""The launcher Job, the worker wiring and the MPI environment (the launcher's verdict is the
base's: test_followjob.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from test_mpi_plan import Cluster, mpijob

from jobcontroller import PlanConfig
from mpi_operator.api import MPIJob, default_mpijob
from mpi_operator.launcher import (
    configure_worker,
    launcher_env,
    launcher_template,
)

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def job(launcher: dict[str, Any] | None = None, **spec: Any) -> MPIJob:
    template = {"spec": {"containers": [{"name": "l", "image": "i", "env": [{"name": "A"}]}]}}
    raw = {
        "metadata": {"name": "pi", "namespace": "ns", "uid": "u"},
        "spec": {
            **spec,
            "mpiReplicaSpecs": {
                "Launcher": {"template": template, **(launcher or {})},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [{}]}}},
            },
        },
    }
    return default_mpijob(MPIJob.parse(raw))


def names(env: list[dict[str, str]]) -> list[str]:
    return [e["name"] for e in env]


@pytest.mark.parametrize(
    ("implementation", "expected"),
    [
        (
            "OpenMPI",
            [
                ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
                ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
                ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
                ("OMPI_MCA_orte_set_default_slots", "3"),
            ],
        ),
        (
            "Intel",
            [
                ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "-o ConnectionAttempts=10"),
                ("I_MPI_PERHOST", "3"),
            ],
        ),
        (
            "MPICH",
            [
                ("HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                ("HYDRA_LAUNCH_EXTRA_ARGS", "-o ConnectionAttempts=10"),
            ],
        ),
    ],
)
def test_launcher_env_per_implementation(
    implementation: str, expected: list[tuple[str, str]]
) -> None:
    env = launcher_env(job(mpiImplementation=implementation, slotsPerWorker=3))
    assert [(e["name"], e["value"]) for e in env] == [
        ("K_MPI_JOB_ROLE", "launcher"),
        *expected,
        ("NVIDIA_VISIBLE_DEVICES", ""),
        ("NVIDIA_DRIVER_CAPABILITIES", ""),
    ]


def test_a_working_launcher_keeps_its_gpus() -> None:
    assert "NVIDIA_VISIBLE_DEVICES" not in names(launcher_env(job(runLauncherAsWorker=True)))


def launcher_job(**spec: Any) -> dict[str, Any]:
    """The launcher Job as the operator creates it."""
    cluster = Cluster(mpijob(**spec))
    cluster.settle()
    return cluster.get("Job", "pi-launcher")


def test_launcher_job_carries_the_run_policy() -> None:
    run_policy = {
        "backoffLimit": 2,
        "activeDeadlineSeconds": 30,
        "ttlSecondsAfterFinished": 60,
        "suspend": True,
    }
    body = launcher_job(runPolicy=run_policy)
    assert body["metadata"]["labels"] == {"app": "pi", "training.kubeflow.org/job-name": "pi"}
    assert "annotations" not in body["metadata"]
    spec = body["spec"]
    assert {k: v for k, v in spec.items() if k != "template"} == {
        "backoffLimit": 2,
        "activeDeadlineSeconds": 30,
        "ttlSecondsAfterFinished": 60,
        "suspend": True,
        "podReplacementPolicy": "Failed",
    }


def test_launcher_job_without_run_policy_leaves_kubernetes_defaults() -> None:
    spec = launcher_job()["spec"]
    assert set(spec) == {"podReplacementPolicy", "suspend", "template"}
    assert spec["suspend"] is False


def test_launcher_template_wiring() -> None:
    built = launcher_template(
        job({"restartPolicy": "Never"}, runLauncherAsWorker=True), config=PlanConfig()
    )
    template = built.body
    assert not built.template_restart_policy
    assert template["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": "pi",
        "training.kubeflow.org/job-role": "launcher",
        "training.kubeflow.org/replica-index": "0",
    }
    spec = template["spec"]
    assert (spec["hostname"], spec["subdomain"], spec["restartPolicy"]) == (
        "pi-launcher",
        "pi",
        "Never",
    )
    container = spec["containers"][0]
    assert names(container["env"])[:2] == ["A", "K_MPI_JOB_ROLE"]  # user env first
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/root/.ssh", "/etc/mpi"]


def test_template_restart_policy_is_overridden_and_reported() -> None:
    mpi = job()
    mpi.spec.mpi_replica_specs["Launcher"].template["spec"]["restartPolicy"] = "Always"
    built = launcher_template(mpi, config=PlanConfig())
    assert built.template_restart_policy
    assert built.body["spec"]["restartPolicy"] == "OnFailure"


def test_host_network_launcher_keeps_cluster_dns_and_joins_the_gang() -> None:
    mpi = job()
    mpi.spec.mpi_replica_specs["Launcher"].template["spec"]["hostNetwork"] = True
    config = PlanConfig(gang_scheduler_name="volcano", pod_group_available=True)
    template = launcher_template(mpi, config=config).body
    assert template["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert template["spec"]["schedulerName"] == "volcano"
    assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pi"


def test_worker_gets_sshd_host_name_dns_search_and_keys() -> None:
    template: dict[str, Any] = {
        "spec": {"containers": [{"name": "w"}], "dnsConfig": {"searches": ["corp"]}}
    }
    configure_worker(template, job=job(), index=1, config=PlanConfig(cluster_domain="c.local"))
    spec = template["spec"]
    assert template["metadata"]["labels"] == {"training.kubeflow.org/job-role": "worker"}
    assert (spec["hostname"], spec["subdomain"]) == ("pi-worker-1", "pi")
    assert spec["dnsConfig"]["searches"] == ["corp", "pi.ns.svc.c.local"]
    container = spec["containers"][0]
    assert container["command"] == ["/usr/sbin/sshd", "-De"]
    assert container["env"] == [{"name": "K_MPI_JOB_ROLE", "value": "worker"}]
    assert spec["volumes"][0]["name"] == "ssh-auth"


def test_worker_with_its_own_args_keeps_them() -> None:
    template: dict[str, Any] = {"spec": {"containers": [{"name": "w", "args": ["serve"]}]}}
    configure_worker(template, job=job(), index=0, config=PlanConfig())
    assert "command" not in template["spec"]["containers"][0]
