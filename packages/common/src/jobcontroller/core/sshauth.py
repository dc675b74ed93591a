"""SSH between MPI processes: the key pair a ``kubernetes.io/ssh-auth`` Secret carries.

mpi-operator's MPIJob and Trainer v2's MPI policy both give the launcher and the nodes one
fresh ECDSA P-521 pair per job, in a Secret of type ``kubernetes.io/ssh-auth`` with the keys
``ssh-privatekey`` (a PEM ``EC PRIVATE KEY`` block) and ``ssh-publickey`` (an
``authorized_keys`` line). The pair is random, so no pure plan can hold it: a plan asks for the
Secret without ``data`` and the controller's ``materialize`` hook calls :func:`with_key_pair`
just before the create. The keys go to the API server only; nothing here logs them.
"""

from __future__ import annotations

import base64
from typing import Any

from jobcontroller.api.deepcopy import deep_copy

__all__ = [
    "SSH_AUTH_SECRET_TYPE",
    "SSH_PRIVATE_KEY",
    "SSH_PUBLIC_KEY",
    "generate_ssh_key_pair",
    "has_ssh_key_pair",
    "openmpi_hostfile",
    "with_ssh_key_pair",
]

SSH_AUTH_SECRET_TYPE = "kubernetes.io/ssh-auth"
SSH_PRIVATE_KEY = "ssh-privatekey"
SSH_PUBLIC_KEY = "ssh-publickey"
_KEYS = frozenset({SSH_PRIVATE_KEY, SSH_PUBLIC_KEY})


def generate_ssh_key_pair() -> tuple[bytes, bytes]:
    """A new ECDSA P-521 pair: the private key as a PEM ``EC PRIVATE KEY`` block and the
    public key as an ``authorized_keys`` line."""
    # Imported on first use: cryptography's OpenSSL is about 10 MB of RSS, which an operator
    # that has not yet seen an MPI job (or serves other kinds only) should not pay.
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


def has_ssh_key_pair(secret: dict[str, Any]) -> bool:
    """Whether the Secret holds exactly the two keys (mpi-operator regenerates otherwise)."""
    return set(secret.get("data") or {}) == _KEYS


def with_ssh_key_pair(secret: dict[str, Any]) -> dict[str, Any]:
    """A copy of a planned Secret carrying a fresh key pair; one that has keys is kept."""
    if has_ssh_key_pair(secret):
        return secret
    private, public = generate_ssh_key_pair()
    out = deep_copy(secret)
    out["data"] = {
        SSH_PRIVATE_KEY: base64.b64encode(private).decode(),
        SSH_PUBLIC_KEY: base64.b64encode(public).decode(),
    }
    return out


def openmpi_hostfile(hosts: list[str], *, slots: int) -> str:
    """Open MPI's hostfile: one ``host slots=N`` line per host, in order."""
    return "".join(f"{host} slots={slots}\n" for host in hosts)
