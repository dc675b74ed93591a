"""What the test kit's add-on controllers built from Go modules (Kueue, JobSet) share.

Each one is built by a script under ``hack/`` into ``~/.cache/jobcontroller/bin/<name>-<v>/``
next to its module's CRDs (``crd/``) and webhook manifests (``webhook.yaml``), and runs as a
process beside the local control plane. This module finds that build (building it from the
checkout when the cache lacks it), installs the CRDs, registers the webhooks by URL with a CA of
the test kit, and waits for a health endpoint.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Self

import yaml

from jobcontroller.testing import yamlfast
from jobcontroller.testing.controlplane import START_TIMEOUT, ControlPlane

MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

#: A webhook configuration registered by :func:`register_webhooks`: (collection path, name).
Registered = tuple[str, str]


class BuildNotFound(RuntimeError):
    """The add-on is not built and could not be built now."""


def _complete(directory: Path, binary: str) -> bool:
    return (
        os.access(directory / binary, os.X_OK)
        and (directory / "crd").is_dir()
        and (directory / "webhook.yaml").is_file()
    )


def find_build(*, binary: str, env_var: str, script: str) -> Path:
    """The directory of ``hack/<script>``'s build of ``binary``: ``$<env_var>``, else the
    newest complete ``<binary>-*`` in the cache, else the script's build, made now (or, when
    another process is building, waited for: the scripts hold a lock while they build)."""
    lacks = f"lacks {binary}, crd/ or webhook.yaml"
    explicit = os.environ.get(env_var)
    if explicit:
        path = Path(explicit).expanduser()
        if not _complete(path, binary):
            raise BuildNotFound(f"{env_var}={explicit} {lacks}")
        return path
    cache = Path(os.environ.get("JOBCONTROLLER_CACHE", Path.home() / ".cache" / "jobcontroller"))
    candidates = sorted(
        (d for d in (cache / "bin").glob(f"{binary}-*") if d.is_dir() and _complete(d, binary)),
        key=lambda d: d.stat().st_mtime,
        reverse=True,
    )
    if candidates:
        return candidates[0]
    checkout_script = Path(__file__).resolve().parents[5] / "hack" / script
    if not checkout_script.is_file():
        raise BuildNotFound(
            f"no {binary} build in {cache / 'bin'}: run hack/{script}, or set {env_var}"
        )
    done = subprocess.run(
        ["bash", str(checkout_script)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise BuildNotFound(f"{checkout_script} failed:\n{done.stderr[-4000:]}")
    path = Path(done.stdout.strip().splitlines()[-1])
    if not _complete(path, binary):
        raise BuildNotFound(f"{checkout_script} printed {path}, which {lacks}")
    return path


def ensure_namespace(cp: ControlPlane, name: str) -> None:
    try:
        cp.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise


def install_crds(cp: ControlPlane, files: Iterable[Path]) -> list[str]:
    """Create each CRD (kept when it exists) and wait until all are Established.

    The modules' kustomizations add conversion webhooks; the test kit uses each kind's storage
    version only, so the API server needs none and the stanza is dropped."""
    names = []
    served: list[tuple[str, str]] = []
    for path in files:
        crd = yamlfast.load(path.read_text())
        crd["spec"].pop("conversion", None)
        try:
            cp.request("POST", CRDS, crd)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise RuntimeError(f"CRD {path.name}: {exc.code} {exc.read()!r}") from None
        names.append(crd["metadata"]["name"])
        spec = crd["spec"]
        served += [
            (f"/apis/{spec['group']}/{v['name']}", spec["names"]["plural"])
            for v in spec.get("versions") or ()
            if v.get("served", True)
        ]
    deadline = time.monotonic() + 60
    for name in names:
        while True:
            status = cp.request("GET", f"{CRDS}/{name}").get("status") or {}
            conds = status.get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {name} not Established")
            time.sleep(0.1)
    # Established is not yet discoverable: a controller that maps its kinds at start (Kueue's
    # indexes) exits when discovery does not list them yet, which a loaded machine shows.
    for group_version, plural in served:
        while not _discovered(cp, group_version, plural):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{plural} not in the discovery of {group_version}")
            time.sleep(0.1)
    return names


def _discovered(cp: ControlPlane, group_version: str, plural: str) -> bool:
    try:
        listed = cp.request("GET", group_version).get("resources") or []
    except urllib.error.HTTPError:
        return False
    return any(r.get("name") == plural for r in listed)


def register_webhooks(
    cp: ControlPlane,
    manifests: Path,
    *,
    port: int,
    ca_bundle: bytes,
    prefix: str,
    adjust: Callable[[dict[str, Any]], dict[str, Any] | None],
) -> list[Registered]:
    """Register the webhook configurations of ``manifests`` (a module's ``webhook.yaml``)
    calling ``https://127.0.0.1:<port><path>`` with ``ca_bundle``: no Service, no aggregator
    routing. ``adjust(hook)`` returns the hook to register (changed in place or not) or None to
    leave it out. Names get ``prefix`` and the API server's port, so that configurations of
    two sessions' clusters never meet."""
    bundle = base64.b64encode(ca_bundle).decode()
    registered: list[Registered] = []
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not doc:
            continue
        path = MUTATING if doc["kind"] == "MutatingWebhookConfiguration" else VALIDATING
        hooks = []
        for hook in doc["webhooks"]:
            svc = hook["clientConfig"].pop("service")
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port}{svc['path']}",
                "caBundle": bundle,
            }
            kept = adjust(hook)
            if kept is not None:
                hooks.append(kept)
        name = f"{prefix}-{doc['metadata']['name']}-{cp.apiserver_port}"
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": doc["kind"],
            "metadata": {"name": name},
            "webhooks": hooks,
        }
        with contextlib.suppress(urllib.error.HTTPError):
            cp.request("DELETE", f"{path}/{name}")
        cp.request("POST", path, body)
        registered.append((path, name))
    return registered


def unregister_webhooks(cp: ControlPlane, registered: Iterable[Registered]) -> None:
    for path, name in registered:
        with contextlib.suppress(Exception):
            cp.request("DELETE", f"{path}/{name}")


def wait_healthy(
    url: str, *, what: str, alive: Callable[[], bool], log_tail: Callable[[], str]
) -> float:
    """Poll ``url`` until it answers 200; the monotonic deadline left for what follows."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if not alive():
            raise RuntimeError(f"{what} exited during start:\n{log_tail()}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:
            if resp.status == 200:
                return deadline
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {START_TIMEOUT:.0f}s:\n{log_tail()}")
        time.sleep(0.2)


def wait_admitted(
    cp: ControlPlane, path: str, body: dict[str, Any], *, what: str, deadline: float
) -> None:
    """Until a dry-run POST of ``body`` to ``path`` passes: health says the webhook server
    listens, this says the API server reaches it through every registered webhook."""
    while True:
        try:
            cp.request("POST", f"{path}?dryRun=All", body)
            return
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} webhooks not reachable: {detail}") from None
        time.sleep(0.2)


class AddonProcess:
    """The process side of an add-on controller (Kueue's, JobSet's): ``with``, :meth:`stop`,
    :meth:`alive`, :meth:`log_tail`. A subclass (a dataclass holding ``cp``) sets ``popen``
    and ``_webhooks`` in ``__post_init__`` and provides ``start`` and ``log``."""

    cp: ControlPlane
    popen: subprocess.Popen[bytes] | None
    _webhooks: list[Registered]

    @property
    def log(self) -> Path:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Unregister the webhooks first (the API server would call a dead process), then
        stop the process: SIGTERM, SIGKILL after 15 s."""
        unregister_webhooks(self.cp, self._webhooks)
        self._webhooks = []
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.popen = None

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
