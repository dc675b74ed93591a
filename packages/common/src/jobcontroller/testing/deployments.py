"""Running an operator locally exactly as its Deployment would run it.

Used by the demo and the end-to-end tests: render kustomize manifests, take a Deployment's
command line as the kubelet would expand it, and authenticate as the Deployment's
ServiceAccount with a bound token, so a local process has the same flags and the same RBAC
identity as the pod.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.runtime.kube import SERVICE_ACCOUNTS, KubeApi
from jobcontroller.testing import yamlfast
from jobcontroller.testing.ports import free_port

__all__ = ["LocalCommand", "deployment_command", "render_kustomize", "token_kubeconfig"]


def render_kustomize(kubectl: str, directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize directory`` as a list of objects."""
    out = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=True
    )
    return yamlfast.load_all(out.stdout)


@dataclass(frozen=True)
class LocalCommand:
    argv: list[str]
    metrics_port: int
    health_port: int


def _expand(arg: str, env: dict[str, str]) -> str:
    # The kubelet's $(VAR) expansion; unknown references stay as they are.
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), arg)


def deployment_command(deployment: dict[str, Any], *, kubeconfig: Path) -> LocalCommand:
    """The first container's command and args, made local: the console script from this
    Python's environment, free ports instead of 8080/8081, loopback, and ``kubeconfig``."""
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {"POD_NAMESPACE": deployment["metadata"].get("namespace", "default")}
    argv = [_expand(a, env) for a in container["command"] + container.get("args", [])]
    metrics, health = free_port(), free_port()
    local: list[str] = []
    for arg in argv:
        if arg.startswith("--metrics-port="):
            arg = f"--metrics-port={metrics}"
        elif arg.startswith("--health-port="):
            arg = f"--health-port={health}"
        local.append(arg)
    local[0] = str(Path(sys.executable).parent / local[0])
    local += [f"--kubeconfig={kubeconfig}", "--bind-address=127.0.0.1"]
    if not any(arg.startswith("--state-dir") for arg in local):
        # The pod's /tmp is its own; on this host it is shared with every other local run, so
        # the crash-loop guard gets a directory of this command's (kept across its restarts).
        local.append(f"--state-dir={tempfile.mkdtemp(prefix='jobcontroller-state-')}")
    return LocalCommand(argv=local, metrics_port=metrics, health_port=health)


async def token_kubeconfig(
    kube: KubeApi,
    *,
    admin_kubeconfig: Path,
    service_account: str,
    namespace: str,
    out: Path,
    expiration_seconds: int = 86400,
) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount (TokenRequest API)."""
    path = SERVICE_ACCOUNTS.path(namespace=namespace, name=service_account, subresource="token")
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": expiration_seconds},
    }
    result = await kube.request("POST", path, body=body)
    return _write_token_kubeconfig(
        admin_kubeconfig, out, user=service_account, token=result["status"]["token"]
    )


def _write_token_kubeconfig(admin: Path, out: Path, *, user: str, token: str) -> Path:
    config = yaml.safe_load(admin.read_text())
    config["users"] = [{"name": user, "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = user
    out.write_text(yaml.safe_dump(config))
    out.chmod(0o600)
    return out
