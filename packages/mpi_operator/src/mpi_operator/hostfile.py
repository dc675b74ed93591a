"""How MPI finds its hosts: host names, the job-wide Service, the hostfile ConfigMap.

Every pod of an MPIJob (launcher and workers) sets ``hostname`` and ``subdomain=<job>``, and the
headless Service ``<job>`` selects them all, so each resolves as ``<pod>.<job>.<ns>.svc``. The
launcher reads the hosts from ``/etc/mpi/hostfile`` (every worker, whatever its state) and
Elastic Horovod runs ``/etc/mpi/discover_hosts.sh`` (the workers Running right now).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jobcontroller import JOB_NAME_LABEL, OPERATOR_NAME_LABEL, listed_names_bytes, openmpi_hostfile
from mpi_operator.api import MPIImplementation, MPIJob, MPIReplicaType

__all__ = [
    "APP_LABEL",
    "CONFIG_MOUNT_PATH",
    "CONFIG_SUFFIX",
    "DISCOVER_HOSTS_KEY",
    "HOSTFILE_KEY",
    "LAUNCHER_SUFFIX",
    "OPERATOR_NAME",
    "config_map",
    "config_map_bytes",
    "config_map_name",
    "discover_hosts",
    "dns_search_domain",
    "host_fqdn",
    "hostfile",
    "job_service",
    "launcher_name",
    "object_metadata",
    "worker_name",
]

#: The ``training.kubeflow.org/operator-name`` value on mpi-operator's pods.
OPERATOR_NAME = "mpi-operator"
APP_LABEL = "app"
LAUNCHER_SUFFIX = "-launcher"
CONFIG_SUFFIX = "-config"
CONFIG_MOUNT_PATH = "/etc/mpi"
HOSTFILE_KEY = "hostfile"
DISCOVER_HOSTS_KEY = "discover_hosts.sh"
_DEFAULT_CLUSTER_DOMAIN = "cluster.local"


def launcher_name(job: MPIJob) -> str:
    """The launcher Job's name, which is also its pod's host name."""
    return job.name + LAUNCHER_SUFFIX


def worker_name(job: MPIJob, index: int) -> str:
    return f"{job.name}-worker-{index}"


def config_map_name(job: MPIJob) -> str:
    return job.name + CONFIG_SUFFIX


def object_metadata(job: MPIJob) -> dict[str, Any]:
    """The metadata of its own that the Service, ConfigMap, Secret and launcher Job carry:
    mpi-operator's ``app`` label. The base adds name, namespace, the owner and the job-name
    label its informers select on (core/children.py)."""
    return {"labels": {APP_LABEL: job.name}}


def host_fqdn(*, host: str, job: MPIJob, cluster_domain: str) -> str:
    """``<host>.<job>.<ns>.svc``, plus ``.<cluster domain>`` when one is configured."""
    name = f"{host}.{job.name}.{job.namespace}.svc"
    return f"{name}.{cluster_domain}" if cluster_domain else name


def dns_search_domain(job: MPIJob, *, cluster_domain: str) -> str:
    """The search domain workers get so Intel MPI and MPICH can reach the launcher by its bare
    host name (the anchor hard-codes cluster.local; its PR #832 honours a custom domain)."""
    return f"{job.name}.{job.namespace}.svc.{cluster_domain or _DEFAULT_CLUSTER_DOMAIN}"


def _hosts(job: MPIJob) -> list[str]:
    """Host names in hostfile order: the launcher first when it also works, then workers."""
    hosts = [launcher_name(job)] if job.spec.run_launcher_as_worker else []
    worker = job.spec.mpi_replica_specs.get(MPIReplicaType.WORKER)
    replicas = (worker.replicas or 0) if worker is not None else 0
    return hosts + [worker_name(job, i) for i in range(replicas)]


def hostfile(job: MPIJob, *, cluster_domain: str) -> str:
    """One line per host: ``host slots=N`` (Open MPI) or ``host:N`` (Intel MPI, MPICH)."""
    slots = job.spec.slots_per_worker if job.spec.slots_per_worker is not None else 1
    open_mpi = job.spec.mpi_implementation in (None, MPIImplementation.OPEN_MPI)
    hosts = [host_fqdn(host=h, job=job, cluster_domain=cluster_domain) for h in _hosts(job)]
    if open_mpi:
        return openmpi_hostfile(hosts, slots=slots)
    return "".join(f"{fqdn}:{slots}\n" for fqdn in hosts)


def config_map_bytes(job: MPIJob, *, cluster_domain: str) -> int:
    """The most data the ``<job>-config`` ConfigMap can hold: the hostfile and a discovery
    script listing every worker (all Running), keys included. Arithmetic, O(1): it is checked
    against the ConfigMap limit before anything is built."""
    slots = job.spec.slots_per_worker if job.spec.slots_per_worker is not None else 1
    open_mpi = job.spec.mpi_implementation in (None, MPIImplementation.OPEN_MPI)
    tail = f" slots={slots}\n" if open_mpi else f":{slots}\n"
    domain = host_fqdn(host="", job=job, cluster_domain=cluster_domain)
    worker = job.spec.mpi_replica_specs.get(MPIReplicaType.WORKER)
    count = (worker.replicas or 0) if worker is not None else 0
    prefix = worker_name(job, 0).removesuffix("0")
    launcher = len(host_fqdn(host=launcher_name(job), job=job, cluster_domain=cluster_domain))
    hostfile_bytes = listed_names_bytes(
        prefix=prefix, suffix=domain + tail, count=count, quote=0, sep=0
    )
    script_bytes = len("#!/bin/sh\n") + listed_names_bytes(
        prefix="echo " + prefix, suffix=domain + "\n", count=count, quote=0, sep=0
    )
    if job.spec.run_launcher_as_worker:
        hostfile_bytes += launcher + len(tail)
        script_bytes += len("echo \n") + launcher
    return len(HOSTFILE_KEY) + hostfile_bytes + len(DISCOVER_HOSTS_KEY) + script_bytes


def discover_hosts(job: MPIJob, *, running_workers: Iterable[str], cluster_domain: str) -> str:
    """Elastic Horovod's host discovery script: the launcher (when it works) and the workers
    now Running, sorted by name so the script only changes when membership does."""
    lines = ["#!/bin/sh\n"]
    hosts = [launcher_name(job)] if job.spec.run_launcher_as_worker else []
    hosts += sorted(running_workers)
    for host in hosts:
        lines.append(f"echo {host_fqdn(host=host, job=job, cluster_domain=cluster_domain)}\n")
    return "".join(lines)


def config_map(
    job: MPIJob, *, running_workers: Iterable[str], cluster_domain: str
) -> dict[str, Any]:
    """The ``<job>-config`` ConfigMap mounted at ``/etc/mpi`` in the launcher (as declared: the
    base names it and adds the owner)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_metadata(job),
        "data": {
            HOSTFILE_KEY: hostfile(job, cluster_domain=cluster_domain),
            DISCOVER_HOSTS_KEY: discover_hosts(
                job, running_workers=running_workers, cluster_domain=cluster_domain
            ),
        },
    }


def job_service(job: MPIJob) -> dict[str, Any]:
    """The headless Service ``<job>`` over the launcher and every worker (as declared).

    It publishes not-ready addresses when the launcher is also a worker: the launcher must
    resolve its own name before it is Ready.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(job),
        "spec": {
            "clusterIP": "None",
            "selector": {OPERATOR_NAME_LABEL: OPERATOR_NAME, JOB_NAME_LABEL: job.name},
            "publishNotReadyAddresses": bool(job.spec.run_launcher_as_worker),
        },
    }
