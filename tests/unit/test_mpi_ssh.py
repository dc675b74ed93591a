"""The SSH key pair, the ``<job>-ssh`` Secret and its mounts."""

from __future__ import annotations

import base64
import subprocess
import sys
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from test_mpi_plan import Cluster, mpijob

from jobcontroller import CreateObject
from jobcontroller.core.sshauth import _encoded
from mpi_operator.api import MPIJob, default_mpijob
from mpi_operator.controller import MPIJobController
from mpi_operator.ssh import (
    generate_key_pair,
    has_key_pair,
    mount_ssh_auth,
    ssh_secret,
    with_key_pair,
)


def job(**spec: Any) -> MPIJob:
    raw = {
        "metadata": {"name": "pi", "namespace": "ns", "uid": "u"},
        "spec": {**spec, "mpiReplicaSpecs": {"Launcher": {"template": {}}}},
    }
    return default_mpijob(MPIJob.parse(raw))


def test_key_pair_is_p521_with_a_matching_authorized_key() -> None:
    private, public = generate_key_pair()
    assert private.startswith(b"-----BEGIN EC PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(private, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp521r1"
    assert public.startswith(b"ecdsa-sha2-nistp521 ") and public.endswith(b"\n")
    expected = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert public == expected + b"\n"


def test_our_encodings_are_cryptographys_byte_for_byte() -> None:
    """The PEM block and the ``authorized_keys`` line are written by hand (cryptography's
    serialization package costs 2.6 times the CPU at first use): each must equal what cryptography's
    serializers write for the same key, including keys whose scalar or coordinates need
    fewer than 66 bytes (written at the curve's full width all the same)."""
    narrow = 0
    for _ in range(300):
        key = ec.generate_private_key(ec.SECP521R1())
        public = key.public_key().public_numbers()
        values = (key.private_numbers().private_value, public.x, public.y)
        narrow += any(v.bit_length() <= 65 * 8 for v in values)
        pem, line = _encoded(key)
        assert pem == key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
        expected = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        assert line == expected + b"\n"
    assert narrow > 200  # each of the three has its 521st bit clear half of the time


def test_a_key_pair_does_not_import_cryptographys_serializers() -> None:
    code = (
        "import sys\n"
        "from jobcontroller.core.sshauth import generate_ssh_key_pair\n"
        "generate_ssh_key_pair()\n"
        "print('cryptography.hazmat.primitives.serialization' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_planned_secret_has_no_keys_and_materializing_adds_fresh_ones() -> None:
    [action] = [a for a in Cluster(mpijob()).plan().actions if a.kind == "Secret"]
    assert isinstance(action, CreateObject) and action.name == "pi-ssh"
    planned = action.body
    assert planned["type"] == "kubernetes.io/ssh-auth" and "data" not in planned
    first, second = with_key_pair(planned), with_key_pair(planned)
    assert "data" not in planned  # the plan is not modified
    assert has_key_pair(first) and first["data"] != second["data"]
    assert with_key_pair(first) is first
    pem = base64.b64decode(first["data"]["ssh-privatekey"])
    assert pem.startswith(b"-----BEGIN EC PRIVATE KEY-----")


def test_has_key_pair_wants_exactly_the_two_keys() -> None:
    assert not has_key_pair({"data": {"ssh-privatekey": "x"}})
    assert not has_key_pair({"data": {"ssh-privatekey": "x", "ssh-publickey": "y", "z": "w"}})
    assert has_key_pair({"data": {"ssh-privatekey": "x", "ssh-publickey": "y"}})


def test_controller_materializes_only_secrets() -> None:
    controller = MPIJobController()
    secret = CreateObject(kind="Secret", body=ssh_secret(job()))
    assert has_key_pair(controller.materialize(secret).body)
    config = CreateObject(kind="ConfigMap", body={"metadata": {"name": "pi-config"}})
    assert controller.materialize(config) is config


def test_default_mount_is_owner_only() -> None:
    spec: dict[str, Any] = {"containers": [{"name": "a"}, {"name": "b"}]}
    mount_ssh_auth(spec, job=job())
    assert spec["volumes"][0]["secret"]["defaultMode"] == 0o600
    assert spec["volumes"][0]["secret"]["items"] == [
        {"key": "ssh-privatekey", "path": "id_rsa"},
        {"key": "ssh-publickey", "path": "id_rsa.pub"},
        {"key": "ssh-publickey", "path": "authorized_keys"},
    ]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "ssh-auth", "mountPath": "/root/.ssh"}
    ]
    assert "volumeMounts" not in spec["containers"][1]


def test_custom_mount_path_leaves_the_mode_to_the_user() -> None:
    spec: dict[str, Any] = {"containers": [{"name": "a"}]}
    mount_ssh_auth(spec, job=job(sshAuthMountPath="/home/mpiuser/.ssh"))
    assert "defaultMode" not in spec["volumes"][0]["secret"]
    assert spec["containers"][0]["volumeMounts"][0]["mountPath"] == "/home/mpiuser/.ssh"
