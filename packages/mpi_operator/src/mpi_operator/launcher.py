"""The pods of an MPIJob: the launcher's pod template and the wiring of each worker pod.

The launcher runs ``mpirun``, which reaches the workers over SSH using the hostfile mounted at
``/etc/mpi``; the implementation-specific environment tells each MPI where that file is and
how many slots a host has. The launcher is a batch/v1 Job, the base's child Job (see the
controller): it carries runPolicy (retries, the deadline, the TTL), the Kubernetes Job
controller enforces it, and the MPIJob succeeds or fails when the launcher Job does.
"""

from __future__ import annotations

from msgspec import Struct

from jobcontroller import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    GangFlavor,
    Obj,
    PlanConfig,
    build_template,
)
from jobcontroller.api import RestartPolicy
from mpi_operator.api import MPIImplementation, MPIJob, MPIReplicaType
from mpi_operator.hostfile import (
    CONFIG_MOUNT_PATH,
    DISCOVER_HOSTS_KEY,
    HOSTFILE_KEY,
    OPERATOR_NAME,
    config_map_name,
    dns_search_domain,
    launcher_name,
    worker_name,
)
from mpi_operator.ssh import mount_ssh_auth

__all__ = [
    "CONFIG_VOLUME",
    "JOB_ROLE_ENV",
    "LAUNCHER_ROLE",
    "SSHD_COMMAND",
    "WORKER_ROLE",
    "BuiltLauncher",
    "configure_worker",
    "launcher_env",
    "launcher_template",
]

LAUNCHER_ROLE = "launcher"
WORKER_ROLE = "worker"
JOB_ROLE_ENV = "K_MPI_JOB_ROLE"
CONFIG_VOLUME = "mpi-job-config"
#: A worker only has to accept the launcher's SSH connections unless told otherwise.
SSHD_COMMAND = ("/usr/sbin/sshd", "-De")
_HOSTFILE_PATH = f"{CONFIG_MOUNT_PATH}/{HOSTFILE_KEY}"
_SSH_RETRIES = "-o ConnectionAttempts=10"  # workers' sshd may start after the launcher
_READ_ONLY, _EXECUTABLE = 0o444, 0o555
_SLOTS = "{slots}"  # slotsPerWorker, filled in by launcher_env
#: Where each MPI finds the hostfile, how it retries ssh, and its slots per host.
_IMPLEMENTATION_ENV: dict[str, tuple[tuple[str, str], ...]] = {
    MPIImplementation.OPEN_MPI: (
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        ("OMPI_MCA_orte_default_hostfile", _HOSTFILE_PATH),
        ("OMPI_MCA_plm_rsh_args", _SSH_RETRIES),
        ("OMPI_MCA_orte_set_default_slots", _SLOTS),
    ),
    MPIImplementation.INTEL: (
        ("I_MPI_HYDRA_HOST_FILE", _HOSTFILE_PATH),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", _SSH_RETRIES),
        ("I_MPI_PERHOST", _SLOTS),
    ),
    MPIImplementation.MPICH: (
        ("HYDRA_HOST_FILE", _HOSTFILE_PATH),
        ("HYDRA_LAUNCH_EXTRA_ARGS", _SSH_RETRIES),
    ),
}


def _env(name: str, value: str) -> dict[str, str]:
    return {"name": name, "value": value}


def launcher_env(job: MPIJob) -> list[dict[str, str]]:
    """The launcher's environment, appended to its first container's (in this order)."""
    slots = str(job.spec.slots_per_worker if job.spec.slots_per_worker is not None else 1)
    implementation = job.spec.mpi_implementation or MPIImplementation.OPEN_MPI
    env = [(JOB_ROLE_ENV, LAUNCHER_ROLE), *_IMPLEMENTATION_ENV[implementation]]
    if not job.spec.run_launcher_as_worker:
        # A launcher that does no work must not grab GPUs a container runtime exposes anyway.
        env += [("NVIDIA_VISIBLE_DEVICES", ""), ("NVIDIA_DRIVER_CAPABILITIES", "")]
    return [_env(name, value.format(slots=slots)) for name, value in env]


def _pod_restart_policy(policy: RestartPolicy | None) -> str:
    return "Never" if policy in (RestartPolicy.EXIT_CODE, RestartPolicy.NEVER) else "OnFailure"


def _host_wiring(spec: Obj, *, job: MPIJob, hostname: str) -> None:
    spec["hostname"] = hostname
    spec["subdomain"] = job.name  # the job-wide headless Service
    if spec.get("hostNetwork"):
        # Keeps cluster DNS (and so the other hosts' names) on the host network.
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"


class BuiltLauncher(Struct, frozen=True):
    body: Obj
    template_restart_policy: bool
    """The template set its own restartPolicy, which the replica's overrides."""


def launcher_template(job: MPIJob, *, config: PlanConfig) -> BuiltLauncher:
    """The launcher pod template: labels, host name, MPI env, hostfile and SSH mounts."""
    replica = job.spec.mpi_replica_specs[MPIReplicaType.LAUNCHER]
    labels = {
        OPERATOR_NAME_LABEL: OPERATOR_NAME,
        JOB_NAME_LABEL: job.name,
        JOB_ROLE_LABEL: "launcher",
    }
    if job.spec.run_launcher_as_worker:
        labels[REPLICA_INDEX_LABEL] = "0"  # workers start at 1 (Kueue's TAS needs an index)

    def configure(template: Obj) -> None:
        spec = template["spec"]
        _host_wiring(spec, job=job, hostname=launcher_name(job))
        container = spec["containers"][0]
        container["env"] = [*(container.get("env") or []), *launcher_env(job)]
        mount_ssh_auth(spec, job=job)
        spec.setdefault("volumes", []).append(
            {
                "name": CONFIG_VOLUME,
                "configMap": {
                    "name": config_map_name(job),
                    "items": [
                        {"key": HOSTFILE_KEY, "path": HOSTFILE_KEY, "mode": _READ_ONLY},
                        {
                            "key": DISCOVER_HOSTS_KEY,
                            "path": DISCOVER_HOSTS_KEY,
                            "mode": _EXECUTABLE,
                        },
                    ],
                },
            }
        )
        container.setdefault("volumeMounts", []).append(
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH}
        )

    built = build_template(
        job,
        rtype=MPIReplicaType.LAUNCHER,
        spec=replica,
        config=config,
        labels=labels,
        restart_policy=_pod_restart_policy(replica.restart_policy),
        configure=configure,
        flavor=GangFlavor.mpi_operator(),
    )
    return BuiltLauncher(body=built.template, template_restart_policy=built.template_restart_policy)


def configure_worker(template: Obj, *, job: MPIJob, index: int, config: PlanConfig) -> None:
    """Wire one worker pod template (in place): role label, host name, DNS search path, sshd
    as the default command, role env and the SSH keys. The base already set the replica
    labels, restart policy and gang scheduling."""
    metadata = template.setdefault("metadata", {})
    metadata.setdefault("labels", {})[JOB_ROLE_LABEL] = WORKER_ROLE
    spec = template.setdefault("spec", {})
    _host_wiring(spec, job=job, hostname=worker_name(job, index))
    dns = spec.setdefault("dnsConfig", {})
    search = dns_search_domain(job, cluster_domain=config.cluster_domain)
    dns["searches"] = [*(dns.get("searches") or []), search]
    container = spec["containers"][0]
    if not container.get("command") and not container.get("args"):
        container["command"] = list(SSHD_COMMAND)
    container["env"] = [*(container.get("env") or []), _env(JOB_ROLE_ENV, WORKER_ROLE)]
    mount_ssh_auth(spec, job=job)
