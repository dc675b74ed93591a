"""``python -m jobcontroller.testing up|down|status [--dir .cluster] [--real-node]``: a detached
local cluster; ``images``: build the real node's images (``testing/images.py``).

``up`` starts a supervisor process in its own session that runs the whole local cluster
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, four fake nodes) and
writes ``<dir>/kubeconfig``; it returns once the cluster is ready. The components die with the
supervisor, so ``down`` (SIGTERM to the supervisor, then removal of ``<dir>``) leaves nothing
running. ``--real-node`` adds one real worker node (``testing/realnode.py``) with every image
of ``testing/images.py`` imported. ``--kueue`` adds Kueue's manager (``testing/kueue.py``, built
by ``hack/build-kueue.sh``) with its CRDs and webhooks, and installs the project's kubeflow.org
and trainer.kubeflow.org CRDs (``manifests/base/crds``) first so that Kueue's integrations
start at once (Kueue installs JobSet's CRD itself).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

from jobcontroller.testing import yamlfast
from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.controlplane import START_TIMEOUT, ControlPlane
from jobcontroller.testing.jobset import JobSetController
from jobcontroller.testing.kueue import Kueue


def node_images() -> list[Path]:
    """Every image the real node needs, built (or taken from the cache) now."""
    from jobcontroller.testing import images

    root = Path(__file__).resolve().parents[5]
    if not (root / "uv.lock").exists():
        root = Path.cwd()
    return [images.build(name, root=root) for name in images.IMAGES]


def _project_crds() -> list[Path]:
    root = Path(__file__).resolve().parents[5]
    if not (root / "uv.lock").exists():
        root = Path.cwd()
    return sorted((root / "manifests" / "base" / "crds").glob("*.yaml"))


def _start_kueue(cp: ControlPlane) -> Kueue:

    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for crd_file in _project_crds():
        with contextlib.suppress(urllib.error.HTTPError):  # 409: installed already
            cp.request("POST", path, yamlfast.load(crd_file.read_text()))
    kq = Kueue(cp)
    kq.start()
    return kq


def _supervise(
    directory: Path,
    nodes: int,
    real_node: bool = False,
    kueue: bool = False,
    jobset: bool = False,
) -> int:
    stop = False

    def _on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        cp = ControlPlane(
            controller_manager=True,
            scheduler=True,
            kwok=True,
            nodes=nodes,
            workdir=directory,
            real_node=real_node,
            node_images=node_images() if real_node else [],
        )
        kq: Kueue | None = None
        js: JobSetController | None = None
        cp.start()
        kq = _start_kueue(cp) if kueue else None
        if jobset:
            js = JobSetController(cp)
            js.start()
    except Exception as exc:
        (directory / "failed").write_text(str(exc))
        if kq is not None:
            kq.stop()
        cp.stop()
        return 1
    lines = [*cp.describe(), *(kq.describe() if kq else []), *(js.describe() if js else [])]
    (directory / "ready").write_text("\n".join(lines) + "\n")
    while not stop:
        signal.pause()
    for component in (js, kq):
        if component is not None:
            component.stop()
    cp.stop()
    return 0


def _pid(directory: Path) -> int | None:
    try:
        pid = int((directory / "supervisor.pid").read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def up(
    directory: Path,
    nodes: int,
    real_node: bool = False,
    kueue: bool = False,
    jobset: bool = False,
) -> int:
    if _pid(directory) is not None and (directory / "ready").exists():
        print(f"cluster already running; kubeconfig: {directory / 'kubeconfig'}")
        return 0
    down(directory, quiet=True)
    directory.mkdir(parents=True, exist_ok=True)
    log = (directory / "supervisor.log").open("ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobcontroller.testing",
            "_supervise",
            str(directory),
            str(nodes),
            *(["--real-node"] if real_node else []),
            *(["--kueue"] if kueue else []),
            *(["--jobset"] if jobset else []),
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    (directory / "supervisor.pid").write_text(str(proc.pid))
    # Building the real node's images the first time takes minutes (printed to its log).
    deadline = time.monotonic() + START_TIMEOUT * (30 if real_node else 3)
    while time.monotonic() < deadline:
        if (directory / "ready").exists():
            print((directory / "ready").read_text(), end="")
            kubectl = _link_kubectl(directory)
            print(f"kubeconfig: {directory / 'kubeconfig'}")
            kubeconfig = directory / "kubeconfig"
            print(f"to use it: export KUBECONFIG={kubeconfig} PATH={kubectl.parent}:$PATH")
            return 0
        if (directory / "failed").exists() or proc.poll() is not None:
            print("cluster failed to start:", file=sys.stderr)
            with contextlib.suppress(OSError):
                print((directory / "failed").read_text(), file=sys.stderr)
            down(directory, quiet=True)
            return 1
        time.sleep(0.2)
    print("cluster did not become ready in time", file=sys.stderr)
    down(directory, quiet=True)
    return 1


def _link_kubectl(directory: Path) -> Path:
    """``<dir>/bin/kubectl``: the cluster's own kubectl, where a user finds it."""
    link = directory / "bin" / "kubectl"
    link.parent.mkdir(exist_ok=True)
    if not link.exists():
        link.symlink_to(find_binaries()["kubectl"])
    return link


def _stop_extras(directory: Path) -> None:
    """Stop process groups that tools (the demo's operators) listed in ``<dir>/*.pids``."""
    for pids in directory.glob("*.pids"):
        for text in pids.read_text().split():
            with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                os.killpg(int(text), signal.SIGTERM)


def down(directory: Path, *, quiet: bool = False) -> int:
    if directory.exists():
        _stop_extras(directory)
    pid = _pid(directory)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
    if directory.exists():
        shutil.rmtree(directory, ignore_errors=True)
    if not quiet:
        print("cluster stopped" if pid else "no cluster was running")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobcontroller.testing")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "down", "status"):
        p = sub.add_parser(name)
        p.add_argument("--dir", default=".cluster", type=Path)
        p.add_argument("--nodes", default=4, type=int)
        p.add_argument("--real-node", action="store_true")
        p.add_argument("--kueue", action="store_true", help="with Kueue (hack/build-kueue.sh)")
        p.add_argument("--jobset", action="store_true", help="with JobSet (hack/build-jobset.sh)")
    sub.add_parser("images")
    sup = sub.add_parser("_supervise")
    sup.add_argument("dir", type=Path)
    sup.add_argument("nodes", type=int)
    sup.add_argument("--real-node", action="store_true")
    sup.add_argument("--kueue", action="store_true")
    sup.add_argument("--jobset", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "images":
        for path in node_images():
            print(path)
        return 0
    directory = args.dir.resolve()
    if args.command == "_supervise":
        return _supervise(directory, args.nodes, args.real_node, args.kueue, args.jobset)
    if args.command == "up":
        return up(directory, args.nodes, args.real_node, args.kueue, args.jobset)
    if args.command == "down":
        return down(directory)
    running = _pid(directory) is not None
    print(f"cluster {'running' if running else 'not running'}")
    return 0 if running else 1


if __name__ == "__main__":
    sys.exit(main())
