"""Loading where the API server is and how to authenticate, without the generated client."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobcontroller.runtime.kubeconfig import (
    ConfigError,
    load_config,
    load_incluster_config,
    load_kubeconfig,
)
from jobcontroller.testing.certs import CertificateAuthority


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    path: Path, *, cluster: dict[str, Any], user: dict[str, Any], name: str = "c"
) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": name, "cluster": cluster}],
                "users": [{"name": name, "user": user}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
                "current-context": name,
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority()


async def test_certificates_from_data_and_a_static_token(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    client = ca.client(user="alice")
    path = kubeconfig(
        tmp_path / "config",
        cluster={
            "server": "https://10.0.0.1:6443/",
            "certificate-authority-data": b64(ca.pair.cert),
            "tls-server-name": "kubernetes",
        },
        user={
            "client-certificate-data": b64(client.cert),
            "client-key-data": b64(client.key),
            "token": "t0k3n",
        },
    )
    config = load_kubeconfig(str(path))
    assert config.host == "https://10.0.0.1:6443"
    assert config.server_hostname == "kubernetes"
    assert config.ssl_context is not None
    assert config.ssl_context.cert_store_stats()["x509_ca"] == 1
    assert await config.auth_headers() == {"Authorization": "Bearer t0k3n"}


async def test_files_are_relative_to_the_kubeconfig(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    client = ca.client(user="bob")
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(ca.pair.cert)
    client.write(tmp_path / "pki", "bob")
    (tmp_path / "token").write_text("from-a-file\n")
    path = kubeconfig(
        tmp_path / "config",
        cluster={"server": "https://h:6443", "certificate-authority": "pki/ca.crt"},
        user={
            "client-certificate": "pki/bob.crt",
            "client-key": "pki/bob.key",
            "tokenFile": "token",
        },
    )
    config = load_kubeconfig(str(path))
    assert await config.auth_headers() == {"Authorization": "Bearer from-a-file"}


async def test_an_exec_plugin_runs_once_until_its_token_expires(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    expiry = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(
        "#!/bin/sh\n"
        f'echo "$1 $KUBERNETES_EXEC_INFO" >> {calls}\n'
        'echo \'{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",'
        f' "status": {{"token": "tok-\'$MY_VAR\'", "expirationTimestamp": "{expiry}"}}}}\'\n'
    )
    plugin.chmod(0o755)
    path = kubeconfig(
        tmp_path / "config",
        cluster={"server": "https://h:6443", "insecure-skip-tls-verify": True},
        user={
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "./plugin.sh",
                "args": ["--flag"],
                "env": [{"name": "MY_VAR", "value": "x"}],
                "provideClusterInfo": True,
            }
        },
    )
    config = load_kubeconfig(str(path))
    assert await config.auth_headers() == {"Authorization": "Bearer tok-x"}
    assert await config.auth_headers() == {"Authorization": "Bearer tok-x"}
    [line] = calls.read_text().splitlines()
    arg, info = line.split(" ", 1)
    assert arg == "--flag"
    assert json.loads(info)["spec"]["cluster"]["server"] == "https://h:6443"


async def test_a_failing_exec_plugin_says_why(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "config",
        cluster={"server": "https://h:6443"},
        user={"exec": {"command": "/nonexistent/plugin", "installHint": "install it"}},
    )
    with pytest.raises(ConfigError, match="install it"):
        await load_kubeconfig(str(path)).auth_headers()


def test_kubeconfig_files_merge_the_first_definition_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = kubeconfig(
        tmp_path / "a", cluster={"server": "http://first:1"}, user={"token": "a"}, name="x"
    )
    second = tmp_path / "b"
    second.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": "x", "cluster": {"server": "http://ignored:2"}},
                    {"name": "y", "cluster": {"server": "http://second:3"}},
                ],
                "users": [{"name": "y", "user": {"token": "b"}}],
                "contexts": [{"name": "y", "context": {"cluster": "y", "user": "y"}}],
                "current-context": "y",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(second)]))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert load_config().host == "http://first:1"  # the first file's current-context
    assert load_config(context="y").host == "http://second:3"


@pytest.mark.parametrize(
    ("user", "context", "message"),
    [
        ({"auth-provider": {"name": "gcp"}}, None, "gke-gcloud-auth-plugin"),
        ({"token": "t"}, "missing", "no context named 'missing'"),
    ],
)
def test_unusable_configs_are_refused_with_a_reason(
    tmp_path: Path, user: dict[str, Any], context: str | None, message: str
) -> None:
    path = kubeconfig(tmp_path / "config", cluster={"server": "https://h:6443"}, user=user)
    with pytest.raises(ConfigError, match=message):
        load_kubeconfig(str(path), context)


def test_a_named_kubeconfig_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_kubeconfig(str(tmp_path / "nope"))


async def test_in_cluster_reads_the_rotating_token(
    tmp_path: Path, ca: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("first")
    (tmp_path / "ca.crt").write_bytes(ca.pair.cert)
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = load_incluster_config(env, account_dir=tmp_path)
    assert config.host == "https://[fd00::1]:443"
    assert await config.auth_headers() == {"Authorization": "Bearer first"}
    (tmp_path / "token").write_text("rotated")
    monkeypatch.setattr("jobcontroller.runtime.kubeconfig.TOKEN_FILE_REFRESH_SECONDS", 0.0)
    assert await config.auth_headers() == {"Authorization": "Bearer rotated"}


def test_not_in_a_cluster() -> None:
    with pytest.raises(ConfigError, match="not in a cluster"):
        load_incluster_config({}, account_dir=Path("/nonexistent"))


def test_a_json_kubeconfig_is_read_without_pyyaml(tmp_path: Path) -> None:
    """kubectl reads JSON kubeconfigs too; ours parses them without importing PyYAML, as a pod's
    in-cluster credentials do (about 4 MB of RSS an operator need not pay)."""
    import subprocess
    import sys

    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.2:6443"}}],
                "users": [{"name": "c", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "c"}}],
                "current-context": "c",
            }
        )
    )
    probe = (
        "import sys\n"
        "from jobcontroller.runtime.kubeconfig import load_kubeconfig\n"
        f"print(load_kubeconfig({str(path)!r}).host, 'yaml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["https://10.0.0.2:6443", "False"]


def test_a_kubeconfig_that_is_not_yaml_says_so(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("clusters: [unclosed\n")
    with pytest.raises(ConfigError, match=r"kubeconfig .*config"):
        load_kubeconfig(str(path))
