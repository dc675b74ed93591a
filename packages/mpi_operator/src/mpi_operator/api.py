"""MPIJob, `kubeflow.org/v2beta1` (the mpi-operator API): model, defaulting, validation and CRD.

Only v2beta1 is served; training-operator's `kubeflow.org/v1` MPIJob is deliberately absent,
since one cluster cannot serve both CRDs under one name (kubeflow/trainer #1930). The replica
rules are declared once, in `MPIJob.REPLICA_RULES`: the CRD's CEL and `validate_mpijob`'s
checks are both made from them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from jobcontroller import override
from jobcontroller.api import (
    INT32_MAX,
    MAX_PROCESSES_PER_POD,
    CleanPodPolicy,
    JobModel,
    JobSpec,
    KnownTypes,
    ReplicaRules,
    Replicas,
    ReplicaSpec,
    Required,
    RestartPolicies,
    RestartPolicy,
    deep_copy,
    replica_rule_errors,
    replica_specs_path,
)
from jobcontroller.api.crd import CRD_DEFAULT_KEY, build_crd, cel_ratcheted, cel_root_rules
from jobcontroller.api.validation import (
    DNS1035_MESSAGE,
    MAX_DNS_LABEL_LENGTH,
    container_errors,
    dns1035_label_errors,
    managed_by_errors,
    managed_by_update_errors,
    replica_pod_name,
)

__all__ = [
    "DEFAULT_SSH_AUTH_MOUNT_PATH",
    "MANAGED_BY_VALUES",
    "LauncherCreationPolicy",
    "MPIImplementation",
    "MPIJob",
    "MPIJobSpec",
    "MPIReplicaType",
    "default_mpijob",
    "default_mpijob_in_place",
    "mpijob_crd",
    "validate_mpijob",
]

DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"
MANAGED_BY_VALUES = ("kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue")


class MPIReplicaType(StrEnum):
    LAUNCHER = "Launcher"
    WORKER = "Worker"


class LauncherCreationPolicy(StrEnum):
    """When to create the launcher: at once, or once every worker pod is Ready."""

    AT_STARTUP = "AtStartup"
    WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


class MPIImplementation(StrEnum):
    OPEN_MPI = "OpenMPI"
    INTEL = "Intel"
    MPICH = "MPICH"


_MSG_LAUNCHER_NAME = (
    f"too long: the launcher's host name <name>-launcher must be at most "
    f"{MAX_DNS_LABEL_LENGTH} characters"
)


class MPIJobSpec(JobSpec):
    # The CRD stores mpi-operator's defaults, as its own CRD does (the operator defaults them
    # too, for objects stored before the CRD had them).
    slots_per_worker: int | None = Field(
        default=None,
        ge=1,
        # Read up to int32 (jobs stored before the ceiling parse; validation fails them).
        le=INT32_MAX,
        description=(
            f"Slots (processes) per worker in the hostfile. Defaults to 1. "
            f"At most {MAX_PROCESSES_PER_POD}."
        ),
        json_schema_extra={CRD_DEFAULT_KEY: 1, "maximum": MAX_PROCESSES_PER_POD},
    )
    run_launcher_as_worker: bool | None = Field(
        default=None,
        description="Also list the launcher in the hostfile. Defaults to false.",
        json_schema_extra={CRD_DEFAULT_KEY: False},
    )
    ssh_auth_mount_path: str | None = Field(
        default=None,
        min_length=1,
        description=f"Where the SSH keys are mounted. Defaults to {DEFAULT_SSH_AUTH_MOUNT_PATH}.",
        json_schema_extra={CRD_DEFAULT_KEY: DEFAULT_SSH_AUTH_MOUNT_PATH},
    )
    launcher_creation_policy: LauncherCreationPolicy | None = Field(
        default=None, json_schema_extra={CRD_DEFAULT_KEY: "AtStartup"}
    )
    mpi_implementation: MPIImplementation | None = Field(
        default=None,
        description=(
            "The MPI implementation the launcher uses: OpenMPI (default), Intel or MPICH; "
            "decides the hostfile format and the launcher's environment."
        ),
        json_schema_extra={CRD_DEFAULT_KEY: "OpenMPI"},
    )
    mpi_replica_specs: dict[str, ReplicaSpec] = Field(
        description="Replica specs keyed by type: Launcher (exactly 1 replica) and Worker."
    )

    @override
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.mpi_replica_specs


_ROOT_RULES: list[Any] = [
    # Worker pods are <name>-worker-<i>; the launcher is the Job <name>-launcher (below), as
    # mpi-operator checks them: names of 53 and 54 characters are fine for both.
    *cel_root_rules(specs_path="self.spec.mpiReplicaSpecs", not_pods=["Launcher"]),
    *cel_ratcheted(
        {
            "rule": f"size(self.metadata.name) + size('-launcher') <= {MAX_DNS_LABEL_LENGTH}",
            "message": _MSG_LAUNCHER_NAME,
            "fieldPath": ".metadata.name",
            "reason": "FieldValueInvalid",
        }
    ),
]


class MPIJob(JobModel[MPIJobSpec]):
    """MPIJob is an MPI training job: a launcher that runs mpirun, and workers it reaches over
    SSH, listed in a hostfile the operator writes."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _ROOT_RULES})

    VERSION: ClassVar[str] = "v2beta1"
    KIND: ClassVar[str] = "MPIJob"
    PLURAL: ClassVar[str] = "mpijobs"
    SINGULAR: ClassVar[str] = "mpijob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mpij",)
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(MPIReplicaType)
    # mpi-operator uses the first container of each template.
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = None
    MANAGED_BY_SELF: ClassVar[str] = MANAGED_BY_VALUES[0]
    REPLICA_RULES: ClassVar[ReplicaRules | None] = ReplicaRules(
        exact=True,
        empty=None,
        rules=(
            KnownTypes(message="replica types must be Launcher or Worker"),
            Required(rtype="Launcher", message="a Launcher replica spec is required"),
            Replicas(types=("Launcher",), min=1, max=1, message="Launcher replicas must be 1"),
            # Defaulting sets an omitted Worker.replicas to 0, which validation then rejects;
            # saying so at admission spares the user a job accepted that never runs.
            Replicas(
                types=("Worker",),
                min=1,
                must_set=True,
                message="Worker replicas must be set to at least 1",
            ),
            RestartPolicies(
                allowed=(RestartPolicy.NEVER, RestartPolicy.ON_FAILURE),
                message="must be Never or OnFailure (MPIJob does not support Always or ExitCode)",
            ),
        ),
    )


def default_mpijob(job: MPIJob) -> MPIJob:
    """mpi-operator's SetDefaults_MPIJob (v2beta1), as a pure function returning a new object."""
    return default_mpijob_in_place(deep_copy(job))


def default_mpijob_in_place(job: MPIJob) -> MPIJob:
    """:func:`default_mpijob` on ``job`` itself, for a model no one else holds (the planner's,
    parsed afresh each pass): a deep copy of a whole MPIJob was a quarter of a plan's time."""
    spec = job.spec
    if spec.run_policy.clean_pod_policy is None:
        # The field comment says Running; the anchor's code (and so we) default to None.
        spec.run_policy.clean_pod_policy = CleanPodPolicy.NONE
    if spec.run_policy.suspend is None:
        spec.run_policy.suspend = False
    if spec.slots_per_worker is None:
        spec.slots_per_worker = 1
    if spec.run_launcher_as_worker is None:
        spec.run_launcher_as_worker = False
    if not spec.ssh_auth_mount_path:
        spec.ssh_auth_mount_path = DEFAULT_SSH_AUTH_MOUNT_PATH
    if spec.launcher_creation_policy is None:
        spec.launcher_creation_policy = LauncherCreationPolicy.AT_STARTUP
    if spec.mpi_implementation is None:
        spec.mpi_implementation = MPIImplementation.OPEN_MPI
    launcher = spec.mpi_replica_specs.get(MPIReplicaType.LAUNCHER)
    if launcher is not None:
        if launcher.replicas is None:
            launcher.replicas = 1
        if launcher.restart_policy is None:
            launcher.restart_policy = RestartPolicy.ON_FAILURE
    worker = spec.mpi_replica_specs.get(MPIReplicaType.WORKER)
    if worker is not None:
        if worker.replicas is None:
            worker.replicas = 0
        if worker.restart_policy is None:
            worker.restart_policy = RestartPolicy.NEVER
    return job


def _name_errors(job: MPIJob) -> list[str]:
    errors = dns1035_label_errors(job.name, path="metadata.name")
    if errors:
        return errors
    launcher_host = f"{job.name}-launcher"
    if len(launcher_host) > MAX_DNS_LABEL_LENGTH:
        errors.append(f"metadata.name: {_MSG_LAUNCHER_NAME}")
    worker = job.spec.mpi_replica_specs.get(MPIReplicaType.WORKER)
    if worker is not None:
        last = replica_pod_name(
            job_name=job.name, replica_type="worker", index=max((worker.replicas or 1) - 1, 0)
        )
        if len(last) > MAX_DNS_LABEL_LENGTH:
            errors.append(
                f"metadata.name: too long: worker host name {last!r} would exceed "
                f"{MAX_DNS_LABEL_LENGTH} characters ({DNS1035_MESSAGE})"
            )
    return errors


def validate_mpijob(job: MPIJob, *, old: MPIJob | None = None) -> list[str]:
    """mpi-operator's ValidateMPIJob; [] when valid. Run it on a defaulted job.

    Fields that defaulting fills in are only checked when set, so an undefaulted job
    is judged as the CRD judges it at admission.
    """
    errors = _name_errors(job) + replica_rule_errors(job)
    spec = job.spec
    path = replica_specs_path(job)
    for rtype, replica in spec.mpi_replica_specs.items():
        if rtype in MPIJob.REPLICA_TYPES:  # as mpi-operator: no further look at an unknown type
            errors += container_errors(
                replica_type=rtype, spec=replica, path=path, default_container=None
            )
    slots = spec.slots_per_worker
    if slots is not None and slots > MAX_PROCESSES_PER_POD:
        errors.append(f"spec.slotsPerWorker: must be at most {MAX_PROCESSES_PER_POD}, got {slots}")
    if spec.ssh_auth_mount_path is not None and not spec.ssh_auth_mount_path:
        errors.append("spec.sshAuthMountPath: must not be empty")
    errors += managed_by_errors(run_policy=spec.run_policy, allowed=MANAGED_BY_VALUES)
    if old is not None:
        errors += managed_by_update_errors(old=old.spec.run_policy, new=spec.run_policy)
    return errors


def mpijob_crd() -> dict[str, Any]:
    return build_crd(MPIJob)
