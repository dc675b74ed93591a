"""Where the API server is and how to authenticate: a kubeconfig or the pod's service account.

The generated Kubernetes client is not needed for this, and importing it costs more than the
rest of an operator (kubernetes_asyncio's models took the interpreter from 43 to 110 MB and
1.8 s of CPU at start-up). What client-go's loaders support, we support:

* the pod's service account (``$KUBERNETES_SERVICE_HOST``, the projected token re-read every
  minute as it rotates, the cluster CA);
* a kubeconfig: ``--kubeconfig``, else ``$KUBECONFIG`` (several files, colon-separated, merged
  as kubectl merges them: the first to define a name wins), else ``~/.kube/config``; a context
  by name or the current one; the cluster's ``server``, ``certificate-authority(-data)``,
  ``insecure-skip-tls-verify``, ``tls-server-name`` and ``proxy-url``; the user's
  ``client-certificate(-data)``/``client-key(-data)``, ``token``, ``tokenFile``,
  ``username``/``password`` and ``exec`` credential plugins (``client.authentication.k8s.io``
  v1 and v1beta1, run again when their token expires). Relative paths are relative to the
  kubeconfig file. The legacy ``auth-provider`` plugins (removed from kubectl in 1.26) are
  refused with a message naming their exec replacement.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "ClusterConfig",
    "ConfigError",
    "load_config",
    "load_incluster_config",
    "load_kubeconfig",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: client-go re-reads a token file at most once a minute.
TOKEN_FILE_REFRESH_SECONDS = 60.0
#: An exec credential is fetched again this long before it expires.
EXEC_EXPIRY_MARGIN_SECONDS = 10.0

Obj = dict[str, Any]


class ConfigError(ValueError):
    """The kubeconfig (or the in-cluster environment) cannot be used; the message says why."""


class Auth(Protocol):
    async def headers(self) -> dict[str, str]: ...


@dataclass
class _NoAuth:
    async def headers(self) -> dict[str, str]:
        return {}


@dataclass
class _StaticToken:
    token: str

    async def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class _BasicAuth:
    username: str
    password: str

    async def headers(self) -> dict[str, str]:
        pair = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return {"Authorization": f"Basic {pair}"}


@dataclass
class _TokenFile:
    """A token read from a file and read again every minute (a projected token rotates)."""

    path: Path
    _token: str = ""
    _read_at: float = float("-inf")

    async def headers(self) -> dict[str, str]:
        now = time.monotonic()
        if now - self._read_at >= TOKEN_FILE_REFRESH_SECONDS:
            self._token = self.path.read_text().strip()
            self._read_at = now
        return {"Authorization": f"Bearer {self._token}"}


@dataclass
class _ExecPlugin:
    """A kubeconfig ``exec`` credential plugin, run when no unexpired token is at hand."""

    spec: Obj
    base_dir: Path
    cluster: Obj
    _token: str = ""
    _expires: float | None = None
    _lock: asyncio.Lock | None = None

    async def headers(self) -> dict[str, str]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            fresh = self._token and (self._expires is None or time.time() < self._expires)
            if not fresh:
                status = await self.run()
                self._token = str(status.get("token") or "")
                self._expires = _expiry(status.get("expirationTimestamp"))
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    async def run(self) -> Obj:
        command = str(self.spec.get("command") or "")
        if not command:
            raise ConfigError("exec credential plugin without a command")
        if "/" in command and not os.path.isabs(command):
            command = str(self.base_dir / command)  # relative to the kubeconfig, as kubectl
        api_version = str(self.spec.get("apiVersion") or "client.authentication.k8s.io/v1")
        info: Obj = {
            "apiVersion": api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": False},
        }
        if self.spec.get("provideClusterInfo"):
            info["spec"]["cluster"] = self.cluster
        env = {**os.environ, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        for var in self.spec.get("env") or ():
            env[str(var["name"])] = str(var["value"])
        try:
            proc = await asyncio.create_subprocess_exec(
                command,
                *[str(a) for a in self.spec.get("args") or ()],
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            hint = self.spec.get("installHint") or ""
            raise ConfigError(f"exec credential plugin {command!r}: {exc}. {hint}".strip()) from exc
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise ConfigError(
                f"exec credential plugin {command!r} exited {proc.returncode}: "
                f"{err.decode(errors='replace').strip()}"
            )
        try:
            credential = json.loads(out)
        except ValueError as exc:
            raise ConfigError(f"exec credential plugin {command!r}: not JSON: {exc}") from exc
        status: Obj = credential.get("status") or {}
        if not status.get("token"):
            raise ConfigError(
                f"exec credential plugin {command!r} gave no token (plugins that return a "
                "client certificate are not supported)"
            )
        return status


def _expiry(value: Any) -> float | None:
    if not value:
        return None
    at = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    return at - EXEC_EXPIRY_MARGIN_SECONDS


@dataclass
class ClusterConfig:
    """How to reach one API server: what the HTTP client needs, and the credentials."""

    host: str
    ssl_context: ssl.SSLContext | None = None
    """None for plain HTTP (a test server)."""
    server_hostname: str | None = None
    """The name to verify the server's certificate against (kubeconfig ``tls-server-name``)."""
    proxy: str | None = None
    """kubeconfig ``proxy-url``; the environment's proxy is looked up once when None."""
    auth: Auth = field(default_factory=_NoAuth)

    async def auth_headers(self) -> dict[str, str]:
        return await self.auth.headers()


def _ssl_context(
    *,
    ca_file: str | None = None,
    ca_data: bytes | None = None,
    insecure: bool = False,
    cert: bytes | None = None,
    key: bytes | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> ssl.SSLContext:
    context = ssl.create_default_context(
        cafile=ca_file, cadata=ca_data.decode() if ca_data else None
    )
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert is not None and key is not None:
        # load_cert_chain reads files only: a private directory, gone once loaded.
        with tempfile.TemporaryDirectory(prefix="jobcontroller-tls-") as tmp:
            cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            cert_path.write_bytes(cert)
            key_path.touch(mode=0o600)
            key_path.write_bytes(key)
            context.load_cert_chain(cert_path, key_path)
    elif cert_file and key_file:
        context.load_cert_chain(cert_file, key_file)
    return context


def load_incluster_config(
    environ: Mapping[str, str] | None = None, account_dir: Path = SERVICE_ACCOUNT_DIR
) -> ClusterConfig:
    """The pod's service account, as client-go's ``rest.InClusterConfig``."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    token, ca = account_dir / "token", account_dir / "ca.crt"
    if not token.is_file():
        raise ConfigError(f"in-cluster: no service account token at {token}")
    return ClusterConfig(
        host=f"https://{host}:{port}",
        ssl_context=_ssl_context(ca_file=str(ca) if ca.is_file() else None),
        auth=_TokenFile(token),
    )


def _data_or_file(entry: Obj, key: str, base: Path) -> bytes | None:
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"])
    if entry.get(key):
        return _resolve(str(entry[key]), base).read_bytes()
    return None


def _resolve(path: str, base: Path) -> Path:
    expanded = Path(os.path.expanduser(path))
    return expanded if expanded.is_absolute() else base / expanded


def _load(text: str) -> Any:
    """A kubeconfig's document. JSON (which kubectl reads too, being YAML) and the block YAML
    kubectl and its kin write (``yaml_subset``) are parsed without PyYAML, which is imported
    only for a YAML file outside that subset: a pod (in-cluster credentials) or a kubeconfig
    as kubectl writes it never loads it (16 ms of CPU and 2.3 MB of RSS). libyaml's safe
    loader where PyYAML has it (0.2 ms against 3.7 for a kubeconfig with its certificates
    inline). YAML errors are raised as ValueError."""
    if text.lstrip().startswith("{"):
        return json.loads(text)
    from jobcontroller.runtime import yaml_subset

    doc = yaml_subset.load(text)
    if doc is not None:
        return doc
    import yaml

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from exc


def _merged(paths: list[Path]) -> tuple[Obj, dict[str, Path]]:
    """kubectl's merge of several kubeconfig files: the first to define a name wins. Returns
    the merged config and, per cluster and user name, the directory its paths are relative to."""
    merged: Obj = {"clusters": [], "users": [], "contexts": [], "current-context": ""}
    origin: dict[str, Path] = {}
    seen: dict[str, set[str]] = {"clusters": set(), "users": set(), "contexts": set()}
    for path in paths:
        try:
            doc = _load(path.read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            raise ConfigError(f"kubeconfig {path}: {exc}") from exc
        if not isinstance(doc, dict):
            raise ConfigError(f"kubeconfig {path}: not a mapping")
        if not merged["current-context"]:
            merged["current-context"] = doc.get("current-context") or ""
        for section in ("clusters", "users", "contexts"):
            for item in doc.get(section) or ():
                name = str(item.get("name", ""))
                if name and name not in seen[section]:
                    seen[section].add(name)
                    merged[section].append(item)
                    origin[f"{section}/{name}"] = path.parent
    return merged, origin


def _kubeconfig_paths(kubeconfig: str | None) -> list[Path]:
    if kubeconfig:
        return [Path(os.path.expanduser(kubeconfig))]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        return [Path(os.path.expanduser(p)) for p in env.split(os.pathsep) if p]
    return [Path(os.path.expanduser("~/.kube/config"))]


def load_kubeconfig(kubeconfig: str | None = None, context: str | None = None) -> ClusterConfig:
    """A kubeconfig's context (``context``, else its current one)."""
    paths = _kubeconfig_paths(kubeconfig)
    if kubeconfig and not paths[0].is_file():
        raise ConfigError(f"kubeconfig {paths[0]} does not exist")
    config, origin = _merged(paths)
    name = context or config["current-context"]
    if not name:
        raise ConfigError(
            f"no context chosen and no current-context in {', '.join(map(str, paths))}"
        )

    def named(section: str, wanted: str) -> tuple[Obj, Path]:
        for item in config[section]:
            if item.get("name") == wanted:
                return dict(item.get(section[:-1]) or {}), origin[f"{section}/{wanted}"]
        raise ConfigError(f"kubeconfig has no {section[:-1]} named {wanted!r}")

    ctx, _ = named("contexts", name)
    cluster, cluster_dir = named("clusters", str(ctx.get("cluster", "")))
    user, user_dir = named("users", str(ctx.get("user", ""))) if ctx.get("user") else ({}, Path())
    server = str(cluster.get("server") or "")
    if not server:
        raise ConfigError(f"cluster {ctx.get('cluster')!r} has no server")

    auth: Auth = _NoAuth()
    cert = _data_or_file(user, "client-certificate", user_dir)
    key = _data_or_file(user, "client-key", user_dir)
    if user.get("auth-provider"):
        provider = (user["auth-provider"] or {}).get("name", "")
        raise ConfigError(
            f"the {provider!r} auth-provider plugin is not supported (kubectl dropped it in "
            "1.26): use its exec credential plugin, e.g. gke-gcloud-auth-plugin or kubelogin"
        )
    if user.get("exec"):
        cluster_info = {
            "server": server,
            "insecure-skip-tls-verify": bool(cluster.get("insecure-skip-tls-verify")),
        }
        auth = _ExecPlugin(dict(user["exec"]), user_dir, cluster_info)
    elif user.get("token"):
        auth = _StaticToken(str(user["token"]))
    elif user.get("tokenFile"):
        auth = _TokenFile(_resolve(str(user["tokenFile"]), user_dir))
    elif user.get("username"):
        auth = _BasicAuth(str(user["username"]), str(user.get("password") or ""))

    context_ssl = None
    if server.startswith("https://"):
        ca_file = cluster.get("certificate-authority")
        ca_data = cluster.get("certificate-authority-data")
        context_ssl = _ssl_context(
            ca_file=str(_resolve(str(ca_file), cluster_dir)) if ca_file and not ca_data else None,
            ca_data=base64.b64decode(ca_data) if ca_data else None,
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
            cert=cert,
            key=key,
        )
    return ClusterConfig(
        host=server.rstrip("/"),
        ssl_context=context_ssl,
        server_hostname=cluster.get("tls-server-name") or None,
        proxy=cluster.get("proxy-url") or None,
        auth=auth,
    )


def load_config(kubeconfig: str | None = None, context: str | None = None) -> ClusterConfig:
    """In a pod and with no kubeconfig named: the service account; else a kubeconfig."""
    if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return load_incluster_config()
    return load_kubeconfig(kubeconfig, context)
