"""Host names, the hostfile, discover_hosts.sh and the job-wide Service of an MPIJob."""

from __future__ import annotations

from typing import Any

import pytest
from test_mpi_plan import Cluster, mpijob

from mpi_operator.api import MPIJob, default_mpijob
from mpi_operator.hostfile import (
    config_map,
    discover_hosts,
    dns_search_domain,
    hostfile,
    job_service,
)


def job(name: str = "pi", namespace: str = "ns", workers: int = 2, **spec: Any) -> MPIJob:
    raw = {
        "metadata": {"name": name, "namespace": namespace, "uid": "u"},
        "spec": {
            **spec,
            "mpiReplicaSpecs": {
                "Launcher": {"template": {"spec": {"containers": [{"name": "l"}]}}},
                "Worker": {"replicas": workers, "template": {"spec": {"containers": [{}]}}},
            },
        },
    }
    return default_mpijob(MPIJob.parse(raw))


def test_open_mpi_hostfile_lists_every_worker_with_slots() -> None:
    assert hostfile(job(slotsPerWorker=4), cluster_domain="") == (
        "pi-worker-0.pi.ns.svc slots=4\npi-worker-1.pi.ns.svc slots=4\n"
    )


@pytest.mark.parametrize("implementation", ["Intel", "MPICH"])
def test_intel_and_mpich_hostfiles_use_host_colon_slots(implementation: str) -> None:
    mpi = job(
        "intelmpi-with-slots",
        "project-x",
        workers=1,
        slotsPerWorker=10,
        mpiImplementation=implementation,
    )
    # The anchor's own unit-test example.
    assert hostfile(mpi, cluster_domain="") == (
        "intelmpi-with-slots-worker-0.intelmpi-with-slots.project-x.svc:10\n"
    )


def test_launcher_as_worker_comes_first_and_cluster_domain_is_appended() -> None:
    mpi = job(workers=1, runLauncherAsWorker=True)
    assert hostfile(mpi, cluster_domain="corp.local") == (
        "pi-launcher.pi.ns.svc.corp.local slots=1\npi-worker-0.pi.ns.svc.corp.local slots=1\n"
    )


def test_discover_hosts_lists_running_workers_sorted_without_slots() -> None:
    mpi = job(workers=12, slotsPerWorker=3)
    script = discover_hosts(mpi, running_workers=["pi-worker-2", "pi-worker-10"], cluster_domain="")
    assert script == "#!/bin/sh\necho pi-worker-10.pi.ns.svc\necho pi-worker-2.pi.ns.svc\n"
    assert discover_hosts(mpi, running_workers=[], cluster_domain="") == "#!/bin/sh\n"


def test_discover_hosts_always_names_a_working_launcher() -> None:
    mpi = job(runLauncherAsWorker=True)
    assert discover_hosts(mpi, running_workers=[], cluster_domain="") == (
        "#!/bin/sh\necho pi-launcher.pi.ns.svc\n"
    )


def test_config_map_holds_both_files_and_is_owned() -> None:
    body = config_map(job(), running_workers=["pi-worker-0"], cluster_domain="")
    assert set(body["data"]) == {"hostfile", "discover_hosts.sh"}
    # As created (the base adds the name, the job-name label and the owner).
    cluster = Cluster(mpijob())
    cluster.step()
    for kind, name in (("ConfigMap", "pi-config"), ("Secret", "pi-ssh"), ("Service", "pi")):
        meta = cluster.get(kind, name)["metadata"]
        assert meta["labels"] == {"app": "pi", "training.kubeflow.org/job-name": "pi"}
        [owner] = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("MPIJob", "pi", True)


def test_dns_search_domain_honours_a_custom_cluster_domain() -> None:
    assert dns_search_domain(job(), cluster_domain="") == "pi.ns.svc.cluster.local"
    assert dns_search_domain(job(), cluster_domain="corp.local") == "pi.ns.svc.corp.local"


@pytest.mark.parametrize("as_worker", [False, True])
def test_service_selects_launcher_and_workers(as_worker: bool) -> None:
    spec = job(runLauncherAsWorker=as_worker)
    service = job_service(spec)
    assert service["spec"] == {
        "clusterIP": "None",
        "selector": {
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/job-name": "pi",
        },
        "publishNotReadyAddresses": as_worker,
    }
