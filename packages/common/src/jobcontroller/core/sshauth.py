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
from typing import TYPE_CHECKING, Any

from jobcontroller.api.deepcopy import deep_copy

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey

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
    public key as an ``authorized_keys`` line, byte for byte what cryptography's serializers
    (``TraditionalOpenSSL`` PEM, ``OpenSSH``) write for the same key."""
    # Imported on first use: cryptography's OpenSSL is about 8 MB of RSS, which an operator
    # that has not yet seen an MPI job (or serves other kinds only) should not pay. Only the
    # curve module: the two encodings are written here. Importing cryptography's
    # serialization package too (its SSH module pulls in every cipher and key type) made the
    # first pair cost 41 ms of CPU against 15.5, and 0.9 MB more (tests compare the bytes).
    from cryptography.hazmat.primitives.asymmetric import ec

    return _encoded(ec.generate_private_key(ec.SECP521R1()))


def _encoded(key: EllipticCurvePrivateKey) -> tuple[bytes, bytes]:
    """``key``'s PEM block and ``authorized_keys`` line."""
    public = key.public_key().public_numbers()
    point = b"\x04" + public.x.to_bytes(_P521_BYTES, "big") + public.y.to_bytes(_P521_BYTES, "big")
    secret = key.private_numbers().private_value.to_bytes(_P521_BYTES, "big")
    return _sec1_pem(secret, point), _openssh_line(point)


#: P-521's field and order are 521 bits: each coordinate and the scalar take 66 bytes.
_P521_BYTES = 66
#: secp521r1's OID, 1.3.132.0.35, DER-encoded.
_SECP521R1_OID = bytes.fromhex("06052b81040023")
_SSH_KEY_TYPE, _SSH_CURVE = b"ecdsa-sha2-nistp521", b"nistp521"


def _der(tag: int, content: bytes) -> bytes:
    """One DER TLV (definite length, short or long form)."""
    n = len(content)
    if n < 0x80:
        return bytes((tag, n)) + content
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes((tag, 0x80 | len(size))) + size + content


def _sec1_pem(secret: bytes, point: bytes) -> bytes:
    """RFC 5915's ECPrivateKey (version 1, the scalar, the curve, the public point) in a PEM
    block, lines of 64 characters as OpenSSL writes them."""
    der = _der(
        0x30,
        _der(0x02, b"\x01")
        + _der(0x04, secret)
        + _der(0xA0, _SECP521R1_OID)
        + _der(0xA1, _der(0x03, b"\x00" + point)),
    )
    text = base64.b64encode(der)
    lines = b"\n".join(text[i : i + 64] for i in range(0, len(text), 64))
    return b"-----BEGIN EC PRIVATE KEY-----\n" + lines + b"\n-----END EC PRIVATE KEY-----\n"


def _openssh_line(point: bytes) -> bytes:
    """RFC 5656's public key blob (key type, curve, point; each length-prefixed) on an
    ``authorized_keys`` line, without a comment."""
    blob = b"".join(
        len(part).to_bytes(4, "big") + part for part in (_SSH_KEY_TYPE, _SSH_CURVE, point)
    )
    return _SSH_KEY_TYPE + b" " + base64.b64encode(blob) + b"\n"


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
