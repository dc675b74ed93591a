"""SSH between the launcher and the workers: the ``<job>-ssh`` Secret and its mounts.

The key pair is random, so it cannot come from the pure planner: the plan asks for the Secret
without ``data`` (:func:`ssh_secret`) and the controller's executor hook fills a freshly
generated pair in just before the create (:func:`with_key_pair`). The keys go to the apiserver
only; nothing here logs them.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

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
SECRET_TYPE = "kubernetes.io/ssh-auth"
PRIVATE_KEY = "ssh-privatekey"
PUBLIC_KEY = "ssh-publickey"
SSH_AUTH_VOLUME = "ssh-auth"
_KEYS = frozenset({PRIVATE_KEY, PUBLIC_KEY})
#: Where the keys land in the mount: ssh's default identity and authorized keys files.
_ITEMS = (
    {"key": PRIVATE_KEY, "path": "id_rsa"},
    {"key": PUBLIC_KEY, "path": "id_rsa.pub"},
    {"key": PUBLIC_KEY, "path": "authorized_keys"},
)
_OWNER_ONLY = 0o600


def secret_name(job: MPIJob) -> str:
    return job.name + SSH_SUFFIX


def generate_key_pair() -> tuple[bytes, bytes]:
    """A new ECDSA P-521 pair: the private key as a PEM ``EC PRIVATE KEY`` block and the
    public key as an ``authorized_keys`` line."""
    # Imported on first use: cryptography's OpenSSL is about 10 MB of RSS, which an operator
    # that has not yet seen an MPIJob (or serves other kinds only) should not pay.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.TraditionalOpenSSL,
        encryption_algorithm=serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        encoding=serialization.Encoding.OpenSSH, format=serialization.PublicFormat.OpenSSH
    )
    return private, public + b"\n"


def ssh_secret(job: MPIJob) -> dict[str, Any]:
    """The Secret as declared: everything but the keys (see :func:`with_key_pair`); the base
    names it and adds the owner."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": SECRET_TYPE,
        "metadata": object_metadata(job),
    }


def with_key_pair(secret: dict[str, Any]) -> dict[str, Any]:
    """A copy of a planned Secret carrying a fresh key pair; one that has keys is kept."""
    if has_key_pair(secret):
        return secret
    private, public = generate_key_pair()
    out = copy.deepcopy(secret)
    out["data"] = {
        PRIVATE_KEY: base64.b64encode(private).decode(),
        PUBLIC_KEY: base64.b64encode(public).decode(),
    }
    return out


def has_key_pair(secret: dict[str, Any]) -> bool:
    """Whether the Secret holds exactly the two keys (the anchor regenerates otherwise)."""
    return set(secret.get("data") or {}) == _KEYS


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
