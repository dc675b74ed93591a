"""The PKI of a local control plane, generated in Python.

One CA signs the apiserver's serving certificate (for ``localhost`` and ``127.0.0.1``) and the
client certificates (one per user, the groups in O=). A separate RSA key pair signs
service-account tokens. ECDSA P-256 keeps generation fast (milliseconds, where RSA 2048 takes
tens of them); everything is valid for a week, like envtest's.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=7)


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class KeyPair:
    """PEM-encoded certificate and private key."""

    cert: bytes
    key: bytes

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        crt, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        crt.write_bytes(self.cert)
        key.write_bytes(self.key)
        key.chmod(0o600)
        return crt, key


class CertificateAuthority:
    """A throw-away CA for one control plane."""

    def __init__(self, common_name: str = "jobcontroller-test-ca") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self._name = name
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .sign(self._key, hashes.SHA256())
        )

    @property
    def pair(self) -> KeyPair:
        return KeyPair(cert=_pem_cert(self._cert), key=_pem_key(self._key))

    def _issue(
        self,
        *,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert=_pem_cert(cert), key=_pem_key(key))

    def serving(self, *, hosts: list[str] | None = None, ips: list[str] | None = None) -> KeyPair:
        """A server certificate for loopback (and ``hosts`` and ``ips``)."""
        sans: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("10.0.0.1")),  # the kubernetes Service IP
        ]
        sans += [x509.DNSName(h) for h in hosts or []]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips or []]
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        return self._issue(subject=subject, usage=ExtendedKeyUsageOID.SERVER_AUTH, sans=sans)

    def client(self, *, user: str, groups: list[str] | None = None) -> KeyPair:
        """A client certificate: CN is the user name, each O is a group."""
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups or []]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        return self._issue(subject=x509.Name(attrs), usage=ExtendedKeyUsageOID.CLIENT_AUTH)


def service_account_keys() -> tuple[bytes, bytes]:
    """(private PEM, public PEM) for signing and verifying service-account tokens."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _pem_key(key), public
