"""SSH between the launcher and the workers: the ``<job>-ssh`` Secret and its mounts.

The key pair is the base's (:mod:`jobcontroller`'s ``with_ssh_key_pair``, which Trainer v2's
MPI policy uses too): the plan asks for the Secret without ``data`` (:func:`ssh_secret`) and
the controller's ``materialize`` hook fills a freshly generated pair in just before the
create. The keys go to the apiserver only; nothing here logs them.
"""

from __future__ import annotations

from typing import Any

from jobcontroller import (
    SSH_AUTH_SECRET_TYPE,
    SSH_PRIVATE_KEY,
    SSH_PUBLIC_KEY,
    generate_ssh_key_pair,
    has_ssh_key_pair,
    with_ssh_key_pair,
)
from mpi_operator.api import DEFAULT_SSH_AUTH_MOUNT_PATH, MPIJob
from mpi_operator.hostfile import object_metadata

__all__ = [
    "PRIVATE_KEY",
    "PUBLIC_KEY",
    "SECRET_TYPE",
    "SSH_AUTH_VOLUME",
    "SSH_SUFFIX",
    "generate_key_pair",
    "has_key_pair",
    "mount_ssh_auth",
    "secret_name",
    "ssh_secret",
    "with_key_pair",
]

SSH_SUFFIX = "-ssh"
SECRET_TYPE = SSH_AUTH_SECRET_TYPE
PRIVATE_KEY = SSH_PRIVATE_KEY
PUBLIC_KEY = SSH_PUBLIC_KEY
SSH_AUTH_VOLUME = "ssh-auth"
generate_key_pair = generate_ssh_key_pair
has_key_pair = has_ssh_key_pair
with_key_pair = with_ssh_key_pair
#: Where the keys land in the mount: ssh's default identity and authorized keys files.
_ITEMS = (
    {"key": PRIVATE_KEY, "path": "id_rsa"},
    {"key": PUBLIC_KEY, "path": "id_rsa.pub"},
    {"key": PUBLIC_KEY, "path": "authorized_keys"},
)
_OWNER_ONLY = 0o600


def secret_name(job: MPIJob) -> str:
    return job.name + SSH_SUFFIX


def ssh_secret(job: MPIJob) -> dict[str, Any]:
    """The Secret as declared: everything but the keys (see :func:`with_key_pair`); the base
    names it and adds the owner."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": SECRET_TYPE,
        "metadata": object_metadata(job),
    }


def mount_ssh_auth(pod_spec: dict[str, Any], *, job: MPIJob) -> None:
    """Mount the keys at ``sshAuthMountPath`` in the first container (in place).

    sshd refuses keys others can read; the mode is set only for the default path, as the
    anchor does, since a custom path may belong to a non-root user who sets it up itself.
    """
    path = job.spec.ssh_auth_mount_path or DEFAULT_SSH_AUTH_MOUNT_PATH
    source: dict[str, Any] = {"secretName": secret_name(job), "items": [dict(i) for i in _ITEMS]}
    if path == DEFAULT_SSH_AUTH_MOUNT_PATH:
        source["defaultMode"] = _OWNER_ONLY
    pod_spec.setdefault("volumes", []).append({"name": SSH_AUTH_VOLUME, "secret": source})
    container = pod_spec["containers"][0]
    container.setdefault("volumeMounts", []).append({"name": SSH_AUTH_VOLUME, "mountPath": path})
