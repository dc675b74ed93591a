"""The launcher Job, the worker wiring, the MPI environment and the launcher's verdict."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from jobcontroller import PlanConfig
from jobcontroller.api import JobStatus
from mpi_operator.api import MPIJob, default_mpijob
from mpi_operator.launcher import (
    apply_launcher_status,
    configure_worker,
    launcher_env,
    launcher_job,
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


def test_launcher_job_carries_the_run_policy() -> None:
    run_policy = {
        "backoffLimit": 2,
        "activeDeadlineSeconds": 30,
        "ttlSecondsAfterFinished": 60,
        "suspend": True,
    }
    body = launcher_job(job(runPolicy=run_policy), config=PlanConfig()).body
    assert body["metadata"]["name"] == "pi-launcher"
    spec = body["spec"]
    assert {k: v for k, v in spec.items() if k != "template"} == {
        "backoffLimit": 2,
        "activeDeadlineSeconds": 30,
        "ttlSecondsAfterFinished": 60,
        "suspend": True,
        "podReplacementPolicy": "Failed",
    }


def test_launcher_job_without_run_policy_leaves_kubernetes_defaults() -> None:
    spec = launcher_job(job(), config=PlanConfig()).body["spec"]
    assert set(spec) == {"podReplacementPolicy", "template"}


def test_launcher_template_wiring() -> None:
    built = launcher_job(
        job({"restartPolicy": "Never"}, runLauncherAsWorker=True), config=PlanConfig()
    )
    template = built.body["spec"]["template"]
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
    built = launcher_job(mpi, config=PlanConfig())
    assert built.template_restart_policy
    assert built.body["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_host_network_launcher_keeps_cluster_dns_and_joins_the_gang() -> None:
    mpi = job()
    mpi.spec.mpi_replica_specs["Launcher"].template["spec"]["hostNetwork"] = True
    config = PlanConfig(gang_scheduler_name="volcano", pod_group_available=True)
    template = launcher_job(mpi, config=config).body["spec"]["template"]
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


def launcher_obj(*conditions: dict[str, str], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "pi-launcher", "uid": "j"},
        "spec": {},
        "status": {"conditions": list(conditions), **status},
    }


def pod(phase: str, created: str, **status: str) -> dict[str, Any]:
    return {
        "metadata": {"creationTimestamp": created},
        "status": {"phase": phase, **status},
    }


def test_running_launcher_counts_running_pods_only() -> None:
    status = JobStatus()
    pods = [pod("Running", "t1"), pod("Pending", "t2")]
    assert (
        apply_launcher_status(job(), status, launcher_obj(active=2), pods, now=NOW, final=True)
        == []
    )
    assert status.replica_statuses["Launcher"].active == 1
    assert status.conditions == []


def test_complete_launcher_succeeds_the_job_at_its_completion_time() -> None:
    status = JobStatus()
    launcher = launcher_obj(
        {"type": "Complete", "status": "True"}, completionTime="2024-01-01T11:59:00Z", succeeded=1
    )
    events = apply_launcher_status(job(), status, launcher, [], now=NOW, final=True)
    assert [e.reason for e in events] == ["MPIJobSucceeded"]
    assert status.is_condition_true("Succeeded")
    assert status.completion_time == dt.datetime(2024, 1, 1, 11, 59, tzinfo=dt.UTC)
    counts = status.replica_statuses["Launcher"]
    assert (counts.active, counts.succeeded) == (0, 1)


def test_backoff_limit_failure_names_the_last_failed_pod() -> None:
    status = JobStatus()
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit",
    }
    pods = [
        pod("Failed", "2024-01-01T11:00:00Z", reason="OOMKilled", message="first"),
        pod("Failed", "2024-01-01T11:30:00Z", reason="Evicted", message="node pressure"),
    ]
    events = apply_launcher_status(
        job(), status, launcher_obj(failed, failed=2), pods, now=NOW, final=True
    )
    cond = status.condition("Failed")
    assert cond is not None and cond.reason == "BackoffLimitExceeded/Evicted"
    assert cond.message == "Job has reached the specified backoff limit: node pressure"
    assert [(e.type, e.reason) for e in events] == [("Warning", "BackoffLimitExceeded/Evicted")]
    assert status.replica_statuses["Launcher"].failed == 2 and status.completion_time == NOW


def test_failure_without_pod_details_keeps_the_jobs_reason() -> None:
    status = JobStatus()
    failed = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "x"}
    apply_launcher_status(job(), status, launcher_obj(failed), [], now=NOW, final=True)
    cond = status.condition("Failed")
    assert cond is not None and (cond.reason, cond.message) == ("DeadlineExceeded", "x")


def test_long_failure_messages_are_truncated() -> None:
    status = JobStatus()
    failed = {"type": "Failed", "status": "True", "reason": "R", "message": "m" * 2000}
    apply_launcher_status(job(), status, launcher_obj(failed), [], now=NOW, final=True)
    cond = status.condition("Failed")
    assert cond is not None and cond.message is not None
    assert len(cond.message) == 1024 and cond.message.endswith("...")


def test_suspended_job_only_counts() -> None:
    status = JobStatus()
    done = launcher_obj({"type": "Complete", "status": "True"})
    assert apply_launcher_status(job(), status, done, [], now=NOW, final=False) == []
    assert status.conditions == [] and status.replica_statuses["Launcher"].succeeded == 1
