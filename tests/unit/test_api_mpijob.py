"""MPIJob v2beta1: defaulting and validation as in mpi-operator's default.go and validation.go."""

from __future__ import annotations

from typing import Any

import pytest

from jobcontroller.api import CleanPodPolicy, RestartPolicy
from mpi_operator.api import (
    LauncherCreationPolicy,
    MPIImplementation,
    MPIJob,
    default_mpijob,
    mpijob_crd,
    validate_mpijob,
)


def _replica(replicas: int | None = 1, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": "mpi", "image": "mpi-pi:openmpi"}]}},
        **extra,
    }
    if replicas is not None:
        out["replicas"] = replicas
    return out


def _job(specs: dict[str, Any], *, name: str = "pi", **spec: Any) -> MPIJob:
    return MPIJob.parse({"metadata": {"name": name}, "spec": {"mpiReplicaSpecs": specs, **spec}})


# mpi-operator's examples/v2beta1/pi/pi.yaml, in the shape its docs show.
PI: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "pi"},
    "spec": {
        "slotsPerWorker": 1,
        "runPolicy": {"cleanPodPolicy": "Running", "ttlSecondsAfterFinished": 60},
        "sshAuthMountPath": "/home/mpiuser/.ssh",
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "image": "mpioperator/mpi-pi:openmpi",
                                "name": "mpi-launcher",
                                "command": ["mpirun"],
                                "args": ["-n", "2", "/home/mpiuser/pi"],
                                "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
                            }
                        ]
                    }
                },
            },
            "Worker": {
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "image": "mpioperator/mpi-pi:openmpi",
                                "name": "mpi-worker",
                                "command": ["/usr/sbin/sshd"],
                                "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
                            }
                        ]
                    }
                },
            },
        },
    },
}


def test_docs_example_parses_defaults_and_validates() -> None:
    job = MPIJob.parse(PI)
    assert job.api_version == "kubeflow.org/v2beta1"
    defaulted = default_mpijob(job)
    assert validate_mpijob(defaulted) == []
    spec = defaulted.spec
    assert spec.ssh_auth_mount_path == "/home/mpiuser/.ssh"
    assert spec.run_policy.clean_pod_policy is CleanPodPolicy.RUNNING
    assert spec.mpi_replica_specs["Launcher"].restart_policy is RestartPolicy.ON_FAILURE
    assert spec.mpi_replica_specs["Worker"].restart_policy is RestartPolicy.NEVER
    # No port or container renaming for MPI: templates are left as written.
    assert defaulted.to_dict()["spec"]["mpiReplicaSpecs"] == PI["spec"]["mpiReplicaSpecs"] | {
        "Launcher": {**PI["spec"]["mpiReplicaSpecs"]["Launcher"], "restartPolicy": "OnFailure"},
        "Worker": {**PI["spec"]["mpiReplicaSpecs"]["Worker"], "restartPolicy": "Never"},
    }


def test_defaults_match_mpi_operator() -> None:
    job = default_mpijob(_job({"Launcher": _replica(None), "Worker": _replica(None)}))
    spec = job.spec
    assert spec.slots_per_worker == 1
    assert spec.run_launcher_as_worker is False
    assert spec.ssh_auth_mount_path == "/root/.ssh"
    assert spec.launcher_creation_policy is LauncherCreationPolicy.AT_STARTUP
    assert spec.mpi_implementation is MPIImplementation.OPEN_MPI
    # The field comment says Running; mpi-operator's code defaults to None.
    assert spec.run_policy.clean_pod_policy is CleanPodPolicy.NONE
    assert spec.mpi_replica_specs["Launcher"].replicas == 1
    # An omitted Worker.replicas defaults to 0, which validation then rejects (as upstream).
    assert spec.mpi_replica_specs["Worker"].replicas == 0
    assert any("Worker replicas" in e for e in validate_mpijob(job))


@pytest.mark.parametrize(
    ("specs", "extra", "expected"),
    [
        pytest.param({"Launcher": _replica(1), "Worker": _replica(4)}, {}, None, id="valid"),
        pytest.param({"Launcher": _replica(1)}, {}, None, id="launcher-only"),
        pytest.param({"Worker": _replica(2)}, {}, "Launcher replica spec", id="no-launcher"),
        pytest.param({"Launcher": _replica(2)}, {}, "Launcher replicas", id="two-launchers"),
        pytest.param(
            {"Launcher": _replica(1), "Worker": _replica(0)}, {}, "Worker", id="zero-workers"
        ),
        pytest.param(
            {"Launcher": _replica(1, restartPolicy="ExitCode")},
            {},
            "Never or OnFailure",
            id="exit-code",
        ),
        pytest.param(
            {"Launcher": _replica(1, restartPolicy="Always")},
            {},
            "Never or OnFailure",
            id="always",
        ),
        pytest.param(
            {"Launcher": _replica(1), "PS": _replica(1)}, {}, "Launcher or Worker", id="ps"
        ),
        pytest.param(
            {"Launcher": {"template": {"spec": {"containers": []}}}},
            {},
            "at least one container",
            id="no-containers",
        ),
        pytest.param(
            {"Launcher": _replica(1)},
            {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}},
            "managedBy",
            id="training-operator-managed-by",
        ),
        pytest.param(
            {"Launcher": _replica(1)},
            {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}},
            None,
            id="multikueue",
        ),
    ],
)
def test_validation(specs: dict[str, Any], extra: dict[str, Any], expected: str | None) -> None:
    errors = validate_mpijob(_job(specs, **extra))
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


def test_worker_host_names_must_fit_a_dns_label() -> None:
    specs = {"Launcher": _replica(1), "Worker": _replica(10)}
    # "<54 chars>-worker-9" is 63 characters.
    assert validate_mpijob(_job(specs, name="w" * 54)) == []
    errors = validate_mpijob(_job({**specs, "Worker": _replica(11)}, name="w" * 54))
    assert len(errors) == 1 and "worker-10" in errors[0]


def test_launcher_host_name_must_fit_a_dns_label() -> None:
    assert validate_mpijob(_job({"Launcher": _replica(1)}, name="l" * 54)) == []
    errors = validate_mpijob(_job({"Launcher": _replica(1)}, name="l" * 55))
    assert errors == [
        "metadata.name: too long: the launcher's host name <name>-launcher must be at most "
        "63 characters"
    ]


def test_crd_is_v2beta1_with_the_mpij_short_name() -> None:
    crd = mpijob_crd()
    assert crd["metadata"]["name"] == "mpijobs.kubeflow.org"
    assert crd["spec"]["names"]["shortNames"] == ["mpij"]
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v2beta1"]
    assert "scale" not in crd["spec"]["versions"][0]["subresources"]
