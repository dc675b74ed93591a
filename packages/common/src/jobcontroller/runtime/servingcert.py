"""The training-progress endpoint's certificate: a CA of its own and a serving certificate it
signs, for the operator Service's names.

Upstream serves the endpoint with its webhook's certificate (cert-manager's, or its internal
rotator's); this operator has no webhook, so it makes one pair at first start and keeps it in
a Secret, where every replica finds the same one. ECDSA P-256; valid ten years; there is no
rotation: deleting the Secret and restarting the operator makes a new pair, which jobs
created afterwards get (running pods keep the CA they mounted).

The operator makes the pair in a child process (:func:`serving_cert_from_child`): cryptography
costs about 11 MB resident once imported, and an operator keeps whatever it imported for
life, so the one start that makes the pair would keep that cost. This module therefore
imports nothing outside the standard library at its top: the child runs it as a script.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography import x509

__all__ = ["ServingCert", "new_serving_cert", "serving_cert_from_child"]

_VALIDITY = dt.timedelta(days=3650)


@dataclass(frozen=True, slots=True)
class ServingCert:
    ca_pem: str
    cert_pem: str
    key_pem: str


def _san(host: str) -> x509.GeneralName:
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def new_serving_cert(*, hosts: list[str], now: dt.datetime) -> ServingCert:
    """A fresh CA and a serving certificate for ``hosts`` (DNS names or IPs) signed by it.

    cryptography is imported here, not at start; the operator calls this in a child
    (:func:`serving_cert_from_child`), so its own process never loads it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trainjob-status-ca")])
    start, end = now - dt.timedelta(minutes=5), now + _VALIDITY
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return ServingCert(
        ca_pem=ca.public_bytes(pem).decode(),
        cert_pem=cert.public_bytes(pem).decode(),
        key_pem=key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
    )


async def serving_cert_from_child(*, hosts: list[str], now: dt.datetime) -> ServingCert:
    """:func:`new_serving_cert`, made by this module run as a script in a child interpreter
    (``-P``: the script's directory, which holds modules named like the standard library's,
    is not put on the path). A child that fails raises ``OSError`` with its stderr's end."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-P",
        __file__,
        json.dumps({"hosts": hosts, "now": now.isoformat()}),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await child.communicate()
    except BaseException:  # cancelled (the operator stops): no child outlives it
        if child.returncode is None:  # one that has just ended and been reaped cannot be killed
            child.kill()
        await asyncio.shield(child.wait())
        raise
    if child.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise OSError(f"making the serving certificate failed: {' / '.join(tail)}")
    return ServingCert(**json.loads(out))


if __name__ == "__main__":
    ask = json.loads(sys.argv[1])
    made = new_serving_cert(hosts=ask["hosts"], now=dt.datetime.fromisoformat(ask["now"]))
    print(json.dumps(asdict(made)))
