"""The MPI policy (``mlPolicy.mpi``): Trainer v2.3.0's MPI plugin (pkg/runtime/framework/
plugins/mpi), on plain JSON.

A launcher Job runs ``mpirun`` over SSH to the nodes listed in a hostfile. For a TrainJob on an
MPI runtime:

- the ``node`` replicated job runs ``numNodes`` pods (one fewer when the launcher runs as a
  node too, but at least one); the slots per node are the TrainJob's ``numProcPerNode``, else
  the runtime's, and a runtime's 1 becomes the GPU count of a node that has more than one;
- the launcher and node pods mount the SSH key pair of the Secret ``<trainjob>-mpi-ssh-auth``
  (type ``kubernetes.io/ssh-auth``, immutable, created once) at ``sshAuthMountPath``; the
  launcher also mounts the hostfile of the ConfigMap ``<trainjob>-mpi-hostfile`` at
  ``/etc/mpi`` and gets Open MPI's ``OMPI_MCA_*`` env (the only implementation v2.3.0 serves);
- the hostfile lists every host that runs training processes, as the JobSet's headless
  Service names them (``<trainjob>-<replicated job>-<job index>-<pod index>.<subdomain>``),
  in the runtime's order of replicated jobs, each with its slots.

The key pair and the hostfile's format are the base's (``jobcontroller``'s
``with_ssh_key_pair`` and ``openmpi_hostfile``), which the v1 MPIJob uses too. The Secret and
ConfigMap carry the operator's job-name label (its informers select on it; upstream's carry no
labels).
"""

from __future__ import annotations

import copy
from typing import Any

from jobcontroller import (
    LABEL_JOB_NAME,
    SSH_AUTH_SECRET_TYPE,
    SSH_PRIVATE_KEY,
    SSH_PUBLIC_KEY,
    openmpi_hostfile,
)
from trainer_operator.builder import owner_reference
from trainer_operator.info import NODE, Info, PodSet, RuntimeProblem, by_mount_path, by_name, upsert
from trainer_operator.resources import node_resources, num_gpu

__all__ = [
    "HOSTFILE_SUFFIX",
    "LAUNCHER",
    "MPI_RESERVED_ENV",
    "SSH_AUTH_SUFFIX",
    "enforce_mpi",
    "hostfile_configmap",
    "mpi_errors",
    "ssh_auth_secret",
]

Obj = dict[str, Any]

LAUNCHER = "launcher"
SSH_AUTH_SUFFIX = "-mpi-ssh-auth"
SSH_AUTH_VOLUME = "mpi-ssh-auth"
HOSTFILE_SUFFIX = "-mpi-hostfile"
HOSTFILE_VOLUME = "mpi-hostfile"
HOSTFILE_DIR = "/etc/mpi"
HOSTFILE_KEY = "hostfile"
OPEN_MPI = "OpenMPI"
_HOSTFILE_ENV = "OMPI_MCA_orte_default_hostfile"
_KEEP_FQDN_ENV = "OMPI_MCA_orte_keep_fqdn_hostnames"
_SLOTS_ENV = "OMPI_MCA_orte_set_default_slots"
_RSH_ARGS_ENV = "OMPI_MCA_plm_rsh_args"
MPI_RESERVED_ENV = (_HOSTFILE_ENV, _RSH_ARGS_ENV, _KEEP_FQDN_ENV, _SLOTS_ENV)
"""The env a TrainJob on an MPI runtime may not set (``constants.MPIReservedEnvNames``)."""

#: Modes of the SSH items: sshd refuses a private key others can read.
_SECRET_DEFAULT_MODE = 0o400
_PRIVATE_KEY_MODE = 0o640
_PUBLIC_KEY_MODE = 0o644
_HOSTFILE_MODE = 0o444


def _policy(info: Info) -> Obj | None:
    mpi = (info.ml_policy or {}).get("mpi")
    return mpi if isinstance(mpi, dict) else None


def _pod_set(info: Info, name: str) -> PodSet | None:
    return next((ps for ps in info.pod_sets if ps.name == name), None)


def _ssh_volume(trainjob_name: str) -> Obj:
    items = [
        {"key": SSH_PRIVATE_KEY, "path": "id_rsa", "mode": _PRIVATE_KEY_MODE},
        {"key": SSH_PUBLIC_KEY, "path": "id_rsa.pub", "mode": _PUBLIC_KEY_MODE},
        {"key": SSH_PUBLIC_KEY, "path": "authorized_keys", "mode": _PUBLIC_KEY_MODE},
    ]
    return {
        "name": SSH_AUTH_VOLUME,
        "secret": {
            "secretName": trainjob_name + SSH_AUTH_SUFFIX,
            "defaultMode": _SECRET_DEFAULT_MODE,
            "items": items,
        },
    }


def _hostfile_volume(trainjob_name: str) -> Obj:
    return {
        "name": HOSTFILE_VOLUME,
        "configMap": {
            "name": trainjob_name + HOSTFILE_SUFFIX,
            "items": [{"key": HOSTFILE_KEY, "path": HOSTFILE_KEY, "mode": _HOSTFILE_MODE}],
        },
    }


def _slots(info: Info, trainer: Obj, mpi: Obj) -> int:
    if trainer.get("numProcPerNode") is not None:
        return int(trainer["numProcPerNode"])
    slots = int(mpi.get("numProcPerNode") or 1)
    if slots == 1:
        given = trainer.get("resourcesPerNode")
        resources = given if isinstance(given, dict) else node_resources(info)
        gpus = num_gpu(resources)
        if gpus > 1:
            return gpus
    return slots


def enforce_mpi(info: Info, trainjob: Obj, trainer: Obj | None) -> None:
    """Apply the MPI policy to ``info`` (the node count, the slots, the mounts and the env);
    ``info.ml_policy`` gets a copy whose ``mpi.numProcPerNode`` is the slots."""
    mpi = _policy(info)
    if mpi is None:
        return
    implementation = mpi.get("mpiImplementation") or OPEN_MPI
    if implementation != OPEN_MPI:
        raise RuntimeProblem(f"MPI implementation for {implementation} doesn't supported")
    trainer_fields = trainer or {}
    launcher_as_node = bool(mpi.get("runLauncherAsNode"))
    node = _pod_set(info, NODE)
    if trainer_fields.get("numNodes") is not None and node is not None:
        nodes = int(trainer_fields["numNodes"])
        node.count = max(nodes - 1, 1) if launcher_as_node else nodes
    mpi = {**mpi, "numProcPerNode": _slots(info, trainer_fields, mpi)}
    info.ml_policy = {**copy.deepcopy(info.ml_policy or {}), "mpi": mpi}
    name = str(trainjob["metadata"]["name"])
    mount_path = str(mpi.get("sshAuthMountPath") or "/root/.ssh")
    for ps in info.pod_sets:
        if ps.name not in (NODE, LAUNCHER):
            continue
        upsert(ps.volumes, [_ssh_volume(name)], by_name)
        if ps.name == LAUNCHER:
            upsert(ps.volumes, [_hostfile_volume(name)], by_name)
        for container in ps.containers:
            if container.name != NODE:
                continue
            upsert(
                container.volume_mounts,
                [{"name": SSH_AUTH_VOLUME, "mountPath": mount_path}],
                by_mount_path,
            )
            if ps.name != LAUNCHER:
                continue
            upsert(
                container.volume_mounts,
                [{"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR}],
                by_mount_path,
            )
            env = [
                {"name": _HOSTFILE_ENV, "value": f"{HOSTFILE_DIR}/{HOSTFILE_KEY}"},
                {"name": _KEEP_FQDN_ENV, "value": "true"},
                {"name": _SLOTS_ENV, "value": str(mpi["numProcPerNode"])},
                {"name": _RSH_ARGS_ENV, "value": "-o ConnectionAttempts=10"},
            ]
            upsert(container.env, env, by_name)


def _endpoints(info: Info, trainjob_name: str, ps: PodSet) -> list[str]:
    """The host names of a pod set's pods (``IdentifyPodNetwork``)."""
    subdomain = (info.spec.get("network") or {}).get("subdomain") or trainjob_name
    jobs: list[Obj] = info.spec.get("replicatedJobs") or []
    rjob = next((r for r in jobs if r.get("name") == ps.name), {})
    replicas = rjob.get("replicas")
    replicas = 1 if replicas is None else int(replicas)
    return [
        f"{trainjob_name}-{ps.name}-{job}-{pod}.{subdomain}"
        for job in range(replicas)
        for pod in range(ps.count)
    ]


def _owned_metadata(trainjob: Obj, name: str) -> Obj:
    meta = trainjob["metadata"]
    return {
        "name": name,
        "namespace": meta.get("namespace", ""),
        "labels": {LABEL_JOB_NAME: meta["name"]},
        "ownerReferences": [owner_reference(trainjob)],
    }


def hostfile_configmap(info: Info, trainjob: Obj) -> Obj | None:
    """The ``<trainjob>-mpi-hostfile`` ConfigMap (None: not an MPI runtime)."""
    mpi = _policy(info)
    if mpi is None:
        return None
    name = str(trainjob["metadata"]["name"])
    launcher_as_node = bool(mpi.get("runLauncherAsNode"))
    hosts: list[str] = []
    for ps in info.pod_sets:
        if ps.name == NODE or (launcher_as_node and ps.name == LAUNCHER):
            hosts += _endpoints(info, name, ps)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _owned_metadata(trainjob, name + HOSTFILE_SUFFIX),
        "data": {HOSTFILE_KEY: openmpi_hostfile(hosts, slots=int(mpi.get("numProcPerNode") or 1))},
    }


def ssh_auth_secret(trainjob: Obj) -> Obj:
    """The ``<trainjob>-mpi-ssh-auth`` Secret as planned: no keys yet (the controller's
    ``materialize`` adds a fresh pair just before the create)."""
    name = str(trainjob["metadata"]["name"])
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": SSH_AUTH_SECRET_TYPE,
        "immutable": True,
        "metadata": _owned_metadata(trainjob, name + SSH_AUTH_SUFFIX),
    }


def mpi_errors(info: Info, trainjob: Obj) -> list[str]:
    """What v2.3.0's MPI plugin's ``Validate`` refuses, in its words."""
    mpi = _policy(info)
    if mpi is None:
        return []
    trainer = (trainjob.get("spec") or {}).get("trainer")
    if not isinstance(trainer, dict):
        return []
    errors: list[str] = []
    nodes = trainer.get("numNodes")
    nodes = 1 if nodes is None else int(nodes)
    missing = _pod_set(info, LAUNCHER) is None or _pod_set(info, NODE) is None
    if nodes >= 2 and mpi.get("runLauncherAsNode") and missing:
        errors.append(
            "spec.trainer.numNodes: Invalid value: must have 1 when MPI trainingRuntime "
            "with enabled runLauncherAsNode does not have either launcher and node"
        )
    names = {str(e.get("name")) for e in trainer.get("env") or ()}
    reserved = sorted(names & set(MPI_RESERVED_ENV))
    if reserved:
        errors.append(
            "spec.trainer.env: Invalid value: must not have reserved envs, invalid envs "
            f"configured: [{' '.join(reserved)}]"
        )
    return errors
