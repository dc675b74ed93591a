"""What an MPIJob owns, exactly: Service, hostfile ConfigMap, SSH Secret, workers, launcher Job."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mpijob_fixtures import (
    MPIJOBS,
    launcher_job,
    mpijob,
    wait_condition,
    worker_pods,
)

from jobcontroller.runtime.kube import CONFIGMAPS, PODS, SECRETS, SERVICES, KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for, wait_for_list
from mpi_operator.controller import MPIJobController

OWNER_KEYS = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
SSH_VOLUME = {
    "name": "ssh-auth",
    "secret": {
        "secretName": "pi-ssh",
        "defaultMode": 0o600,
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa"},
            {"key": "ssh-publickey", "path": "id_rsa.pub"},
            {"key": "ssh-publickey", "path": "authorized_keys"},
        ],
    },
}
CONFIG_VOLUME = {
    "name": "mpi-job-config",
    "configMap": {
        "name": "pi-config",
        "defaultMode": 0o644,
        "items": [
            {"key": "hostfile", "path": "hostfile", "mode": 0o444},
            {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
        ],
    },
}
IMPLEMENTATION_ENV = {
    "OpenMPI": [
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
        ("OMPI_MCA_orte_set_default_slots", "2"),
    ],
    "Intel": [
        ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "-o ConnectionAttempts=10"),
        ("I_MPI_PERHOST", "2"),
    ],
    "MPICH": [
        ("HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
        ("HYDRA_LAUNCH_EXTRA_ARGS", "-o ConnectionAttempts=10"),
    ],
}


def owner(obj: dict[str, Any]) -> tuple[Any, ...]:
    ref = obj["metadata"]["ownerReferences"][0]
    return tuple(ref[k] for k in OWNER_KEYS)


def env_of(container: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["name"], e.get("value", "")) for e in container.get("env", [])]


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
async def test_owned_objects_per_implementation(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, implementation: str
) -> None:
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        body = mpijob(
            "pi",
            launcher_exit=None,
            slotsPerWorker=2,
            mpiImplementation=implementation,
            runPolicy={"backoffLimit": 3, "ttlSecondsAfterFinished": 60},
        )
        job = await kube.create(MPIJOBS, body, namespace=ns)
        mine = ("kubeflow.org/v2beta1", "MPIJob", "pi", job["metadata"]["uid"], True, True)
        labels = {"app": "pi", "training.kubeflow.org/job-name": "pi"}

        service = await wait_for(kube, SERVICES, "pi", namespace=ns, until=bool)
        assert service is not None and owner(service) == mine
        assert service["metadata"]["labels"] == labels
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == {
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/job-name": "pi",
        }
        assert service["spec"].get("publishNotReadyAddresses", False) is False

        hosts = [f"pi-worker-{i}.pi.{ns}.svc" for i in range(2)]
        line = "{} slots=2\n" if implementation == "OpenMPI" else "{}:2\n"
        script = "#!/bin/sh\n" + "".join(f"echo {h}\n" for h in hosts)
        config = await wait_for(
            kube,
            CONFIGMAPS,
            "pi-config",
            namespace=ns,
            until=lambda c: c is not None and c["data"]["discover_hosts.sh"] == script,
        )
        assert config is not None and owner(config) == mine
        assert config["metadata"]["labels"] == labels
        assert config["data"]["hostfile"] == "".join(line.format(h) for h in hosts)

        secret = await kube.get(SECRETS, "pi-ssh", namespace=ns)
        assert owner(secret) == mine and secret["metadata"]["labels"] == labels
        assert secret["type"] == "kubernetes.io/ssh-auth"
        assert set(secret["data"]) == {"ssh-privatekey", "ssh-publickey"}
        private_pem = base64.b64decode(secret["data"]["ssh-privatekey"])
        assert private_pem.startswith(b"-----BEGIN EC PRIVATE KEY-----\n")
        key = serialization.load_pem_private_key(private_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp521r1"
        public = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        assert base64.b64decode(secret["data"]["ssh-publickey"]) == public + b"\n"

        workers = await worker_pods(kube, ns, count=2, phase="Running")
        w1 = workers["pi-worker-1"]
        assert owner(w1) == mine
        assert w1["metadata"]["labels"] == {
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/job-name": "pi",
            "training.kubeflow.org/job-role": "worker",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "1",
        }
        spec = w1["spec"]
        assert (spec["hostname"], spec["subdomain"]) == ("pi-worker-1", "pi")
        assert spec["dnsConfig"]["searches"] == [f"pi.{ns}.svc.cluster.local"]
        assert spec["restartPolicy"] == "Never"
        assert [v for v in spec["volumes"] if v["name"] == "ssh-auth"] == [SSH_VOLUME]
        container = spec["containers"][0]
        assert container["command"] == ["/usr/sbin/sshd", "-De"]
        assert env_of(container) == [("K_MPI_JOB_ROLE", "worker")]
        assert {"name": "ssh-auth", "mountPath": "/root/.ssh"} in [
            {k: m[k] for k in ("name", "mountPath")} for m in container["volumeMounts"]
        ]

        launcher = await launcher_job(kube, "pi", namespace=ns)
        assert owner(launcher) == mine and launcher["metadata"]["labels"] == labels
        jspec = launcher["spec"]
        assert (jspec["backoffLimit"], jspec["ttlSecondsAfterFinished"]) == (3, 60)
        assert jspec["podReplacementPolicy"] == "Failed"
        assert "activeDeadlineSeconds" not in jspec and not jspec.get("suspend")
        template = jspec["template"]
        assert {
            k: v
            for k, v in template["metadata"]["labels"].items()
            if k.startswith("training.kubeflow.org/")
        } == {
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/job-name": "pi",
            "training.kubeflow.org/job-role": "launcher",
        }
        pod_spec = template["spec"]
        assert (pod_spec["hostname"], pod_spec["subdomain"]) == ("pi-launcher", "pi")
        assert pod_spec["restartPolicy"] == "OnFailure"
        volumes = {v["name"]: v for v in pod_spec["volumes"]}
        assert volumes == {"ssh-auth": SSH_VOLUME, "mpi-job-config": CONFIG_VOLUME}
        lc = pod_spec["containers"][0]
        assert env_of(lc) == [
            ("K_MPI_JOB_ROLE", "launcher"),
            *IMPLEMENTATION_ENV[implementation],
            ("NVIDIA_VISIBLE_DEVICES", ""),
            ("NVIDIA_DRIVER_CAPABILITIES", ""),
        ]
        assert sorted((m["name"], m["mountPath"]) for m in lc["volumeMounts"]) == [
            ("mpi-job-config", "/etc/mpi"),
            ("ssh-auth", "/root/.ssh"),
        ]

        # The Job controller really runs the launcher; with it and every worker Running the
        # MPIJob is Running.
        pods = await wait_for_list(
            kube,
            PODS,
            namespace=ns,
            label_selector="training.kubeflow.org/job-role=launcher",
            until=lambda items: len(items) == 1,
        )
        assert pods[0]["spec"]["hostname"] == "pi-launcher"
        done = await wait_condition(kube, "pi", "Running", namespace=ns)
        assert done["status"]["replicaStatuses"] == {
            "Launcher": {"active": 1, "succeeded": 0, "failed": 0},
            "Worker": {"active": 2, "succeeded": 0, "failed": 0},
        }


async def test_launcher_as_worker_is_host_zero(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        body = mpijob("pi", launcher_exit=None, runLauncherAsWorker=True)
        await kube.create(MPIJOBS, body, namespace=ns)
        hosts = [f"pi-launcher.pi.{ns}.svc"] + [f"pi-worker-{i}.pi.{ns}.svc" for i in range(2)]
        script = "#!/bin/sh\n" + "".join(f"echo {h}\n" for h in hosts)
        config = await wait_for(
            kube,
            CONFIGMAPS,
            "pi-config",
            namespace=ns,
            until=lambda c: c is not None and c["data"]["discover_hosts.sh"] == script,
        )
        assert config is not None
        assert config["data"]["hostfile"] == "".join(f"{h} slots=1\n" for h in hosts)
        service = await kube.get(SERVICES, "pi", namespace=ns)
        assert service["spec"]["publishNotReadyAddresses"] is True
        workers = await worker_pods(kube, ns, count=2)
        assert {
            name: p["metadata"]["labels"]["training.kubeflow.org/replica-index"]
            for name, p in workers.items()
        } == {"pi-worker-0": "1", "pi-worker-1": "2"}
        launcher = await launcher_job(kube, "pi", namespace=ns)
        template = launcher["spec"]["template"]
        assert template["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "0"
        names = [e["name"] for e in template["spec"]["containers"][0]["env"]]
        assert "NVIDIA_VISIBLE_DEVICES" not in names
        # The offset index is stable: the workers are neither deleted nor duplicated.
        await wait_condition(kube, "pi", "Running", namespace=ns)
        assert set(await worker_pods(kube, ns, count=2, phase="Running")) == set(workers)
